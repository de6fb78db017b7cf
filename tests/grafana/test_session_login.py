"""Session login for the web page (README "Session login and CSRF"): Grafana's POST /login
sets an HttpOnly session cookie the Grafana API accepts like Basic auth; state-changing
requests the cookie authenticates need the session's CSRF token (from the login answer or
GET /api/user) in X-Grafana-CSRF and a same-host Origin; failed logins are limited as Basic
ones are; sessions live in the store of Grafana's objects and end at logout."""

from __future__ import annotations

from pathlib import Path

import pytest
from litestar.testing import TestClient

from app import create_app
from services.grafana.common import Clock
from tests.grafana.conftest import ADMIN, ALICE, Fixture, Template

BLOCKED = {"message": "too many consecutive incorrect login attempts for user - login for "
                      "user temporarily blocked"}
CSRF_MISSING = {"message": "forbidden: a request signed in by the session cookie must carry "
                           "the session's CSRF token in the X-Grafana-CSRF header (from POST "
                           "/login or GET /api/user)"}
ENDED = {"message": "Unauthorized: the session has ended; log in again"}
HOST = "http://testserver.local"


def _app(template: Template, data: Path, prefix: str = "",
         grafana: dict | None = None) -> TestClient:
    """An app over a copy of the fixture's database (its users exist: no first-start hash),
    to be entered with `with`; opened again on the same `data`, it is the app restarted."""
    cfg = template.config(data, grafana)
    cfg.server.http_path_prefix = prefix
    return TestClient(create_app(cfg))


def _login(client: TestClient, who: tuple[str, str], path: str = "/login", **kw):
    return client.post(path, json={"user": who[0], "password": who[1]}, **kw)


def _signed_in(fx: Fixture, who: tuple[str, str]) -> tuple[TestClient, str]:
    """fx's client holding `who`'s session cookie (and no Basic credentials), and the
    session's CSRF token."""
    r = _login(fx.client, who)
    assert r.status_code == 200, r.text
    return fx.client, r.json()["csrfToken"]


def _cookie_headers(response) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in response.headers.get_list("set-cookie")}


def test_login_sets_an_httponly_strict_cookie_under_the_path_prefix(template, tmp_path):
    with _app(template, tmp_path / "data", "/logs") as client:
        r = _login(client, ADMIN, "/logs/login")
        assert r.status_code == 200, r.text
        body = r.json()
        assert {k: v for k, v in body.items() if k != "csrfToken"} == \
            {"message": "Logged in", "redirectUrl": "/logs/"}
        cookies = _cookie_headers(r)
        assert list(cookies) == ["logstore_session"]            # nothing a script can read
        session = [p.strip() for p in cookies["logstore_session"].split(";")]
        assert {"HttpOnly", "Path=/logs", "SameSite=strict", "Max-Age=2592000"} <= set(session)
        assert "Secure" not in session
        r = client.get("/logs/api/user")
        assert r.json()["login"] == "admin"
        # a reloaded page gets the CSRF token again with the user
        assert r.headers["X-Grafana-CSRF"] == body["csrfToken"]
        assert "X-Grafana-CSRF" not in client.get("/logs/api/user", auth=ADMIN).headers
        # behind a TLS-terminating proxy the cookie is only ever sent over https
        r = _login(client, ADMIN, "/logs/login", headers={"X-Forwarded-Proto": "https"})
        assert "Secure" in r.headers["set-cookie"]


def test_the_cookie_name_is_grafanas_login_cookie_name(template, tmp_path):
    with _app(template, tmp_path / "data",
              grafana={"login_cookie_name": "grafana_session"}) as client:
        r = _login(client, ADMIN)
        assert list(_cookie_headers(r)) == ["grafana_session"]
        assert client.get("/api/user").json()["login"] == "admin"
        client.cookies.set("logstore_session", client.cookies["grafana_session"])
        del client.cookies["grafana_session"]
        assert client.get("/api/user").status_code == 401  # Grafana's own is not looked at


def test_the_cookie_signs_in_a_viewer_who_does_not_see_a_folder_withheld(fresh):
    admin_view = fresh.titles("type=dash-folder")
    assert "Team Payments" in admin_view and "Infrastructure" in admin_view
    client, _ = _signed_in(fresh, ALICE)
    user = client.get("/api/user").json()
    assert (user["login"], user["isGrafanaAdmin"]) == ("alice", False)
    r = client.get("/api/search", params={"type": "dash-folder"})
    assert r.status_code == 200
    titles = [h["title"] for h in r.json()]
    assert "Infrastructure" in titles and "Team Payments" not in titles


def test_a_wrong_password_is_refused_and_counted_with_basic_logins(fresh):
    attempts = fresh.client.app.state.services.grafana.login_attempts
    attempts.clock = lambda: 1000.0
    attempts.max_attempts = 2       # each wrong password costs a full PBKDF2: keep them few
    r = _login(fresh.client, (ALICE[0], "wrong"))
    assert (r.status_code, r.json()) == (401, {"message": "Invalid username or password"})
    assert "set-cookie" not in r.headers
    assert fresh.client.get("/api/user", auth=(ALICE[0], "wrong")).status_code == 401
    r = _login(fresh.client, ALICE)                      # the right password, too
    assert (r.status_code, r.json()) == (429, BLOCKED)
    assert fresh.client.get("/api/user", auth=ALICE).status_code == 429
    assert _login(fresh.client, ADMIN).status_code == 200   # other logins are not held


def test_logout_ends_the_session_for_a_replayed_cookie(fresh):
    client, _ = _signed_in(fresh, ADMIN)
    stolen = client.cookies["logstore_session"]
    assert client.get("/api/user").status_code == 200
    r = client.get("/logout", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (302, "/")
    assert "logstore_session" not in client.cookies       # the browser drops it
    client.cookies.set("logstore_session", stolen)
    r = client.get("/api/user")
    assert (r.status_code, r.json()) == (401, ENDED)


def test_cookie_writes_need_the_csrf_header_and_this_origin(fresh):
    client, token = _signed_in(fresh, ADMIN)
    body = {"title": "Made by cookie"}
    r = client.post("/api/folders", json=body)
    assert (r.status_code, r.json()) == (403, CSRF_MISSING)
    r = client.post("/api/folders", json=body, headers={"X-Grafana-CSRF": token + "x"})
    assert (r.status_code, r.json()) == (403, CSRF_MISSING)
    r = client.post("/api/folders", json=body,
                    headers={"X-Grafana-CSRF": token, "Origin": "http://evil.example"})
    assert (r.status_code, r.json()) == (403, {"message": "origin not allowed"})
    assert "Made by cookie" not in fresh.titles("type=dash-folder")
    r = client.post("/api/folders", json=body,
                    headers={"X-Grafana-CSRF": token, "Origin": HOST})
    assert r.status_code == 200, r.text
    assert "Made by cookie" in fresh.titles("type=dash-folder")
    # reads need no token; Basic auth needs none (it is no cookie)
    assert client.get("/api/folders").status_code == 200
    client.cookies.clear()
    assert fresh.post("/api/folders", {"title": "Made by Basic"}).status_code == 200


def test_a_foreign_page_cannot_sign_the_browser_in(fresh):
    r = _login(fresh.client, ADMIN, headers={"Origin": "http://evil.example"})
    assert (r.status_code, r.json()) == (403, {"message": "origin not allowed"})
    assert "logstore_session" not in fresh.client.cookies


def test_a_session_survives_a_restart_and_ends_with_a_new_password(template, tmp_path):
    data = tmp_path / "data"
    with _app(template, data) as first:
        assert _login(first, ADMIN).status_code == 200
        cookies = dict(first.cookies)
        token = first.get("/api/user").headers["X-Grafana-CSRF"]
    with _app(template, data) as again:                   # a new app, the same database
        again.cookies.update(cookies)
        r = again.get("/api/user")
        assert r.json()["login"] == "admin" and r.headers["X-Grafana-CSRF"] == token
        r = again.put("/api/user/password", json={"oldPassword": ADMIN[1],
                                                   "newPassword": "admin-2-pass"},
                      headers={"X-Grafana-CSRF": token})
        assert r.status_code == 200, r.text
        r = again.get("/api/user")
        assert (r.status_code, r.json()) == (401, ENDED)


@pytest.mark.parametrize("days, alive", [(6.9, True), (7.1, False)])
def test_a_session_unused_for_seven_days_ends(fresh, days, alive):
    client, _ = _signed_in(fresh, ADMIN)
    try:
        Clock.offset = days * 86400
        assert (client.get("/api/user").status_code == 200) is alive
    finally:
        Clock.offset = 0.0
