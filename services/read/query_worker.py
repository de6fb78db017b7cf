"""A query worker process, forked by services/read/worker_zygote.py for
services/read/query_pool.py.

It evaluates LogQL over a read-only connection to the server's SQLite file, so a heavy query
runs on another core and never holds the server's GIL: pushes keep their latency while it
runs. An idle worker also decodes and validates large push bodies (PrepareJob), the part of
a push that is Python's per-line work; the server keeps the write.

It reads request frames from one pipe and writes answer frames to another, each a pickle
after its length and its job id; both come from the server that started it, and nothing
else writes to the pipe. An empty frame cancels the job whose caller went away: its
evaluation ends at its next statement or deadline check, as on a reader thread. It exits
when the request pipe closes.
"""

from __future__ import annotations

import gc
import pickle
import signal
import struct
import sys
import traceback
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

from config import LimitsConfig, OtlpConfig
from logql.engine.logs import evaluate_log_query
from logql.engine.metrics import evaluate_steps
from logql.engine.results import QueryStats
from services.ingest.decode import decode_body
from services.ingest.otlp import OtlpMapper, decode_otlp
from services.ingest.records import prepare_records
from services.ingest.prepare import Preparer
from services.patterns.mining import MinerState, PatternJob, run_job
from services.read.readers import Reading, Scope, Visibility, reader_for
from services.runtime import memory
from storage.db import connect
from storage.push_log import Location, read_payloads

_encode_json = msgspec.json.Encoder().encode
HEADER = struct.Struct("<IQ")  # payload length, job id
READY_ID = 0  # the frame a worker sends once it can take jobs (jobs are numbered from 1)
OPEN_FILES = 4  # databases a worker keeps connections to (one in a server; tests have many)
MINED_FILES = 16  # databases a worker keeps pattern templates of (tests have many at once)
OTLP_CONFIGS = 64  # OTLP mappers a worker keeps, one per distinct otlp_config
MAX_JOBS = 16   # evaluations at once (the server's query gate admits querier.max_concurrent)


@dataclass(frozen=True)
class LogJob:
    tenant: Scope
    expr: Any
    start: int
    end: int
    limit: int
    backward: bool
    interval: int
    categorize: bool
    # the result as its JSON text (bytes), for a caller that only sends it on: encoding it
    # here costs less than pickling it here and unpickling it in the server (1,000 streams of
    # `| json` labels: 0.8 ms against 1.7 + 1.7), and the server then encodes nothing
    encoded: bool = False


@dataclass(frozen=True)
class StepsJob:
    """A metric query's values at `steps`: the whole query's steps, or one part of them."""
    tenant: Scope
    expr: Any
    steps: list[int]
    step_ns: int


@dataclass(frozen=True)
class Request:
    db_path: str
    job: LogJob | StepsJob
    visibility: Visibility
    began: float  # time.monotonic() of the server when the read began (one clock per host)


@dataclass(frozen=True)
class PatternRequest:
    """A job on the worker's pattern miners of one database (services/patterns/mining.py)."""
    db_path: str
    job: PatternJob


@dataclass(frozen=True)
class PrepareJob:
    """A push body to decode and validate: its answer is Preparer.prepare's (the rows and
    the outcome), or the PushError the server answers with (services/ingest/ingester.py)."""
    media: str
    body: bytes
    limit: int  # the most the body may inflate to
    limits: LimitsConfig  # the pushing tenant's
    now_ns: int
    otlp: OtlpConfig | None = None  # an OTLP/HTTP body, mapped per the tenant's otlp_config


@dataclass
class RecordsJob:
    """Records of the push log to store, read from where it wrote them: their streams merged
    and prepared, per tenant (services/ingest/records.py `prepare_records`)."""
    locations: list[Location]
    limits: dict[str, LimitsConfig]
    now_ns: int
    window_ns: int


def run(reader: Reading, job: LogJob | StepsJob, stats: QueryStats) -> Any:
    """The job's value: a log query's JSON result, or a metric query's step values."""
    if isinstance(job, LogJob):
        result = evaluate_log_query(reader, job.tenant, job.expr, job.start, job.end,
                                    limit=job.limit, backward=job.backward,
                                    interval_ns=job.interval, categorize=job.categorize,
                                    stats=stats)
        return _encode_json(result) if job.encoded else result
    return evaluate_steps(reader, job.tenant, job.expr, job.steps, job.step_ns, stats)


def write_frame(out: BinaryIO, job_id: int, payload: bytes) -> None:
    out.write(HEADER.pack(len(payload), job_id))
    out.write(payload)
    out.flush()


def read_frame(inp: BinaryIO) -> tuple[int, bytes] | None:
    """(job id, pickle) of the next frame; None when the pipe closed. The id is outside
    the pickle, so a payload that does not unpickle still fails only its own job."""
    head = inp.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    size, job_id = HEADER.unpack(head)
    body = inp.read(size)
    return (job_id, body) if len(body) == size else None


def pack_error(exc: BaseException) -> tuple:
    """An exception as (class, args, attributes): the typed errors of the engine and the
    services keep their class and fields (their status is chosen at the HTTP edge), though
    their constructors take other arguments than `args`."""
    # where it failed, for the server's log of an unexpected error (a 500)
    exc.add_note("in a query worker process:\n" + traceback.format_exc().rstrip())
    packed = (type(exc), exc.args, dict(vars(exc)))
    try:
        pickle.loads(pickle.dumps(packed))
        return packed
    except Exception:
        return (RuntimeError, (f"{type(exc).__name__}: {exc}",), {})


def unpack_error(packed: tuple) -> BaseException:
    cls, args, attrs = packed
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(attrs)
    return exc


class Worker:
    """Jobs run on threads of their own, as reads do on the server's reader threads: a
    small query is not queued behind a heavy one; they share this process's interpreter,
    never the server's."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.out_lock = threading.Lock()
        self.conns_lock = threading.Lock()
        self.idle_conns: dict[str, list[Any]] = {}
        self.readings: dict[int, Reading] = {}
        self.miner_states: dict[str, MinerState] = {}
        self.preparer = Preparer()  # caches only: shared by the jobs' threads
        # by the otlp_config it maps by (tenants' configs rarely differ)
        self.otlp_mappers: dict[bytes, OtlpMapper] = {}
        self.queued: set[int] = set()     # jobs received and not yet answered
        self.cancelled: set[int] = set()  # of those, the ones to stop as soon as they start
        self.threads = ThreadPoolExecutor(max_workers=MAX_JOBS,
                                          thread_name_prefix="logstore-query")

    def _take_connection(self, path: str) -> Any:
        with self.conns_lock:
            free = self.idle_conns.get(path)
            if free:
                return free.pop()
            if path not in self.idle_conns and len(self.idle_conns) >= OPEN_FILES:
                # a database no longer read (a test's server that stopped): let it go
                stale = next(iter(self.idle_conns))
                for conn in self.idle_conns.pop(stale):
                    conn.close()
        return connect(path, readonly=True)

    def _give_back(self, path: str, conn: Any) -> None:
        with self.conns_lock:
            self.idle_conns.setdefault(path, []).append(conn)

    def submit(self, job_id: int, payload: bytes) -> None:
        with self.conns_lock:
            self.queued.add(job_id)
        self.threads.submit(self.answer, job_id, payload)

    def cancel(self, job_id: int) -> None:
        with self.conns_lock:
            reading = self.readings.get(job_id)
            if reading is not None:
                reading.inner.cancelled = True
            elif job_id in self.queued:
                self.cancelled.add(job_id)  # not started yet: it stops at once
            # else answered already: the server drops the answer

    def _miner_state(self, path: str) -> MinerState:
        with self.conns_lock:
            state = self.miner_states.get(path)
            if state is None:
                if len(self.miner_states) >= MINED_FILES:
                    # a database no longer mined: its templates are on disk
                    self.miner_states.pop(next(iter(self.miner_states)))
                state = self.miner_states[path] = MinerState()
            return state

    def _push_streams(self, job: PrepareJob) -> list:
        if job.otlp is None:
            return decode_body(job.media, job.body, job.limit, None)
        key = msgspec.msgpack.encode(job.otlp)
        with self.conns_lock:
            mapper = self.otlp_mappers.get(key)
            if mapper is None:
                if len(self.otlp_mappers) >= OTLP_CONFIGS:
                    self.otlp_mappers.pop(next(iter(self.otlp_mappers)))
                mapper = self.otlp_mappers[key] = OtlpMapper(job.otlp)
        return mapper.streams(decode_otlp(job.body, job.media), job.now_ns)

    def _evaluate(self, job_id: int, conn: Any, request: Request | PatternRequest,
                  stats: QueryStats) -> Any:
        if isinstance(request, PatternRequest):
            return run_job(self._miner_state(request.db_path), conn, request.job)
        reading = reader_for(conn, request.job.tenant, request.visibility, request.began)
        with self.conns_lock:
            self.readings[job_id] = reading
            reading.inner.cancelled = job_id in self.cancelled
        return run(reading, request.job, stats)

    def answer(self, job_id: int, frame: bytes) -> None:
        stats = QueryStats()
        conn = None
        request: Request | PatternRequest | PrepareJob | RecordsJob | None = None
        try:
            request = pickle.loads(frame)
            if isinstance(request, PrepareJob):
                value = self.preparer.prepare(self._push_streams(request), request.now_ns,
                                              request.limits)
            elif isinstance(request, RecordsJob):
                value = prepare_records(self.preparer, read_payloads(request.locations),
                                        request.limits, request.now_ns, request.window_ns)
            else:
                conn = self._take_connection(request.db_path)
                value = self._evaluate(job_id, conn, request, stats)
            answer = (True, value, stats)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the server
            answer = (False, pack_error(exc), stats)
        finally:
            with self.conns_lock:
                self.readings.pop(job_id, None)
                self.cancelled.discard(job_id)
                self.queued.discard(job_id)
            if conn is not None:
                if conn.in_transaction:
                    conn.rollback()
                self._give_back(request.db_path, conn)
        try:
            payload = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - a value that does not pickle fails its job
            payload = pickle.dumps((False, pack_error(exc), stats))
        with self.out_lock:
            write_frame(self.out, job_id, payload)
        del answer, payload
        if memory.grew_since_trim():
            # a query's blocks and results, freed now, stay resident unless trimmed: a
            # worker that ran `|= "qz"` over 1M lines kept 88 MB instead of 80
            memory.trim_soon()


def main(inp: BinaryIO, out: BinaryIO) -> int:
    """Answer the requests of `inp` on `out` until `inp` closes (a process forked by
    services/read/worker_zygote.py)."""
    sys.stdout = sys.stderr  # the answer pipe carries frames only
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the server, which stops us
    memory.limit_arenas()
    # the engine allocates as a push does: the server's young-generation threshold (app.py)
    gc.set_threshold(memory.GC_GEN0_THRESHOLD, 10, 10)
    worker = Worker(out)
    write_frame(out, READY_ID, b"")  # imported and listening
    while (frame := read_frame(inp)) is not None:
        job_id, payload = frame
        if not payload:
            worker.cancel(job_id)
        else:
            worker.submit(job_id, payload)
    return 0
