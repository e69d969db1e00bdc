// The providers page (#/providers: live health, filters, the as_of time slider) and a
// provider's page (#/providers/<id>: health detail and history timeline). SPEC §9; paths and
// fields: docs/api.md and SPEC §3.1, §3.4.

import { ACTIONS, describeError, get, listAll, withQuery } from './api.js';
import { ListWatch, earliestEventTime } from './sse.js';
import {
  announce, badge, formatTime, h, labelledSelect, pageHeading, setConnection, syncRows, timeCell,
} from './components.js';

const HEALTH = ['Ready', 'Unhealthy', 'Unavailable', 'Pending'];

export function watchProviders(onItems) {
  return new ListWatch('/providers', 'providers', (p) => p.id, {
    onItems,
    onState: setConnection,
    onError: (e) => announce(describeError(e), 'error'),
  });
}

function reasonOf(p) {
  const health = p.health || {};
  return health.last_transition_reason || health.last_error || '';
}

function providerRow(p) {
  const health = p.health || {};
  return h('tr', {},
    h('th', { scope: 'row' },
      h('a', { href: `#/providers/${encodeURIComponent(p.id)}` }, p.name),
      p.display_name && p.display_name !== p.name ? h('div', { class: 'muted' }, p.display_name)
                                                  : null),
    h('td', {}, p.service_type),
    h('td', { class: 'endpoint' }, h('code', { title: p.endpoint }, p.endpoint)),
    h('td', {}, badge(p.health_status)),
    h('td', {}, timeCell(health.last_transition_time)),
    h('td', { class: 'reason' }, reasonOf(p)));
}

// <dcm-providers-page filter-health filter-type>
class ProvidersPage extends HTMLElement {
  connectedCallback() {
    this.filters = {
      health: this.getAttribute('filter-health') || '',
      type: this.getAttribute('filter-type') || '',
      name: '',
    };
    this.live = [];
    this.snapshot = null; // providers as of the slider's time, or null when live
    this.serviceTypes = [];
    this.build();
    this.watch = watchProviders((items) => {
      this.live = [...items.values()];
      if (!this.snapshot) this.render();
    });
    get('/service-types').then((r) => {
      this.serviceTypes = r.service_types || [];
      this.buildFilters();
    }).catch(() => {});
    this.initSlider();
  }

  disconnectedCallback() {
    this.watch?.stop();
    clearInterval(this.clock);
    clearTimeout(this.debounce);
  }

  build() {
    this.filterBar = h('div', { class: 'toolbar', role: 'group', 'aria-label': 'Filters' });
    this.summary = h('p', { class: 'summary', 'aria-live': 'polite' });
    this.banner = h('div', { class: 'snapshot-banner', hidden: true });
    this.tbody = h('tbody');
    this.empty = h('p', { class: 'empty', hidden: true });
    this.replaceChildren(
      pageHeading('Providers'),
      this.filterBar,
      this.buildSlider(),
      this.banner,
      this.summary,
      h('div', { class: 'table-wrap' }, h('table', { class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Registered service providers'),
        h('thead', {}, h('tr', {},
          ['Name', 'Service type', 'Endpoint', 'Health', 'Since', 'Reason'].map(
            (c) => h('th', { scope: 'col' }, c)))),
        this.tbody)),
      this.empty);
    this.buildFilters();
  }

  buildFilters() {
    const set = (k) => (v) => { this.filters[k] = v; this.render(); };
    const types = [...new Set([...this.serviceTypes, ...this.live.map((p) => p.service_type)])];
    this.filterBar.replaceChildren(
      labelledSelect('filter-health', 'Health', [['', 'All'], ...HEALTH.map((s) => [s, s])],
                     this.filters.health, set('health')),
      labelledSelect('filter-type', 'Service type', [['', 'All'], ...types.map((t) => [t, t])],
                     this.filters.type, set('type')),
      h('div', { class: 'field' }, h('label', { for: 'filter-name' }, 'Name contains'),
        h('input', { id: 'filter-name', type: 'search', value: this.filters.name,
                     oninput: (e) => set('name')(e.target.value.trim()) })));
  }

  buildSlider() {
    this.range = h('input', { id: 'asof-range', type: 'range', min: 0, max: 0, step: 1000,
                              disabled: true, 'aria-describedby': 'asof-help' });
    this.rangeLabel = h('output', { id: 'asof-output', for: 'asof-range' }, 'Live');
    this.liveButton = h('button', { type: 'button', id: 'asof-live', class: 'secondary', disabled: true,
                                    onclick: () => this.goLive() }, 'Back to live');
    this.range.addEventListener('input', () => this.onSlide());
    return h('section', { class: 'timeslider', 'aria-label': 'Time travel' },
      h('label', { for: 'asof-range' }, 'Registry as of'),
      this.range, this.rangeLabel, this.liveButton,
      h('span', { id: 'asof-help', class: 'visually-hidden' },
        'From the first event to now; the right end is live.'));
  }

  async initSlider() {
    let earliest = null;
    try {
      earliest = await earliestEventTime();
    } catch (e) {
      return announce(describeError(e), 'error');
    }
    const now = Date.now();
    const start = earliest ? Math.floor(Date.parse(earliest) / 1000) * 1000 : now;
    this.range.min = String(start);
    this.range.max = String(now);
    this.range.value = String(now);
    this.range.disabled = start >= now;
    this.updateSliderText();
    // The right end follows the clock; while live, the thumb stays on it.
    this.clock = setInterval(() => {
      const live = !this.snapshot && !this.pending;
      this.range.max = String(Date.now());
      this.range.disabled = Number(this.range.min) >= Date.now();
      if (live) this.range.value = this.range.max;
      this.updateSliderText();
    }, 2000);
  }

  atRightEnd() {
    return Number(this.range.value) >= Number(this.range.max) - 1000;
  }

  updateSliderText() {
    const live = this.atRightEnd() && !this.snapshot;
    if (this.range.disabled) {
      this.rangeLabel.textContent = 'Live';
      this.range.setAttribute('aria-valuetext', 'Live (no history to travel yet)');
      return;
    }
    const text = live ? 'Live' : formatTime(new Date(Number(this.range.value)).toISOString());
    this.rangeLabel.textContent = text;
    this.range.setAttribute('aria-valuetext', live ? 'Live (now)' : text);
  }

  onSlide() {
    clearTimeout(this.debounce);
    if (this.atRightEnd()) return this.goLive();
    this.pending = true;
    this.updateSliderText();
    this.rangeLabel.textContent = formatTime(new Date(Number(this.range.value)).toISOString());
    this.debounce = setTimeout(() => this.loadSnapshot(Number(this.range.value)), 200);
  }

  async loadSnapshot(ms) {
    const asOf = new Date(ms).toISOString();
    const seq = (this.seq = (this.seq || 0) + 1);
    try {
      const providers = await listAll(withQuery('/providers', { as_of: asOf }), 'providers');
      if (seq !== this.seq) return;
      this.pending = false;
      this.snapshot = { asOf, providers };
      this.liveButton.disabled = false;
      this.banner.hidden = false;
      this.banner.replaceChildren(
        h('strong', {}, 'Past state: '),
        `the registry as it was at ${formatTime(asOf)} (${asOf}). Live updates are paused here.`);
      this.dataset.asOf = asOf;
      this.updateSliderText();
      this.render();
    } catch (e) {
      if (seq === this.seq) announce(describeError(e, ACTIONS.read), 'error');
    }
  }

  goLive() {
    clearTimeout(this.debounce);
    this.seq = (this.seq || 0) + 1;
    this.pending = false;
    this.snapshot = null;
    delete this.dataset.asOf;
    this.range.value = this.range.max;
    this.liveButton.disabled = true;
    this.banner.hidden = true;
    this.updateSliderText();
    this.render();
  }

  render() {
    const all = this.snapshot ? this.snapshot.providers : this.live;
    const { health, type, name } = this.filters;
    const shown = all.filter((p) => (!health || p.health_status === health) &&
                                    (!type || p.service_type === type) &&
                                    (!name || p.name.toLowerCase().includes(name.toLowerCase())))
                     .sort((a, b) => a.name.localeCompare(b.name));
    syncRows(this.tbody, shown.map((p) => ({
      key: p.id, sig: JSON.stringify(p), build: () => providerRow(p),
    })));
    const counts = HEALTH.map((s) => [s, all.filter((p) => p.health_status === s).length])
                         .filter(([, n]) => n > 0).map(([s, n]) => `${n} ${s}`);
    this.summary.textContent = `${shown.length} of ${all.length} providers shown` +
                               (counts.length ? ` · ${counts.join(' · ')}` : '');
    this.empty.hidden = shown.length > 0;
    this.empty.textContent = all.length ? 'No provider matches these filters.'
                                        : this.snapshot ? 'No provider was registered then.'
                                                        : 'No provider is registered yet.';
    if (!this.snapshot && this.filterBar.querySelector('#filter-type')?.options.length !==
        new Set([...this.serviceTypes, ...all.map((p) => p.service_type)]).size + 1) {
      const focused = document.activeElement?.id;
      this.buildFilters();
      if (focused) document.getElementById(focused)?.focus();
    }
  }
}
customElements.define('dcm-providers-page', ProvidersPage);

// Every event type a timeline shows, and the noisy ones it shows only for the last minutes.
const TIMELINE_TYPES = ['registered', 'updated', 'id_changed', 'deleted', 'expired', 'rejected',
                        'health_changed'].map((t) => `dcm.provider.${t}`);
const NOISY_TYPES = ['health_probed', 'heartbeat_recorded'].map((t) => `dcm.provider.${t}`);
const NOISY_WINDOW_MS = 10 * 60 * 1000;

function toneOfEvent(entry) {
  const e = entry.event || {};
  const data = e.data || {};
  if (entry.type.endsWith('health_changed')) {
    return { Ready: 'ok', Unhealthy: 'warn', Unavailable: 'bad' }[data.to] || 'muted';
  }
  if (/rejected|deleted|expired/.test(entry.type)) return 'bad';
  if (/registered|updated|id_changed/.test(entry.type)) return 'info';
  return 'muted';
}

function timelineItem(entry) {
  const short = entry.type.replace(/^dcm\.provider\./, '').replace(/_/g, ' ');
  return h('li', { class: `tl-item tone-${toneOfEvent(entry)}`, dataset: { type: entry.type } },
    h('span', { class: 'tl-dot', 'aria-hidden': 'true' }),
    h('div', { class: 'tl-head' }, timeCell(entry.time), h('span', { class: 'tl-type' }, short),
      entry.actor ? h('span', { class: 'muted' }, `by ${entry.actor}`) : null),
    h('div', { class: 'tl-summary' }, entry.summary || entry.type));
}

function detailList(rows) {
  return h('dl', { class: 'details' }, rows.filter(([, v]) => v !== undefined && v !== null &&
                                                            v !== '')
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// <dcm-provider-page provider-id="…">
class ProviderPage extends HTMLElement {
  connectedCallback() {
    this.id_ = this.getAttribute('provider-id');
    this.noisy = false;
    this.heading = pageHeading(`Provider ${this.id_}`);
    this.body = h('div', { class: 'provider-detail' }, h('p', { class: 'muted' }, 'Loading…'));
    this.timeline = h('ol', { class: 'timeline', 'aria-label': 'History, newest first' });
    this.historyNote = h('p', { class: 'muted' });
    this.replaceChildren(
      h('p', { class: 'crumbs' }, h('a', { href: '#/providers' }, '← All providers')),
      this.heading, this.body,
      h('section', { class: 'history', 'aria-labelledby': 'history-title' },
        h('div', { class: 'section-head' },
          h('h2', { id: 'history-title' }, 'History'),
          h('div', { class: 'field inline' },
            h('input', { id: 'history-noisy', type: 'checkbox',
                         onchange: (e) => { this.noisy = e.target.checked; this.loadHistory(); } }),
            h('label', { for: 'history-noisy' }, 'Include probes and heartbeats (last 10 min)')),
          h('button', { type: 'button', class: 'secondary', onclick: () => this.loadHistory() },
            'Refresh')),
        this.historyNote, this.timeline));
    this.watch = watchProviders((items) => this.show(items.get(this.id_)));
    this.loadHistory();
  }

  disconnectedCallback() {
    this.watch?.stop();
    clearTimeout(this.reload);
  }

  show(p) {
    if (!p) {
      this.heading.textContent = `Provider ${this.id_}`;
      this.body.replaceChildren(h('p', { class: 'empty' },
        'This provider is not registered now. Its history, if any, is below.'));
      return;
    }
    const health = p.health || {};
    const key = `${p.update_time}|${health.last_transition_time}`;
    if (this.lastKey && key !== this.lastKey) {
      clearTimeout(this.reload);
      this.reload = setTimeout(() => this.loadHistory(), 300);
    }
    this.lastKey = key;
    this.heading.replaceChildren(`${p.name} `, badge(p.health_status));
    document.title = `${p.name} · DCM console`;
    const latency = health.latency_ms !== undefined ? `${health.latency_ms.toFixed(1)} ms` : '';
    this.body.replaceChildren(
      h('section', { class: 'card', 'aria-labelledby': 'health-title' },
        h('h2', { id: 'health-title' }, 'Health'),
        detailList([
          ['Status', badge(health.status || p.health_status)],
          ['Last transition', health.last_transition_time
            ? [timeCell(health.last_transition_time), ` — ${health.last_transition_reason || ''}`]
            : 'none yet'],
          ['Consecutive failures', String(health.consecutive_failures ?? 0)],
          ['Consecutive successes', String(health.consecutive_successes ?? 0)],
          ['Last probe', health.last_probe_time
            ? [timeCell(health.last_probe_time), ` — ${health.last_probe_result || ''}` +
               (health.last_http_status ? ` (HTTP ${health.last_http_status})` : '')] : ''],
          ['Latency', latency],
          ['Last error', health.last_error
            ? [health.last_error, ' at ', timeCell(health.last_error_time)] : ''],
          ['Last heartbeat', health.last_heartbeat_time ? timeCell(health.last_heartbeat_time) : ''],
          ['Probe status', health.probe_status],
          ['Heartbeat status', health.heartbeat_status],
        ])),
      h('section', { class: 'card', 'aria-labelledby': 'reg-title' },
        h('h2', { id: 'reg-title' }, 'Registration'),
        detailList([
          ['Id', h('code', {}, p.id)],
          ['Name', p.name],
          ['Display name', p.display_name],
          ['Service type', p.service_type],
          ['Endpoint', h('code', {}, p.endpoint)],
          ['Liveness', p.liveness],
          ['Operations', (p.operations || []).join(', ')],
          ['Owner', p.owner],
          ['Region', p.metadata?.region_code],
          ['Registered', timeCell(p.create_time)],
          ['Updated', timeCell(p.update_time)],
        ])));
  }

  async loadHistory() {
    const seq = (this.seq = (this.seq || 0) + 1);
    const path = `/providers/${encodeURIComponent(this.id_)}/history`;
    const since = new Date(Date.now() - NOISY_WINDOW_MS).toISOString();
    const queries = [
      ...TIMELINE_TYPES.map((type) => withQuery(path, { type })),
      ...(this.noisy ? NOISY_TYPES.map((type) => withQuery(path, { type, since })) : []),
    ];
    try {
      const pages = await Promise.all(queries.map(
        (q) => listAll(q, 'events', { maxPages: 20 }).catch((e) => {
          if (e.status === 404) return [];
          throw e;
        })));
      if (seq !== this.seq) return;
      const entries = pages.flat().sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0));
      const shown = entries.slice(0, 300);
      this.timeline.replaceChildren(...shown.map(timelineItem));
      this.historyNote.textContent = entries.length === 0 ? 'No history for this id.'
        : `${entries.length} events${entries.length > shown.length ? ' (newest 300 shown)' : ''}.`;
    } catch (e) {
      if (seq === this.seq) announce(describeError(e), 'error');
    }
  }
}
customElements.define('dcm-provider-page', ProviderPage);
