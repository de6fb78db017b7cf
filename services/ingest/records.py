"""The push log's records (services/ingest/pending.py): a checked push made a record, and
records made the rows the writer stores, a stream's lines of many pushes in one pack.

No event loop and no storage here: a query worker process (services/read/query_worker.py)
prepares the records of a batch, and imports no more than it evaluates with.
"""

from __future__ import annotations

import logging
import pickle
from array import array
from typing import NamedTuple, Sequence

import msgspec

from config import LimitsConfig
from services.ingest.columns import ColumnStream
from services.ingest.prepare import Preparer, PushOutcome
from storage.entries import PreparedStream

log = logging.getLogger("logstore.pending")

# checks that were made when the push was answered, not again: its lines are acknowledged,
# and a limit changed since must not refuse them now
_UNCHECKED = {"reject_old_samples": False, "creation_grace_period": 1 << 62,
              "max_line_size": 0, "max_label_names_per_series": 1 << 30,
              "max_label_name_length": 1 << 30, "max_label_value_length": 1 << 30,
              "discover_service_name": []}


class CheckedPush(NamedTuple):
    """A push checked for the log (on the server, services/ingest/ingester.py): the record,
    each stream's (canonical labels, lines, bytes) for the tenant's stream limits, the
    outcome."""
    payload: bytes
    streams: list[tuple[str, int, int]]
    outcome: PushOutcome


def checked_push(preparer: Preparer, tenant: str, streams: list, now_ns: int,
                 lim: LimitsConfig) -> CheckedPush | None:
    """The push as a record of the log, or None when it must be prepared whole."""
    checked = preparer.check_columns(streams, now_ns, lim)
    if checked is None:
        return None
    kept, outcome = checked
    return CheckedPush(encode_record(tenant, kept),
                       [(s[0], len(s[2]) // 8, len(s[3])) for s in kept], outcome)


def encode_record(tenant: str, streams: list[tuple]) -> bytes:
    return pickle.dumps((tenant, streams), protocol=pickle.HIGHEST_PROTOCOL)


def without_streams(payload: bytes, refused: set[int]) -> bytes | None:
    """The record without the streams at those positions (a stream limit refused them)."""
    tenant, streams = pickle.loads(payload)
    kept = [s for i, s in enumerate(streams) if i not in refused]
    return encode_record(tenant, kept) if kept else None


def _merged(parts: list[tuple]) -> ColumnStream:
    """One stream's lines from several pushes as one ColumnStream, in arrival order."""
    canonical, labels, ts, text, ends, ascii_only, lo, hi, longest = parts[0]
    if len(parts) == 1:
        return ColumnStream(labels, ts, text, ends, ascii_only, lo, hi, longest)
    all_ends, offset = array("I"), 0
    for p in parts:
        part = array("I", p[4])
        all_ends.extend(part if not offset else [e + offset for e in part])
        offset += len(p[3])
    return ColumnStream(labels, b"".join(p[2] for p in parts), b"".join(p[3] for p in parts),
                        all_ends.tobytes(), all(p[5] for p in parts),
                        min(p[6] for p in parts), max(p[7] for p in parts),
                        max(p[8] for p in parts))


def _per_window(part: tuple, window_ns: int) -> list[tuple]:
    """A record's stream split by the sealer's window, as records' streams: a pack holds one
    window's lines (storage/entries.py). Most of a push lies in one window."""
    lo, hi = part[6], part[7]
    if lo - lo % window_ns == hi - hi % window_ns:
        return [part]
    canonical, labels, ts, text, ends, ascii_only = part[:6]
    split: dict[int, tuple[array, list[bytes], array]] = {}
    start = 0
    for t, end in zip(array("q", ts), array("I", ends)):
        got = split.get(t - t % window_ns)
        if got is None:
            got = split[t - t % window_ns] = (array("q"), [], array("I"))
        got[0].append(t)
        got[1].append(text[start:end])
        got[2].append((got[2][-1] if got[2] else 0) + end - start)
        start = end
    return [(canonical, labels, t.tobytes(), b"".join(lines), e.tobytes(), ascii_only,
             min(t), max(t), max(map(len, lines))) for t, lines, e in split.values()]


def prepare_records(preparer: Preparer, payloads: Sequence[bytes],
                    limits: dict[str, LimitsConfig], now_ns: int, window_ns: int
                    ) -> list[tuple[str, list[PreparedStream]]]:
    """The records' streams as Preparer.prepare makes them for the writer, a stream's lines
    of every record in one per window (the sealer's), a list per tenant and window. What a
    push's checks refused is not in a record: no check is made again."""
    by_window: dict[tuple[str, int], dict[str, list[tuple]]] = {}
    for payload in payloads:
        tenant, streams = pickle.loads(payload)
        for stream in streams:
            for part in _per_window(stream, window_ns):
                by_window.setdefault((tenant, part[6] - part[6] % window_ns), {}
                                     ).setdefault(part[0], []).append(part)
    out = []
    for (tenant, _), per_stream in by_window.items():
        lim = msgspec.structs.replace(limits[tenant], **_UNCHECKED)
        prepared, outcome = preparer.prepare([_merged(p) for p in per_stream.values()],
                                             now_ns, lim)
        if outcome.errors:  # pragma: no cover - nothing left to refuse
            log.error("stored from the push log despite: %s", outcome.error_body())
        out.append((tenant, prepared))
    return out
