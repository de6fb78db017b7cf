"""Packs, the head (issue 25): what the preparer encodes without ids is, once the writer gives
the ids, the very block the codec makes of the same rows; a push's repeats, and repeats of
lines in the head's packs or rows, are stored once; a few lines a stream are rows, many a
pack; a push spanning windows is stored as a pack per window; the head's packs read back
after a restart exactly as pushed; a delete request's rewrite keeps a pack a pack."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings, strategies as st

from config import LimitsConfig
from logql.model import MINUTE_NS
from services.ingest.prepare import Preparer, RawStream
from storage.blocks import codec as B
from storage.blocks.packs import encode_rows
from storage.db import connect, migrate
from storage.entries import PACK_MIN_ROWS, append
from storage.stream_ids import StreamIds
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
    result = append(conn, StreamIds(), "t", prepared, window_ns)
    conn.execute("COMMIT")
    return result


def test_repeats_within_a_push_and_of_stored_lines_are_stored_once(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    many = [(T + i, f"line {i}", None) for i in range(PACK_MIN_ROWS)]
    result = _push(conn, [RawStream([("app", "x")], many + many[:3])])
    assert (result.inserted, result.duplicates) == (PACK_MIN_ROWS, 3)
    assert conn.execute("SELECT count(*) FROM blocks WHERE flags & 4").fetchone()[0] == 1
    # again, with one new line: the stored ones are found in the pack
    result = _push(conn, [RawStream([("app", "x")], many + [(T + 10**6, "new", None)])])
    assert (result.inserted, result.duplicates) == (1, PACK_MIN_ROWS)
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 1  # a few: a row
    # a large push repeating the head's row and the pack's lines stores only its new ones
    more = [(T + 2 * 10**6 + i, f"more {i}", None) for i in range(PACK_MIN_ROWS)]
    result = _push(conn, [RawStream([("app", "x")], more + many + [(T + 10**6, "new", None)])])
    assert (result.inserted, result.duplicates) == (PACK_MIN_ROWS, PACK_MIN_ROWS + 1)
    want = sorted((ts, line) for ts, line, _ in many + more + [(T + 10**6, "new", None)])
    assert sorted([(r[3], r[4]) for r in sealed_rows(conn)] + [
        tuple(r) for r in conn.execute("SELECT ts, line FROM entries")]) == want
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == len(want)
    assert (head_rows(conn), sealed_blocks(conn)) == (len(want), 0)


def test_a_push_spanning_windows_is_a_pack_per_window(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    start = T - T % HOUR
    entries = [(start + k * 5 * MINUTE_NS, f"k={k}", None) for k in range(36)]  # 3 hours
    _push(conn, [RawStream([("app", "x")], entries)])
    packs = conn.execute("SELECT min_ts, max_ts, rows FROM blocks WHERE flags & 4 "
                         "ORDER BY min_ts").fetchall()
    assert [(lo - start, hi - start, n) for lo, hi, n in packs] == [
        (h * HOUR, h * HOUR + 55 * MINUTE_NS, 12) for h in range(3)]


def test_a_few_lines_a_stream_are_rows_and_many_a_pack(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    few = [(T + i, f"few {i}", None) for i in range(PACK_MIN_ROWS - 1)]
    many = [(T + i, f"many {i}", None) for i in range(PACK_MIN_ROWS)]
    _push(conn, [RawStream([("app", "few")], few), RawStream([("app", "many")], many)])
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == PACK_MIN_ROWS - 1
    assert conn.execute("SELECT count(*), sum(rows) FROM blocks WHERE flags & 4").fetchone() \
        == (1, PACK_MIN_ROWS)
    ids = [r[0] for r in conn.execute("SELECT id FROM entries")] + \
        [r[0] for r in sealed_rows(conn)]
    assert sorted(ids) == list(range(1, 2 * PACK_MIN_ROWS))  # one sequence for both


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


def test_the_pattern_miner_gets_every_line_once_from_packs_and_rows_alike(tmp_path):
    """A push of one large stream and one small one gives a pack and rows with interleaved
    ids: mined in batches (as the miner does, its mark at the newest id of each batch),
    every line comes once, none skipped."""
    from storage.patterns import new_entries

    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    for k in range(3):
        _push(conn, [RawStream([("app", "many")], [(T + k * 10**6 + i, f"many {k} {i}", None)
                                                   for i in range(PACK_MIN_ROWS)]),
                     RawStream([("app", "few")], [(T + k * 10**6 + i, f"few {k} {i}", None)
                                                  for i in range(3)])])
    packs = conn.execute("SELECT count(*) FROM blocks WHERE flags & 4").fetchone()[0]
    rows = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert (packs, rows) == (3, 9)  # the state: both forms, ids interleaved
    for limit in (1, 5, 40, 1000):
        mined, mark = [], 0
        while batch := new_entries(conn, mark, limit):
            assert [r[0] for r in batch] == sorted(r[0] for r in batch)
            mined += batch
            mark = batch[-1][0]
        assert sorted(r[0] for r in mined) == list(range(1, 3 * (PACK_MIN_ROWS + 3) + 1)), limit


def test_a_delete_request_keeps_a_rewritten_pack_a_pack(make_client, tmp_path):
    """A delete request that takes lines out of a pack rewrites it as a pack (the head), so
    the sealer still merges it: after /flush, one sealed block holds the lines kept."""
    from tests.helpers import JSON_HEADERS, PUSH

    client = make_client({"limits_config": {"reject_old_samples": False},
                          "storage": {"sealing_enabled": False},
                          "compactor": {"retention_enabled": True,
                                        "delete_request_cancel_period": "0s"}},
                         data_dir=tmp_path / "data")
    client.blocking_portal.call(client.app.state.services.compactor.stop)
    values = [[str(T + i * 10**9), f"line {i} {'drop' if i % 4 == 0 else 'keep'}"]
              for i in range(40)]
    r = client.post(PUSH, headers=JSON_HEADERS,
                    json={"streams": [{"stream": {"app": "p"}, "values": values}]})
    assert r.status_code == 204
    db = tmp_path / "data" / "logstore.db"

    def state() -> tuple[int, int, int]:
        conn = sqlite3.connect(db)
        try:
            packs = conn.execute("SELECT count(*) FROM blocks WHERE flags & 4").fetchone()[0]
            return packs, head_rows(conn), sealed_blocks(conn)
        finally:
            conn.close()

    assert state() == (1, 40, 0)  # the state: the push is one pack
    r = client.post("/logstore/api/v1/delete", params={
        "query": '{app="p"} |= "drop"', "start": str(T // 10**9), "end": str(T // 10**9 + 60)})
    assert r.status_code == 204
    client.blocking_portal.call(client.app.state.services.compactor.run_once)
    assert state() == (1, 30, 0)
    assert client.post("/flush").status_code == 204
    assert state() == (0, 0, 1)
    got = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="p"}', "start": str(T), "end": str(T + 100 * 10**9), "limit": "100",
        "direction": "forward"}).json()["data"]["result"]
    assert [v for s in got for v in s["values"]] == [v for v in values if "keep" in v[1]]


def _stored(k: int, block: B.EncodedBlock):
    from storage.blocks.packs import StoredPack
    return StoredPack(k, block.rows, block.flags, block.min_ts, block.max_ts, block.max_id,
                      block.keys, block.lengths, block.metadata, block.lines)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(
    st.integers(0, 50),  # time step within the pack: equal timestamps too
    st.text(st.characters(blacklist_categories=()), max_size=20),  # lone surrogates too
    st.sampled_from([None, '{"detected_level":"info"}', '{"detected_level":"warn"}',
                     '{"a":"\\u00e9"}'])), min_size=1, max_size=40), min_size=1, max_size=6),
       st.booleans(), st.data())
def test_packs_that_follow_in_time_seal_by_their_columns_as_by_their_rows(packs_rows, overlap,
                                                                          data):
    """A window's packs, one after another in time, become the very block the codec makes of
    their rows, though made from the packs' columns (packs.seal_packs); packs that overlap
    in time are left to the rows."""
    from storage.blocks.packs import encode_columns, seal_packs

    stored, every, next_id, ts = [], [], 1, T
    for k, rows in enumerate(packs_rows):
        if overlap and k:
            ts -= 51  # this pack's oldest line is not newer than the last one's newest
        given = []
        for step, line, md in data.draw(st.permutations(rows)):  # any arrival order
            given.append((ts + step, next_id, line, md))
            next_id += 1
        ts = max(r[0] for r in given) + 1
        every += [(i, t, line, md) for t, i, line, md in given]
        if data.draw(st.booleans()):  # as the preparer encodes a pack, or the writer
            pack = encode_columns([r[0] for r in given], [r[2] for r in given],
                                  [r[3] for r in given]).block(given[0][1])
        else:
            pack = B.encode([(i, t, line, md) for t, i, line, md in given], pack=True)
        stored.append(_stored(k, pack))
    got = seal_packs(stored)
    if overlap and len(stored) > 1:
        assert got is None
    else:
        assert got == B.encode(every)


def test_the_sealer_takes_packs_by_their_columns_and_rows_beside_them_by_their_rows(
        tmp_path, monkeypatch):
    """Through the sealer's read of a window: three packs in time order become the codec's
    block of their rows, no row decoded; with an `entries` row in the window too, the block
    holds it (the packs' rows decoded then)."""
    from storage.blocks import sealing
    from storage.blocks.catalog import insert_blocks

    decoded = []
    real = B.decode_rows
    monkeypatch.setattr(B, "decode_rows", lambda *a: decoded.append(a[0]) or real(*a))

    conn = connect(str(tmp_path / "s.db"))
    migrate(conn)
    conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                 "VALUES (1, 'fake', '{s=\"1\"}', 0, 0, 0)")
    rows = [(100 + i, T + i * 10**6, f"line {i} ✓" if i % 7 else f"line {i}",
             '{"detected_level":"info"}' if i % 3 else None) for i in range(120)]
    insert_blocks(conn, [(1, B.encode(rows[k:k + 40], pack=True)) for k in (0, 40, 80)],
                  max_id=219)
    whole = sealing.read_group(conn, 1, T - T % HOUR, T - T % HOUR + HOUR, 20_000)
    assert whole.block == B.encode(rows) and whole.entry_ids == [] and whole.rows == 120
    assert len(whole.packs) == 3 and decoded == []
    conn.execute("INSERT INTO entries (id, stream_id, ts, hash, line, metadata) "
                 "VALUES (300, 1, ?, 1, 'a row', NULL)", (T + 5 * 10**6 + 1,))
    mixed = sealing.read_group(conn, 1, T - T % HOUR, T - T % HOUR + HOUR, 20_000)
    assert mixed.block == B.encode(rows + [(300, T + 5 * 10**6 + 1, "a row", None)])
    assert mixed.entry_ids == [300] and mixed.rows == 121 and decoded == [40, 40, 40]


def test_a_body_read_in_c_repeating_stored_lines_stores_only_its_new_ones(tmp_path):
    """The push path of a plain JSON body (services/ingest/columns.py): its streams come as
    columns and packs, and a line it repeats is still found among the stored ones."""
    import json

    from services.ingest.columns import ColumnStream
    from services.ingest.decode import decode_json

    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    values = [[str(T + i), f"line {i} level=info"] for i in range(40)]

    def push(vals):
        streams = decode_json(json.dumps({"streams": [{"stream": {"app": "x"},
                                                       "values": vals}]}).encode())
        assert [type(s) for s in streams] == [ColumnStream]  # the C path's state
        return _push(conn, streams)

    assert (push(values).inserted, push(values).duplicates) == (40, 40)
    # a line among them changed: only it is new; the push's newest line is past the stored
    result = push(values[:10] + [[str(T + 10), "changed"]] + values[11:] +
                  [[str(T + 10**6), "newest"]])
    assert (result.inserted, result.duplicates) == (2, 39)
    assert sorted(r[3] for r in stored(str(tmp_path / "x.db"))) == sorted(
        [v[1] for v in values] + ["changed", "newest"])
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == 42


def test_metadata_columns_of_tables_met_before_read_back_as_their_own():
    """A metadata table's text is kept by the table once written: packs that meet the same
    table again, or another one, each decode to their own rows' metadata."""
    info, warn = '{"detected_level":"info"}', '{"detected_level":"warn"}'
    tables = [[info], [info, warn], [warn], [info, warn], [info]]
    rows = 6
    for k, table in enumerate(tables):
        index = [(i + k) % len(table) for i in range(rows)]
        column, names = B.metadata_index_column(
            b"".join(i.to_bytes(4, "little", signed=True) for i in index), table)
        assert B.decode_metadata(column, rows) == [table[i] for i in index]
        assert names == "detected_level"
    column, names = B.metadata_index_column((0).to_bytes(4, "little"), ['{"a":"1","b":"2"}'])
    assert (B.decode_metadata(column, 1), names) == (['{"a":"1","b":"2"}'], "a\nb")
