"""Every stream's id by tenant and label set, held by the writer thread.

The `streams` table has no index on its label text: a push of new streams would write one
entry of it per stream at a place set by the labels, so all over the index (a push of 500
new pods dirtied 170-200 of its pages, a quarter of the push's WAL; with pods named by
random suffixes, as Kubernetes names them, one page each). The writer is the only creator
and remover of streams, so it keeps the whole mapping in memory instead, as Loki's ingester
keeps its streams: loaded from the table on first use, then told of every stream it creates
or removes, and loaded again after a rollback that may have undone some of that
(`storage/db.py` `Database._forget`).
"""

from __future__ import annotations

import sqlite3


class StreamIds:
    """tenant -> canonical labels -> stream id, for the writer thread only."""

    def __init__(self) -> None:
        self._by_tenant: dict[str, dict[str, int]] | None = None

    def of_tenant(self, conn: sqlite3.Connection, tenant: str) -> dict[str, int]:
        """The tenant's streams (the dict itself: the caller adds what it creates, once
        every statement that created them has run)."""
        if self._by_tenant is None:
            loaded: dict[str, dict[str, int]] = {}
            for owner, labels, sid in conn.execute("SELECT tenant, labels, id FROM streams"):
                loaded.setdefault(owner, {})[labels] = sid
            self._by_tenant = loaded
        return self._by_tenant.setdefault(tenant, {})

    def remove(self, tenant: str, canonical: str) -> None:
        if self._by_tenant is not None:
            self._by_tenant.get(tenant, {}).pop(canonical, None)

    def forget(self) -> None:
        """After a rollback: load the table again on next use."""
        self._by_tenant = None

    @property
    def loaded(self) -> bool:
        return self._by_tenant is not None
