"""Stream identity, label postings, and the series/labels/values lookups.

A stream is a tenant plus a sorted label set. Matchers turn into stream ids through the
postings table: equality is an index probe; a regex is tested once per distinct value of its
label, never per stream or per line.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping
from typing import Iterable, Sequence

from logql.model import (Matcher, canonical_json, canonical_labels, escape_value,  # noqa: F401
                         labels_json, parse_canonical)
from storage.stream_ids import StreamIds


# -- tenants -------------------------------------------------------------------------------

TENANT_LABEL = "__tenant_id__"
ORIGINAL_TENANT_LABEL = "original___tenant_id__"


class TenantSet(tuple):
    """Several tenants read as one (multi-tenant queries, http-api.md §16): sorted, distinct
    ids. Every stream read through it carries `__tenant_id__`; a stream's own label of that
    name is shown as `original___tenant_id__`. A single tenant is a plain `str` instead."""

    def __new__(cls, ids) -> "TenantSet":
        return super().__new__(cls, sorted(set(ids)))



class _Renamed:
    """A matcher on `original___tenant_id__`, asked of the data's own `__tenant_id__`."""

    def __init__(self, m: Matcher, name: str):
        self.name, self.op, self.value, self._m = name, m.op, m.value, m

    def matches(self, value: str) -> bool:
        return self._m.matches(value)


def _scoped(tenants: TenantSet, matchers: Sequence[Matcher]) -> tuple[list[str], list]:
    """(tenants to read, matchers for each tenant's data): matchers on `__tenant_id__` choose
    tenants and are not asked of the data."""
    chosen, rest = list(tenants), []
    for m in matchers:
        if m.name == TENANT_LABEL:
            chosen = [t for t in chosen if m.matches(t)]
        elif m.name == ORIGINAL_TENANT_LABEL:
            rest.append(_Renamed(m, TENANT_LABEL))
        else:
            rest.append(m)
    return chosen, rest


def _with_tenant(labels: dict[str, str], tenant: str) -> dict[str, str]:
    if TENANT_LABEL in labels:
        labels[ORIGINAL_TENANT_LABEL] = labels.pop(TENANT_LABEL)
    labels[TENANT_LABEL] = tenant
    return labels


def fingerprint(canonical: str) -> int:
    return int.from_bytes(hashlib.blake2b(canonical.encode(), digest_size=8).digest(),
                          "big", signed=True)


# -- writer side ---------------------------------------------------------------------------

def stream_ids_for(conn: sqlite3.Connection, ids: StreamIds, tenant: str,
                   streams: Sequence) -> tuple[list[int], set[int]]:
    """Stream ids for each prepared stream (`labels`, `canonical`, `first_ts`, `last_ts`),
    and which of them this call created, with their postings and time range. A push of
    hundreds of new streams costs a few statements, not several per stream.

    `ids` is the writer's map of every stream (storage/stream_ids.py): a label set it does
    not hold is new. It learns the new ids only after every statement here has run; a
    rollback after that makes it load the table again."""
    known = ids.of_tenant(conn, tenant)
    new = list({ps.canonical: ps for ps in streams if ps.canonical not in known}.values())
    created: dict[str, int] = {}
    if new:
        # the ids SQLite would pick (max + 1 onwards: the writer is alone), given so that one
        # executemany creates them all (statements of many rows, storage/inserts.py, took
        # 9.3-9.7 ms for 500 new streams and their postings against 6.2-6.7)
        top = conn.execute("SELECT coalesce(max(id), 0) FROM streams").fetchone()[0]
        created = {ps.canonical: top + 1 + k for k, ps in enumerate(new)}
        conn.executemany("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, "
                         "last_ts) VALUES (?, ?, ?, ?, ?, ?)",
                         [(created[ps.canonical], tenant, ps.canonical,
                           fingerprint(ps.canonical), ps.first_ts, ps.last_ts) for ps in new])
        conn.executemany("INSERT INTO stream_labels (tenant, name, value, stream_id) "
                         "VALUES (?, ?, ?, ?)",
                         [(tenant, name, value, created[ps.canonical])
                          for ps in new for name, value in ps.labels.items()])
        known.update(created)
    return [known[ps.canonical] for ps in streams], set(created.values())


def stream_range_statements(ranges: Sequence[tuple[int, int, int]]
                            ) -> list[tuple[str, tuple]]:
    """(first, last, stream id) each: the statements that widen the streams' time ranges to
    include them (run with storage/sqlbatch.py)."""
    # a stream named twice is merged first: `UPDATE ... FROM` updates a row once, from
    # either of the rows that name it
    widest: dict[int, tuple[int, int]] = {}
    for first, last, sid in ranges:
        had = widest.get(sid)
        widest[sid] = (first, last) if had is None else (min(had[0], first), max(had[1], last))
    if not widest:
        return []
    # one statement, not a step per stream (storage/inserts.py)
    return [("UPDATE streams SET first_ts = min(first_ts, v.value ->> 1), "
             "last_ts = max(last_ts, v.value ->> 2) FROM json_each(?) v "
             "WHERE streams.id = v.value ->> 0",
             (json.dumps([(sid, *span) for sid, span in widest.items()]),))]


# -- read side -----------------------------------------------------------------------------

def _streams_with_label(conn: sqlite3.Connection, tenant: str, m: Matcher) -> set[int]:
    """Ids of streams that carry label m.name with a value m accepts."""
    if m.op == "=":
        rows = conn.execute("SELECT stream_id FROM stream_labels "
                            "WHERE tenant = ? AND name = ? AND value = ?",
                            (tenant, m.name, m.value))
        return {r[0] for r in rows}
    values = [r[0] for r in conn.execute(
        "SELECT DISTINCT value FROM stream_labels WHERE tenant = ? AND name = ?",
        (tenant, m.name))]
    accepted = [v for v in values if m.matches(v)]
    if not accepted:
        return set()
    if len(accepted) == len(values):
        return {r[0] for r in conn.execute(
            "SELECT stream_id FROM stream_labels WHERE tenant = ? AND name = ?",
            (tenant, m.name))}
    ids: set[int] = set()
    for chunk in _chunks(accepted, 500):
        marks = ",".join("?" * len(chunk))
        ids.update(r[0] for r in conn.execute(
            f"SELECT stream_id FROM stream_labels WHERE tenant = ? AND name = ? "
            f"AND value IN ({marks})", (tenant, m.name, *chunk)))
    return ids


def _all_stream_ids(conn: sqlite3.Connection, tenant: str) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM streams WHERE tenant = ?", (tenant,))}


def select_stream_ids(conn: sqlite3.Connection, tenant: str | TenantSet,
                      matchers: Sequence[Matcher], start: int | None = None,
                      end: int | None = None) -> list[int]:
    """Stream ids matching every matcher (and with data overlapping [start, end] if given).

    A matcher that accepts the empty string also accepts streams without the label, as in
    Prometheus: `{x!="a"}` matches streams that have no x. For a TenantSet, the union over
    the tenants its `__tenant_id__` matchers choose.
    """
    if isinstance(tenant, TenantSet):
        chosen, rest = _scoped(tenant, matchers)
        return sorted(sid for t in chosen
                      for sid in select_stream_ids(conn, t, rest, start, end))
    if start is None or end is None:
        # the postings alone: /series checks the range with the labels it reads
        return sorted(_matching_ids(conn, tenant, matchers))
    return [r[0] for r in _selected(conn, tenant, matchers, start, end, "s.id")]


def select_stream_texts(conn: sqlite3.Connection, tenant: str, matchers: Sequence[Matcher],
                        start: int, end: int) -> dict[int, str]:
    """Stream id -> canonical label text of the streams select_stream_ids finds (ids
    ascending), read in the statement that checks their time range: 20,000 pods' ids and
    texts in 25 ms, where the ids and then the texts by id took 100."""
    return dict(_selected(conn, tenant, matchers, start, end, "s.id, s.labels"))


# the streams behind one `name="value"` posting, joined by primary key in the same pass
_ONE_POSTING = ("SELECT {columns} FROM stream_labels p CROSS JOIN streams s "
                "ON s.id = p.stream_id WHERE p.tenant = ? AND p.name = ? AND p.value = ?")
_BY_ID = "SELECT {columns} FROM streams s WHERE s.id IN (SELECT value FROM json_each(?))"
_IN_RANGE = " AND s.first_ts <= ? AND s.last_ts >= ?"


def _selected(conn: sqlite3.Connection, tenant: str, matchers: Sequence[Matcher],
              start: int, end: int, columns: str) -> list[tuple]:
    """`columns` of the streams (`s`) of one tenant matching every matcher and with data
    overlapping [start, end], ids ascending."""
    if len(matchers) == 1 and matchers[0].op == "=" and matchers[0].value != "":
        # the commonest selector ({namespace="prod"}, {pod="x"}) needs no set of ids; in
        # the postings' order: ORDER BY s.id, the same ids, took a sort
        m = matchers[0]
        return conn.execute(_ONE_POSTING.format(columns=columns) + _IN_RANGE +
                            " ORDER BY p.stream_id", (tenant, m.name, m.value, end, start)
                            ).fetchall()
    ids = _matching_ids(conn, tenant, matchers)
    if not ids:
        return []
    return conn.execute(_BY_ID.format(columns=columns) + _IN_RANGE + " ORDER BY s.id",
                        (json.dumps(sorted(ids)), end, start)).fetchall()


def _matching_ids(conn: sqlite3.Connection, tenant: str,
                  matchers: Sequence[Matcher]) -> set[int]:
    """Ids of the tenant's streams matching every matcher, whatever their time range."""
    result: set[int] | None = None
    # cheapest, most selective matchers first
    ordered = sorted(matchers, key=lambda m: (m.matches(""), m.op != "="))
    everything: set[int] | None = None
    for m in ordered:
        if m.matches(""):
            if everything is None:
                everything = _all_stream_ids(conn, tenant)
            ids = everything - _streams_with_label(conn, tenant, _Negated(m))
        else:
            ids = _streams_with_label(conn, tenant, m)
        result = ids if result is None else result & ids
        if not result:
            return set()
    return _all_stream_ids(conn, tenant) if result is None else result


class _Negated:
    """The complement of a matcher over present values: which values it rejects."""

    def __init__(self, m: Matcher):
        self.name, self.op, self.value, self._m = m.name, "!", m.value, m

    def matches(self, value: str) -> bool:
        return not self._m.matches(value)


def streams_meeting(conn: sqlite3.Connection, ids: Sequence[int],
                    ranges: Sequence[tuple[int, int]]) -> list[int]:
    """The streams (ids ascending) whose time range meets one of a few ranges `lo < ts <=
    hi`: only they can have an entry there (what a count's edge corrections read)."""
    if not ids or not ranges:
        return []
    meets = " OR ".join(["(first_ts <= ? AND last_ts > ?)"] * len(ranges))
    return [r[0] for r in conn.execute(
        f"SELECT id FROM streams WHERE id IN (SELECT value FROM json_each(?)) AND ({meets}) "
        "ORDER BY id", (json.dumps(list(ids)), *(x for lo, hi in ranges for x in (hi, lo))))]


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _stream_rows(conn: sqlite3.Connection, ids: Sequence[int]) -> Iterable[tuple[int, str, str]]:
    """(id, tenant, canonical labels) of each stream, by primary key, in one statement (40
    statements of 500 ids each cost more for 20,000 streams)."""
    return conn.execute("SELECT id, tenant, labels FROM streams WHERE id IN "
                        "(SELECT value FROM json_each(?))", (json.dumps(list(ids)),))


def stream_label_sets(conn: sqlite3.Connection, ids: Sequence[int],
                      tenant: str | TenantSet | None = None) -> dict[int, dict[str, str]]:
    """Stream id -> its labels, decoded from each stream's own row (a primary-key probe per
    stream: the postings are keyed by label, so reading them by stream would scan them all);
    read through a TenantSet, with `__tenant_id__` added."""
    several = isinstance(tenant, TenantSet)
    out = {sid: _with_tenant(parse_canonical(text), owner) if several else parse_canonical(text)
           for sid, owner, text in _stream_rows(conn, ids)}
    return {sid: out.get(sid, {}) for sid in ids}


# from this many streams on, a label's values come from its postings (one index range per
# name) rather than from every stream's decoded label set; at most this many postings per
# stream are read, so a name far more common than the selection falls back to the sets
POSTINGS_MIN_STREAMS = 256
POSTINGS_PER_STREAM = 4


def stream_label_values(conn: sqlite3.Connection, ids: Sequence[int],
                        tenant: str | TenantSet, names: Sequence[str]
                        ) -> dict[int, tuple[str | None, ...]]:
    """Stream id -> its values of `names` (None where it lacks one), for reads that need a
    few labels of many streams (`sum by (app)` over 20,000 pods: the postings of `app` in
    28 ms, the label sets decoded in 150-200)."""
    if isinstance(tenant, str) and len(ids) >= POSTINGS_MIN_STREAMS:
        most = POSTINGS_PER_STREAM * len(ids)
        columns = []
        for name in names:
            rows = conn.execute("SELECT stream_id, value FROM stream_labels "
                                "WHERE tenant = ? AND name = ? LIMIT ?",
                                (tenant, name, most + 1)).fetchall()
            if len(rows) > most:
                break
            columns.append(dict(rows))
        else:
            return {sid: tuple([c.get(sid) for c in columns]) for sid in ids}
    sets = stream_label_sets(conn, ids, tenant)
    return {sid: tuple([sets[sid].get(n) for n in names]) for sid in ids}


class LabelSets(Mapping[int, dict[str, str]]):
    """Stream id -> labels, as stream_label_sets gives them for one tenant, each parsed from
    its canonical text the first time it is asked for: a limited log query over 20,000
    matched streams emits the rows of a few, and parsing every label set was 16 % of it."""

    __slots__ = ("_texts", "_parsed")

    def __init__(self, texts: dict[int, str]):
        self._texts = texts  # ids ascending (select_stream_texts)
        self._parsed: dict[int, dict[str, str]] = {}

    def __getitem__(self, sid: int) -> dict[str, str]:
        labels = self._parsed.get(sid)
        if labels is None:
            labels = self._parsed[sid] = parse_canonical(self._texts[sid])
        return labels

    def __iter__(self) -> Iterator[int]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def __contains__(self, sid: object) -> bool:
        return sid in self._texts


# Each distinct name by a skip-scan of the postings (one probe per name, not a row per
# stream), kept if some stream that carries it has data in range: usually the first one.
_NAMES_IN_RANGE = """
WITH RECURSIVE n(name) AS (
    SELECT min(name) FROM stream_labels WHERE tenant = ?1
    UNION ALL
    SELECT (SELECT min(name) FROM stream_labels WHERE tenant = ?1 AND name > n.name)
    FROM n WHERE n.name IS NOT NULL
)
SELECT name FROM n WHERE name IS NOT NULL AND EXISTS (
    SELECT 1 FROM stream_labels l JOIN streams s ON s.id = l.stream_id
    WHERE l.tenant = ?1 AND l.name = n.name AND s.first_ts <= ?3 AND s.last_ts >= ?2)
"""


def label_names(conn: sqlite3.Connection, tenant: str | TenantSet, start: int, end: int,
                matchers: Sequence[Matcher] | None = None) -> list[str]:
    if matchers or isinstance(tenant, TenantSet):
        ids = select_stream_ids(conn, tenant, matchers or (), start, end)
        names: set[str] = set()
        for labels in stream_label_sets(conn, ids, tenant).values():
            names.update(labels)
        return sorted(names)
    return [r[0] for r in conn.execute(_NAMES_IN_RANGE, (tenant, start, end))]


def label_values(conn: sqlite3.Connection, tenant: str | TenantSet, name: str, start: int,
                 end: int, matchers: Sequence[Matcher] | None = None) -> list[str]:
    if matchers or isinstance(tenant, TenantSet):
        ids = select_stream_ids(conn, tenant, matchers or (), start, end)
        values = {labels[name] for labels in stream_label_sets(conn, ids, tenant).values()
                  if name in labels}
        return sorted(values)
    # one JSON array out of SQLite, not a row per value: 20,000 pods' values cost 38 ms as
    # rows, 10 as one text (decoded in C, sorted again as SQLite's aggregate order is not
    # promised)
    (found,) = conn.execute(
        "SELECT json_group_array(value) FROM (SELECT DISTINCT l.value FROM stream_labels l "
        "JOIN streams s ON s.id = l.stream_id WHERE l.tenant = ? AND l.name = ? "
        "AND s.first_ts <= ? AND s.last_ts >= ?)", (tenant, name, end, start)).fetchone()
    return sorted(json.loads(found))


def series_json(conn: sqlite3.Connection, tenant: str | TenantSet,
                groups: Sequence[Sequence[Matcher]], start: int, end: int) -> list[str]:
    """Label sets of streams matching any of the matcher groups (a union), sorted, each as
    the JSON object /series sends: with 20,000 streams, dicts built only to be encoded were
    half of the request."""
    ids: set[int] = set()
    for group in groups:
        ids.update(select_stream_ids(conn, tenant, group))
    # the time range and the labels in one statement; a stream's stored identity is its
    # canonical text, and sorting by it is sorting by labels
    rows = conn.execute(
        "SELECT tenant, labels FROM streams WHERE id IN (SELECT value FROM json_each(?)) "
        "AND first_ts <= ? AND last_ts >= ?", (json.dumps(sorted(ids)), end, start))
    if isinstance(tenant, TenantSet):
        return _tenant_series(rows)
    texts = [text for _, text in rows]
    texts.sort()
    return list(map(canonical_json, texts))


def _tenant_series(rows: Iterable[tuple[str, str]]) -> list[str]:
    """The JSON of streams read through a TenantSet, `__tenant_id__` added last (as
    `_with_tenant` adds it), sorted by the text of each set with it. When a set's first name
    starts with a lower-case letter, every name sorts after `__tenant_id__` and none is it:
    the text gains the pair in front and the JSON gains it at the end, without a dict."""
    parts: dict[str, tuple[str, str]] = {}  # tenant -> (text pair, JSON member)
    keyed = []
    for owner, text in rows:
        if "a" <= text[1:2] <= "z":
            part = parts.get(owner)
            if part is None:
                pair = {TENANT_LABEL: owner}
                part = parts[owner] = (canonical_labels(pair)[:-1] + ", ",
                                       "," + labels_json(pair)[1:])
            keyed.append((part[0] + text[1:], canonical_json(text)[:-1] + part[1]))
        else:
            labels = _with_tenant(parse_canonical(text), owner)
            keyed.append((canonical_labels(labels), labels_json(labels)))
    keyed.sort()
    return [j for _, j in keyed]
