// The peers page (#/peers, SPEC §10): the peer enclaves this enclave federates with, and their
// health as the peer prober folds it (GET /api/v1alpha1/peers). Peers are few, operator-
// configured and have no watch stream: the page asks again every two seconds while it is shown.
// Fields: docs/federation.md "Peers and their health".

import { describeError, get } from './api.js';
import { announce, badge, h, pageHeading, syncRows, timeCell } from './components.js';

const POLL_MS = 2000;

// <dcm-peers-page>
class PeersPage extends HTMLElement {
  connectedCallback() {
    this.stopped = false;
    this.tbody = h('tbody');
    this.enclave = h('code', { class: 'enclave-id' }, '…');
    this.empty = h('p', { class: 'empty', hidden: true },
      'No peer enclave is configured (FEDERATION_PEERS).');
    this.replaceChildren(
      pageHeading('Peers'),
      h('p', { class: 'lead' }, 'This enclave, ', this.enclave, ', places what its own ' +
        'providers cannot serve on these peers (Ready ones only). Resources placed on a peer ' +
        'show the provider peer:<enclave>.'),
      h('div', { class: 'table-wrap' }, h('table', { class: 'data' },
        h('caption', { class: 'visually-hidden' }, 'Peer enclaves'),
        h('thead', {}, h('tr', {},
          ['Peer', 'URL', 'Health', 'Last probe', 'Last result', 'Failures in a row']
            .map((c) => h('th', { scope: 'col' }, c)))),
        this.tbody)),
      this.empty);
    this.poll();
  }

  disconnectedCallback() {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  async poll() {
    try {
      const r = await get('/peers');
      this.enclave.textContent = r.enclave_id;
      this.render(r.peers || []);
    } catch (e) {
      announce(describeError(e), 'error');
    }
    if (!this.stopped) this.timer = setTimeout(() => this.poll(), POLL_MS);
  }

  render(peers) {
    syncRows(this.tbody, peers.map((p) => ({
      key: p.id, sig: JSON.stringify(p), build: () => this.row(p),
    })));
    this.empty.hidden = peers.length > 0;
  }

  row(p) {
    const health = p.health || {};
    return h('tr', { 'data-peer': p.id },
      h('th', { scope: 'row' }, p.id),
      h('td', {}, h('code', {}, p.url)),
      h('td', {}, badge(p.health_status)),
      h('td', {}, p.last_probe_time ? timeCell(p.last_probe_time) : 'never'),
      h('td', {}, health.last_probe_result || ''),
      h('td', {}, String(health.consecutive_failures ?? 0)));
  }
}
customElements.define('dcm-peers-page', PeersPage);
