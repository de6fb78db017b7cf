// Small helpers shared by the views: HTML escaping, element building, time formatting.

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);

// h('div', {class: 'x', onclick: f}, child, 'text'): one element; children are nodes or text
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k in el && k !== 'list' && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined && c !== false) el.append(c);
  }
  return el;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// local time, to the millisecond: what a person compares with their own clock
export function fmtTime(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function fmtShort(ms, spanMs) {
  const d = new Date(ms);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (spanMs > 2 * 86400e3) return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
  if (spanMs < 600e3) return `${hm}:${pad(d.getSeconds())}`;
  return hm;
}

// the value a datetime-local input shows for a time (local, to the second)
export function toLocalInput(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// a Loki timestamp (nanoseconds as a decimal string) in milliseconds
export const nsToMs = (ns) => Number(String(ns).slice(0, -6) || '0');
export const msToNs = (ms) => `${Math.round(ms)}000000`;

export function labelsText(labels) {
  return '{' + Object.entries(labels || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ') + '}';
}
