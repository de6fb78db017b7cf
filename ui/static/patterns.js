// Patterns and fields of the streams the query selects: the patterns API (top patterns,
// their counts and a sparkline; a click explores the lines of that pattern with `|>`) and
// detected_fields (cardinality; a click explores the lines that have the field).
import * as api from './api.js';
import { selectorOf } from './logql.js';
import { push, resolveRange } from './state.js';
import { esc, h, msToNs } from './util.js';

const TOP = 50;

function sparkline(samples) {
  if (!samples.length) return '';
  const xs = samples.map((s) => Number(s[0])), ys = samples.map((s) => Number(s[1]));
  const x0 = Math.min(...xs), x1 = Math.max(...xs) || 1, top = Math.max(...ys) || 1;
  const pts = samples.map((s, i) => `${x1 === x0 ? i : ((xs[i] - x0) / (x1 - x0)) * 100},${20 - (ys[i] / top) * 18}`);
  return `<svg class="spark" viewBox="0 0 100 22" preserveAspectRatio="none" aria-hidden="true"><polyline points="${pts.join(' ')}"/></svg>`;
}

// a LogQL string literal: backticks take the pattern as it is, unless it holds one
const literal = (s) => (s.includes('`') ? JSON.stringify(s) : `\`${s}\``);

export function mount(main, initial) {
  const sel = h('input', { id: 'patterns-selector', class: 'wide', 'aria-label': 'Stream selector', placeholder: '{service_name="app"}' });
  const form = h('form', { class: 'query', id: 'patterns-form' }, h('div', { class: 'controls' },
    sel, h('button', { type: 'submit' }, 'Show patterns and fields')));
  const error = h('pre', { class: 'error', role: 'alert', hidden: true });
  const patterns = h('div', { id: 'patterns' });
  const fields = h('div', { id: 'fields' });
  main.replaceChildren(form, error, h('div', { class: 'split' },
    h('section', {}, h('h3', {}, 'Patterns'), patterns), h('section', {}, h('h3', {}, 'Fields'), fields)));
  let state = initial;

  // to Explore with a query: a new history entry, shown as Back/Forward would show it
  function explore(q) {
    push({ view: 'explore', q });
    window.dispatchEvent(new PopStateEvent('popstate'));
  }

  async function load(s) {
    state = s;
    const selector = selectorOf(s.q);
    sel.value = selector;
    error.hidden = true;
    if (!selector) { patterns.textContent = 'Give a stream selector.'; fields.textContent = ''; return; }
    let start, end;
    try { [start, end] = resolveRange(s); } catch (e) { error.textContent = e.message; error.hidden = false; return; }
    const params = { query: selector, start: msToNs(start), end: msToNs(end) };
    patterns.textContent = fields.textContent = 'Loading…';
    const [p, f] = await Promise.allSettled([api.api('logstore/api/v1/patterns', params),
      api.api('logstore/api/v1/detected_fields', params)]);
    if (p.status === 'fulfilled') {
      const rows = (p.value.data || []).map((x) => ({ ...x, total: x.samples.reduce((n, s) => n + Number(s[1]), 0) }))
        .sort((a, b) => b.total - a.total).slice(0, TOP);
      patterns.innerHTML = rows.length ? `<table class="grid"><tbody>${rows.map((r) => `<tr><td>${r.total}</td>` +
        `<td>${sparkline(r.samples)}</td><td><button type="button" class="linkish" data-pattern="${esc(r.pattern)}">` +
        `<code>${esc(r.pattern)}</code></button></td></tr>`).join('')}</tbody></table>` : '<p class="muted">No patterns in this range.</p>';
    } else {
      patterns.textContent = p.reason.status === 404
        ? 'Patterns are off on this server (pattern_ingester.enabled).' : p.reason.message;
    }
    if (f.status === 'fulfilled') {
      const rows = f.value.fields || [];
      fields.innerHTML = rows.length ? `<table class="grid"><thead><tr><th>Field</th><th>Type</th><th>Cardinality</th><th>Parser</th></tr></thead><tbody>` +
        rows.map((r) => `<tr><td><button type="button" class="linkish" data-field="${esc(r.label)}" data-parser="${esc((r.parsers || [])[0] || '')}">` +
          `${esc(r.label)}</button></td><td>${esc(r.type)}</td><td>${r.cardinality}</td><td>${esc((r.parsers || []).join(', '))}</td></tr>`).join('') +
        '</tbody></table>' : '<p class="muted">No fields found.</p>';
    } else fields.textContent = f.reason.message;
  }

  patterns.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-pattern]');
    if (b) explore(`${selectorOf(state.q)} |> ${literal(b.dataset.pattern)}`);
  });
  fields.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-field]');
    if (!b) return;
    const parser = b.dataset.parser ? ` | ${b.dataset.parser}` : '';
    explore(`${selectorOf(state.q)}${parser} | ${b.dataset.field} != ""`);
  });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    load(push({ view: 'patterns', q: sel.value }));
  });
  load(state);
  return { update: load, unmount() {} };
}
