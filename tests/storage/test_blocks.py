"""Sealed blocks as storage sees them: what goes in comes out, and the summary only ever rules
out a block that cannot hold a match."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from logql.reading import LineConditions
from storage.blocks import codec as B
from storage.db import migrate
from storage.scan import conditions_sql
from storage.blocks.counts import sealed_at, sealed_range_counts, sealed_totals
from storage.blocks.sealed import BlockFilter, SealedBlocks, Summary

T = 1_700_000_000 * 10**9

lines_st = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
                    min_size=1, max_size=30)


def rows_of(lines: list[str], metadata=None) -> list[tuple[int, int, str, str | None]]:
    return [(100 + i, T + (i // 2) * 1000, line, metadata(i) if metadata else None)
            for i, line in enumerate(lines)]


@given(lines_st, st.booleans())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_encode_decode_round_trip(lines, with_metadata):
    md = (lambda i: None if i % 3 == 0 else json.dumps({"k": str(i)}, separators=(",", ":"))) \
        if with_metadata else None
    rows = rows_of(lines, md)
    b = B.encode(list(reversed(rows)))  # any order in, (ts, id) order out
    ts, ids = B.decode_keys(b.keys, b.rows)
    lengths = B.decode_lengths(b.lengths)
    got = list(zip(ids, ts, B.decode_lines(b.lines, lengths, bool(b.flags & B.FLAG_ASCII)),
                   B.decode_metadata(b.metadata, b.rows)))
    assert got == sorted(rows, key=lambda r: (r[1], r[0]))
    assert (b.min_ts, b.max_ts, b.min_id, b.max_id) == (rows[0][1], rows[-1][1], 100,
                                                       100 + len(rows) - 1)
    assert b.bytes == sum(len(l.encode()) for l in lines) == sum(lengths)
    assert b.md_names == ("k" if with_metadata and len(lines) > 1 else "")


def test_nul_newline_and_non_ascii_survive():
    lines = ["a\x00b", "two\nlines", "caf\u00e9 \U0001F600", "", "\\escaped"]
    b = B.encode(rows_of(lines))
    assert not b.flags & B.FLAG_ASCII and b.flags & B.FLAG_BACKSLASH
    out = B.decode_lines(b.lines, B.decode_lengths(b.lengths), False)
    assert out == lines


@given(lines_st, st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_bloom_admits_every_substring_of_every_line(lines, data):
    b = B.encode(rows_of(lines))
    line = data.draw(st.sampled_from(lines))
    raw = line.encode("utf-8")
    if len(raw) < 3:
        return
    i = data.draw(st.integers(0, len(raw) - 3))
    j = data.draw(st.integers(i + 3, len(raw)))
    probes = B.trigram_probes(raw[i:j])
    assert probes is not None and B.bloom_admits(b.bloom, probes)
    # and any ASCII case of it
    assert B.bloom_admits(b.bloom, B.trigram_probes(raw[i:j].upper()))


def test_bloom_rules_out_absent_needles():
    lines = [f"GET /api/v1/items/{i} 200 {i * 7}ms" for i in range(2000)]
    b = B.encode(rows_of(lines))
    assert len(b.bloom) < sum(map(len, lines)) // 10
    misses = sum(B.bloom_admits(b.bloom, B.trigram_probes(f"needle-{k:05x}".encode()))
                 for k in range(1000))
    assert misses <= 20  # about 1 % false positives per trigram, many trigrams per needle
    assert B.bloom_admits(b.bloom, B.trigram_probes(b"items/1999 200"))


def test_a_large_block_finds_its_distinct_trigrams_by_table_the_same_as_by_sort(monkeypatch):
    from tests.helpers import synthetic_lines

    body = "".join(synthetic_lines(3000)).encode() + "é✓\\".encode()
    assert len(body) - 2 >= B.BLOOM_BITMAP_FROM  # the state: a body the table is used for
    by_table = B.build_bloom(body)
    monkeypatch.setattr(B, "BLOOM_BITMAP_FROM", 1 << 62)
    assert B.build_bloom(body) == by_table


def test_block_filter_keeps_what_it_cannot_test():
    b = B.encode(rows_of(["plain ascii text"]))
    s = Summary(1, 1, b.min_ts, b.max_ts, b.rows, b.bytes, b.flags, 0, frozenset())
    assert not BlockFilter.build([[("absent", False)]], None).admits(s, b.bloom)
    assert BlockFilter.build([[("ASCII", True)]], None).admits(s, b.bloom)
    # (?i) with k or s can match the Kelvin sign or the long s: not testable by bytes
    assert BlockFilter.build([[("kelvin", True)]], None).admits(s, b.bloom)
    assert BlockFilter.build([[("absent", False), ("ab", False)]], None).admits(s, b.bloom)
    # a `| json | name="value"` demand: value in the line, or hidden by an escape, or metadata
    cond = LineConditions(label_values=[("user", "zed")])
    assert not BlockFilter.build([], cond).admits(s, b.bloom)
    s_md = Summary(1, 1, b.min_ts, b.max_ts, b.rows, b.bytes, b.flags, 0, frozenset({"user"}))
    assert BlockFilter.build([], cond).admits(s_md, b.bloom)
    esc = B.encode(rows_of(['{"user":"z\\u0065d"}']))
    s_esc = Summary(1, 1, esc.min_ts, esc.max_ts, 1, esc.bytes, esc.flags, 0, frozenset())
    assert BlockFilter.build([], cond).admits(s_esc, esc.bloom)


@pytest.fixture
def conn(tmp_path):
    c = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    migrate(c)
    yield c
    c.close()


def _store(conn, sid: int, rows) -> None:
    from storage.blocks import sealing
    conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                 "VALUES (?, 'fake', ?, 0, 0, 0) ON CONFLICT DO NOTHING", (sid, f'{{s="{sid}"}}'))
    conn.executemany("INSERT INTO entries (id, stream_id, ts, hash, line, metadata) "
                     "VALUES (?, ?, ?, ?, ?, ?)", [(i, sid, ts, i, l, md) for i, ts, l, md in rows])
    sealing.seal_now(conn, sealing.sealable_groups(conn, 0, 10**15, 0, everything=True), 10**6)


def test_counts_match_the_rows(conn):
    md = lambda i: '{"x":"1"}' if i % 2 else None  # noqa: E731
    rows = rows_of([f"line {i} {'é' * (i % 3)}" for i in range(50)], md)
    _store(conn, 7, rows)
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    size = lambda rs: sum(len(r[2].encode()) for r in rs)  # noqa: E731
    lo, hi = T + 3000, T + 17000
    inside = [r for r in rows if lo <= r[1] < hi]
    assert sealed_range_counts(conn, [7], lo, hi) == (len(inside), size(inside))
    got = sorted(sealed_totals(conn, [7], [(lo, hi), (hi, hi + 5000)]))
    want = []
    for i, (a, b) in enumerate([(lo, hi), (hi, hi + 5000)]):
        for mdv in ("", '{"x":"1"}'):
            sel = [r for r in rows if a < r[1] <= b and (r[3] or "") == mdv]
            if sel:
                want.append((7, mdv, i, len(sel), size(sel)))
    assert got == sorted(want)
    at = sorted(sealed_at(conn, [7], [T + 4000, T + 999]))
    sel = [r for r in rows if r[1] == T + 4000]
    assert at == sorted((7, r[3] or "", T + 4000, 1, len(r[2].encode())) for r in sel)


def test_sealed_rows_apply_the_conditions_exactly_as_sql(conn):
    lines = ["Error here", "error here", "ERROR", "warn", "K\u212aelvin", "x\\y", "none"]
    rows = rows_of(lines)
    _store(conn, 1, rows)
    cases = [LineConditions(all_of=[[("error", True)]]),
             LineConditions(all_of=[[("Error", False), ("warn", False)]]),
             LineConditions(none_of=["e"]),
             LineConditions(label_values=[("a", "zz")])]
    for cond in cases:
        sql, params = conditions_sql(cond)
        blocks = SealedBlocks(conn, [1], T, T + 10**12, conditions=cond)
        got = sorted(r[3] for r in blocks.rows(T, T + 10**12))
        mem = sqlite3.connect(":memory:")
        mem.execute("CREATE TABLE entries (line TEXT, metadata TEXT)")
        mem.executemany("INSERT INTO entries VALUES (?, NULL)", [(l,) for l in lines])
        expected = sorted(r[0] for r in mem.execute("SELECT line FROM entries WHERE 1" + sql,
                                                    params))
        assert got == expected, cond


def test_blocks_encoded_on_many_threads_at_once_decode_to_their_rows():
    # the sealer and the compactor encode on different reader threads: a zstd compressor
    # shared between threads corrupts output (or crashes the process)
    import threading

    inputs = [rows_of([f"stream {k} line {i} " + "x" * ((i * 37 + k) % 300)
                       for i in range(2000)]) for k in range(6)]
    bad: list = []

    def work(k: int) -> None:
        for _ in range(15):
            b = B.encode(inputs[k])
            got = B.decode_lines(b.lines, B.decode_lengths(b.lengths), True)
            if got != [r[2] for r in sorted(inputs[k], key=lambda r: (r[1], r[0]))]:
                bad.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_a_limited_read_decodes_the_lines_of_the_blocks_it_returns_only(conn, monkeypatch):
    """Thousands of quiet streams' last lines can fall in one instant, where the summaries'
    estimate cannot split the window: the scan reads those blocks' timestamps, cuts the
    window to the newest rows, and decompresses the lines of only the blocks those are in.
    The rows stay exactly the newest, ties at the cut included."""
    from storage import scan

    for sid in range(1, 301):  # a block per stream, its last line within a microsecond
        _store(conn, sid, [(sid * 10, T + 600 * 10**9, f"s{sid} older", None),
                           (sid * 10 + 1, T + 900 * 10**9 + sid % 100, f"s{sid} last", None)])
    fetched = []
    complete = SealedBlocks._complete
    monkeypatch.setattr(SealedBlocks, "_complete",
                        lambda self, ds: (fetched.append(len(ds)), complete(self, ds))[1])
    blocks = SealedBlocks(conn, list(range(1, 301)), T, T + 3600 * 10**9)
    batches = scan.scan_ordered(conn, list(range(1, 301)), T, T + 3600 * 10**9,
                                backward=True, sealed=blocks, target_rows=40)
    first = next(batches) + next(batches)  # the first window, in batches of 40
    # three streams per nanosecond (sid % 100): the 40th newest row's nanosecond holds two
    # more, so the window keeps 42
    newest = sorted(((T + 900 * 10**9 + sid % 100, sid * 10 + 1) for sid in range(1, 301)),
                    reverse=True)
    assert [(r[2], r[0]) for r in first] == newest[:42]
    assert sum(fetched) == 42


def test_blocks_written_before_issue_25_still_read():
    """Blocks in existing databases were written with zstd level 3 in every column and a
    10-bit, 5-probe Bloom filter (fixtures/write_block_v1.py); they must decode as before."""
    from pathlib import Path
    cases = json.loads((Path(__file__).parent / "fixtures" / "block-v1.json").read_text())
    for case in cases.values():
        rows = [tuple(r) for r in case["rows"]]
        b = case["block"]
        cols = {k: bytes.fromhex(b[k]) for k in ("bloom", "keys", "lengths", "metadata", "lines")}
        ts, ids = B.decode_keys(cols["keys"], b["rows"])
        lengths = B.decode_lengths(cols["lengths"])
        assert B.line_offsets(cols["lengths"], b["rows"])[1:] == \
            list(B.decode_offsets(cols["lengths"], b["rows"])[1:])
        got = list(zip(ids, ts, B.decode_lines(cols["lines"], lengths,
                                               bool(b["flags"] & B.FLAG_ASCII)),
                       B.decode_metadata(cols["metadata"], b["rows"])))
        assert got == sorted(rows, key=lambda r: (r[1], r[0]))
        for _, _, line, _ in rows:
            raw = line.encode("utf-8")
            for i in range(0, max(0, len(raw) - 2), 5):
                assert B.bloom_admits(cols["bloom"], B.trigram_probes(raw[i:i + 12]))
        assert not B.bloom_admits(cols["bloom"], B.trigram_probes(b"needle-0c0ffee"))


@pytest.mark.parametrize("rows", [1, 5, B.SMALL_ROWS, B.SMALL_ROWS + 1, 3000])
def test_line_lengths_read_back_from_the_shuffled_column(rows):
    lines = [("x" * (i * 37 % 300)) + ("\u00e9" * (i % 3)) for i in range(rows - 1)] + \
        ["y" * 70_000]  # a length above 16 bits
    b = B.encode(rows_of(lines))
    assert b.lengths[:1] == b"\x01"
    want = [len(line.encode()) for line in lines]
    assert B.decode_lengths(b.lengths) == want
    offsets = [0]
    for n in want:
        offsets.append(offsets[-1] + n)
    assert B.line_offsets(b.lengths, rows) == offsets
    assert B.decode_offsets(b.lengths, rows).tolist() == offsets
    ts, offs = B.decode_ts_offsets(b.keys, b.lengths, rows)
    assert offs.tolist() == offsets


def _quiet_pods(conn, n: int) -> None:
    for sid in range(1, n + 1):  # a block per stream, its last line within a microsecond
        _store(conn, sid, [(sid * 10, T + 600 * 10**9 + sid % 100, f"s{sid} older", None),
                           (sid * 10 + 1, T + 900 * 10**9 + sid % 100, f"s{sid} last", None)])


def _fetched(monkeypatch, column: str) -> list[int]:
    """Ids of the blocks whose `column` is read apart from the summaries."""
    from storage.blocks import sealed
    out: list[int] = []
    real = sealed._block_columns

    def counting(conn, ids, columns):
        if columns.split(",")[0] == column:
            out.extend(ids)
        return real(conn, ids, columns)
    monkeypatch.setattr(sealed, "_block_columns", counting)
    return out


def test_the_cut_reads_the_timestamps_of_blocks_ending_past_it_only(conn, monkeypatch):
    """A window cut to the newest (oldest) rows of 300 blocks, each ending (starting) in the
    window: the summaries' bounds place the cut, and only the blocks that reach past the
    40th newest end (oldest start) have their timestamps read to find it exactly."""
    from storage import scan

    _quiet_pods(conn, 300)
    keys = _fetched(monkeypatch, "keys")
    for backward in (True, False):
        keys.clear()
        blocks = SealedBlocks(conn, list(range(1, 301)), T, T + 3600 * 10**9)
        # the windows before the first (after the last) lines are empty
        first = next(b for b in scan.scan_ordered(conn, list(range(1, 301)), T,
                                                  T + 3600 * 10**9, backward=backward,
                                                  sealed=blocks, target_rows=40) if b)
        edge = (900 if backward else 600) * 10**9
        stamps = sorted(((T + edge + sid % 100, sid * 10 + backward) for sid in range(1, 301)),
                        reverse=backward)
        # three streams per nanosecond: the 40th row's nanosecond holds two more
        assert [(r[2], r[0]) for r in first] == stamps[:40]
        assert 40 <= len(keys) <= 42, len(keys)
        # what the scan examined is counted from the blocks it holds decoded as from disk
        for lo, hi in ((T, T + 3600 * 10**9), (T + 900 * 10**9 + 50, T + 3600 * 10**9),
                       (T, T + 600 * 10**9 + 50)):
            assert blocks.counts(lo, hi) == sealed_range_counts(conn, list(range(1, 301)),
                                                                lo, hi)


@pytest.mark.parametrize("prefetch_max", [4096, 1], ids=["with-summaries", "when-reached"])
def test_small_bloom_filters_come_with_the_summaries(conn, monkeypatch, prefetch_max):
    """A needle search over 300 quiet streams: their Bloom filters come with the summaries
    (none read apart), and the blocks they rule out never enter a window; a large filter is
    read when a window reaches its block. The rows are the same either way."""
    from storage import scan
    from storage.blocks import sealed

    _quiet_pods(conn, 300)
    monkeypatch.setattr(sealed, "BLOOM_PREFETCH_MAX", prefetch_max)
    blooms = _fetched(monkeypatch, "bloom")
    cond = LineConditions(all_of=(((("s77 ", False),),)))
    blocks = SealedBlocks(conn, list(range(1, 301)), T, T + 3600 * 10**9, conditions=cond,
                          needles=[[("s77 ", False)]])
    rows = [r for batch in scan.scan_ordered(conn, list(range(1, 301)), T, T + 3600 * 10**9,
                                             backward=True, sealed=blocks, conditions=cond)
            for r in batch]
    assert [(r[1], r[3]) for r in rows] == [(77, "s77 last"), (77, "s77 older")]
    if prefetch_max > 1:
        assert blooms == [] and bool(blocks)
        assert len(blocks._live) < 10  # 1 % false positives
    else:
        assert len(blooms) == 300


@pytest.mark.parametrize("needle", [True, False], ids=["needle", "every-line"])
def test_a_window_lets_go_of_each_block_once_its_rows_are_out(conn, monkeypatch, needle):
    """A window over 40 streams' blocks that lie inside it holds one block decompressed at a
    time, not all 40 (a full scan over 1M lines held 225 at once, +52 MB in a query worker);
    a block that reaches past the window stays decoded for the next one. Found lines go to
    the caller as text cut from the block's bytes, not with the whole block decoded."""
    import weakref

    from storage.blocks import sealed

    for sid in range(1, 41):
        _store(conn, sid, [(sid * 1000 + k, T + k * 10**9, f"s{sid} k{k}{' hit' * (k == 7)}",
                            None) for k in range(50)])
    assert conn.execute("SELECT count(*), sum(rows) FROM blocks").fetchone() == (40, 2000)
    live: weakref.WeakSet = weakref.WeakSet()
    most = [0]
    real_init, real_raw = sealed.Decoded.__init__, sealed.Decoded.raw.fget

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        live.add(self)

    def raw(self):
        got = real_raw(self)
        most[0] = max(most[0], sum(d._raw is not None for d in live))
        return got
    monkeypatch.setattr(sealed.Decoded, "__init__", init)
    monkeypatch.setattr(sealed.Decoded, "raw", property(raw))
    needles = [[("hit", False)]] if needle else ()
    blocks = SealedBlocks(conn, list(range(1, 41)), T, T + 3600 * 10**9, needles=needles,
                          conditions=LineConditions(all_of=[[("hit", False)]])
                          if needle else None)
    rows = blocks.rows(T, T + 3600 * 10**9)  # takes every block whole
    assert len(live) == 0 and most[0] == 1
    if needle:
        assert sorted(r[3] for r in rows) == sorted(f"s{sid} k7 hit" for sid in range(1, 41))
    else:
        assert len(rows) == 2000
    # this window reaches into every block: all 40 are kept decoded for the next one
    cut = blocks.rows(T, T + 10 * 10**9)
    assert most[0] == 40 and len(live) == 40 and len(cut) == (40 if needle else 400)
    if needle:
        assert all(d._text is None for d in live)
    assert blocks.rows(T + 100 * 10**9, T + 200 * 10**9) == []  # past them: let go
    assert len(live) == 0
