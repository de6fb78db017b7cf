"""The storage-side narrowing (SQL line conditions on the head, Python conditions and Bloom
filters on sealed blocks) never changes an answer: every query here is checked against a
brute-force reference with the data all in the head, half sealed, sealed in small blocks
that overlap in time, and all sealed. Also: a rare needle skips most sealed blocks, and
answers survive a server restart."""

from __future__ import annotations

import re
import sqlite3

import httpx
import pytest

from tests.helpers import JSON_HEADERS, PUSH, head_rows, sealed_blocks
from tests.query.conftest import OLD_DATA, QUERY_RANGE, push

T = 1_700_000_000 * 10**9
DAY = 86400 * 10**9

TRICKY = [
    "disk 100% full", "disk 100 full", "path a_b c", "path axb c", r"back\slash here",
    "Kelvin \u212a here", "kelvin k here", "long \u017fs", "ERROR upper", "error lower",
    "ÉCOLE accent", "école accent", "caf\u00e9", "needle-0c0ffee in the middle",
    "", "  ", "timeout after 30s", "TimeOut after 5s", "x" * 300 + "needle-0c0ffee",
]


def lines(n: int) -> list[str]:
    out = []
    for i in range(n):
        out.append(TRICKY[i % len(TRICKY)] + f" #{i}" if i % 7 else TRICKY[i % len(TRICKY)])
    return out


QUERIES = [
    ('|= "100%"', lambda l: "100%" in l),
    ('|= "a_b"', lambda l: "a_b" in l),
    ('|= "k\\\\sl"', lambda l: "k\\sl" in l),
    ('|~ "(?i)kelvin k"', lambda l: re.search("(?i)kelvin k", l) is not None),
    ('|~ "(?i)\u017fs"', lambda l: re.search("(?i)\u017fs", l) is not None),
    ('|~ "(?i)error"', lambda l: "error" in l.lower()),
    ('|~ "(?i)école"', lambda l: re.search("(?i)école", l) is not None),
    ('|= "needle-0c0ffee"', lambda l: "needle-0c0ffee" in l),
    ('|= "needle" |= "0c0ffee" != "x"', lambda l: "needle" in l and "0c0ffee" in l
     and "x" not in l),
    ('|~ "timeout|TimeOut"', lambda l: "timeout" in l or "TimeOut" in l),
    ('|= "disk" or "path"', lambda l: "disk" in l or "path" in l),
    ('!= ""', lambda l: False),
    ('|= ""', lambda l: True),
    ('|> "<_>after <_>s<_>"', None),
    ('| logfmt |= "full"', lambda l: "full" in l),
    ('|= "ab" |= "le"', lambda l: "ab" in l and "le" in l),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Pushed through the app, then queried on a connection of our own with the app stopped:
    the background sealer must not move data under the test."""
    from litestar.testing import TestClient

    from app import create_app
    from storage.db import connect
    from tests.conftest import make_config

    data_dir = tmp_path_factory.mktemp("pf") / "data"
    body = lines(3000)
    step = DAY // len(body)
    stamps = [T + i * step for i in range(len(body))]
    extra = {**OLD_DATA, "storage": {"sealing_enabled": False}}
    with TestClient(create_app(make_config(data_dir, extra))) as c:
        for i in range(0, len(body), 1000):
            push(c, {"app": "pf", "part": str(i // 1500)},
                 [[str(t), l] for t, l in zip(stamps[i:i + 1000], body[i:i + 1000])])
        path = c.app.state.services.db.path
    conn = connect(path)
    yield conn, list(zip(stamps, body)), path
    conn.close()


def _answer(conn, q: str, limit: int, direction: str, stats=None) -> list[tuple[int, str]]:
    from logql import parse_expr
    from logql.engine.logs import evaluate_log_query
    from storage.reader import LogReader

    result = evaluate_log_query(LogReader(conn), "fake", parse_expr('{app="pf"} ' + q), T, T + DAY,
                                limit=limit, backward=direction == "backward", stats=stats)
    out = [(int(ts), line) for s in result for ts, line in s["values"]]
    return sorted(out, reverse=direction == "backward")


def _reference(rows, keep, limit: int, direction: str) -> list[tuple[int, str]]:
    kept = [(ts, l) for ts, l in rows if keep(l)]
    kept.sort(reverse=direction == "backward")
    return kept[:limit]


def _seal_state(data_dir, state: str) -> None:
    """A fresh copy of the pushed data with the given part of it sealed."""
    from tests.helpers import seal

    conn = sqlite3.connect(data_dir / "logstore.db", isolation_level=None)
    try:
        if state == "half":  # the first part's stream, and the early windows of the other
            seal(conn, keep=lambda g: g.stream_id == 1 or g.lo < T + DAY // 3)
        elif state == "small overlapping blocks":
            # blocks of 40 rows cut from a window, then late rows sealed over them
            seal(conn, max_rows=40, keep=lambda g: g.lo % (2 * 3600 * 10**9) == 0)
            seal(conn, max_rows=40, window_ns=DAY)
        elif state == "full":
            seal(conn)
    finally:
        conn.close()


def _sealed_copy(tmp_path_factory, path: str, state: str):
    from storage.db import connect

    copy = tmp_path_factory.mktemp("sealed") / "data"
    copy.mkdir()
    src = sqlite3.connect(path)
    dst = sqlite3.connect(copy / "logstore.db")
    src.backup(dst)
    src.close()
    dst.close()
    _seal_state(copy, state)
    return connect(str(copy / "logstore.db"))


@pytest.fixture(scope="module", params=["head", "half", "small overlapping blocks", "full"])
def sealed_data(request, data, tmp_path_factory):
    _, rows, path = data
    conn = _sealed_copy(tmp_path_factory, path, request.param)
    yield conn, rows, request.param
    conn.close()


def test_answers_do_not_depend_on_sealing(sealed_data):
    conn, rows, state = sealed_data
    if state != "head":
        assert sealed_blocks(conn) > 0
    if state in ("head", "half"):
        assert head_rows(conn) > 0
    for q, keep in QUERIES:
        if keep is None:
            pattern = re.compile(r"after .*s.")  # `<_>after <_>s<_>`: a non-empty tail
            keep = lambda l, p=pattern: p.search(l) is not None  # noqa: E731
        for limit, direction in ((5000, "backward"), (25, "backward"), (25, "forward")):
            want = _reference(rows, keep, limit, direction)
            got = _answer(conn, q, limit, direction)
            if got != want:  # (pytest's diff of long lists takes minutes: report compactly)
                extra = sorted(set(got) - set(want))[:3]
                missing = sorted(set(want) - set(got))[:3]
                pytest.fail(f"{q} limit={limit} {direction} sealed={state}: "
                            f"{len(got)} vs {len(want)} entries; unexpected {extra}; "
                            f"missing {missing}")


def test_rare_needle_skips_most_sealed_blocks(data, tmp_path_factory):
    from storage.reader import LogReader

    _, rows, path = data
    conn = _sealed_copy(tmp_path_factory, path, "full")
    assert _answer(conn, '|= "#1234"', 1000, "backward") == [
        (ts, l) for ts, l in rows if "#1234" in l]
    scan = LogReader(conn).lines([1, 2], T, T + DAY, needles=[[("#1234", False)]])
    got = [r for batch in scan for r in batch]
    blocks = scan._blocks
    assert len(blocks.blocks) == 26  # 2 streams of 12-13 hours
    assert len(blocks.skipped) >= 23
    assert [r[3] for r in got if "#1234" in r[3]] == [l for _, l in rows if "#1234" in l]
    conn.close()


def test_answers_survive_a_restart(make_server):
    server = make_server(OLD_DATA)
    values = [[str(T + i * 10**9), f"line {i} {'odd' if i % 2 else 'even'}"] for i in range(50)]
    body = {"streams": [{"stream": {"app": "r"}, "values": values}]}
    assert httpx.post(server.url + PUSH, json=body, headers=JSON_HEADERS).status_code == 204
    params = {"query": '{app="r"} |= "odd"', "start": str(T), "end": str(T + DAY),
              "limit": "10"}
    before = httpx.get(server.url + QUERY_RANGE, params=params).json()["data"]["result"]
    assert sum(len(s["values"]) for s in before) == 10
    server.kill()
    server.start()
    after = httpx.get(server.url + QUERY_RANGE, params=params).json()["data"]["result"]
    assert after == before
