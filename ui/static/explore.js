// Explore: a LogQL box with a label browser, a time range, limit and direction; log lines
// under a volume histogram by level, or a chart for a metric query. Its state is the URL's.
import * as api from './api.js';
import { histogram, timeseries } from './chart.js';
import { LogList, entriesOf } from './logs.js';
import { isLogQuery, needles, selectorOf, withMatcher, withStage } from './logql.js';
import { PRESETS, presetOf, push, resolveRange } from './state.js';
import { h, toLocalInput } from './util.js';

const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
  43200, 86400];
const BARS = 80; // about this many bars across the histogram

export const volumeStep = (start, end) =>
  STEPS.find((s) => s * 1000 * BARS >= end - start) || 86400;

// The volume query of a log query: lines per step, by level (the whole query, filters
// included, so the bars count the lines the list would show)
export const volumeQuery = (q, stepSec) =>
  `sum by (detected_level) (count_over_time(${q.trim()} [${stepSec}s]))`;

export function mount(main, initial) {
  const query = h('textarea', { id: 'query', rows: 3, spellcheck: false, autocomplete: 'off',
    placeholder: '{service_name="app"} |= "error"    (Ctrl+Enter runs)', 'aria-label': 'LogQL query' });
  const range = h('select', { id: 'range', 'aria-label': 'Time range' },
    PRESETS.map((p) => h('option', { value: p }, `Last ${p}`)), h('option', { value: 'abs' }, 'Absolute'));
  const from = h('input', { id: 'from', type: 'datetime-local', step: 1, 'aria-label': 'From' });
  const to = h('input', { id: 'to', type: 'datetime-local', step: 1, 'aria-label': 'To' });
  const limit = h('input', { id: 'limit', type: 'number', min: 1, max: 5000, 'aria-label': 'Line limit' });
  const dir = h('select', { id: 'direction', 'aria-label': 'Direction' },
    h('option', { value: 'backward' }, 'Newest first'), h('option', { value: 'forward' }, 'Oldest first'));
  const labelList = h('div', { class: 'chips', id: 'label-names' });
  const valueList = h('div', { class: 'chips', id: 'label-values' });
  const browser = h('details', { class: 'browser', id: 'label-browser' },
    h('summary', {}, 'Label browser'), labelList, valueList);
  const form = h('form', { class: 'query', id: 'explore-form' },
    browser, query,
    h('div', { class: 'controls' }, range, from, to,
      h('label', {}, 'Limit ', limit), dir, h('button', { type: 'submit', id: 'run' }, 'Run query')));
  const error = h('pre', { class: 'error', id: 'error', role: 'alert', hidden: true });
  const status = h('div', { class: 'status', id: 'status', 'aria-live': 'polite' });
  const volume = h('figure', { class: 'volume', id: 'volume', hidden: true });
  const chart = h('figure', { class: 'chart', id: 'chart', hidden: true });
  const lines = h('div', { id: 'lines' });
  main.replaceChildren(form, error, status, volume, chart, lines);

  let state = initial;
  let running = null;

  const list = new LogList(lines, (kind, name, value) => {
    query.value = kind === 'stream' ? withMatcher(query.value, name, value)
      : withStage(query.value, `| ${name}=${JSON.stringify(value)}`);
    query.focus();
  });

  function fill(s) {
    query.value = s.q;
    const preset = presetOf(s);
    range.value = preset || 'abs';
    try {
      const [a, b] = resolveRange(s);
      from.value = toLocalInput(a);
      to.value = toLocalInput(b);
    } catch { /* shown when run */ }
    from.disabled = to.disabled = Boolean(preset);
    limit.value = s.limit;
    dir.value = s.dir;
  }

  function fromForm() {
    const out = { view: 'explore', q: query.value, limit: limit.value || '1000', dir: dir.value };
    if (range.value === 'abs') {
      out.from = String(Date.parse(from.value));
      out.to = String(Date.parse(to.value));
    } else {
      out.from = `now-${range.value}`;
      out.to = 'now';
    }
    return out;
  }

  function showError(text) {
    error.textContent = text;
    error.hidden = !text;
  }

  async function run(s) {
    running?.abort();
    const ctl = running = new AbortController();
    showError('');
    volume.hidden = chart.hidden = true;
    if (!s.q.trim()) {
      status.textContent = 'Type a LogQL query, or pick labels in the label browser.';
      list.render([]);
      return;
    }
    let start, end;
    try {
      [start, end] = resolveRange(s);
    } catch (e) {
      showError(e.message);
      return;
    }
    status.textContent = 'Running…';
    const t0 = performance.now();
    const logQuery = isLogQuery(s.q);
    const answer = api.queryRange({ query: s.q, start, end, limit: s.limit, direction: s.dir }, ctl.signal);
    const step = volumeStep(start, end);
    const vol = logQuery ? api.queryRange({ query: volumeQuery(s.q, step), start, end, step }, ctl.signal) : null;
    try {
      const res = await answer;
      if (ctl.signal.aborted) return;
      const ms = Math.round(performance.now() - t0);
      if (res.data.resultType === 'streams') {
        const entries = entriesOf(res.data.result, s.dir);
        const t1 = performance.now();
        list.render(entries, needles(s.q));
        const drawn = Math.round(performance.now() - t1);
        status.textContent = `${entries.length} line${entries.length === 1 ? '' : 's'} in ${ms} ms, shown in ${drawn} ms` +
          (entries.length >= Number(s.limit) ? ` (the limit: older lines not shown)` : '');
      } else {
        list.render([]);
        const series = res.data.resultType === 'matrix' ? res.data.result
          : res.data.result.map((v) => ({ metric: v.metric, values: [v.value] }));
        drawChart(series, start, end);
        status.textContent = `${series.length} series in ${ms} ms`;
      }
    } catch (e) {
      if (e.name === 'AbortError') return;
      list.render([]);
      status.textContent = '';
      showError(e.message);
      vol?.catch(() => {});
      return;
    }
    if (vol) {
      try {
        drawVolume((await vol).data.result, start, end, step);
      } catch (e) {
        if (e.name !== 'AbortError') status.textContent += ` — no volume: ${e.message}`;
      }
    }
  }

  function zoom(a, b) {
    state = push({ ...fromForm(), from: String(a), to: String(b) });
    fill(state);
    run(state);
  }

  function drawVolume(series, start, end, step) {
    const { svg, legend } = histogram(series, start, end, step * 1000, zoom);
    volume.replaceChildren(svg);
    volume.insertAdjacentHTML('beforeend', `<figcaption>${legend}<span class="hint">drag to zoom</span></figcaption>`);
    volume.hidden = false;
  }

  function drawChart(series, start, end) {
    const { svg, legend } = timeseries(series, start, end, zoom);
    chart.replaceChildren(svg);
    chart.insertAdjacentHTML('beforeend', `<figcaption class="legend">${legend}</figcaption>`);
    chart.hidden = false;
  }

  // -- label browser: names and values over the range, a value goes into the selector
  async function loadLabels() {
    const [start, end] = resolveRange(fromForm());
    labelList.textContent = 'Loading labels…';
    valueList.replaceChildren();
    try {
      const res = await api.labels(start, end);
      labelList.replaceChildren(...(res.data || []).map((n) =>
        h('button', { type: 'button', class: 'chip', 'data-label': n }, n)));
      if (!(res.data || []).length) labelList.textContent = 'No labels in this range.';
    } catch (e) {
      labelList.textContent = e.message;
    }
  }

  async function loadValues(name) {
    const [start, end] = resolveRange(fromForm());
    for (const b of labelList.children) b.classList.toggle('on', b.dataset.label === name);
    valueList.textContent = 'Loading values…';
    try {
      const res = await api.labelValues(name, start, end);
      valueList.replaceChildren(h('span', { class: 'muted' }, `${name}:`),
        ...(res.data || []).map((v) => h('button', { type: 'button', class: 'chip value',
          'data-label': name, 'data-value': v }, v)));
    } catch (e) {
      valueList.textContent = e.message;
    }
  }

  browser.addEventListener('toggle', () => { if (browser.open) loadLabels(); });
  labelList.addEventListener('click', (ev) => {
    const b = ev.target.closest('button');
    if (b) loadValues(b.dataset.label);
  });
  valueList.addEventListener('click', (ev) => {
    const b = ev.target.closest('button');
    if (!b) return;
    query.value = withMatcher(query.value, b.dataset.label, b.dataset.value);
    query.focus();
  });

  // -- form
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    state = push(fromForm());
    run(state);
  });
  query.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  range.addEventListener('change', () => {
    from.disabled = to.disabled = range.value !== 'abs';
    if (range.value !== 'abs') form.requestSubmit();
  });

  fill(state);
  run(state);
  query.focus();
  return {
    update(s) {
      state = s;
      fill(s);
      run(s);
      if (browser.open) loadLabels(); // another tenant has other labels
    },
    unmount() { running?.abort(); },
    selector: () => selectorOf(query.value),
  };
}
