"""`server.admin_token` (issue 15): the state-changing operational endpoints want it; reads
and the query API do not; without it everything stays open, as in Loki."""

from __future__ import annotations

import pytest

TEXT = "this operational endpoint wants the server's admin token (Authorization: Bearer)\n"
GUARDED = [("POST", "/log_level?log_level=debug"), ("POST", "/flush"), ("GET", "/flush"),
           ("POST", "/flush/tenant"), ("POST", "/ingester/prepare_shutdown"),
           ("DELETE", "/ingester/prepare_shutdown"), ("POST", "/ingester/shutdown")]


@pytest.fixture
def client(make_client):
    return make_client({"server": {"admin_token": "s3cret"}})


@pytest.mark.parametrize("method, path", GUARDED)
def test_guarded_without_or_with_a_wrong_token(client, method, path):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic s3cret"}):
        r = client.request(method, path, headers=headers)
        assert (r.status_code, r.text) == (401, TEXT), headers


def test_with_the_token(client):
    auth = {"Authorization": "Bearer s3cret"}
    assert client.post("/log_level?log_level=debug", headers=auth).status_code == 200
    assert client.post("/flush", headers=auth).status_code == 204
    assert client.post("/ingester/prepare_shutdown", headers=auth).status_code == 204
    assert client.get("/ingester/prepare_shutdown").text == "set"  # reading stays open
    for path in ("/ready", "/metrics", "/config", "/log_level", "/services"):
        assert client.get(path).status_code == 200, path
    assert "admin_token: '********'" in client.get("/config").text


def test_open_without_a_token(make_client):
    c = make_client()
    assert c.post("/flush").status_code == 204
