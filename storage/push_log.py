"""The push log: pushes acknowledged before they are in the SQLite file, on disk first.

Under load, a checked push is appended here and synced, then answered; a background step
(services/ingest/pending.py) stores many pushes at once in the database and records there,
in the same transaction, the newest record it stored (`push_log.applied`). A push is thus
durable when it is answered, as Loki's is once in its WAL, and the database pays for a
stream's pages once per batch instead of once per push (bench/REPORT.md, issue 25).

A record is `<length u32><crc32 u32><seq u64>` then its payload, in segment files named by
their first sequence number. Records are written by one thread, in sequence order, many
to a write and one fdatasync. On start every record past the applied one is stored again;
a record cut short or with a wrong checksum ends its segment (it was never answered: the
sync that would have made it so did not complete).
"""

from __future__ import annotations

import logging
import os
import queue
import struct
import threading
import zlib
from typing import TYPE_CHECKING, Iterator, Sequence

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("logstore.push_log")

HEADER = struct.Struct("<IIQ")
DIRNAME = "push-log"
SUFFIX = ".log"
# a segment is closed once this long: a fully applied one is then removed whole
SEGMENT_BYTES = 64 << 20
_STOP = object()
_EMPTY = object()  # the open segment's records are stored: empty it
_ROTATE = object()  # ... and it is long: close it, begin another


# where a written record's payload is: (segment path, offset, length)
Location = tuple[str, int, int]


class PushLogError(OSError):
    """The record could not be made durable (the disk is full, or failing): not answered."""


def _segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}{SUFFIX}"


def read_segment(path: str) -> Iterator[tuple[int, bytes]]:
    """(seq, payload) of each whole record, up to the first one cut short or damaged."""
    with open(path, "rb") as f:
        data = f.read()
    pos, end = 0, len(data)
    while pos + HEADER.size <= end:
        length, crc, seq = HEADER.unpack_from(data, pos)
        start = pos + HEADER.size
        if start + length > end:
            return
        payload = data[start:start + length]
        if zlib.crc32(payload) != crc:
            return
        yield seq, payload
        pos = start + length


class PushLog:
    """Append-only, synced records in `directory`, one writer thread."""

    def __init__(self, directory: str, *, sync: bool = True):
        self.directory = directory
        self.sync = sync  # storage.synchronous off/normal: written, not synced, as SQLite
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._fd = -1
        self._segment_first = 0  # the open segment's first seq
        self._segment_size = 0
        self._segment_last = 0  # the newest seq written to the open segment
        self._closed: list[tuple[int, int, str]] = []  # (first, last, path) of older segments
        self._next_seq = 1
        self._lock = threading.Lock()  # seq numbers and the queue's order agree
        self._segments_lock = threading.Lock()  # _closed: the writer thread adds, release removes
        self.records = 0  # written since start

    def open(self, applied: int) -> list[tuple[int, bytes]]:
        """The records past `applied` (to store again), in order. Segments holding only
        applied records are removed; writing starts in a new segment."""
        os.makedirs(self.directory, exist_ok=True)
        pending: list[tuple[int, bytes]] = []
        newest = applied
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(SUFFIX):
                continue
            path = os.path.join(self.directory, name)
            last = 0
            for seq, payload in read_segment(path):
                last = seq
                if seq > applied:
                    pending.append((seq, payload))
            newest = max(newest, last)
            self._closed.append((int(name[:-len(SUFFIX)]), last, path))
        self._next_seq = newest + 1
        self._open_segment()
        self._thread = threading.Thread(target=self._write_loop, name="push-log",
                                        daemon=True)
        self._thread.start()
        return pending

    def _open_segment(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            with self._segments_lock:
                self._closed.append((self._segment_first, self._segment_last, self._path()))
        self._segment_first = self._next_seq
        self._segment_last = self._next_seq - 1
        self._segment_size = 0
        self._fd = os.open(self._path(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
                           0o644)
        if self.sync:
            fsync_path(self.directory)  # the new name survives a crash

    def _path(self) -> str:
        return os.path.join(self.directory, _segment_name(self._segment_first))

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def submit(self, payload: bytes) -> tuple[int, asyncio.Future]:
        """The record's seq, and a future done once it is on disk (synced) with where its
        payload is (`Location`), or failed with PushLogError when it cannot be. Called in
        the event loop; seqs are in call order."""
        import asyncio  # here: a query worker imports this module for read_payloads alone

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
            self._queue.put((seq, payload, future, loop))
        return seq, future

    def release(self, applied: int, everything: bool = False) -> None:
        """Every record up to `applied` is in the database: remove the segments holding
        only those. With `everything` (no record waits), the open segment is emptied too;
        else it is closed once long enough, to be removed when its records are stored."""
        if self._segment_size and self._segment_last <= applied and (
                everything or self._segment_size >= SEGMENT_BYTES):
            self._queue.put((_EMPTY if everything else _ROTATE, applied))
        with self._segments_lock:
            done = [s for s in self._closed if s[1] <= applied]
            self._closed = [s for s in self._closed if s[1] > applied]
        for _, _, path in done:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            records = []
            for item in batch:
                if item is _STOP:
                    if records:
                        self._write(records)
                    return
                if item[0] is _EMPTY or item[0] is _ROTATE:
                    if records:
                        self._write(records)
                        records = []
                    self._segment_done(item[0], item[1])
                else:
                    records.append(item)
            if records:
                self._write(records)

    def _segment_done(self, how: object, applied: int) -> None:
        """The open segment's records are all stored (none written since `applied`)."""
        if self._segment_last > applied or not self._segment_size:
            return
        try:
            if how is _EMPTY:
                os.ftruncate(self._fd, 0)
                self._segment_size = 0
            else:
                self._open_segment()
        except OSError as exc:
            log.error("push log: a stored segment could not be emptied: %s", exc)

    def _write(self, records: list) -> None:
        parts, locations = [], []
        path, offset = self._path(), self._segment_size
        for seq, payload, _, _ in records:
            parts.append(HEADER.pack(len(payload), zlib.crc32(payload), seq))
            parts.append(payload)
            locations.append((path, offset + HEADER.size, len(payload)))
            offset += HEADER.size + len(payload)
        data = b"".join(parts)
        error: BaseException | None = None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            if self.sync:
                os.fdatasync(self._fd)
        except OSError as exc:
            error = exc
            # what was written may be there, whole or cut: cut it off, or the next records
            # would follow a torn one (and be lost with it at the next start)
            try:
                os.ftruncate(self._fd, self._segment_size)
            except OSError:
                log.exception("push log: a failed write could not be cut off")
        else:
            self._segment_size += len(data)
            self._segment_last = records[-1][0]
            self.records += len(records)
        for (_, _, future, loop), location in zip(records, locations):
            loop.call_soon_threadsafe(_settle, future, error, location)


def _settle(future: asyncio.Future, error: BaseException | None, location: Location) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(location)
    else:
        future.set_exception(PushLogError(error.errno, f"the push log: {error.strerror}"))


def read_payloads(locations: Sequence[Location]) -> list[bytes]:
    """The payloads of written records, read back where the log wrote them (a query worker
    reads a batch so, instead of receiving it through the server). A record's segment is
    emptied or removed only once the record is stored, so it is there to read."""
    out, files = [], {}
    try:
        for path, offset, length in locations:
            fd = files.get(path)
            if fd is None:
                fd = files[path] = os.open(path, os.O_RDONLY)
            out.append(os.pread(fd, length, offset))
    finally:
        for fd in files.values():
            os.close(fd)
    return out


def fsync_path(path: str) -> None:
    """A file or a directory (the names in it) made durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
