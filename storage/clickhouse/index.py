"""Stream selection, label names and values, and series on ClickHouse: the same answers as
storage/streams.py gives on SQLite, from the `streams` and `stream_labels` tables.

A stream's row in `streams` may be there several times until a merge folds them (one per
push that widened its time range), so every read groups by id; postings may be repeated the
same way, so reads take distinct values.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from logql.model import canonical_json, parse_canonical
from storage.streams import (Matcher, TenantSet, _Negated, _scoped, _tenant_series,
                             _with_tenant)


def stream_id(tenant: str, canonical: str) -> int:
    """The id every node derives for a stream: 63 bits of a hash of tenant and labels (ids
    of different tenants differ, as a multi-tenant read needs)."""
    digest = hashlib.blake2b(tenant.encode() + b"\x00" + canonical.encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class StreamIndex:
    """The stream index of one database, read through a `Client`."""

    def __init__(self, client: Any, db: str):
        self.client, self.db = client, db

    def _q(self, sql: str, **params: Any) -> list[list[Any]]:
        return self.client.query(sql.replace("{db}", self.db), params)

    # -- matchers -> ids --------------------------------------------------------------------
    def _with_label(self, tenant: str, m: Any) -> set[int]:
        if m.op == "=":
            return {r[0] for r in self._q(
                "SELECT DISTINCT stream_id FROM {db}.stream_labels WHERE tenant = {t:String} "
                "AND name = {n:String} AND value = {v:String}", t=tenant, n=m.name, v=m.value)}
        values = [r[0] for r in self._q(
            "SELECT DISTINCT value FROM {db}.stream_labels WHERE tenant = {t:String} "
            "AND name = {n:String}", t=tenant, n=m.name)]
        accepted = [v for v in values if m.matches(v)]
        if not accepted:
            return set()
        if len(accepted) == len(values):
            return {r[0] for r in self._q(
                "SELECT DISTINCT stream_id FROM {db}.stream_labels WHERE tenant = {t:String} "
                "AND name = {n:String}", t=tenant, n=m.name)}
        return {r[0] for r in self._q(
            "SELECT DISTINCT stream_id FROM {db}.stream_labels WHERE tenant = {t:String} "
            "AND name = {n:String} AND value IN {vs:Array(String)}",
            t=tenant, n=m.name, vs=accepted)}

    def _all_ids(self, tenant: str) -> set[int]:
        return {r[0] for r in self._q(
            "SELECT DISTINCT id FROM {db}.streams WHERE tenant = {t:String}", t=tenant)}

    def matching_ids(self, tenant: str, matchers: Sequence[Matcher]) -> set[int]:
        """Ids of the tenant's streams matching every matcher (storage/streams.py's rules:
        a matcher accepting "" also takes streams without the label)."""
        result: set[int] | None = None
        everything: set[int] | None = None
        for m in sorted(matchers, key=lambda m: (m.matches(""), m.op != "=")):
            if m.matches(""):
                if everything is None:
                    everything = self._all_ids(tenant)
                ids = everything - self._with_label(tenant, _Negated(m))
            else:
                ids = self._with_label(tenant, m)
            result = ids if result is None else result & ids
            if not result:
                return set()
        return self._all_ids(tenant) if result is None else result

    # -- streams in a time range ----------------------------------------------------------
    def texts_in_range(self, tenant: str, ids: set[int] | None, start: int, end: int
                       ) -> list[list[Any]]:
        """[id, canonical labels] of the tenant's streams (all, or those of `ids`) with data
        overlapping [start, end], ids ascending."""
        where = "" if ids is None else " AND id IN {ids:Array(UInt64)}"
        if ids is not None and not ids:
            return []
        return self._q(
            "SELECT id, any(labels) FROM {db}.streams WHERE tenant = {t:String}" + where +
            " GROUP BY id HAVING min(first_ts) <= {e:Int64} AND max(last_ts) >= {s:Int64} "
            "ORDER BY id", t=tenant, ids=sorted(ids or ()), s=start, e=end)

    def select_streams(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                       start: int, end: int) -> dict[int, dict[str, str]]:
        if isinstance(tenant, TenantSet):
            chosen, rest = _scoped(tenant, matchers)
            out: dict[int, dict[str, str]] = {}
            for t in chosen:
                for sid, labels in self.select_streams(t, rest, start, end).items():
                    out[sid] = dict(sorted(_with_tenant(labels, t).items()))
            return dict(sorted(out.items()))
        ids = self.matching_ids(tenant, matchers)
        return {sid: parse_canonical(text)
                for sid, text in self.texts_in_range(tenant, ids, start, end)}

    # -- labels, values, series ----------------------------------------------------------
    def label_names(self, tenant: str | TenantSet, start: int, end: int,
                    matchers: Sequence[Matcher] | None = None) -> list[str]:
        names: set[str] = set()
        for labels in self.select_streams(tenant, matchers or (), start, end).values():
            names.update(labels)
        return sorted(names)

    def label_values(self, tenant: str | TenantSet, name: str, start: int, end: int,
                     matchers: Sequence[Matcher] | None = None) -> list[str]:
        return sorted({labels[name] for labels in
                       self.select_streams(tenant, matchers or (), start, end).values()
                       if name in labels})

    def series_json(self, tenant: str | TenantSet, groups: Sequence[Sequence[Matcher]],
                    start: int, end: int) -> list[str]:
        """As storage.streams.series_json: the union of the groups, sorted by labels."""
        if isinstance(tenant, TenantSet):
            rows = []
            for t in tenant:
                ids: set[int] = set()
                for group in groups:
                    chosen, rest = _scoped(TenantSet([t]), group)
                    if chosen:
                        ids |= self.matching_ids(t, rest)
                rows.extend((t, text) for _, text in self.texts_in_range(t, ids, start, end))
            return _tenant_series(rows)
        ids = set()
        for group in groups:
            ids |= self.matching_ids(tenant, group)
        texts = sorted(text for _, text in self.texts_in_range(tenant, ids, start, end))
        return list(map(canonical_json, texts))
