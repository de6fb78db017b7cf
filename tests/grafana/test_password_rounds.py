"""Passwords a person chooses are stored with OWASP's 600,000 PBKDF2 rounds; a hash made with
fewer (an older release's 100,000) still logs in (issue 27)."""

from __future__ import annotations

import hashlib

from services.grafana.auth import PBKDF2_ITERATIONS


def _hash_of(fx, login: str) -> str:
    return fx.state.read_sync(lambda conn: conn.execute(
        "SELECT password_hash FROM gf_user WHERE login = ?", (login,)).fetchone()[0])


def test_new_passwords_take_600k_rounds_and_old_hashes_still_log_in(fresh):
    carol = fresh.post("/api/admin/users", {"login": "carol", "email": "carol@example.com",
                                            "password": "carol-pw"}).json()["id"]
    scheme, rounds, salt, digest = _hash_of(fresh, "carol").split("$")
    assert (scheme, int(rounds)) == ("pbkdf2_sha256", 600_000) == ("pbkdf2_sha256",
                                                                    PBKDF2_ITERATIONS)
    assert hashlib.pbkdf2_hmac("sha256", b"carol-pw", salt.encode(), 600_000).hex() == digest
    assert fresh.client.get("/api/search", auth=("carol", "carol-pw")).status_code == 200
    # a hash an older release wrote (100,000 rounds): put in place as that release did
    old_salt = "0" * 32
    old = "pbkdf2_sha256$100000$%s$%s" % (old_salt, hashlib.pbkdf2_hmac(
        "sha256", b"old-pw", old_salt.encode(), 100_000).hex())
    assert fresh.put(f"/api/admin/users/{carol}/password", {"password": "old-pw"}) \
        .status_code == 200
    fresh.state.write_sync(lambda conn: conn.execute(
        "UPDATE gf_user SET password_hash = ? WHERE login = 'carol'", (old,)))
    assert _hash_of(fresh, "carol") == old
    assert fresh.client.get("/api/search", auth=("carol", "old-pw")).status_code == 200
    assert fresh.client.get("/api/search", auth=("carol", "wrong")).status_code == 401
