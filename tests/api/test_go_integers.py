"""Integer parameters are read as Go's strconv.Atoi reads them, on every route that takes one
(issue 24). Python's int() takes ' 5 ', '1_0' and '٣'; Loki answers 400 with Atoi's text for
all three. Timestamps (ParseInt/ParseFloat), `step` (ParseFloat) and the detected-field types
follow the same Go parsers. Grafana's API is lenient instead (spec/search.md: an integer that
does not parse counts as 0, then defaults), so there the same values fall back to defaults."""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import quote, urlencode

import pytest
import websockets

from tests.conftest import LogstoreServer, module_client
from tests.helpers import JSON_HEADERS, PUSH

SELECTOR = '{app="a"}'
NOT_INTEGERS = [
    (" 5 ", 'strconv.Atoi: parsing " 5 ": invalid syntax'),
    ("1_0", 'strconv.Atoi: parsing "1_0": invalid syntax'),
    ("٣", 'strconv.Atoi: parsing "٣": invalid syntax'),
]
DETECTED = ["/logstore/api/v1/detected_fields", "/logstore/api/v1/detected_field/level/values"]
# (path, parameters besides the integer, the integer parameters it takes)
ROUTES = [
    ("/logstore/api/v1/query_range", {"query": SELECTOR}, ["limit"]),
    ("/logstore/api/v1/query", {"query": SELECTOR}, ["limit"]),
    ("/api/compat/query", {"query": SELECTOR}, ["limit"]),
    *[(path, {"query": SELECTOR}, ["line_limit", "limit", "field_limit"]) for path in DETECTED],
    ("/logstore/api/v1/index/volume", {"query": SELECTOR}, ["limit"]),
    ("/logstore/api/v1/index/volume_range", {"query": SELECTOR}, ["limit"]),
]
CASES = [(path, dict(params, **{name: value}), text)
         for path, params, names in ROUTES for name in names for value, text in NOT_INTEGERS]


@pytest.fixture(scope="module")
def client(tmp_path_factory, storage_state):
    """One app for the module: its requests are refused or read, and the one push (the
    detected field types) is the only data any of them reads."""
    with module_client(tmp_path_factory, storage_state) as c:
        yield c


@pytest.mark.parametrize("path, params, text", CASES)
def test_a_non_go_integer_is_a_400_with_atois_text(client, path, params, text):
    for method in ("GET", "POST"):
        r = (client.get(path, params=params) if method == "GET"
             else client.post(path, data=params))
        assert (r.status_code, r.text) == (400, text), (method, path, params)
        assert r.headers["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize("path, params, _", CASES[::3])
def test_the_same_parameter_as_go_digits_is_taken(client, path, params, _):
    name = next(k for k in params if k != "query")
    r = client.get(path, params=dict(params, **{name: "5"}))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("value", ["٣", " 5 ", "1_0", "99999999999999999999"])
def test_timestamps_are_go_integers_too(client, value):
    r = client.get("/logstore/api/v1/query_range", params={"query": SELECTOR, "start": value})
    assert (r.status_code, r.text) == (
        400, f'could not parse \'start\' parameter: strconv.ParseInt: parsing "{value}": '
             "invalid syntax")


def test_step_is_a_go_float(client):
    for value in (" 5 ", "٣", "١.٥"):
        r = client.get("/logstore/api/v1/query_range",
                       params={"query": f"count_over_time({SELECTOR}[1m])", "step": value})
        assert (r.status_code, r.text) == (400, f'cannot parse "{value}" to a valid duration')
    # Go's ParseFloat takes an underscore between digits: 10 seconds
    r = client.get("/logstore/api/v1/query_range",
                   params={"query": f"count_over_time({SELECTOR}[1m])", "step": "1_0"})
    assert r.status_code == 200, r.text


def test_delete_times_are_ascii_unix_seconds(make_client):
    c = make_client({"compactor": {"retention_enabled": True}})
    r = c.post("/logstore/api/v1/delete",
               params={"query": SELECTOR, "start": "١٧٠٠٠٠٠٠٠٠", "end": "1700003600"})
    assert (r.status_code, r.text) == (
        400, "invalid start time: require unix seconds or RFC3339 format\n")


def test_detected_field_types_are_gos(client):
    line = 'a=٣ b=1_0 c=5 d=99999999999999999999 e=1.5'
    body = {"streams": [{"stream": {"app": "a"}, "values": [[str(time.time_ns()), line]]}]}
    assert client.post(PUSH, content=json.dumps(body), headers=JSON_HEADERS).status_code == 204
    r = client.get(DETECTED[0], params={"query": SELECTOR})
    types = {f["label"]: f["type"] for f in r.json()["fields"] if len(f["label"]) == 1}
    assert types == {"a": "string", "b": "float", "c": "int", "d": "float", "e": "float"}


# -- tail: checked before the WebSocket upgrade, so a real server answers the 400 -----------

@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LogstoreServer(tmp_path_factory.mktemp("atoi") / "data").start()
    yield server
    server.stop()


@pytest.mark.parametrize("path", ["/logstore/api/v1/tail", "/api/compat/tail"])
@pytest.mark.parametrize("name", ["limit", "delay_for"])
@pytest.mark.parametrize("value, text", NOT_INTEGERS)
def test_tail_integers_are_go_integers(srv, path, name, value, text):
    url = srv.url.replace("http://", "ws://") + path + "?" + urlencode(
        {"query": SELECTOR, name: value})

    async def main():
        with pytest.raises(websockets.InvalidStatus) as info:
            async with websockets.connect(url):
                pass
        return info.value.response

    response = asyncio.run(main())
    assert (response.status_code, bytes(response.body).decode()) == (400, text)


# -- Grafana: lenient, a bad integer is 0 and then the default -------------------------------

ADMIN = ("admin", "admin")
# each of these would be 1 (or 2) to Python's int(), and is no integer to Go's Atoi
LENIENT_ONE = [" 1 ", "0_1", "١", "1\n"]
LENIENT_TWO = [" 2 ", "0_2", "٢", "2\n"]


@pytest.fixture(scope="module")
def grafana(tmp_path_factory, storage_state):
    """One Grafana for the module's tests: they only read it, or are refused."""
    with module_client(tmp_path_factory, storage_state,
                       {"grafana": {"admin_password": "admin"}}) as c:
        yield _grafana(c)


def _grafana(c):
    for uid in ("f1", "f2"):
        r = c.post("/api/folders", json={"uid": uid, "title": uid.upper()}, auth=ADMIN)
        assert r.status_code == 200, r.text
        c.folder_id = r.json()["id"]
    for uid in ("d1", "d2", "d3"):
        r = c.post("/api/dashboards/db", json={"dashboard": {"uid": uid, "title": uid.upper()},
                                               "folderUid": "f1"}, auth=ADMIN)
        assert r.status_code == 200, r.text
        c.dashboard_id = r.json()["id"]
    return c


def _get(c, path: str, **params):
    r = c.get(path, params=params, auth=ADMIN)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("one, two", list(zip(LENIENT_ONE, LENIENT_TWO)))
def test_grafana_search_and_folder_paging_default_a_bad_integer(grafana, one, two):
    dashboards = {"type": "dash-db"}
    assert len(_get(grafana, "/api/search", limit="1", **dashboards)) == 1
    assert len(_get(grafana, "/api/search", limit=one, **dashboards)) == 3
    second = _get(grafana, "/api/search", limit="1", page="2", **dashboards)
    assert _get(grafana, "/api/search", limit="1", page=two, **dashboards) != second
    assert len(_get(grafana, "/api/folders", limit="1")) == 1
    assert len(_get(grafana, "/api/folders", limit=one)) == 2
    assert _get(grafana, "/api/teams/search", perpage=one)["perPage"] == 1000


@pytest.mark.parametrize("spell", [" {} ", "0_{}", "arabic"])
def test_grafana_ids_in_paths_are_go_integers(grafana, spell):
    def spelt(n: int) -> str:
        if spell == "arabic":
            return "".join(chr(0x660 + int(d)) for d in str(n))
        return spell.format(n)

    r = grafana.post("/api/user/stars/dashboard/" + quote(spelt(grafana.dashboard_id)),
                     auth=ADMIN)
    assert (r.status_code, r.json()) == (400, {"message": "Invalid dashboard ID"})
    r = grafana.get("/api/folders/id/" + quote(spelt(grafana.folder_id)), auth=ADMIN)
    assert (r.status_code, r.json()) == (404, {"message": "folder not found",
                                               "status": "not-found"})
