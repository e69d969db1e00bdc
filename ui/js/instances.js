// The instances page (#/instances: catalog item instances with their status and a Rehydrate
// action) and the cleanup queue (#/cleanup: records with Retry for FAILED ones). SPEC §9; paths
// and fields: docs/api.md "Catalog item instances" and "Cleanup queue".

import { ACTIONS, describeError, post } from './api.js';
import { ListWatch } from './sse.js';
import {
  announce, badge, h, labelledSelect, pageHeading, setConnection, syncRows, timeCell,
} from './components.js';

function watch(path, key, idOf, onItems) {
  return new ListWatch(path, key, idOf, {
    onItems,
    onState: setConnection,
    onError: (e) => announce(describeError(e), 'error'),
  });
}

const byNewest = (field) => (a, b) => ((a[field] || '') < (b[field] || '') ? 1 : -1);

// <dcm-instances-page>
class InstancesPage extends HTMLElement {
  connectedCallback() {
    this.items = [];
    this.busy = new Set(); // instance ids with a rehydration in flight
    this.tbody = h('tbody');
    this.empty = h('p', { class: 'empty', hidden: true }, 'No catalog item instance yet.');
    this.result = h('section', { class: 'result', id: 'rehydrate-result', hidden: true,
                                 'aria-live': 'polite', 'aria-label': 'Last rehydration' });
    this.replaceChildren(
      pageHeading('Instances'),
      h('p', { class: 'lead' }, 'Catalog item instances. Rehydrate re-creates an instance from ' +
        'its original intent under today\'s policy, then queues the old resource for deletion.'),
      this.result,
      h('div', { class: 'table-wrap' }, h('table', { class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Catalog item instances'),
        h('thead', {}, h('tr', {},
          ['Instance', 'Service type', 'Provider', 'Resource', 'Status', 'Updated', 'Actions']
            .map((c) => h('th', { scope: 'col' }, c)))),
        this.tbody)),
      this.empty);
    this.watch = watch('/catalog-item-instances', 'results', (i) => i.id, (items) => {
      this.items = [...items.values()];
      this.render();
    });
  }

  disconnectedCallback() { this.watch?.stop(); }

  render() {
    const rows = [...this.items].sort(byNewest('create_time'));
    syncRows(this.tbody, rows.map((i) => ({
      key: i.id, sig: JSON.stringify(i) + this.busy.has(i.id), build: () => this.row(i),
    })));
    this.empty.hidden = rows.length > 0;
  }

  row(i) {
    const name = i.display_name || i.id;
    const busy = this.busy.has(i.id);
    return h('tr', {},
      h('th', { scope: 'row' }, name, i.display_name ? h('div', { class: 'muted' },
                                                         h('code', {}, i.id)) : null),
      h('td', {}, i.spec?.service_type || ''),
      h('td', {}, i.provider_name || ''),
      h('td', {}, h('code', { class: 'resource-id' }, i.resource_id || '')),
      h('td', {}, badge(i.status)),
      h('td', {}, timeCell(i.update_time)),
      h('td', {}, h('button', { type: 'button', class: 'rehydrate', disabled: busy,
                                'aria-label': `Rehydrate ${name}`,
                                onclick: () => this.rehydrate(i) },
                    busy ? 'Rehydrating…' : 'Rehydrate')));
  }

  async rehydrate(instance) {
    const name = instance.display_name || instance.id;
    this.busy.add(instance.id);
    this.render();
    announce(`Rehydrating ${name}…`);
    try {
      const r = await post(`/catalog-item-instances/${encodeURIComponent(instance.id)}:rehydrate`);
      announce(''); // the result panel (aria-live) says it, once
      this.showResult(name, r);
    } catch (e) {
      this.showError(name, describeError(e, ACTIONS.rehydrate));
    } finally {
      this.busy.delete(instance.id);
      this.render();
    }
  }

  showResult(name, r) {
    this.result.hidden = false;
    this.result.className = 'result result-ok';
    this.result.replaceChildren(
      h('h2', { tabindex: '-1' }, `Rehydrated ${name}`),
      h('dl', { class: 'details' },
        h('dt', {}, 'New resource'),
        h('dd', {}, h('code', { class: 'new-resource' }, r.resource_id), ' on ',
          r.provider_name || '?', ' ', badge(r.status)),
        h('dt', {}, 'Old resource'),
        h('dd', {}, h('code', { class: 'old-resource' }, r.old_resource_id || '?'),
          ' — queued for deletion: ', h('a', { href: '#/cleanup' }, 'see the cleanup queue'))));
    this.result.querySelector('h2').focus(); // the button that had the focus was re-rendered
  }

  showError(name, message) {
    this.result.hidden = false;
    this.result.className = 'result result-error';
    this.result.replaceChildren(h('h2', { tabindex: '-1' }, `Could not rehydrate ${name}`),
                                h('p', { class: 'error-text' }, message));
    announce('');
    this.result.querySelector('h2').focus();
  }
}
customElements.define('dcm-instances-page', InstancesPage);

const CLEANUP_STATUSES = ['PENDING', 'PENDING_PROVIDER', 'FAILED'];

// <dcm-cleanup-page filter-status>
class CleanupPage extends HTMLElement {
  connectedCallback() {
    this.status = this.getAttribute('filter-status') || '';
    this.records = [];
    this.busy = new Set();
    this.tbody = h('tbody');
    this.summary = h('p', { class: 'summary' });
    this.empty = h('p', { class: 'empty', hidden: true });
    this.replaceChildren(
      pageHeading('Cleanup queue'),
      h('p', { class: 'lead' }, 'Old resources waiting for deletion on their provider. A record ' +
        'that used up its retries is FAILED until an admin retries it.'),
      h('div', { class: 'toolbar' }, labelledSelect('filter-status', 'Status',
        [['', 'All'], ...CLEANUP_STATUSES.map((s) => [s, s])], this.status,
        (v) => { this.status = v; this.render(); })),
      this.summary,
      h('div', { class: 'table-wrap' }, h('table', { class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Cleanup queue'),
        h('thead', {}, h('tr', {},
          ['Resource', 'Provider', 'Service type', 'Requested', 'Retries', 'Status',
           'Last attempt', 'Last error', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
        this.tbody)),
      this.empty);
    this.watch = watch('/cleanup-queue', 'records', (r) => r.instance_id, (items) => {
      this.records = [...items.values()];
      this.render();
    });
  }

  disconnectedCallback() { this.watch?.stop(); }

  render() {
    const shown = this.records.filter((r) => !this.status || r.status === this.status)
                              .sort(byNewest('requested_at'));
    syncRows(this.tbody, shown.map((r) => ({
      key: r.instance_id, sig: JSON.stringify(r) + this.busy.has(r.instance_id),
      build: () => this.row(r),
    })));
    const failed = this.records.filter((r) => r.status === 'FAILED').length;
    this.summary.textContent = `${shown.length} of ${this.records.length} records shown` +
                               (failed ? ` · ${failed} FAILED` : '');
    this.empty.hidden = shown.length > 0;
    this.empty.textContent = this.records.length ? 'No record has this status.'
                                                 : 'The cleanup queue is empty.';
  }

  row(r) {
    const busy = this.busy.has(r.instance_id);
    return h('tr', {},
      h('th', { scope: 'row' }, h('code', {}, r.instance_id)),
      h('td', {}, r.provider_name || ''),
      h('td', {}, r.service_type || ''),
      h('td', {}, timeCell(r.requested_at)),
      h('td', { class: 'num' }, String(r.retry_count ?? 0)),
      h('td', {}, badge(r.status)),
      h('td', {}, timeCell(r.last_attempt)),
      h('td', { class: 'reason' }, r.last_error || ''),
      h('td', {}, r.status === 'FAILED'
        ? h('button', { type: 'button', class: 'retry', disabled: busy,
                        'aria-label': `Retry cleanup of ${r.instance_id}`,
                        onclick: () => this.retry(r) }, busy ? 'Retrying…' : 'Retry')
        : ''));
  }

  async retry(record) {
    this.busy.add(record.instance_id);
    this.render();
    try {
      await post(`/cleanup-queue/${encodeURIComponent(record.instance_id)}:retry`);
      announce(`Cleanup of ${record.instance_id} is PENDING again (retry count 0).`, 'success');
    } catch (e) {
      announce(describeError(e, ACTIONS.retry), 'error');
    } finally {
      this.busy.delete(record.instance_id);
      this.render();
    }
  }
}
customElements.define('dcm-cleanup-page', CleanupPage);
