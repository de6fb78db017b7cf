"""Failed Basic logins are limited as Grafana limits them (issue 15): five wrong passwords
for a login within five minutes block it, the right password included, until the oldest
attempt ages out; a success clears the record; one client address gets ten times the
allowance across logins. Time is injected."""

from __future__ import annotations

from tests.grafana.conftest import ADMIN, ALICE

BLOCKED = {"message": "too many consecutive incorrect login attempts for user - login for "
                      "user temporarily blocked"}


def _clock(fx):
    attempts = fx.client.app.state.services.grafana.login_attempts
    now = {"t": 1000.0}
    attempts.clock = lambda: now["t"]
    return now


def _user(fx, login: str, password: str) -> int:
    return fx.client.get("/api/user", auth=(login, password)).status_code


def test_five_wrong_passwords_block_the_login_for_five_minutes(fresh):
    now = _clock(fresh)
    for _ in range(5):
        assert _user(fresh, ALICE[0], "wrong") == 401
    r = fresh.client.get("/api/user", auth=ALICE)              # the right password, too
    assert (r.status_code, r.json()) == (429, BLOCKED)
    assert _user(fresh, ADMIN[0], ADMIN[1]) == 200             # other logins are not held
    now["t"] += 299
    assert _user(fresh, ALICE[0], ALICE[1]) == 429
    now["t"] += 2                                              # the first attempt aged out
    assert _user(fresh, ALICE[0], ALICE[1]) == 200


def test_a_success_clears_the_failures(fresh):
    _clock(fresh)
    for _ in range(4):
        assert _user(fresh, ALICE[0], "wrong") == 401
    assert _user(fresh, ALICE[0], ALICE[1]) == 200
    for _ in range(4):
        assert _user(fresh, ALICE[0], "wrong") == 401
    assert _user(fresh, ALICE[0], ALICE[1]) == 200


def test_one_address_cannot_try_many_logins(fresh):
    _clock(fresh)
    for i in range(50):                                        # 50 logins, one try each
        assert _user(fresh, f"guess{i}", "wrong") == 401
    r = fresh.client.get("/api/user", auth=ADMIN)
    assert (r.status_code, r.json()) == (429, BLOCKED)


def test_tokens_are_not_limited_by_failed_logins(fresh):
    _clock(fresh)
    for _ in range(60):
        assert _user(fresh, "nobody", "wrong") in (401, 429)
    r = fresh.get("/api/search", who="SV")
    assert r.status_code == 200
