// The live event stream (#/events): CloudEvents as the control plane records them, filtered by
// subject and type (GET /events?watch=true&subject=&type=, SPEC §9 and docs/api.md "Audit and
// history"). Newest first; at most MAX_SHOWN kept.

import { describeError } from './api.js';
import { EventWatch } from './sse.js';
import { announce, h, pageHeading, setConnection, timeCell } from './components.js';

const MAX_SHOWN = 500;
const BACKLOG_MS = 60 * 1000; // polling starts this far back, so the page is not empty

function eventRow(e) {
  const data = e.data === undefined ? '' : JSON.stringify(e.data);
  return h('li', { class: 'event', dataset: { type: e.type, subject: e.subject || '' } },
    h('div', { class: 'event-head' },
      timeCell(e.time),
      h('span', { class: 'event-type' }, e.type),
      e.subject ? h('a', { class: 'event-subject', href: `#/events?subject=${encodeURIComponent(e.subject)}`,
                           title: 'Show only this subject' }, e.subject) : null,
      e.actor ? h('span', { class: 'muted' }, `by ${e.actor}`) : null),
    data ? h('details', {}, h('summary', {}, data.length > 140 ? `${data.slice(0, 140)}…` : data),
             h('pre', {}, JSON.stringify(e, null, 2))) : null);
}

// <dcm-events-page subject type>
class EventsPage extends HTMLElement {
  connectedCallback() {
    this.paused = false;
    this.held = [];
    this.count = 0;
    this.subject = h('input', { id: 'events-subject', type: 'search', autocomplete: 'off',
                                value: this.getAttribute('subject') || '',
                                placeholder: 'provider or instance id' });
    this.type = h('input', { id: 'events-type', type: 'search', autocomplete: 'off',
                             value: this.getAttribute('type') || '',
                             placeholder: 'dcm.provider.* or an exact type',
                             'aria-describedby': 'events-type-help' });
    this.pauseButton = h('button', { type: 'button', class: 'secondary', 'aria-pressed': 'false',
                                     onclick: () => this.togglePause() }, 'Pause');
    this.list = h('ol', { class: 'events', 'aria-label': 'Events, newest first' });
    this.note = h('p', { class: 'summary', 'aria-live': 'polite' });
    this.replaceChildren(
      pageHeading('Events'),
      h('form', { class: 'toolbar', role: 'search', onsubmit: (e) => {
        e.preventDefault();
        this.apply();
      } },
        h('div', { class: 'field' }, h('label', { for: 'events-subject' }, 'Subject'), this.subject),
        h('div', { class: 'field' }, h('label', { for: 'events-type' }, 'Type'), this.type,
          h('span', { id: 'events-type-help', class: 'visually-hidden' },
            'Exact, or a prefix ending in *')),
        h('button', { type: 'submit' }, 'Apply filters'),
        h('button', { type: 'button', class: 'secondary', onclick: () => {
          this.subject.value = '';
          this.type.value = '';
          this.apply();
        } }, 'Clear'),
        this.pauseButton),
      this.note, this.list);
    this.start();
  }

  disconnectedCallback() { this.watch?.stop(); }

  // Filters go into the address, so the filtered stream can be linked to.
  apply() {
    const q = new URLSearchParams();
    if (this.subject.value.trim()) q.set('subject', this.subject.value.trim());
    if (this.type.value.trim()) q.set('type', this.type.value.trim());
    const hash = `#/events${q.toString() ? `?${q}` : ''}`;
    if (location.hash !== hash) location.hash = hash; // the router re-opens the page
    else this.restart();
  }

  restart() {
    this.watch?.stop();
    this.list.replaceChildren();
    this.count = 0;
    this.start();
  }

  start() {
    const q = new URLSearchParams();
    if (this.subject.value.trim()) q.set('subject', this.subject.value.trim());
    if (this.type.value.trim()) q.set('type', this.type.value.trim());
    const path = `/events${q.toString() ? `?${q}` : ''}`;
    this.note.textContent = 'Waiting for events…';
    this.watch = new EventWatch(path, {
      since: new Date(Date.now() - BACKLOG_MS).toISOString(),
      onEvents: (events) => this.add(events),
      onState: setConnection,
      onError: (e) => announce(describeError(e), 'error'),
    });
  }

  togglePause() {
    this.paused = !this.paused;
    this.pauseButton.setAttribute('aria-pressed', String(this.paused));
    this.pauseButton.textContent = this.paused ? 'Resume' : 'Pause';
    if (!this.paused) {
      const held = this.held;
      this.held = [];
      this.add(held);
    }
    this.updateNote();
  }

  add(events) {
    if (this.paused) {
      this.held.push(...events);
      return this.updateNote();
    }
    const sorted = [...events].sort((a, b) => (a.time < b.time ? -1 : 1));
    for (const e of sorted) this.list.prepend(eventRow(e));
    this.count += events.length;
    while (this.list.children.length > MAX_SHOWN) this.list.lastElementChild.remove();
    this.updateNote();
  }

  updateNote() {
    const shown = this.list.children.length;
    this.note.textContent = (shown ? `${this.count} events received, ${shown} shown.`
                                   : 'Waiting for events…') +
      (this.paused ? ` Paused: ${this.held.length} new events held.` : '');
  }
}
customElements.define('dcm-events-page', EventsPage);
