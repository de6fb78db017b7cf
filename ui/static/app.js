// The page's entry: reads the state from the URL, mounts the view it names, and follows
// Back/Forward (popstate) and the navigation links without reloading the page.
import { push, read } from './state.js';
import { h } from './util.js';

const VIEWS = {
  explore: () => import('./explore.js'),
  tail: () => import('./tail.js'),
  patterns: () => import('./patterns.js'),
  alerts: () => import('./alerts.js'),
  dashboards: () => import('./dashboards.js'),
};

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const tenant = document.getElementById('tenant');
let current = { name: null, view: null };

async function show(state) {
  tenant.value = state.tenant;
  const name = VIEWS[state.view] ? state.view : 'explore';
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.view === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (current.name === name) {
    current.view.update(state);
    return;
  }
  current.view?.unmount();
  current = { name, view: null };
  try {
    const mod = await VIEWS[name]();
    if (current.name !== name) return; // another view was asked for meanwhile
    current.view = mod.mount(main, state);
    document.body.dataset.view = name; // the view is on the page (tests wait for this)
  } catch (e) {
    main.replaceChildren(h('pre', { class: 'error', role: 'alert' }, `This view failed to load: ${e.message}`));
    current = { name: null, view: null };
  }
}

// the navigation keeps the query: Explore -> Live tail tails what was being explored
nav.addEventListener('click', (ev) => {
  const a = ev.target.closest('a[data-view]');
  if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  show(push({ view: a.dataset.view }));
});

// another tenant: the current view asks the API again, for that tenant's data
tenant.addEventListener('change', () => show(push({ tenant: tenant.value.trim() })));

window.addEventListener('popstate', () => show(read()));
show(read());
