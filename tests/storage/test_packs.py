"""Packs, the head (issue 25): what the preparer encodes without ids is, once the writer gives
the ids, the very block the codec makes of the same rows; a push's repeats are stored once;
a push spanning windows is stored as a pack per window; the head's packs read back after a
restart exactly as pushed."""

from __future__ import annotations

import sqlite3

from config import LimitsConfig
from logql.model import MINUTE_NS
from services.ingest.prepare import Preparer, RawStream
from storage.blocks import codec as B
from storage.blocks.packs import encode_rows
from storage.db import connect, migrate
from storage.entries import append
from tests.helpers import head_rows, sealed_blocks, sealed_rows, stored

T = 1_700_000_000 * 10**9
HOUR = 3600 * 10**9


def _rows(n: int) -> list[tuple[int, int, str, str | None]]:
    # out of order, equal timestamps, non-ASCII, metadata on some: the codec's every case
    stamps = [T + (i * 7919) % n * 10**6 // 3 for i in range(n)]
    return [(ts, i, f"line {i} ✓" if i % 5 == 0 else f"line {i} \\ ok",
             '{"detected_level":"info"}' if i % 3 else None) for i, ts in enumerate(stamps)]


def test_a_pack_is_the_block_the_codec_makes_of_its_rows():
    for n in (1, 2, 33, 500):
        rows = _rows(n)
        want = B.encode([(1000 + i, r[0], r[2], r[3]) for i, r in enumerate(rows)], pack=True)
        got = encode_rows(rows).block(1000)
        assert got == want, n
        assert got.flags & B.FLAG_PACK and got.bloom == B.ADMIT_ALL_BLOOM
        ts, ids = B.decode_keys(got.keys, n)
        # sorted by time, equal timestamps in arrival order (the ids)
        assert list(zip(ts, ids)) == sorted(zip(ts, ids))
        assert sorted(ids) == list(range(1000, 1000 + n))


def _push(conn, raw: list[RawStream], window_ns: int = HOUR):
    prepared, outcome = Preparer().prepare(raw, T + 10 * HOUR,
                                           LimitsConfig(reject_old_samples=False))
    assert not outcome.errors
    conn.execute("BEGIN")
    result = append(conn, {}, "t", prepared, window_ns)
    conn.execute("COMMIT")
    return result


def test_repeats_within_a_push_and_of_stored_lines_are_stored_once(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    entries = [(T + 5, "a", None), (T + 5, "a", None), (T + 5, "b", None), (T + 6, "a", None)]
    result = _push(conn, [RawStream([("app", "x")], entries)])
    assert (result.inserted, result.duplicates) == (3, 1)
    # again, with one new line: the stored ones are found in the pack
    result = _push(conn, [RawStream([("app", "x")], entries + [(T + 7, "c", None)])])
    assert (result.inserted, result.duplicates) == (1, 4)
    assert sorted((r[3], r[4]) for r in sealed_rows(conn)) == [
        (T + 5, "a"), (T + 5, "b"), (T + 6, "a"), (T + 7, "c")]
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == 4
    assert (head_rows(conn), sealed_blocks(conn)) == (4, 0)


def test_a_push_spanning_windows_is_a_pack_per_window(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    start = T - T % HOUR
    entries = [(start + k * 20 * MINUTE_NS, f"k={k}", None) for k in range(9)]  # 3 hours
    _push(conn, [RawStream([("app", "x")], entries)])
    packs = conn.execute("SELECT min_ts, max_ts, rows FROM blocks WHERE flags & 4 "
                         "ORDER BY min_ts").fetchall()
    assert [(lo - start, hi - start, n) for lo, hi, n in packs] == [
        (h * HOUR, h * HOUR + 40 * MINUTE_NS, 3) for h in range(3)]


def test_the_head_reads_back_after_a_restart(make_server):
    import httpx

    from tests.helpers import JSON_HEADERS, PUSH

    server = make_server({"limits_config": {"reject_old_samples": False},
                          "storage": {"sealing_enabled": False}})
    values = [[str(T + i * 10**9), f"line {i}"] for i in range(100)]
    r = httpx.post(server.url + PUSH, headers=JSON_HEADERS,
                   json={"streams": [{"stream": {"app": "p"}, "values": values}]})
    assert r.status_code == 204
    db = server.data_dir / "logstore.db"
    conn = sqlite3.connect(db)
    assert (head_rows(conn), sealed_blocks(conn)) == (100, 0)  # the state: all in one pack
    assert conn.execute("SELECT count(*) FROM blocks WHERE flags & 4").fetchone()[0] == 1
    conn.close()
    server.kill()
    server.start()
    got = httpx.get(server.url + "/logstore/api/v1/query_range", params={
        "query": '{app="p"}', "start": str(T), "end": str(T + 200 * 10**9), "limit": "1000",
        "direction": "forward"}).json()["data"]["result"]
    assert [v for s in got for v in s["values"]] == values
    assert [(r[2], r[3]) for r in stored(str(db))] == [(int(t), line) for t, line in values]
