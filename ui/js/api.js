// The API client of the console: the token (sessionStorage), fetch with it, problem+json errors
// turned into messages a person can act on, and paging. Every path is under /api/v1alpha1
// (docs/api.md); nothing here talks to another origin.

export const API = '/api/v1alpha1';
const TOKEN_KEY = 'dcm.console.token';

// Who may do what (SPEC §6, docs/api.md "Who may call what"), for 403 messages.
export const ACTIONS = {
  read: { verb: 'read this', roles: 'dcm-reader, dcm-provider, dcm-user or dcm-admin' },
  rehydrate: { verb: 'rehydrate', roles: 'dcm-user or dcm-admin' },
  retry: { verb: 'retry a cleanup', roles: 'dcm-admin' },
};

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (private mode): the token lives until the page is closed.
  }
  auth.update('unknown');
  window.dispatchEvent(new CustomEvent('dcm-token-changed'));
}

// What the console knows about authentication, from the answers it got:
//   unknown  -> nothing answered yet
//   off      -> a call without a token succeeded: authentication is disabled (dev mode)
//   ok       -> a call with the token succeeded
//   rejected -> 401: no token, or the token was refused (detail says why)
export const auth = new (class extends EventTarget {
  state = 'unknown';
  detail = '';
  update(state, detail = '') {
    if (state === this.state && detail === this.detail) return;
    this.state = state;
    this.detail = detail;
    this.dispatchEvent(new Event('change'));
  }
  // Every API answer goes through here.
  observe(status, detail) {
    if (status === 401) this.update('rejected', detail);
    else if (status > 0 && status !== 403 && status < 500) this.update(getToken() ? 'ok' : 'off');
  }
})();

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.detail = detail || '';
  }
}

// Headers with the bearer token (if any) and `extra`.
export function authHeaders(extra = {}) {
  const headers = new Headers(extra);
  const token = getToken();
  if (token) headers.set('Authorization', `Bearer ${token}`);
  return headers;
}

// The error an answer that is not 2xx stands for; its problem+json `detail` when present.
export async function errorFrom(response) {
  let detail = '';
  const type = response.headers.get('content-type') || '';
  try {
    if (type.includes('json')) {
      const problem = await response.json();
      detail = problem.detail || problem.title || '';
    } else {
      detail = (await response.text()).slice(0, 300);
    }
  } catch {
    // No readable body: the status says enough.
  }
  auth.observe(response.status, detail);
  return new ApiError(response.status, detail);
}

// One API call: the parsed JSON (null for 204), or throws ApiError (status 0: no answer).
export async function call(method, path, { body, signal, headers } = {}) {
  const init = { method, signal, cache: 'no-store', headers: authHeaders(headers) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers.set('Content-Type', 'application/json');
  }
  let response;
  try {
    response = await fetch(API + path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, `the control plane did not answer (${e.message})`);
  }
  if (!response.ok) throw await errorFrom(response);
  auth.observe(response.status);
  return response.status === 204 ? null : response.json();
}

export const get = (path, options) => call('GET', path, options);
export const post = (path, body, options) => call('POST', path, { ...options, body });

// Every item of a paginated list (`key`: providers, results, records, events), following
// next_page_token; at most `maxPages` pages.
export async function listAll(path, key, { signal, maxPages = 100, first } = {}) {
  let page = first || (await get(withQuery(path, { max_page_size: 100 }), { signal }));
  const items = [...(page[key] || [])];
  for (let n = 1; page.next_page_token && n < maxPages; n++) {
    page = await get(withQuery(path, { max_page_size: 100, page_token: page.next_page_token }),
                     { signal });
    items.push(...(page[key] || []));
  }
  return items;
}

// `path` with query parameters added (empty and null values left out).
export function withQuery(path, params) {
  const [base, existing] = path.split('?');
  const query = new URLSearchParams(existing || '');
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') query.set(k, v);
  }
  const text = query.toString();
  return text ? `${base}?${text}` : base;
}

// A sentence for a failed call: what to do about 401 and 403, the server's detail otherwise.
export function describeError(error, action = ACTIONS.read) {
  if (!(error instanceof ApiError)) return `Unexpected error: ${error.message || error}`;
  const detail = error.detail ? ` (${error.detail})` : '';
  switch (error.status) {
    case 0:
      return `Cannot reach the control plane: ${error.detail}`;
    case 401:
      return `Not signed in / token rejected: paste a token${detail}.`;
    case 403:
      return `Your token's role cannot ${action.verb} (needs ${action.roles})${detail}.`;
    default:
      return `Could not ${action.verb}: HTTP ${error.status}${detail}.`;
  }
}
