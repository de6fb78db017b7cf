// The page's state lives in the URL (?view=&q=&from=&to=&limit=&dir=&tenant=): a link shares
// it and Back restores it. `tenant` is the org id Loki's API is asked for (auth_enabled). Views call push() on a user action; app.js re-reads the URL on popstate.

export const PRESETS = ['5m', '15m', '1h', '6h', '24h', '7d'];
export const DEFAULTS = { view: 'explore', q: '', from: 'now-1h', to: 'now', limit: '1000', dir: 'backward', tenant: '' };
const KEYS = Object.keys(DEFAULTS);

export function read() {
  const p = new URLSearchParams(location.search);
  const out = {};
  for (const k of KEYS) out[k] = p.get(k) ?? DEFAULTS[k];
  return out;
}

function url(state) {
  const p = new URLSearchParams();
  for (const k of KEYS) {
    if (state[k] !== undefined && state[k] !== DEFAULTS[k] && state[k] !== '') p.set(k, state[k]);
  }
  const qs = p.toString();
  // relative to the page itself, so the page keeps working under a proxy's sub-path
  return qs ? '?' + qs : location.pathname;
}

// a new history entry when anything changed; the same URL again adds none
export function push(state) {
  const next = { ...read(), ...state };
  if (url(next) !== url(read())) history.pushState(null, '', url(next));
  return next;
}

const UNITS = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3 };

// `now`, `now-15m` or milliseconds since the epoch -> milliseconds
export function resolveTime(text, now = Date.now()) {
  const t = String(text).trim();
  if (t === 'now') return now;
  const rel = /^now-(\d+)([smhdw])$/.exec(t);
  if (rel) return now - Number(rel[1]) * UNITS[rel[2]];
  if (/^\d+$/.test(t)) return Number(t);
  const parsed = Date.parse(t);
  if (!Number.isNaN(parsed)) return parsed;
  throw new Error(`not a time: ${t}`);
}

export function resolveRange(state) {
  const now = Date.now();
  const start = resolveTime(state.from, now);
  const end = resolveTime(state.to, now);
  if (!(start < end)) throw new Error('the start of the range must be before its end');
  return [start, end];
}

// the preset a range is (`1h` for now-1h..now), or '' for an absolute one
export function presetOf(state) {
  const m = /^now-(\d+[smhdw])$/.exec(state.from);
  return m && state.to === 'now' ? m[1] : '';
}
