// The console's entry point: hash routes (so deep links and the back button work without the
// server knowing any route), the header's navigation, and what a token change restarts.
//
//   #/providers[?health_status=&service_type=]   providers with live health and time slider
//   #/providers/<id>                             a provider's health detail and history
//   #/instances                                  catalog item instances, Rehydrate
//   #/cleanup[?status=]                          the cleanup queue, Retry
//   #/events[?subject=&type=]                    the live event stream
//   #/peers                                      peer enclaves and their health (SPEC §10)

import { auth } from './api.js';
import { announce, h, setConnection } from './components.js';
import './providers.js';
import './instances.js';
import './events.js';
import './peers.js';

const ROUTES = [
  { pattern: /^\/providers\/([^/]+)$/, nav: 'providers', title: 'Provider',
    page: ([id]) => h('dcm-provider-page', { 'provider-id': decodeURIComponent(id) }) },
  { pattern: /^\/providers$/, nav: 'providers', title: 'Providers',
    page: (_, q) => h('dcm-providers-page', { 'filter-health': q.get('health_status'),
                                              'filter-type': q.get('service_type') }) },
  { pattern: /^\/instances$/, nav: 'instances', title: 'Instances',
    page: () => h('dcm-instances-page') },
  { pattern: /^\/cleanup$/, nav: 'cleanup', title: 'Cleanup queue',
    page: (_, q) => h('dcm-cleanup-page', { 'filter-status': q.get('status') }) },
  { pattern: /^\/events$/, nav: 'events', title: 'Events',
    page: (_, q) => h('dcm-events-page', { subject: q.get('subject'), type: q.get('type') }) },
  { pattern: /^\/peers$/, nav: 'peers', title: 'Peers', page: () => h('dcm-peers-page') },
];

function route() {
  const hash = location.hash.replace(/^#/, '') || '/providers';
  const [path, query] = hash.split('?');
  const q = new URLSearchParams(query || '');
  const main = document.getElementById('main');
  for (const r of ROUTES) {
    const m = path.match(r.pattern);
    if (!m) continue;
    return show(main, r.page(m.slice(1), q), r.nav, r.title);
  }
  show(main, h('section', {}, h('h1', { tabindex: '-1', class: 'page-title' }, 'Not found'),
    h('p', {}, 'No console page is at ', h('code', {}, location.hash), '. ',
      h('a', { href: '#/providers' }, 'Go to the providers.'))), '', 'Not found');
}

function show(main, page, nav, title) {
  setConnection('idle');
  announce('');
  main.replaceChildren(page);
  document.title = `${title} · DCM console`;
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  // Keyboard and screen-reader users land on the new page's heading, not at the old spot.
  if (started) main.querySelector('h1')?.focus({ preventScroll: false });
}

let started = false;
window.addEventListener('hashchange', route);
window.addEventListener('dcm-token-changed', route); // watches restart with the new token
auth.addEventListener('change', () => {
  if (auth.state === 'rejected') {
    announce(`Not signed in / token rejected: paste a token${auth.detail ? ` (${auth.detail})`
                                                                        : ''}.`, 'error');
  }
});
if (!location.hash) history.replaceState(null, '', '#/providers');
route();
started = true;
