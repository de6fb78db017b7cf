"""The pages a push writes to SQLite's WAL, by the table or index they belong to.

    .venv/bin/python bench/wal_pages.py [--pushes 300] [--per-commit 1 4]

Realistic 1,000-line pushes (bench/dataset.py: 30 streams, loghub, logfmt and JSON lines),
decoded and prepared first as a query worker would, are appended by the writer's own code
(storage/entries.py `append`) to a new database, `--per-commit` pushes to a transaction, with
the server's pragmas and its checkpoints. A commit writes every page it changed to the WAL
as a frame of a whole page; the frames of each commit after the first third of the pushes
are read back from the -wal file and counted by owner (SQLite's dbstat table). Prints the
frames per push and their owners, and the writer thread's CPU per push. Nothing is written to
bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from writer_gil import prepared_pushes  # noqa: E402

from storage.db import CHECKPOINT_PAGES, Database  # noqa: E402
from storage.entries import append  # noqa: E402
from storage.stream_ids import StreamIds  # noqa: E402

WAL_HEADER = 32
FRAME_HEADER = 24


def frame_pages(wal: str, page_size: int, first: int, last: int) -> list[int]:
    """The page number of each frame first..last-1 (0-based) of the -wal file."""
    pages = []
    with open(wal, "rb") as f:
        for frame in range(first, last):
            f.seek(WAL_HEADER + frame * (FRAME_HEADER + page_size))
            pages.append(struct.unpack(">I", f.read(4))[0])
    return pages


def run(prepared: list, per_commit: int) -> tuple[float, int, float, collections.Counter]:
    """(frames per push, page size, writer CPU ms per push, frames per push by owner); the
    CPU is the appends' and commits' alone."""
    work = tempfile.mkdtemp(prefix="logstore-wal-pages-")
    db = Database(os.path.join(work, "data"))
    db.open()
    conn = db._writer_conn
    ids = StreamIds()
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    owners: collections.Counter = collections.Counter()
    frames = counted = 0
    cpu = 0.0  # the appends and commits alone: reading the frames back costs more
    try:
        for i in range(0, len(prepared), per_commit):
            if db._wal_frames_waiting() >= CHECKPOINT_PAGES:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            before = db.wal_index()[0]
            started = time.thread_time()
            conn.execute("BEGIN IMMEDIATE")
            for streams in prepared[i:i + per_commit]:
                append(conn, ids, "bench", streams)
            conn.execute("COMMIT")
            cpu += time.thread_time() - started
            if i < len(prepared) // 3:
                continue  # the first pushes make the tables; the steady state is counted
            after = db.wal_index()[0]
            if after < before:  # a checkpoint restarted the WAL: counted from its start
                before = 0
            pages = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
            for page in frame_pages(db.path + "-wal", page_size, before, after):
                owners[pages.get(page, "(freelist or new)")] += 1
            frames += after - before
            counted += len(prepared[i:i + per_commit])
    finally:
        db.close()
        shutil.rmtree(work, ignore_errors=True)
    return frames / counted, page_size, cpu * 1000 / len(prepared), \
        collections.Counter({k: v / counted for k, v in owners.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pushes", type=int, default=300)
    ap.add_argument("--per-commit", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    prepared = prepared_pushes(args.pushes)
    for per_commit in args.per_commit:
        per_push, page_size, cpu, owners = run(prepared, per_commit)
        print(f"{per_commit} push(es) a commit: {per_push:.1f} WAL frames a push "
              f"({per_push * page_size / 1024:.0f} KiB), writer CPU "
              f"{cpu:.2f} ms a push")
        for name, n in owners.most_common():
            print(f"  {n:6.1f}  {name}")


if __name__ == "__main__":
    main()
