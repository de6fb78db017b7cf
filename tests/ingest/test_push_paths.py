"""A stream whose entries are all well formed is decoded and prepared a column at a time;
one with a fault, metadata or a line to cut goes entry by entry. Both must store the same
rows (the content hash decides what is a duplicate), so the same lines pushed once each way
are stored once, with the same detected level."""

from __future__ import annotations

from tests.helpers import JSON_HEADERS, PUSH, db_path, now_ns, push_body, stored

LINES = ["ts=1 level=warn msg=a", 'ts=2 msg="x" Level=ERR', "plain words, error here",
         "ümlaut level=info", "nothing"]


def _values(ts: int) -> list:
    return [[str(ts + i), line] for i, line in enumerate(LINES)]


def test_whole_stream_and_entry_by_entry_store_the_same_rows(client):
    ts = now_ns() - 60 * 10**9
    clean = push_body({"app": "a"}, _values(ts))
    assert client.post(PUSH, content=clean, headers=JSON_HEADERS).status_code == 204
    first = stored(db_path(client))
    assert [row[4]["detected_level"] for row in first] == [
        "warn", "error", "error", "info", "unknown"]
    # the same lines again, beside an entry too old (validation goes entry by entry) and
    # an entry with metadata (decoding goes entry by entry): only the new one is stored
    mixed = push_body({"app": "a"}, _values(ts) + [
        [str(ts - 30 * 24 * 3600 * 10**9), "too old"],
        [str(ts + 99), "with metadata", {"trace_id": "t1"}]])
    r = client.post(PUSH, content=mixed, headers=JSON_HEADERS)
    assert r.status_code == 400 and "timestamp too old" in r.text
    rows = stored(db_path(client))
    assert rows[:len(first)] == first
    assert [(row[3], row[4]) for row in rows[len(first):]] == [
        ("with metadata", {"trace_id": "t1", "detected_level": "unknown"})]


def test_a_fault_late_in_a_stream_is_reported_at_its_place(client):
    ts = now_ns()
    values = [[str(ts + i), f"line {i}"] for i in range(5)] + [[str(ts + 9), {"not": "a line"}]]
    r = client.post(PUSH, content=push_body({"app": "a"}, values), headers=JSON_HEADERS)
    assert (r.status_code, r.text) == (
        400, "invalid line at $.streams[0].values[5][1]: the log line must be a string\n")
    assert stored(db_path(client)) == []
