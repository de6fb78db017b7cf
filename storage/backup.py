"""`logstore backup DEST`: a consistent copy of the data directory, taken while it serves.

The copy is SQLite's online backup, page by page, from inside one read transaction held for
the whole copy. Without that transaction each step would read the database afresh, and a
server committing between two steps makes the backup start over (under steady pushes it may
never finish); inside it, every step reads the same snapshot, the one of the moment the
backup began, while the server goes on writing to its WAL beside it. (That WAL cannot be
emptied past the snapshot until the backup ends, so it grows for as long as the copy takes.)

The data directory holds `logstore.db` and, while a server runs, its `-wal` and `-shm`, the
lock file, the push log and perhaps the prepare-shutdown mark. The backup is `logstore.db`,
with the WAL's committed pages in it, and the push log's segments, copied first (pushes
answered under load before they were stored): a restore needs nothing else. It is written as
`logstore.db.partial`, fsynced, and renamed at the end, so an interrupted backup never leaves
a file a server would take for a database.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from dataclasses import dataclass
from typing import Callable, TextIO

from storage.db import DB_FILENAME, connect
from storage.push_log import DIRNAME as PUSH_LOG_DIR, SUFFIX as PUSH_LOG_SUFFIX, fsync_path

PARTIAL_SUFFIX = ".partial"
STEP_PAGES = 1024  # pages copied between two progress calls (4 MiB at the default page size)
PROGRESS_EVERY = 1.0  # seconds between two progress lines


class BackupError(Exception):
    pass


@dataclass(frozen=True)
class Backup:
    path: str
    pages: int
    bytes: int
    seconds: float


def backup(data_dir: str, dest: str, *, max_rate: int = 0,
           progress: Callable[[int, int], None] | None = None,
           started: Callable[[int, int], None] | None = None) -> Backup:
    """Copy `<data_dir>/logstore.db` to `<dest>/logstore.db` (dest is created; it must not
    hold a database already). `max_rate` caps the copy at that many bytes a second (0: as
    fast as it goes); `started(pages, page_size)` is called once the snapshot is taken,
    `progress(done, total)` after each step."""
    source_path = os.path.join(data_dir, DB_FILENAME)
    if not os.path.isfile(source_path):
        raise BackupError(f"there is no database to back up: {source_path} does not exist")
    target_path = os.path.join(dest, DB_FILENAME)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise BackupError(f"{dest} is not a directory")
    if any(os.path.exists(target_path + suffix) for suffix in ("", "-wal")):
        raise BackupError(f"{dest} already holds a database ({target_path}); back up into a "
                          f"new or empty directory")
    os.makedirs(dest, exist_ok=True)
    partial = target_path + PARTIAL_SUFFIX
    _remove(partial)  # left by a backup that was killed

    began = time.monotonic()
    source = connect(source_path, readonly=True)
    target = None
    try:
        # pushes answered from the push log and perhaps not yet stored: copied before the
        # snapshot is taken, so each one answered before the backup began is in one or the
        # other (a segment is removed only once a committed transaction stored its records)
        _copy_push_log(data_dir, dest)
        target = sqlite3.connect(partial, isolation_level=None)
        # no journal, no syncs: the file is only a database once renamed, after one fsync
        target.execute("PRAGMA journal_mode = OFF")
        target.execute("PRAGMA synchronous = OFF")
        source.execute("BEGIN")
        # the snapshot is taken at the first read, and every step below reads it
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()
        pages = source.execute("PRAGMA page_count").fetchone()[0]
        page_size = source.execute("PRAGMA page_size").fetchone()[0]
        if started is not None:
            started(pages, page_size)

        def step(_status: int, remaining: int, total: int) -> None:
            done = total - remaining
            if max_rate:
                ahead = done * page_size / max_rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
            if progress is not None:
                progress(done, total)

        # under a cap, steps of a tenth of a second's worth: the pauses stay short and even
        pages_per_step = (max(1, min(STEP_PAGES, max_rate // page_size // 10)) if max_rate
                          else STEP_PAGES)
        source.backup(target, pages=pages_per_step, progress=step, sleep=0)
        source.execute("COMMIT")
        target.close()
        target = None
        fsync_path(partial)
        os.rename(partial, target_path)
        fsync_path(dest)  # the rename itself
    except BaseException:
        if target is not None:
            target.close()
        _remove(partial)
        shutil.rmtree(os.path.join(dest, PUSH_LOG_DIR), ignore_errors=True)
        raise
    finally:
        source.close()
    return Backup(target_path, pages, os.path.getsize(target_path), time.monotonic() - began)


def _copy_push_log(data_dir: str, dest: str) -> None:
    """The push log's segments (storage/push_log.py) into `dest`, synced: a server started
    there stores the records its database does not have."""
    source = os.path.join(data_dir, PUSH_LOG_DIR)
    target = os.path.join(dest, PUSH_LOG_DIR)
    shutil.rmtree(target, ignore_errors=True)  # left by a backup that was killed
    try:
        names = sorted(n for n in os.listdir(source) if n.endswith(PUSH_LOG_SUFFIX))
    except FileNotFoundError:
        return
    for name in names:
        try:
            with open(os.path.join(source, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue  # its records were stored meanwhile: they are in the snapshot
        if not data:
            continue  # emptied: every record of it is stored
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, name), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    if os.path.isdir(target):
        fsync_path(target)


def _remove(path: str) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


def backup_command(data_dir: str, dest: str, max_rate: int = 0,
                   out: TextIO | None = None) -> int:
    """`logstore backup`: the copy with progress lines on `out` (stderr); the exit code."""
    out = out or sys.stderr
    last = [time.monotonic()]

    def started(pages: int, page_size: int) -> None:
        print(f"backup: copying {os.path.join(data_dir, DB_FILENAME)} ({_mib(pages * page_size)},"
              f" {pages} pages) to {dest}", file=out, flush=True)

    def progress(done: int, total: int) -> None:
        if time.monotonic() - last[0] >= PROGRESS_EVERY and done < total:
            last[0] = time.monotonic()
            print(f"backup: {100 * done // total}% ({done} of {total} pages)", file=out,
                  flush=True)

    try:
        made = backup(data_dir, dest, max_rate=max_rate, progress=progress, started=started)
    except (BackupError, OSError, sqlite3.Error) as exc:
        print(f"logstore: backup failed: {exc}", file=out, flush=True)
        return 1
    except KeyboardInterrupt:
        print(f"logstore: backup interrupted, nothing was left in {dest}", file=out, flush=True)
        return 130
    print(f"backup: done: {made.path} ({_mib(made.bytes)}) in {made.seconds:.1f} s; a server "
          f"started on {dest} serves this copy", file=out, flush=True)
    return 0


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
