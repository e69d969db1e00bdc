// Live data for the console (SPEC §9). EventSource cannot send an Authorization header, so
// watches are read with fetch() and a ReadableStream, through a small Server-Sent Events parser.
//
// A watch's connection state, shown by <dcm-live-indicator>:
//
//   connecting ──SSE answer──▶ live ──stream ends / errors / goes silent──▶ disconnected
//       │                                                                      │ backoff
//       │ JSON list (watch not served yet) or 4xx                              ▼ 1 s … 30 s
//       ▼                                                                  connecting
//   polling (every 2 s; a list watch is tried again on every poll, since its JSON answer is the
//            list; the event watch, and any watch after a 4xx, every 30 s)
//
// Reconnecting sends the last `id:` seen as Last-Event-ID, so a server that resumes does so.

import { API, auth, authHeaders, errorFrom, get, listAll, withQuery } from './api.js';

const POLL_MS = 2000;
const RETRY_WATCH_MS = 30000;
const MAX_BACKOFF_MS = 30000;
const SILENCE_MS = 45000; // the server sends a comment every 15 s

// Server-Sent Events parser (the WHATWG event-stream format): feed it text as it arrives.
export class SseParser {
  constructor(onEvent, onComment = () => {}) {
    this.onEvent = onEvent;
    this.onComment = onComment;
    this.buffer = '';
    this.data = [];
    this.type = '';
    this.lastEventId = '';
  }

  push(text) {
    this.buffer += text;
    let start = 0;
    for (;;) {
      const cr = this.buffer.indexOf('\r', start);
      const lf = this.buffer.indexOf('\n', start);
      if (cr < 0 && lf < 0) break;
      let end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      let next = end + 1;
      if (this.buffer[end] === '\r') {
        if (end + 1 === this.buffer.length) break; // maybe "\r\n" split across chunks
        if (this.buffer[end + 1] === '\n') next++;
      }
      this.line(this.buffer.slice(start, end));
      start = next;
    }
    this.buffer = this.buffer.slice(start);
  }

  line(line) {
    if (line === '') return this.dispatch();
    if (line[0] === ':') return this.onComment(line.slice(1));
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'event') this.type = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.lastEventId = value;
  }

  dispatch() {
    const data = this.data;
    const type = this.type || 'message';
    this.data = [];
    this.type = '';
    if (data.length === 0) return;
    this.onEvent({ type, data: data.join('\n'), id: this.lastEventId });
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });

function isEventStream(response) {
  return (response.headers.get('content-type') || '').startsWith('text/event-stream');
}

// The base of the list and event watches: the connect / read / poll / back off loop.
// Subclasses implement onMessage(event), poll(firstPage), pollPlain() and reset().
class Watch {
  constructor(path, { onState = () => {}, onError = () => {} } = {}) {
    this.path = path;
    this.onState = onState;
    this.onError = onError;
    this.state = 'connecting';
    this.lastEventId = '';
    this.controller = new AbortController();
    queueMicrotask(() => this.run()); // once the subclass's constructor has run
  }

  stop() {
    this.controller.abort();
  }

  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.onState(state);
  }

  async run() {
    const signal = this.controller.signal;
    let backoff = 1000;
    let plainUntil = 0; // after a 4xx (or a useless JSON answer) to a watch: poll plainly until then
    while (!signal.aborted) {
      try {
        if (Date.now() < plainUntil) {
          await this.poll(null);
          this.setState('polling');
          await sleep(POLL_MS, signal);
          continue;
        }
        const response = await this.connect(signal);
        if (response.ok && isEventStream(response)) {
          backoff = 1000;
          this.setState('live');
          await this.read(response, signal);
          if (signal.aborted) return;
          this.setState('disconnected');
        } else if (response.ok) {
          // The server answered the list itself: it does not stream yet. Poll.
          await this.poll(await response.json());
          if (!this.answerIsCurrent) plainUntil = Date.now() + RETRY_WATCH_MS;
          this.setState('polling');
          await sleep(POLL_MS, signal);
          continue;
        } else {
          const error = await errorFrom(response);
          if (response.status === 401 || response.status === 403 || response.status >= 500) {
            this.onError(error);
            this.setState('disconnected');
          } else {
            plainUntil = Date.now() + RETRY_WATCH_MS; // e.g. 400/404/406: no watch here
            continue;
          }
        }
      } catch (e) {
        if (signal.aborted) return;
        this.onError(e);
        this.setState('disconnected');
      }
      await sleep(backoff * (0.75 + Math.random() / 2), signal);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  connect(signal) {
    const headers = { Accept: 'text/event-stream' };
    if (this.lastEventId) headers['Last-Event-ID'] = this.lastEventId;
    return fetch(API + withQuery(this.path, { watch: 'true' }), {
      headers: authHeaders(headers), signal, cache: 'no-store',
    });
  }

  // Reads the stream until it ends, fails or stays silent for SILENCE_MS.
  async read(response, signal) {
    auth.observe(response.status);
    this.reset();
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser((e) => {
      this.lastEventId = e.id || this.lastEventId;
      this.onMessage(e);
    });
    let silent;
    const arm = () => {
      clearTimeout(silent);
      silent = setTimeout(() => reader.cancel(), SILENCE_MS);
    };
    const cancel = () => reader.cancel();
    signal.addEventListener('abort', cancel, { once: true });
    try {
      arm();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        parser.push(decoder.decode(value, { stream: true }));
      }
    } finally {
      clearTimeout(silent);
      signal.removeEventListener('abort', cancel);
    }
  }
}

// A Kubernetes-style list watch (GET /providers?watch=true, /catalog-item-instances,
// /cleanup-queue): ADDED per object, SYNCED, then ADDED / MODIFIED / DELETED. `onItems(map)`
// gets the whole current map (key → object) after each batch of changes.
export class ListWatch extends Watch {
  constructor(path, key, idOf, { onItems, ...options }) {
    super(path, options);
    this.key = key;
    this.idOf = idOf;
    this.onItems = onItems;
    this.items = new Map();
    this.seen = null; // keys (re)announced since this connection began, until SYNCED
    this.answerIsCurrent = true; // a JSON answer to the watch is the current list: poll with it
  }

  reset() {
    this.seen = new Set();
  }

  onMessage({ type, data }) {
    if (type === 'SYNCED') {
      // What the server did not announce again is gone (resume or not, the result is right).
      for (const id of [...this.items.keys()]) if (!this.seen.has(id)) this.items.delete(id);
      this.seen = null;
      return this.changed(true);
    }
    let object;
    try {
      object = JSON.parse(data);
    } catch {
      return;
    }
    const id = this.idOf(object);
    if (type === 'DELETED') this.items.delete(id);
    else if (type === 'ADDED' || type === 'MODIFIED') {
      this.items.set(id, object);
      if (this.seen) this.seen.add(id);
    } else return;
    this.changed(false);
  }

  // Renders at most every 100 ms (a SYNCED at once).
  changed(now) {
    if (now) {
      clearTimeout(this.timer);
      this.timer = null;
      return this.onItems(this.items);
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.onItems(this.items);
    }, 100);
  }

  async poll(firstPage) {
    const signal = this.controller.signal;
    const list = await listAll(this.path, this.key, { signal, first: firstPage });
    this.items = new Map(list.map((o) => [this.idOf(o), o]));
    this.onItems(this.items);
  }
}

// GET /events?watch=true&subject=&type=: CloudEvents as they happen (`onEvents([...])`, oldest
// first, each id once). Polling falls back to GET /events?since=<last seen time>.
export class EventWatch extends Watch {
  constructor(path, { onEvents, since, ...options }) {
    super(path, options);
    this.onEvents = onEvents;
    this.since = since;
    this.ids = new Set();
    this.idOrder = [];
  }

  reset() {}

  fresh(events) {
    const out = [];
    for (const e of events) {
      if (!e || !e.id || this.ids.has(e.id)) continue;
      this.ids.add(e.id);
      this.idOrder.push(e.id);
      if (this.idOrder.length > 5000) this.ids.delete(this.idOrder.shift());
      if (e.time && e.time > this.since) this.since = e.time;
      out.push(e);
    }
    if (out.length) this.onEvents(out);
  }

  onMessage({ data }) {
    try {
      this.fresh([JSON.parse(data)]);
    } catch {
      // A message that is not a CloudEvent: nothing to show.
    }
  }

  // A JSON answer to the watch request is the oldest page (answerIsCurrent unset: the watch is
  // tried again only every RETRY_WATCH_MS); polls read from our cursor instead.
  async poll() {
    const signal = this.controller.signal;
    const path = withQuery(this.path, { since: this.since });
    const events = await listAll(path, 'events', { signal, maxPages: 20 });
    this.fresh(events);
  }
}

// The earliest event's time (RFC 3339), or null: where the time slider starts.
export async function earliestEventTime() {
  const page = await get('/events?max_page_size=1');
  return page.events && page.events.length ? page.events[0].time : null;
}
