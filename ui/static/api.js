// Requests to logstore's own API. Every path is relative (no leading `/`), so the page works
// wherever it is served from, a reverse proxy's sub-path included. Errors keep the API's own
// text: a LogQL parse error reads as the server wrote it, position and all.
import { ApiError, errorText } from './api-error.js';
import { authHeaders } from './auth.js';
import { read } from './state.js';
import { msToNs } from './util.js';

// With auth_enabled, Loki's API (logstore/..., compat/...) wants the tenant in X-Scope-OrgID;
// the page's tenant is the header field's, kept in the URL. The Grafana API (api/...) has
// users, not tenants. Empty: no header, as for a single-tenant server.
const tenant = () => read().tenant.trim();

function tenantHeaders(path) {
  const t = tenant();
  return t && /^(logstore|compat)\//.test(path) ? { 'X-Scope-OrgID': t } : {};
}

export async function getJSON(path, params = {}, { signal, headers = {} } = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (Array.isArray(v)) v.forEach((x) => qs.append(k, x));
    else if (v !== undefined && v !== null && v !== '') qs.set(k, v);
  }
  const url = qs.toString() ? `${path}?${qs}` : path;
  const grafana = path.startsWith('api/');
  const res = await fetch(url, {
    signal,
    credentials: 'same-origin',
    headers: { Accept: 'application/json', ...(grafana ? authHeaders() : tenantHeaders(path)), ...headers },
  });
  if (!res.ok) throw new ApiError(res.status, await errorText(res));
  return res.json();
}

const L = 'logstore/api/v1';

// a query over [startMs, endMs]; log lines come with their labels split into stream labels,
// structured metadata and parsed fields (Loki's categorize-labels encoding)
export function queryRange({ query, start, end, limit, direction, step }, signal) {
  return getJSON(`${L}/query_range`, {
    query, start: msToNs(start), end: msToNs(end), limit, direction, step,
  }, { signal, headers: { 'X-Loki-Response-Encoding-Flags': 'categorize-labels' } });
}

export const labels = (start, end, signal) =>
  getJSON(`${L}/labels`, { start: msToNs(start), end: msToNs(end) }, { signal });

export const labelValues = (name, start, end, signal) =>
  getJSON(`${L}/label/${encodeURIComponent(name)}/values`,
    { start: msToNs(start), end: msToNs(end) }, { signal });

export const api = (path, params, opts) => getJSON(path, params, opts);

// ws:// or wss:// URL of the tail endpoint, relative to the page as every other URL
export function tailURL(query, startMs, limit) {
  const url = new URL(`${L}/tail`, location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.search = new URLSearchParams({ query, start: msToNs(startMs), limit: String(limit) });
  return url.toString();
}

// A WebSocket cannot carry X-Scope-OrgID: the tail takes the tenant from the subprotocol
// `logstore.tenant.<UTF-8 org id as unpadded base64url>` (routes/loki/tail.py)
export function tailProtocols() {
  const t = tenant();
  if (!t) return [];
  const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(t)));
  return [`logstore.tenant.${b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}`];
}

// Why the server refused a tail: a browser hides the answer to a refused WebSocket, but the
// same URL over plain HTTP gets the same checks and says which failed ("Bad Request" alone
// when they all passed and only the missing upgrade was refused)
export async function tailRefusal(wsURL) {
  const url = new URL(wsURL);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  const res = await fetch(url, { credentials: 'same-origin', headers: tenantHeaders(`${L}/tail`) });
  const text = (await res.text()).trim();
  return text === 'Bad Request' ? '' : text;
}
