"""Session login for the web page (README "Session login"): Grafana's POST /login sets an
HttpOnly session cookie the Grafana API accepts like Basic auth; state-changing requests the
cookie authenticates need the session's CSRF token in X-Grafana-CSRF and a same-host Origin;
failed logins are limited as Basic ones are; sessions live in SQLite and end at logout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from litestar.testing import TestClient

from app import create_app
from services.grafana.common import Clock
from storage.db import DB_FILENAME
from tests.grafana.conftest import ADMIN, ALICE, Fixture, grafana_config

BLOCKED = {"message": "too many consecutive incorrect login attempts for user - login for "
                      "user temporarily blocked"}
CSRF_MISSING = {"message": "forbidden: a request signed in by the session cookie must carry "
                           "the X-Grafana-CSRF header with the value of the grafana_csrf "
                           "cookie"}
ENDED = {"message": "Unauthorized: the session has ended; log in again"}
HOST = "http://testserver.local"


def _app(template, data: Path, prefix: str = "") -> TestClient:
    """An app over a copy of the fixture's database (its users exist: no first-start hash),
    to be entered with `with`; opened again on the same `data`, it is the app restarted."""
    if not data.exists():
        data.mkdir(parents=True)
        shutil.copy(template[0] / DB_FILENAME, data / DB_FILENAME)
    cfg = grafana_config(data)
    cfg.server.http_path_prefix = prefix
    return TestClient(create_app(cfg))


def _login(client: TestClient, who: tuple[str, str], path: str = "/login", **kw):
    return client.post(path, json={"user": who[0], "password": who[1]}, **kw)


def _signed_in(fx: Fixture, who: tuple[str, str]) -> TestClient:
    """fx's client holding `who`'s session cookies (and no Basic credentials)."""
    r = _login(fx.client, who)
    assert r.status_code == 200, r.text
    assert r.json()["csrfToken"] == fx.client.cookies["grafana_csrf"]
    return fx.client


def _cookie_headers(response) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in response.headers.get_list("set-cookie")}


def test_login_sets_httponly_strict_cookies_under_the_path_prefix(template, tmp_path):
    with _app(template, tmp_path / "data", "/logs") as client:
        r = _login(client, ADMIN, "/logs/login")
        assert r.status_code == 200, r.text
        assert {k: v for k, v in r.json().items() if k != "csrfToken"} == \
            {"message": "Logged in", "redirectUrl": "/logs/"}
        cookies = _cookie_headers(r)
        session = [p.strip() for p in cookies["grafana_session"].split(";")]
        assert {"HttpOnly", "Path=/logs", "SameSite=strict", "Max-Age=2592000"} <= set(session)
        assert "Secure" not in session
        csrf = [p.strip() for p in cookies["grafana_csrf"].split(";")]
        assert "HttpOnly" not in csrf and {"Path=/logs", "SameSite=strict"} <= set(csrf)
        assert client.get("/logs/api/user").json()["login"] == "admin"
        # behind a TLS-terminating proxy the cookies are only ever sent over https
        r = _login(client, ADMIN, "/logs/login", headers={"X-Forwarded-Proto": "https"})
        assert all("Secure" in h for h in _cookie_headers(r).values())


def test_the_cookie_signs_in_a_viewer_who_does_not_see_a_folder_withheld(fresh):
    admin_view = fresh.titles("type=dash-folder")
    assert "Team Payments" in admin_view and "Infrastructure" in admin_view
    client = _signed_in(fresh, ALICE)
    user = client.get("/api/user").json()
    assert (user["login"], user["isGrafanaAdmin"]) == ("alice", False)
    r = client.get("/api/search", params={"type": "dash-folder"})
    assert r.status_code == 200
    titles = [h["title"] for h in r.json()]
    assert "Infrastructure" in titles and "Team Payments" not in titles


def test_a_wrong_password_is_refused_and_counted_with_basic_logins(fresh):
    attempts = fresh.client.app.state.services.grafana.login_attempts
    attempts.clock = lambda: 1000.0
    r = _login(fresh.client, (ALICE[0], "wrong"))
    assert (r.status_code, r.json()) == (401, {"message": "Invalid username or password"})
    assert "set-cookie" not in r.headers
    for _ in range(2):
        assert _login(fresh.client, (ALICE[0], "wrong")).status_code == 401
    for _ in range(2):
        assert fresh.client.get("/api/user", auth=(ALICE[0], "wrong")).status_code == 401
    r = _login(fresh.client, ALICE)                      # the right password, too
    assert (r.status_code, r.json()) == (429, BLOCKED)
    assert fresh.client.get("/api/user", auth=ALICE).status_code == 429


def test_logout_ends_the_session_for_a_replayed_cookie(fresh):
    client = _signed_in(fresh, ADMIN)
    stolen = client.cookies["grafana_session"]
    assert client.get("/api/user").status_code == 200
    r = client.get("/logout", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (302, "/")
    assert "grafana_session" not in client.cookies       # the browser drops it
    client.cookies.set("grafana_session", stolen)
    r = client.get("/api/user")
    assert (r.status_code, r.json()) == (401, ENDED)


def test_cookie_writes_need_the_csrf_header_and_this_origin(fresh):
    client = _signed_in(fresh, ADMIN)
    token = client.cookies["grafana_csrf"]
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
    assert "grafana_session" not in fresh.client.cookies


def test_a_session_survives_a_restart_and_ends_with_a_new_password(template, tmp_path):
    data = tmp_path / "data"
    with _app(template, data) as first:
        assert _login(first, ADMIN).status_code == 200
        cookies = dict(first.cookies)
        assert first.get("/api/user").json()["login"] == "admin"
    with _app(template, data) as again:                   # a new app, the same database
        again.cookies.update(cookies)
        assert again.get("/api/user").json()["login"] == "admin"
        r = again.put("/api/user/password", json={"oldPassword": ADMIN[1],
                                                   "newPassword": "admin-2-pass"},
                      headers={"X-Grafana-CSRF": cookies["grafana_csrf"]})
        assert r.status_code == 200, r.text
        r = again.get("/api/user")
        assert (r.status_code, r.json()) == (401, ENDED)


@pytest.mark.parametrize("days, alive", [(6.9, True), (7.1, False)])
def test_a_session_unused_for_seven_days_ends(fresh, days, alive):
    client = _signed_in(fresh, ADMIN)
    try:
        Clock.offset = days * 86400
        assert (client.get("/api/user").status_code == 200) is alive
    finally:
        Clock.offset = 0.0
