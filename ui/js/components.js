// Small building blocks of the console: a DOM helper that never parses data as HTML, status
// badges (colour, shape and text), the live indicator, the token panel and the status region.

import { auth, getToken, setToken } from './api.js';

// h('a', {href: '#/x', class: 'y'}, 'text', child…): children are nodes or text (never HTML).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

// "2026-03-01T10:00:00.123Z" → local "2026-03-01 11:00:00"; '' for nothing.
export function formatTime(text) {
  if (!text) return '';
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) return text;
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// "3 s ago", "5 min ago"… for a recent time.
export function ago(text) {
  if (!text) return '';
  const s = Math.round((Date.now() - new Date(text).getTime()) / 1000);
  if (!Number.isFinite(s)) return '';
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function timeCell(text) {
  return text ? h('time', { datetime: text, title: text }, formatTime(text)) : '—';
}

// Status → tone: every tone has a colour and a shape, so colour is never the only cue.
const TONES = {
  READY: 'ok', RUNNING: 'ok', ACTIVE: 'ok', HEALTHY: 'ok', SUCCEEDED: 'ok',
  UNHEALTHY: 'warn', PENDING: 'warn', PROVISIONING: 'info', PENDING_PROVIDER: 'warn',
  DEGRADED: 'warn', UPDATING: 'info', DELETING: 'info',
  UNAVAILABLE: 'bad', FAILED: 'bad', LOST: 'bad', ERROR: 'bad', DELETED: 'muted',
};

// <dcm-badge status="Ready">: the status in words, with a tone (colour + icon).
class Badge extends HTMLElement {
  static observedAttributes = ['status'];
  connectedCallback() { this.render(); }
  attributeChangedCallback() { this.render(); }
  render() {
    const status = this.getAttribute('status') || 'Unknown';
    // Health's "Pending" (not probed yet) is neutral; a cleanup record's PENDING is waiting.
    const tone = status === 'Pending' ? 'pending' : TONES[status.toUpperCase()] || 'muted';
    this.className = `badge tone-${tone}`;
    this.replaceChildren(h('span', { class: 'badge-icon', 'aria-hidden': 'true' }),
                         h('span', { class: 'badge-text' }, status));
  }
}
customElements.define('dcm-badge', Badge);

export const badge = (status) => h('dcm-badge', { status: status || 'Unknown' });

// <dcm-live-indicator>: the state of the current page's watch (sse.js).
const STATES = {
  live: ['Live', 'Updates arrive as they happen (server-sent events)'],
  polling: ['Polling', 'The server does not stream here: the page refreshes every 2 s'],
  connecting: ['Connecting', 'Opening the live connection'],
  disconnected: ['Disconnected', 'The connection dropped: reconnecting with backoff'],
  idle: ['Idle', 'This page has nothing live'],
};
class LiveIndicator extends HTMLElement {
  static observedAttributes = ['state'];
  connectedCallback() { this.render(); }
  attributeChangedCallback() { this.render(); }
  render() {
    const state = this.getAttribute('state') || 'idle';
    const [label, title] = STATES[state] || STATES.idle;
    this.className = `live live-${state}`;
    this.title = title;
    this.replaceChildren(h('span', { class: 'live-dot', 'aria-hidden': 'true' }),
                         h('span', { class: 'live-text' }, label));
  }
}
customElements.define('dcm-live-indicator', LiveIndicator);

// The page's connection state, shown in the header.
export function setConnection(state) {
  document.querySelector('dcm-live-indicator')?.setAttribute('state', state);
}

// The aria-live status region: a sentence for everyone, screen readers included.
export function announce(message, kind = 'info') {
  const region = document.getElementById('status');
  if (!region) return;
  region.className = `status status-${kind}`;
  region.textContent = message;
  region.hidden = !message;
}

// <dcm-token-panel>: the bearer token the console sends (kept in sessionStorage, so it is gone
// when the tab closes). With authentication off there is nothing to sign in with.
class TokenPanel extends HTMLElement {
  connectedCallback() {
    this.onAuth = () => this.render();
    auth.addEventListener('change', this.onAuth);
    this.render();
  }
  disconnectedCallback() { auth.removeEventListener('change', this.onAuth); }

  render() {
    const state = auth.state;
    const token = getToken();
    if (state === 'off' && !token) {
      this.replaceChildren(h('span', { class: 'auth-note' }, 'Auth off (dev mode)'));
      return;
    }
    if ((state === 'ok' || state === 'unknown') && token && !this.editing) {
      this.replaceChildren(
        h('span', { class: 'auth-note' }, state === 'ok' ? 'Signed in with a token' : 'Token set'),
        h('button', { type: 'button', class: 'link-button', onclick: () => this.edit() },
          'Change token'),
        h('button', { type: 'button', class: 'link-button', onclick: () => setToken('') },
          'Sign out'));
      return;
    }
    if (state === 'unknown' && !this.editing) {
      this.replaceChildren(h('button', { type: 'button', class: 'link-button',
                                         onclick: () => this.edit() }, 'Use a token'));
      return;
    }
    this.renderForm(state === 'rejected');
  }

  edit() {
    this.editing = true;
    this.render();
    this.querySelector('input')?.focus();
  }

  renderForm(rejected) {
    const input = h('input', { id: 'token-input', type: 'password', autocomplete: 'off',
                               spellcheck: 'false', placeholder: 'eyJhbGciOi…',
                               'aria-describedby': 'token-help' });
    const form = h('form', { class: 'token-form', onsubmit: (e) => {
      e.preventDefault();
      this.editing = false;
      setToken(input.value.trim());
    } },
    h('label', { for: 'token-input' }, 'Bearer token'), input,
    h('button', { type: 'submit' }, 'Use token'),
    this.editing && getToken() ? h('button', { type: 'button', class: 'link-button',
                                               onclick: () => { this.editing = false; this.render(); } },
                                   'Cancel') : null,
    h('span', { id: 'token-help', class: rejected ? 'auth-note auth-bad' : 'auth-note' },
      rejected ? 'Token needed' : 'Kept for this tab only'));
    this.replaceChildren(form);
  }
}
customElements.define('dcm-token-panel', TokenPanel);

// Keyed rows: `entries` is [{key, sig, build}] in display order. A row is rebuilt only when its
// signature changed and moved only when out of place, so a live update does not steal the
// keyboard focus from the rows that did not change.
export function syncRows(tbody, entries) {
  const existing = new Map([...tbody.children].map((tr) => [tr.dataset.key, tr]));
  let previous = null;
  for (const { key, sig, build } of entries) {
    let tr = existing.get(key);
    if (!tr || tr.dataset.sig !== sig) {
      const fresh = build();
      fresh.dataset.key = key;
      fresh.dataset.sig = sig;
      if (tr) tr.replaceWith(fresh);
      tr = fresh;
    }
    existing.delete(key);
    const wanted = previous ? previous.nextSibling : tbody.firstChild;
    if (tr !== wanted) tbody.insertBefore(tr, wanted);
    previous = tr;
  }
  for (const tr of existing.values()) tr.remove();
}

// A <select> with a visible label: [['', 'All'], ['Ready', 'Ready'], …].
export function labelledSelect(id, label, options, value, onchange) {
  const select = h('select', { id, onchange: (e) => onchange(e.target.value) },
    options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));
  return h('div', { class: 'field' }, h('label', { for: id }, label), select);
}

// A page heading that takes the focus when the page opens (for keyboard and screen readers).
export function pageHeading(text) {
  return h('h1', { tabindex: '-1', class: 'page-title' }, text);
}
