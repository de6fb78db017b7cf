// Dashboards and folders from Grafana's search API (/api/search) with its parameters. The
// API wants a Grafana-side user: a login form signs in through auth.js (a session cookie no
// script can read; the password is sent once and kept nowhere).
import * as api from './api.js';
import { currentUser, forget, login, logout, restore } from './auth.js';
import { esc, h } from './util.js';

export function mount(main) {
  const query = h('input', { id: 'search-query', type: 'search', placeholder: 'Search dashboards and folders', 'aria-label': 'Search' });
  const tag = h('input', { id: 'search-tag', placeholder: 'tags, comma separated', 'aria-label': 'Tags' });
  const type = h('select', { id: 'search-type', 'aria-label': 'Type' },
    h('option', { value: '' }, 'Folders and dashboards'), h('option', { value: 'dash-db' }, 'Dashboards'),
    h('option', { value: 'dash-folder' }, 'Folders'));
  const starred = h('input', { id: 'search-starred', type: 'checkbox' });
  const sort = h('select', { id: 'search-sort', 'aria-label': 'Sort' }, h('option', { value: '' }, 'Default order'));
  const form = h('form', { class: 'query', id: 'search-form' }, h('div', { class: 'controls' },
    query, tag, type, h('label', {}, starred, ' Starred only'), sort, h('button', { type: 'submit' }, 'Search')));
  const who = h('div', { class: 'who', id: 'who' });
  const error = h('pre', { class: 'error', id: 'search-error', role: 'alert', hidden: true });
  const results = h('div', { id: 'search-results' });
  main.replaceChildren(who, form, error, results);

  function loginForm(message) {
    const user = h('input', { id: 'login-user', autocomplete: 'username', 'aria-label': 'User', placeholder: 'user', required: true });
    const pass = h('input', { id: 'login-password', type: 'password', autocomplete: 'current-password', 'aria-label': 'Password', placeholder: 'password', required: true });
    const f = h('form', { class: 'login', id: 'login-form' }, h('p', {}, message),
      user, pass, h('button', { type: 'submit' }, 'Log in'),
      h('p', { class: 'muted' }, 'Signs in with a session cookie; the password is kept nowhere.'));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      try {
        await login(user.value, pass.value);
      } catch (e) {
        loginForm(e.status === 401 ? 'Wrong user or password.' : e.message);
        return;
      }
      search();
    });
    who.replaceChildren(f);
    user.focus();
  }

  function showUser() {
    const name = currentUser();
    if (!name) { who.replaceChildren(); return; }
    const out = h('button', { type: 'button', id: 'logout' }, 'Log out');
    out.addEventListener('click', async () => { await logout(); results.replaceChildren(); loginForm('Logged out.'); });
    who.replaceChildren(h('span', {}, `Logged in as ${name} `), out);
  }

  async function loadSorting() {
    try {
      const opts = await api.api('api/search/sorting');
      sort.replaceChildren(h('option', { value: '' }, 'Default order'),
        ...opts.map((o) => h('option', { value: o.name }, o.displayName || o.name)));
    } catch { /* keeps the default order only */ }
  }

  async function search() {
    error.hidden = true;
    const tags = tag.value.split(',').map((t) => t.trim()).filter(Boolean);
    try {
      const items = await api.api('api/search', { query: query.value, tag: tags, type: type.value,
        starred: starred.checked ? 'true' : '', sort: sort.value });
      showUser();
      if (sort.options.length === 1) loadSorting();
      render(items);
    } catch (e) {
      if (e.status === 401) {
        forget();
        results.replaceChildren();
        loginForm(`Log in to see dashboards (${e.message}).`);
        return;
      }
      error.textContent = e.message;
      error.hidden = false;
    }
  }

  function render(items) {
    if (!items.length) { results.innerHTML = '<p class="muted">Nothing found.</p>'; return; }
    const rows = items.map((it) => `<tr class="${it.type === 'dash-folder' ? 'folder' : 'dash'}">` +
      `<td class="muted">${it.type === 'dash-folder' ? 'folder' : 'dashboard'}</td>` +
      `<td class="title">${esc(it.title)}${it.isStarred ? ' <span class="star" title="starred">\u2605</span>' : ''}</td>` +
      `<td>${esc(it.folderTitle || (it.type === 'dash-folder' ? '' : 'General'))}</td>` +
      `<td>${(it.tags || []).map((t) => `<button type="button" class="chip" data-tag="${esc(t)}">${esc(t)}</button>`).join(' ')}</td>` +
      `<td class="muted">${esc(it.uid)}</td></tr>`).join('');
    results.innerHTML = `<table class="search"><thead><tr><th>Type</th><th>Title</th><th>Folder</th><th>Tags</th><th>UID</th></tr></thead><tbody>${rows}</tbody></table>`;
  }

  results.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-tag]');
    if (!b) return;
    tag.value = b.dataset.tag;
    search();
  });
  form.addEventListener('submit', (ev) => { ev.preventDefault(); search(); });
  // a session from before a reload signs in without the form
  restore().then(search, search);
  return { update() {}, unmount() {} };
}
