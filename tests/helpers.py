"""Small helpers shared by tests: push bodies and reading back what was stored."""

from __future__ import annotations

import json
import os
import sqlite3
import time

PUSH = "/logstore/api/v1/push"
JSON_HEADERS = {"Content-Type": "application/json"}


def now_ns() -> int:
    return time.time_ns()


def push_body(stream: dict, values: list) -> bytes:
    return json.dumps({"streams": [{"stream": stream, "values": values}]}).encode()


# The head is packs (blocks flagged 4, storage/blocks/codec.py FLAG_PACK: a stream's lines of
# a push, from storage.entries.PACK_MIN_ROWS on) and the rows of the `entries` table (the
# lines of smaller pushes); sealed blocks are the other blocks.
HEAD_ROWS = ("((SELECT count(*) FROM entries) + "
             "(SELECT coalesce(sum(rows), 0) FROM blocks WHERE flags & 4))")
SEALED_BLOCKS = "(SELECT count(*) FROM blocks WHERE NOT flags & 4)"


def head_rows(conn: sqlite3.Connection) -> int:
    """Lines in the head: in packs, or `entries` rows."""
    return conn.execute(f"SELECT {HEAD_ROWS}").fetchone()[0]


def sealed_blocks(conn: sqlite3.Connection) -> int:
    return conn.execute(f"SELECT {SEALED_BLOCKS}").fetchone()[0]


def stored(db_path: str) -> list[tuple[str, int, str, dict | None]]:
    """(tenant, labels, ts, line, metadata) of every stored entry, in the head or sealed,
    read from the SQLite file in (ts, id) order."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("BEGIN")  # one snapshot: a sealer may move rows between the two reads
        rows = conn.execute(
            "SELECT e.id, s.tenant, s.labels, e.ts, e.line, e.metadata FROM entries e "
            "JOIN streams s ON s.id = e.stream_id").fetchall()
        rows += sealed_rows(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()
    rows.sort(key=lambda r: (r[3], r[0]))
    return [(t, labels, ts, line, json.loads(md) if md else None)
            for _, t, labels, ts, line, md in rows]


def sealed_rows(conn: sqlite3.Connection) -> list[tuple]:
    """(id, tenant, labels, ts, line, metadata) of every row in a block (packs too)."""
    from storage.blocks import codec as blocks

    out = []
    for tenant, labels, *columns in conn.execute(
            "SELECT s.tenant, s.labels, b.rows, b.flags, b.keys, b.lengths, b.metadata, "
            "b.lines FROM blocks b JOIN streams s ON s.id = b.stream_id"):
        out += [(i, tenant, labels, ts, line, md)
                for i, ts, line, md in blocks.decode_rows(*columns)]
    return out


def seal(conn: sqlite3.Connection, *, max_rows: int = 100_000, window_ns: int = 3600 * 10**9,
         keep=lambda group: True) -> int:
    """Seal the head's groups (all, or those `keep` accepts) on a connection of the test's
    own; return the rows sealed. Looks again until nothing is left: a pack's lines past its
    window go back into the head for the next window's group."""
    from storage.blocks import sealing

    sealed = 0
    while True:
        groups = [g for g in sealing.sealable_groups(conn, 0, window_ns, 0, everything=True)
                  if keep(g)]
        done = sealing.seal_now(conn, groups, max_rows)
        if not done:
            return sealed
        sealed += done


def db_path(client) -> str:
    return client.app.state.services.db.path


def synthetic_lines(n: int, seed: int = 1) -> list[str]:
    """`n` distinct syslog-like lines, made here so that a test needing only volume (the
    crash tests) never depends on the loghub corpus; about a third mention `kernel`."""
    import random

    rnd = random.Random(seed)
    sources = ["kernel", "sshd", "crond", "postfix/smtpd", "ntpd", "dhclient"]
    words = ["connection", "reset", "timeout", "accepted", "session", "opened", "closed",
             "error", "warning", "page", "allocation", "failure", "interrupt", "device"]
    return [f"host{rnd.randint(1, 40)} {rnd.choice(sources)}[{rnd.randint(100, 99999)}]: "
            f"{' '.join(rnd.choice(words) for _ in range(rnd.randint(3, 9)))} #{i}"
            for i in range(n)]


def _stat(pid: int | str) -> tuple[bytes, bytes, int, int] | None:
    """(comm, state, ppid, pgrp) from /proc/PID/stat; None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            comm, _, rest = f.read().partition(b"(")[2].rpartition(b")")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    state, ppid, pgrp = rest.split()[:3]
    return comm, state, int(ppid), int(pgrp)


def process_ended(pid: int) -> bool:
    """Gone, or a zombie no one has reaped yet (a query worker whose zygote ended is the
    init process's child)."""
    stat = _stat(pid)
    return stat is None or stat[1] == b"Z"


def parent_pid(pid: int) -> int | None:
    stat = _stat(pid)
    return None if stat is None else stat[2]


def server_of(worker: int) -> int:
    """The server a query worker (or zygote) serves: the last word of the zygote's command
    line, which its workers keep."""
    with open(f"/proc/{worker}/cmdline", "rb") as f:
        return int(f.read().rstrip(b"\0").rpartition(b"\0")[2])


def _named(name: bytes, parent: int | None,
           group: int | None) -> list[int]:
    """The live processes whose /proc/PID/comm is `name`, of the server `parent`
    (`server_of`) or in the process group `group` (a server started in its own session)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        stat = _stat(entry)
        if stat is None or stat[0] != name or stat[1] == b"Z":
            continue
        try:
            server = server_of(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
            continue
        if (parent is None or server == parent) and (group is None or stat[3] == group):
            found.append(int(entry))
    return found


def zygote_pids(*, parent: int | None = None, group: int | None = None) -> list[int]:
    """The live worker zygotes (services/read/worker_zygote.py) of a server."""
    return _named(b"logstore-zygote", parent, group)


def query_worker_pids(*, parent: int | None = None, group: int | None = None) -> list[int]:
    """The live query worker processes (services/read/query_worker.py) of a server: the
    process that runs the pool (`parent`), or a server's process group (`group`)."""
    return _named(b"logstore-worker", parent, group)


def until(check, what: str, timeout: float = 45.0):
    """Poll `check` until it returns something true (returned) or `timeout` seconds pass (a
    failure naming `what`): waiting for a state another process reaches, with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.05)  # polling for a state, with a deadline


def run_copy_to_clickhouse(cfg: dict, cfg_file) -> "subprocess.CompletedProcess[str]":
    """`logstore copy-to-clickhouse` run as a user runs it, with `cfg` written to
    `cfg_file`; its exit code is asserted 0 and its output returned."""
    import subprocess
    import sys

    import yaml

    from tests.conftest import ROOT

    cfg_file.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "app", "copy-to-clickhouse",
                          "--config", str(cfg_file)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def without_retention_rules(insert):
    """A ClickHouse client's insert that leaves out the columns of migration 0003 (a line's
    and a stream's retention rules): how a release of an older schema wrote."""
    def insert_as_before(table, columns, rows):
        kept = [i for i, name in enumerate(columns) if name not in ("rule", "rules")]
        return insert(table, [columns[i] for i in kept], [[r[i] for i in kept] for r in rows])
    return insert_as_before
