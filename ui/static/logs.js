// Log lines as one block of HTML (built as a string and inserted at once: 5,000 lines cost
// one parse, not 5,000 DOM calls) with a single delegated listener per list. A line opens to
// show its stream labels, structured metadata and parsed fields; a field there can be added
// to the query.
import { levelClass } from './chart.js';
import { esc, fmtTime, labelsText, nsToMs } from './util.js';
import { logfmtPairs } from './logql.js';

// Loki's answer (categorize-labels or not) as entries, newest first or oldest first
export function entriesOf(result, direction) {
  const out = [];
  for (const s of result) {
    for (const v of s.values) {
      const extra = v[2] || {};
      out.push({ ts: v[0], line: v[1], stream: s.stream, md: extra.structuredMetadata || {},
        parsed: extra.parsed || {} });
    }
  }
  // nanosecond strings of one length compare as numbers do
  const cmp = (a, b) => (a.ts.length - b.ts.length) || (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0);
  out.sort(direction === 'forward' ? cmp : (a, b) => cmp(b, a));
  return out;
}

// the line's text with every needle match wrapped in <mark>
export function highlight(line, needles) {
  if (!needles.length) return esc(line);
  const spans = [];
  for (const re of needles) {
    re.lastIndex = 0;
    for (let m = re.exec(line); m; m = re.exec(line)) {
      if (m[0].length === 0) { re.lastIndex++; continue; }
      spans.push([m.index, m.index + m[0].length]);
    }
  }
  if (!spans.length) return esc(line);
  spans.sort((a, b) => a[0] - b[0]);
  let out = '', at = 0;
  for (const [s, e] of spans) {
    if (e <= at) continue;
    const from = Math.max(s, at);
    out += esc(line.slice(at, from)) + '<mark>' + esc(line.slice(from, e)) + '</mark>';
    at = e;
  }
  return out + esc(line.slice(at));
}

const levelOf = (e) => e.md.detected_level || e.stream.detected_level || e.stream.level || '';

export function rowsHTML(entries, needles, first = 0) {
  let out = '';
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    const level = levelOf(e);
    out += `<div class="row ${level ? levelClass(level) : ''}" data-i="${first + i}" tabindex="0" role="button" aria-expanded="false">` +
      `<time>${fmtTime(nsToMs(e.ts))}</time><span class="labels">${esc(labelsText(e.stream))}</span>` +
      `<span class="line">${highlight(e.line, needles)}</span></div>`;
  }
  return out;
}

function table(title, pairs, kind) {
  if (!pairs.length) return '';
  const rows = pairs.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td><td>` +
    `<button type="button" class="add" data-kind="${kind}" data-name="${esc(k)}" data-value="${esc(v)}" ` +
    `title="add to the query">+ filter</button></td></tr>`).join('');
  return `<section><h4>${title}</h4><table>${rows}</table></section>`;
}

function detailsHTML(e) {
  const parsed = Object.entries(e.parsed);
  const own = parsed.length ? [] : logfmtPairs(e.line);
  return '<div class="details">' +
    table('Stream labels', Object.entries(e.stream), 'stream') +
    table('Structured metadata', Object.entries(e.md), 'field') +
    table('Parsed fields', parsed, 'field') +
    table('key=value pairs in the line', own, 'field') +
    `<p class="ts">timestamp ${esc(e.ts)} ns</p></div>`;
}

// One list of lines: render(entries) replaces them, append(entries) adds at the end.
// onAdd(kind, name, value) is called when a field's "+ filter" is pressed.
export class LogList {
  constructor(el, onAdd) {
    this.el = el;
    this.entries = [];
    this.needles = [];
    el.classList.add('loglist');
    el.addEventListener('click', (ev) => {
      const add = ev.target.closest('button.add');
      if (add) { onAdd(add.dataset.kind, add.dataset.name, add.dataset.value); return; }
      if (ev.target.closest('.details')) return;
      const row = ev.target.closest('.row');
      if (row) this.toggle(row);
    });
    el.addEventListener('keydown', (ev) => {
      const row = ev.target.closest('.row');
      if (row && (ev.key === 'Enter' || ev.key === ' ') && ev.target === row) {
        ev.preventDefault();
        this.toggle(row);
      }
    });
  }

  toggle(row) {
    const next = row.nextElementSibling;
    if (next && next.classList.contains('details')) {
      next.remove();
      row.setAttribute('aria-expanded', 'false');
      return;
    }
    row.insertAdjacentHTML('afterend', detailsHTML(this.entries[Number(row.dataset.i)]));
    row.setAttribute('aria-expanded', 'true');
  }

  render(entries, needles = []) {
    this.entries = entries;
    this.needles = needles;
    this.el.innerHTML = rowsHTML(entries, needles);
  }

  append(entries, max) {
    const first = this.entries.length;
    this.entries = this.entries.concat(entries);
    this.el.insertAdjacentHTML('beforeend', rowsHTML(entries, this.needles, first));
    const over = this.el.querySelectorAll('.row').length - max;
    if (over > 0) this.dropOldest(over);
  }

  // keeps a long-running tail's page small; indexes stay valid (entries are not shifted)
  dropOldest(n) {
    for (let i = 0; i < n; i++) {
      const row = this.el.querySelector('.row');
      const next = row.nextElementSibling;
      if (next && next.classList.contains('details')) next.remove();
      this.entries[Number(row.dataset.i)] = null; // the memory of a row no longer shown
      row.remove();
    }
  }
}
