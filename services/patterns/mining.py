"""Every stream's miner of one database, and where the mining runs.

`MinerState` is the state and the work: each stream's templates, mining a batch of head
entries, matching lines against the templates. It lives where the mining runs: in the
server (`LocalMiners`, on a reader thread) or, with query workers, in one of them
(`WorkerMiners`; the jobs below). Mining is pure Python over every pushed line: on the
server's interpreter it took most of the GIL the push path needed (bench/REPORT.md, "Issue
25: the pattern miner off the server"), in a worker it takes none of it. The server keeps
the high-water mark and writes what a batch found; a worker that dies loses only its copy
of the templates, which the next job loads back from the database.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from services.patterns.miner import Cluster, Miner
from storage import patterns as store

BATCH = 5000
BUCKET_S = 10

# what a batch found: lines mined, changed clusters (rows for storage.patterns.save),
# counts per (stream, cluster, bucket), the last entry id, the templates now held
Mined = tuple[int, list, dict[tuple[int, int, int], int], int, int]


def _level(metadata: str | None) -> str:
    if not metadata:
        return "unknown"
    try:
        return json.loads(metadata).get("detected_level") or "unknown"
    except (ValueError, AttributeError):
        return "unknown"


class MinerState:
    def __init__(self) -> None:
        self.miners: dict[int, Miner] = {}
        self.loaded = False
        # the stored templates' change counter this copy has learnt up to
        self.version = 0
        self.lock = threading.Lock()  # a worker runs jobs on several threads

    def load(self, conn: Any) -> int:
        """The templates as stored; the templates held."""
        with self.lock:
            return self._learn(store.templates(conn))

    def refresh(self, conn: Any) -> int:
        """Learn what the stored templates gained and lost since the last look (another
        node mines them); the templates held."""
        with self.lock:
            return self._learn(store.templates(conn, self.version if self.loaded else None))

    def _learn(self, stored: store.Templates) -> int:
        version, dropped, rows = stored
        per_stream: dict[int, list[Cluster]] = {}
        for sid, cid, template, line, spans, gaps, level, _ in rows:
            per_stream.setdefault(sid, []).append(
                Cluster(cid, template, line, [tuple(s) for s in spans], level, 0, set(gaps)))
        if dropped is None:
            self.miners = {sid: Miner(clusters) for sid, clusters in per_stream.items()}
        else:
            self._forget(dropped)
            for sid, clusters in per_stream.items():
                self.miners.setdefault(sid, Miner()).learn(clusters)
        self.version = version
        self.loaded = True
        return self.templates()

    def templates(self) -> int:
        return sum(len(m.clusters) for m in self.miners.values())

    def forget(self, dropped: Sequence[tuple[int, int]]) -> int:
        """Drop clusters (stream id, cluster id) the store dropped; the templates held."""
        with self.lock:
            self._forget(dropped)
            return self.templates()

    def _forget(self, dropped: Sequence[tuple[int, int]]) -> None:
        per_stream: dict[int, set[int]] = {}
        for sid, cid in dropped:
            per_stream.setdefault(sid, set()).add(cid)
        for sid, cids in per_stream.items():
            miner = self.miners.get(sid)
            if miner is not None:
                miner.forget(cids)

    def mine(self, conn: Any, after: int,
             source: Callable[[Any, int, int], list] = store.new_entries) -> Mined | None:
        """One batch of entries above `after` (an entry id, or a ClickHouse row's `seq`)
        from `source`; None when there are none."""
        rows = source(conn, after, BATCH)
        if not rows:
            return None
        with self.lock:
            changed: dict[tuple[int, int], Cluster] = {}
            counts: dict[tuple[int, int, int], int] = {}
            for _, sid, ts, line, metadata in rows:
                miner = self.miners.get(sid)
                if miner is None:
                    miner = self.miners[sid] = Miner()
                cluster, is_changed = miner.add(line, _level(metadata))
                if is_changed:
                    changed[(sid, cluster.id)] = cluster
                bucket = ts // 10**9 // BUCKET_S * BUCKET_S
                key = (sid, cluster.id, bucket)
                counts[key] = counts.get(key, 0) + 1
            out = [(sid, c.id, list(c.template), c.line, [list(s) for s in c.spans],
                    sorted(c.gaps), c.level, c.pattern()) for (sid, _), c in changed.items()]
            return len(rows), out, counts, rows[-1][0], self.templates()

    def match(self, sid: int, lines: Sequence[str]) -> list[str | None]:
        """The pattern each line belongs to (None: none), learning nothing from them."""
        with self.lock:
            miner = self.miners.get(sid)
            if miner is None:
                return [None] * len(lines)
            out = []
            for line in lines:
                cluster = miner.match(line)
                out.append(cluster.pattern() if cluster is not None else None)
            return out


# -- jobs a query worker runs (services/read/query_worker.py) -------------------------------

@dataclass(frozen=True)
class LoadJob:
    def run(self, state: MinerState, conn: Any) -> int:
        return state.load(conn)


@dataclass(frozen=True)
class RefreshJob:
    def run(self, state: MinerState, conn: Any) -> int:
        return state.refresh(conn)


@dataclass(frozen=True)
class MineJob:
    after: int

    def run(self, state: MinerState, conn: Any) -> Mined | None:
        return state.mine(conn, self.after)


@dataclass(frozen=True)
class ForgetJob:
    dropped: tuple[tuple[int, int], ...]

    def run(self, state: MinerState, conn: Any) -> int:
        return state.forget(self.dropped)


@dataclass(frozen=True)
class MatchJob:
    sid: int
    lines: tuple[str, ...]

    def run(self, state: MinerState, conn: Any) -> list[str | None]:
        return state.match(self.sid, self.lines)


PatternJob = LoadJob | RefreshJob | MineJob | ForgetJob | MatchJob


def run_job(state: MinerState, conn: Any, job: PatternJob) -> Any:
    """A job on a worker's state, loaded from the database first if this worker has none
    (it is new, or replaced one that died)."""
    if not state.loaded and not isinstance(job, LoadJob):
        state.load(conn)
    return job.run(state, conn)


# -- where the mining runs ----------------------------------------------------------------

class LocalMiners:
    """In the server, on its reader threads (`querier.worker_processes: 0`). `source`:
    where new lines come from, SQLite's head unless log data lives in ClickHouse."""

    def __init__(self, db: Any,
                 source: Callable[[Any, int, int], list] = store.new_entries) -> None:
        self.db = db
        self.source = source
        self.state = MinerState()
        self.templates = 0

    async def load(self) -> None:
        self.templates = await self.db.read(self.state.load)

    async def refresh(self) -> None:
        self.templates = await self.db.read(self.state.refresh)

    async def mine(self, after: int) -> Mined | None:
        done = await self.db.read(self.state.mine, after, self.source)
        if done is not None:
            self.templates = done[4]
        return done

    async def forget(self, dropped: Sequence[tuple[int, int]]) -> None:
        self.templates = self.state.forget(dropped)

    async def match(self, sid: int, lines: Sequence[str]) -> list[str | None]:
        return self.state.match(sid, lines)


class WorkerMiners:
    """In one query worker (always the same one while it lives)."""

    def __init__(self, run: Callable[[PatternJob], Any]) -> None:
        self.run = run  # QueryPool.pattern_job, bound to the server's database
        self.templates = 0

    async def load(self) -> None:
        self.templates = await self.run(LoadJob())

    async def refresh(self) -> None:
        self.templates = await self.run(RefreshJob())

    async def mine(self, after: int) -> Mined | None:
        done = await self.run(MineJob(after))
        if done is not None:
            self.templates = done[4]
        return done

    async def forget(self, dropped: Sequence[tuple[int, int]]) -> None:
        self.templates = await self.run(ForgetJob(tuple(dropped)))

    async def match(self, sid: int, lines: Sequence[str]) -> list[str | None]:
        return await self.run(MatchJob(sid, tuple(lines)))
