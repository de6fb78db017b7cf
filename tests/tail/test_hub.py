"""The tail hub and a session's bounded buffer, driven the way the ingester drives them."""

from __future__ import annotations

import asyncio

from logql import parse_expr
from logql.plan import compile_log_query
from services.read.tail import TailHub, Tailer
from storage.entries import AppendResult

LEVEL = '{"detected_level":"info"}'


def plan(query: str):
    return compile_log_query(parse_expr(query))


def written(sid: int, labels: dict, lines: list[str], ts0: int = 1000) -> AppendResult:
    rows = [(ts0 + i, 0, line, LEVEL) for i, line in enumerate(lines)]
    return AppendResult(inserted=len(rows), written=[(sid, labels, rows)])


def frames_of(tailer: Tailer) -> list[dict]:
    return asyncio.run(tailer.next_frames())


def test_only_the_tenant_and_selected_streams_reach_a_session():
    hub = TailHub()
    tailer = Tailer("a", plan('{job="x"} |= "keep"'))
    hub.add(tailer)
    hub.on_written("b", written(1, {"job": "x"}, ["keep b"]))
    hub.on_written("a", written(2, {"job": "y"}, ["keep y"]))
    hub.on_written("a", written(1, {"job": "x"}, ["keep a", "not this"]))
    assert frames_of(tailer) == [{"streams": [{
        "stream": {"detected_level": "info", "job": "x"}, "values": [["1000", "keep a"]]}]}]


def test_a_full_buffer_reports_dropped_entries_instead_of_growing():
    tailer = Tailer("a", plan('{job="x"} |= "keep"'), max_pending_rows=4)
    lines = [f"{'keep' if i % 2 == 0 else 'skip'} {i}" for i in range(12)]
    tailer.offer(written(1, {"job": "x"}, lines).written)
    assert len(tailer._pending) == 4  # bounded: the rest was not kept
    [frame] = frames_of(tailer)
    assert frame["streams"] == [{"stream": {"detected_level": "info", "job": "x"},
                                 "values": [["1000", "keep 0"], ["1002", "keep 2"]]}]
    # of the 8 rows that did not fit, the 4 the query would have sent are reported
    assert frame["dropped_entries"] == [
        {"labels": {"detected_level": "info", "job": "x"}, "timestamp": str(1000 + i)}
        for i in (4, 6, 8, 10)]
    # once drained, the session accepts rows again
    tailer.offer(written(1, {"job": "x"}, ["keep again"], ts0=5000).written)
    assert frames_of(tailer) == [{"streams": [{
        "stream": {"detected_level": "info", "job": "x"}, "values": [["5000", "keep again"]]}]}]


def test_byte_bound_and_dropped_reports_split_over_frames():
    tailer = Tailer("a", plan('{job="x"}'), max_pending_rows=10**6, max_pending_bytes=1000)
    tailer.offer(written(1, {"job": "x"}, ["x" * 100] * 2500).written)
    assert len(tailer._pending) == 10
    frames = frames_of(tailer)
    assert [len(f.get("dropped_entries", [])) for f in frames] == [1000, 1000, 490]
    assert sum(len(s["values"]) for f in frames for s in f["streams"]) == 10


def test_legacy_frames():
    tailer = Tailer("a", plan('{job="x"}'), legacy=True, max_pending_rows=1)
    tailer.offer(written(1, {"job": "x"}, ["one", "two"], ts0=1_700_000_000_500_000_000).written)
    assert frames_of(tailer) == [{
        "streams": [{"labels": '{detected_level="info", job="x"}',
                     "entries": [{"ts": "2023-11-14T22:13:20.5Z", "line": "one"}]}],
        "dropped_entries": [{"Timestamp": "2023-11-14T22:13:20.500000001Z",
                             "Labels": '{detected_level="info", job="x"}'}]}]


def test_history_entries_are_not_sent_twice():
    tailer = Tailer("a", plan('{job="x"}'))
    history = [{"stream": {"detected_level": "info", "job": "x"},
                "values": [["1001", "b"], ["1000", "a"]]}]
    sent = tailer.remember_history(history)
    assert [(ts, line) for ts, line, _, _ in sent] == [(1000, "a"), (1001, "b")]
    # "b" was committed after subscribing but before the history snapshot
    tailer.offer(written(1, {"job": "x"}, ["b", "c"], ts0=1001).written)
    assert frames_of(tailer) == [{"streams": [{
        "stream": {"detected_level": "info", "job": "x"}, "values": [["1002", "c"]]}]}]


def test_closing_the_hub_ends_waiting_sessions():
    hub = TailHub()
    tailer = Tailer("a", plan('{job="x"}'))
    hub.add(tailer)

    async def main():
        waiting = asyncio.ensure_future(tailer.next_frames())
        await asyncio.sleep(0)
        hub.close_all()
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(main()) is None
