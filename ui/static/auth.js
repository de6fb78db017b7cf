// Credentials for the Grafana-side API (/api/...): the one place that knows how the page
// authenticates, so it can switch to a session cookie without touching the views.
// The password is kept in this module's memory only, never in storage: a reload forgets it.
// Requests always go with the browser's credentials (same-origin cookies) as well.

let basic = null;
let user = '';

export function login(name, password) {
  // btoa takes bytes as Latin-1 characters: encode UTF-8 first
  const bytes = new TextEncoder().encode(`${name}:${password}`);
  basic = btoa(String.fromCharCode(...bytes));
  user = name;
}

export function logout() {
  basic = null;
  user = '';
}

export const currentUser = () => user;

export function authHeaders() {
  return basic ? { Authorization: `Basic ${basic}` } : {};
}
