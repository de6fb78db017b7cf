"""Query worker processes: log and metric queries evaluated on the machine's other cores.

The server is one process, and Python runs one thread of it at a time: a heavy query on a
reader thread takes the interpreter from the push path, and a one-line push waited for it
(p99 0.5 s while four heavy quantile queries ran). `querier.worker_processes` processes
(services/read/query_worker.py) evaluate the queries instead, over read-only connections to
the same SQLite file; the server only sends the parsed query and receives the values. A
range metric query with enough steps is split into contiguous parts of its steps, one per
worker, evaluated at once and joined (a step's value depends on its own range only), so
one heavy query uses every worker.

A worker is started when a query finds every running one busy, up to the pool's size, and
kept; each runs its jobs on threads of its own, so a small query shares a worker's time
with a heavy one instead of queueing behind it (the query gate still bounds how many run).
One that dies (a crash, the OOM killer) fails the queries it ran with a 500 and is
replaced. When the caller goes away the worker is told, and the evaluation ends at its
next check, as on a reader thread. While other pushes are in the server, a large push body
is decoded and validated in a ready worker with no job running; with none, the server does
it itself (and starts a worker for later if fewer than the pool's size run).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import itertools
import logging
import os
import pickle
import select
import signal
import threading
from typing import Any, Callable

from logql.engine.results import QueryStats
from services.runtime.metrics import ScrapeCollector, counter, gauge
from services.read.query_worker import (LogJob, PatternRequest, PrepareJob, READY_ID,
                                        RecordsJob, Request, StepsJob, read_frame,
                                        unpack_error, write_frame)
from services.read.worker_zygote import Zygote

log = logging.getLogger("logstore.query_pool")

# a range query is split only when each part keeps at least this many steps
MIN_STEPS_PER_PART = 16
# Pipe buffers asked for (Linux's default is 64 KiB, its unprivileged maximum 1 MiB): a push
# body or a result that fits is written without waiting for the other side to read it. A
# larger request is written from a thread: the event loop never blocks on the pipe.
PIPE_BYTES = 1 << 20
# the longest a push waits for a worker that prepares another push (_free_for_push): such a
# job takes milliseconds, so only a worker that stopped answering makes a push wait this
# long before the server prepares it itself
PUSH_WAIT_S = 1.0


class WorkerGone(RuntimeError):
    """The worker process ended without answering (a crash, a kill): a 500."""


def portable(expr: Any) -> bool:
    """Whether a parsed query can be sent to a worker: pickling recurses, and a query the
    parser took just short of the interpreter's guard is refused there (it is evaluated
    on a reader thread of the server instead, as before the pool)."""
    try:
        pickle.dumps(expr, protocol=pickle.HIGHEST_PROTOCOL)
        return True
    except RecursionError:
        return False


class WorkerProcess:
    """One worker and the thread that reads its answers; jobs are told apart by id."""

    def __init__(self) -> None:
        # the pipes exist at once, so requests can be written before the worker runs: the
        # fork waits for the zygote (its first start imports for a second), on the thread
        requests_fd, self_requests = os.pipe()
        self_answers, answers_fd = os.pipe()
        self.pipe_bytes = 64 << 10
        for fd in (self_requests, self_answers):
            with contextlib.suppress(OSError):
                self.pipe_bytes = fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self.requests = os.fdopen(self_requests, "wb")
        self.answers = os.fdopen(self_answers, "rb")
        self.pid: int | None = None
        self.pidfd: int | None = None  # watches the worker, which is the zygote's child
        self.write_lock = threading.Lock()
        self.waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self.ids = itertools.count(READY_ID + 1)
        self.gone = False
        self.ready = False  # until the worker says so: a query waits for it, a push not
        self.pushing = 0  # of its jobs, the push bodies it prepares
        self.querying = 0  # of its jobs, the log and metric queries (not pattern jobs)
        self._fds = (requests_fd, answers_fd)

    def start(self, enough: Callable[[], bool]) -> None:
        """Fork the worker on a thread that then reads its answers; `enough()` says whether
        the pool has all its workers once this one runs (the zygote then ends)."""
        _ZYGOTE.expect()
        threading.Thread(target=self._fork_and_read, args=(*self._fds, enough),
                         daemon=True, name="logstore-query-answers").start()

    @property
    def busy(self) -> int:
        return len(self.waiting)

    def alive(self) -> bool:
        return not self.gone and not self._exited(0)

    def _exited(self, timeout_ms: int) -> bool:
        if self.pidfd is None:
            return False  # not forked yet, or forked and already watched as gone
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)  # readable once the process has ended
        return bool(poller.poll(timeout_ms))

    def _fork_and_read(self, requests_fd: int, answers_fd: int,
                       enough: Callable[[], bool]) -> None:
        try:
            self.pid = _ZYGOTE.fork(requests_fd, answers_fd, enough)
            self.pidfd = os.pidfd_open(self.pid)
        except OSError as exc:
            # its answer pipe has no writer left: the reading below ends the worker's jobs
            log.error("query worker not started: %s", exc)
        finally:
            os.close(requests_fd)  # the worker holds them now (or no one does)
            os.close(answers_fd)
        self._read_answers()

    def _read_answers(self) -> None:
        while True:
            try:
                frame = read_frame(self.answers)
            except (OSError, ValueError):
                frame = None
            if frame is None:
                break
            job_id, payload = frame
            if job_id == READY_ID:
                self.ready = True
                continue
            pending = self.waiting.pop(job_id, None)
            if pending is None:
                continue  # a job whose caller went away and was told to stop
            loop, future = pending
            try:
                answer, error = pickle.loads(payload), None
            except Exception as exc:  # noqa: BLE001 - fails its own job only
                answer, error = None, WorkerGone(f"query worker answer unreadable: {exc!r}")
            _settle_soon(loop, future, answer, error)
        self.gone = True
        for job_id in list(self.waiting):
            pending = self.waiting.pop(job_id, None)
            if pending is not None:
                loop, future = pending
                _settle_soon(loop, future, None, WorkerGone(
                    f"query worker {self.pid} exited"))

    def _send(self, job_id: int, payload: bytes) -> None:
        """A pickled request, or b"": stop that job."""
        with self.write_lock:
            write_frame(self.requests, job_id, payload)

    async def run(self, request: Request | PatternRequest | PrepareJob | RecordsJob) -> tuple:
        """The worker's answer `(ok, value or packed error, stats)`; a caller that goes
        away cancels the job in the worker."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        job_id = next(self.ids)
        self.waiting[job_id] = (loop, future)
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        querying = isinstance(request, Request)
        self.querying += querying
        try:
            try:
                if len(payload) < self.pipe_bytes // 2:
                    self._send(job_id, payload)
                else:
                    await asyncio.to_thread(self._send, job_id, payload)
            except (BrokenPipeError, OSError, ValueError):
                self.waiting.pop(job_id, None)
                self.gone = True
                raise WorkerGone(f"query worker {self.pid} exited") from None
            return await future
        except asyncio.CancelledError:
            # the job stays counted until the worker answers that it stopped
            if job_id in self.waiting:
                with contextlib.suppress(OSError, ValueError):
                    self._send(job_id, b"")
            raise
        finally:
            self.querying -= querying

    def stop(self) -> None:
        """Closing its request pipe ends the worker; one that does not end is killed."""
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            self.requests.close()
        if self.pidfd is None:
            return
        if not self._exited(2000):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            self._exited(2000)
        with contextlib.suppress(OSError):
            os.close(self.pidfd)
        self.pidfd = None


def _settle_soon(loop: asyncio.AbstractEventLoop, future: asyncio.Future, answer: Any,
                 error: BaseException | None) -> None:
    """Resolve the future on its loop's thread; a loop already closed (the app that asked
    has stopped, its cancelled job finished later) has no one waiting."""
    try:
        loop.call_soon_threadsafe(_settle, future, answer, error)
    except RuntimeError:
        pass


def _settle(future: asyncio.Future, answer: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(answer)


# the workers of this process, shared by its pools: a worker serves any database file, and
# a process that builds many apps one after another (the test suite) starts them once
_WORKERS: list[WorkerProcess] = []
# the process they are forked from (services/read/worker_zygote.py): started for the first,
# ended once the pool has all its workers, started again to replace one that ended
_ZYGOTE = Zygote()


@atexit.register
def _stop_workers() -> None:
    for worker in _WORKERS:
        worker.stop()
    _ZYGOTE.stop()


class QueryPool:
    def __init__(self, size: int, db_path: str):
        self.size = size
        self.db_path = db_path
        self.started = 0      # worker processes started (what /metrics shows)
        self.lost = 0         # of those, ended while the server ran
        self.pushes = 0       # push bodies decoded and validated in a worker
        # pushes waiting for a worker to finish the push it prepares (prepare_push)
        self.push_waiters: list[asyncio.Future] = []

    @property
    def workers(self) -> list[WorkerProcess]:
        return _WORKERS

    def _live(self) -> list[WorkerProcess]:
        """The running workers; the ones that ended are counted as lost and let go."""
        live = [w for w in _WORKERS if w.alive()]
        if len(live) < len(_WORKERS):
            for worker in _WORKERS:
                if worker not in live:
                    worker.stop()  # ended already: its pipe and pidfd closed
            self.lost += len(_WORKERS) - len(live)
            _WORKERS[:] = live
        return live

    def _start(self) -> WorkerProcess:
        worker = WorkerProcess()
        self.started += 1
        _WORKERS.append(worker)
        worker.start(lambda: sum(w.alive() for w in _WORKERS) >= self.size)
        return worker

    def _least_busy(self, skip: set[int]) -> WorkerProcess:
        """A running worker with the fewest jobs, starting one while fewer than `size`
        run: a query is never queued behind another, it shares a worker's time."""
        live = self._live()[:self.size]
        if len(live) < self.size and all(w.busy for w in live):
            return self._start()
        return min((w for w in live if id(w) not in skip), key=lambda w: w.busy,
                   default=min(live, key=lambda w: w.busy))

    async def prepare_push(self, job: PrepareJob | RecordsJob) -> Any:
        """Preparer.prepare's answer for the body, from a started worker with nothing to do;
        None when every worker is busy or still starting (one more is started while fewer
        than the pool's size run), or the one chosen went away: nothing was stored, the
        caller does the work itself. The body's own error (a PushError) is raised."""
        worker = await self._free_for_push()
        if worker is None:
            return None
        worker.pushing += 1
        try:
            value, _ = await self._answer(worker, job)
        except WorkerGone:
            return None
        finally:
            worker.pushing -= 1
            self._wake_push_waiter()
        self.pushes += 1
        return value

    def free_of_queries(self) -> bool:
        """Whether no worker runs a log or metric query: the push log's batches (which a
        worker prepares) may count on the workers. With queries in them, a batch may be
        left to the server's interpreter, and a one-line push's p99 under four heavy
        queries rose from 36-42 to 42-60 ms (bench/REPORT.md). Pattern jobs do not count:
        the miner runs beside the pushes. Every worker is looked at, not only the live
        ones: a push asks this, and `_live()` polls each worker's pidfd (its cost took
        ingest from 410k to 340k lines/s)."""
        return not any(w.querying for w in _WORKERS)

    async def prepare_records(self, locations: list, limits: dict, now_ns: int,
                              window_ns: int) -> Any:
        """The push log's records prepared in a worker (services/ingest/pending.py), or
        None when none is free: the caller prepares them itself."""
        return await self.prepare_push(RecordsJob(locations, limits, now_ns, window_ns))

    async def _free_for_push(self) -> WorkerProcess | None:
        """A started worker with nothing to do, waiting up to PUSH_WAIT_S for one when every
        worker is preparing a push (a few milliseconds from done): done here instead, the
        push would take the server's interpreter from HTTP and the writer, and 4 clients
        ingested 6-10 % less. Never behind a query, which may run for seconds: None then."""
        live = self._live()[:self.size]
        worker = next((w for w in live if w.ready and not w.busy), None)
        if worker is not None:
            return worker
        all_ready = all(w.ready for w in live)
        if len(live) < self.size and all_ready:
            self._start()  # for the pushes to come: this one is not kept waiting
        if len(live) < self.size or not all_ready or any(w.busy > w.pushing for w in live):
            return None
        waiter = asyncio.get_running_loop().create_future()
        self.push_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, PUSH_WAIT_S)
        except asyncio.TimeoutError:
            return None
        finally:
            with contextlib.suppress(ValueError):
                self.push_waiters.remove(waiter)
        return next((w for w in self._live()[:self.size] if w.ready and not w.busy), None)

    def _wake_push_waiter(self) -> None:
        while self.push_waiters:
            waiter = self.push_waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    @staticmethod
    async def _answer(worker: WorkerProcess,
                      request: Request | PatternRequest | PrepareJob | RecordsJob
                      ) -> tuple[Any, QueryStats]:
        """The job's value and stats; the job's own error raised as it was raised there."""
        ok, value, stats = await worker.run(request)
        if not ok:
            raise unpack_error(value)
        return value, stats

    async def call(self, request: Request, skip: set[int] | None = None
                   ) -> tuple[Any, QueryStats]:
        """A query job on the least busy worker (one not in `skip`, which gets it added)."""
        worker = self._least_busy(skip if skip is not None else set())
        if skip is not None:
            skip.add(id(worker))
        return await self._answer(worker, request)

    async def pattern_job(self, job: Any) -> Any:
        """A job on the pattern miners of this pool's database, always in the first running
        worker: the templates live there (one that replaces it loads them back)."""
        live = self._live()
        value, _ = await self._answer(live[0] if live else self._start(),
                                      PatternRequest(self.db_path, job))
        return value

    async def log_query(self, job: LogJob, visibility: Any, began: float
                        ) -> tuple[Any, QueryStats]:
        return await self.call(Request(self.db_path, job, visibility, began))

    async def steps(self, job: StepsJob, visibility: Any, began: float
                    ) -> tuple[Any, QueryStats]:
        """A metric query's values at job.steps, in parts over the workers when there are
        enough steps; the parts' stats added up (a stream read by two parts counts once)."""
        n = min(self.size, len(job.steps) // MIN_STEPS_PER_PART) or 1
        if n == 1:
            return await self.call(Request(self.db_path, job, visibility, began))
        size = -(-len(job.steps) // n)
        parts = [StepsJob(job.tenant, job.expr, job.steps[i:i + size], job.step_ns)
                 for i in range(0, len(job.steps), size)]
        used: set[int] = set()
        answers = await asyncio.gather(*(
            self.call(Request(self.db_path, part, visibility, began), used)
            for part in parts))
        stats = QueryStats()
        for _, part_stats in answers:
            stats.add(part_stats)
            stats.used_rollups = stats.used_rollups or part_stats.used_rollups
        stats.streams = max(s.streams for _, s in answers)
        values = [v for v, _ in answers]
        if isinstance(values[0], float):  # a number literal: one value for every step
            return values[0], stats
        return [vec for part in values for vec in part], stats

    async def stop(self) -> None:
        """The workers stay for a later pool of this process and end with it (their request
        pipes close); jobs still running were cancelled with their requests."""


__all__ = ["QueryPool", "WorkerGone", "pool_collector", "portable"]


def pool_collector(pool: QueryPool) -> ScrapeCollector:
    """The worker processes in /metrics."""
    return ScrapeCollector(
        gauge("logstore_query_workers", "Query worker processes running (started and ready).",
              lambda: sum(1 for w in pool.workers[:pool.size] if w.ready and w.alive())),
        gauge("logstore_query_worker_jobs",
              "Evaluations running in query worker processes (a cancelled one until it "
              "has stopped).", lambda: sum(w.busy for w in pool.workers)),
        counter("logstore_query_workers_started", "Query worker processes started.",
                lambda: pool.started),
        counter("logstore_query_workers_lost",
                "Query worker processes that ended while the server ran.",
                lambda: pool.lost),
        counter("logstore_query_worker_pushes",
                "Push bodies decoded and validated in a query worker process.",
                lambda: pool.pushes),
        gauge("logstore_query_worker_push_waits",
              "Pushes waiting for a query worker to finish the push it prepares.",
              lambda: len(pool.push_waiters)))
