"""Block summaries are read from SQLite once per process and kept by block id
(storage/blocks/catalog.py): a block never takes the id of one deleted before it, so a kept
summary is never another block's."""

from __future__ import annotations

from storage.blocks import codec as B
from storage.blocks.catalog import insert_block, summaries
from storage.db import connect, migrate

T = 1_700_000_000 * 10**9


def _block(first_id: int, ts: int, text: str) -> B.EncodedBlock:
    return B.encode([(first_id + k, ts + k, f"{text} {k}", None) for k in range(3)])


def _insert_as_before_0009(conn, b: B.EncodedBlock) -> None:
    """A block of stream 1 inserted as before migration 0009: SQLite picks its id."""
    conn.execute(
        "INSERT INTO blocks (stream_id, min_ts, max_ts, rows, bytes, min_id, max_id, flags, "
        "aligned, md_names, bloom, keys, lengths, metadata, lines) "
        "VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (b.min_ts, b.max_ts, b.rows, b.bytes, b.min_id, b.max_id, b.flags, b.aligned,
         b.md_names, b.bloom, b.keys, b.lengths, b.metadata, b.lines))


def _statements(conn) -> list[str]:
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    return seen


def test_a_block_inserted_after_the_newest_was_deleted_gets_a_new_id_and_its_own_summary(
        tmp_path):
    conn = connect(str(tmp_path / "logstore.db"))
    migrate(conn)
    conn.execute("BEGIN")
    for sid in (1, 2):
        conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                     "VALUES (?, 't', ?, ?, ?, ?)", (sid, f'{{s="{sid}"}}', sid, T, T + 10**9))
    old = insert_block(conn, 1, _block(1, T, "one"))
    conn.execute("COMMIT")
    first = summaries(conn, [1, 2], T, T + 10**9)
    assert [(s.id, s.stream_id, s.rows) for s, _ in first] == [(old, 1, 3)]

    seen = _statements(conn)
    again = summaries(conn, [1, 2], T, T + 10**9)
    assert [s for s, _ in again] == [s for s, _ in first]
    assert not [q for q in seen if "length(bloom)" in q]   # kept: not read again

    # the newest block goes (retention, a delete request) and another stream's comes
    conn.execute("BEGIN")
    conn.execute("DELETE FROM blocks WHERE id = ?", (old,))
    new = insert_block(conn, 2, _block(10, T + 500, "two"))
    conn.execute("COMMIT")
    assert new > old
    now = summaries(conn, [1, 2], T, T + 10**9)
    assert [(s.id, s.stream_id, s.min_ts, s.rows) for s, _ in now] == [(new, 2, T + 500, 3)]
    conn.close()


def test_ids_continue_past_every_block_a_database_had_before_the_migration(tmp_path,
                                                                          monkeypatch):
    """A database from before migration 0009, whose blocks took SQLite's ids, gives new
    blocks ids after its highest one."""
    from storage import db

    every = db.migration_files()
    monkeypatch.setattr(db, "migration_files", lambda: [m for m in every if m[0] < 9])
    conn = connect(str(tmp_path / "logstore.db"))
    migrate(conn)
    conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                 "VALUES (1, 't', '{s=\"1\"}', 1, 0, 1)")
    for k in range(1, 4):
        _insert_as_before_0009(conn, _block(k * 10, T + k, "x"))
    assert [i for (i,) in conn.execute("SELECT id FROM blocks")] == [1, 2, 3]
    monkeypatch.undo()
    assert migrate(conn) == ["0009_block_ids.sql", "0010_packs.sql", "0011_seals.sql",
                             "0012_streams_without_label_index.sql",
                             "0013_remote_write_buffered.sql",
                             "0014_pattern_changes.sql", "0015_alert_state_versions.sql",
                             "0016_push_log.sql"]
    conn.execute("BEGIN")
    conn.execute("DELETE FROM blocks WHERE id = 3")
    new = insert_block(conn, 1, _block(50, T + 9, "y"))
    conn.execute("COMMIT")
    assert new == 4
    assert conn.execute("SELECT lineage FROM seal_state").fetchone()[0] != 0
    conn.close()


def test_kept_summaries_stay_under_the_bound_and_answers_stay_whole(tmp_path, monkeypatch):
    from storage.blocks import catalog

    monkeypatch.setattr(catalog, "MAX_CACHED", 8)
    monkeypatch.setattr(catalog, "_kept", {})   # what other tests' databases left
    conn = connect(str(tmp_path / "logstore.db"))
    migrate(conn)
    conn.execute("BEGIN")
    for sid in range(1, 13):
        conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                     "VALUES (?, 't', ?, ?, ?, ?)", (sid, f'{{s="{sid}"}}', sid, T, T + 10**9))
        insert_block(conn, sid, _block(sid * 10, T + sid, f"s{sid}"))
    conn.execute("COMMIT")

    def read(sids):
        return sorted(s.stream_id for s, _ in summaries(conn, sids, T, T + 10**9))

    def kept():
        return sum(map(len, catalog._kept.values()))

    def kept_streams():
        return sorted(s.stream_id for s, _ in catalog._kept_for(conn).values())

    assert read([1, 2, 3]) == [1, 2, 3] and kept() == 3
    assert read([4, 5, 6, 7]) == [4, 5, 6, 7] and kept() == 7
    # past the bound: the summary kept longest makes room
    assert read([8, 9]) == [8, 9] and kept_streams() == [2, 3, 4, 5, 6, 7, 8, 9]
    # a read of more than fit beside its own blocks answers whole and keeps none
    assert read(list(range(1, 13))) == list(range(1, 13))
    assert kept_streams() == [2, 3, 4, 5, 6, 7, 8, 9]
    # room is made from blocks the read does not need (7, not 2-6): asked again (a
    # dashboard's refresh), it reads no summary from SQLite
    assert read([1, 2, 3, 4, 5, 6]) == [1, 2, 3, 4, 5, 6]
    assert kept_streams() == [1, 2, 3, 4, 5, 6, 8, 9]
    seen = _statements(conn)
    assert read([1, 2, 3, 4, 5, 6]) == [1, 2, 3, 4, 5, 6]
    assert seen and not [s for s in seen if "md_names" in s]
    conn.close()


def test_a_database_from_before_0009_is_read_without_keeping_anything(tmp_path, monkeypatch):
    from storage import db
    from storage.blocks import catalog

    every = db.migration_files()
    monkeypatch.setattr(db, "migration_files", lambda: [m for m in every if m[0] < 9])
    monkeypatch.setattr(catalog, "_kept", {})
    conn = connect(str(tmp_path / "logstore.db"))
    migrate(conn)
    conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                 "VALUES (1, 't', '{s=\"1\"}', 1, 0, 1)")
    _insert_as_before_0009(conn, _block(10, T, "old"))
    found = summaries(conn, [1], T, T + 10**9)
    assert [(s.stream_id, s.rows) for s, _ in found] == [(1, 3)]
    assert catalog._kept == {}
    conn.close()
