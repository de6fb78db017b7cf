// The Grafana-side sign-in (/api/...): the one place that knows how the page authenticates.
// POST login sets logstore's HttpOnly session cookie, which the browser sends with every
// same-origin request and no script can read; the page keeps no password anywhere. What it
// keeps, in this module's memory only, is the user's name and the session's CSRF token,
// which writes (POST, PUT, PATCH, DELETE) must carry; after a reload GET api/user gives both.
import { ApiError, errorText } from './api-error.js';

let user = '';
let csrf = '';

export async function login(name, password) {
  const res = await fetch('login', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify({ user: name, password }),
  });
  if (!res.ok) throw new ApiError(res.status, await errorText(res));
  csrf = (await res.json()).csrfToken || '';
  user = name;
}

// the session this browser already has, if any (a reload, another tab): true when signed in
export async function restore() {
  const res = await fetch('api/user', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  if (!res.ok) { forget(); return false; }
  user = (await res.json()).login || '';
  csrf = res.headers.get('X-Grafana-CSRF') || '';
  return Boolean(user);
}

export async function logout() {
  forget();
  await fetch('logout', { credentials: 'same-origin', redirect: 'manual' });
}

// the server ended the session (a 401): drop what the page held of it
export function forget() {
  user = '';
  csrf = '';
}

export const currentUser = () => user;

export function authHeaders() {
  return csrf ? { 'X-Grafana-CSRF': csrf } : {};
}
