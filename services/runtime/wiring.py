"""`build_services`: every service of the app, built once, in dependency order.

Each service is given what it needs when it is constructed (the tenants' limits, the
retention cutoff, the delete filters, the sealer's gate, the listeners told of a push or of
removed lines), so the order below is the dependency graph read top to bottom, and nothing
is patched in afterwards. app.py calls this once and runs `Services.lifecycle`.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Sequence

from config import Config, LimitsConfig, StorageConfig
from services.upkeep import compactor as compactor_module
from services.ingest import inflight as inflight_module
from services.ingest import ingest_limits as ingest_limits_module
from services.ingest import pending as pending_module
from services.runtime import overrides as overrides_module
from services.patterns import patterns as patterns_module
from services.ruler import ruler as ruler_module
from services.upkeep import sealer as sealer_module
from services.runtime.base import Lifecycle, ServiceRegistry
from services.upkeep.compactor import Compactor
from services.runtime.context import Services
from services.upkeep.deletes import Deletions
from services.upkeep.retention_policy import RetentionPolicy
from services.grafana.service import GrafanaService
from services.ingest.inflight import InflightBytes
from services.ingest.ingest_limits import IngestLimits
from services.ingest.ingester import Ingester, tell_written
from services.ingest.pending import PendingPushes, append_for
from logql.errors import StoreUnavailable
from services.runtime.metrics import Metrics, ScrapeCollector, gauge
from services.ingest.otlp import TenantMappers
from services.runtime.overrides import Overrides
from services.patterns.mining import LocalMiners, WorkerMiners
from services.patterns.patterns import Patterns
from services.read.querier import Querier
from services.read.query_gate import gate_collector
from services.read.query_pool import QueryPool, pool_collector
from services.ruler.ruler import Ruler
from services.upkeep.sealer import Sealer
from services.upkeep.shutdown import ShutdownControl
from services.read.tail import TailHub
from storage.db import Database
from storage.push_log import DIRNAME as PUSH_LOG_DIR, PushLog
from storage.shared import REFRESH_SECONDS
from storage.shared.leases import LocalLeases, SharedLeases

if TYPE_CHECKING:
    from storage.clickhouse.store import ClickHouseLogs

# the modules whose states /services and /ready report, as Loki names them
MODULE_NAMES = ["server", "store", "ingester", "sealer"]


def clickhouse_collector(logs: "ClickHouseLogs") -> ScrapeCollector:
    def size() -> int | None:
        try:
            return logs.size_bytes() if logs.available else None
        except StoreUnavailable:
            return None  # a scrape says nothing of a store it cannot reach
    return ScrapeCollector(gauge(
        "logstore_clickhouse_size_bytes",
        "Bytes on disk of the log data's active ClickHouse parts (storage.backend: "
        "clickhouse).", size))


def clickhouse_logs(st: StorageConfig, shared: Any = None) -> "ClickHouseLogs":
    from storage.clickhouse.store import ClickHouseLogs, Target  # only this backend needs it
    ch = st.clickhouse
    target = Target(ch.url, ch.database, ch.user, os.environ.get(ch.password_env, ""),
                    ch.cluster)
    if shared is None:
        return ClickHouseLogs(target)
    # nodes starting together migrate ClickHouse one after the other
    return ClickHouseLogs(target, lambda: shared.exclusive("logstore clickhouse migrations"))


def lease_collector(leases: SharedLeases, names: Sequence[str]) -> ScrapeCollector:
    return ScrapeCollector(gauge(
        "logstore_lease_held", "1 for each once-per-cluster work this node does now (it "
        "holds the lease in storage.shared's PostgreSQL), 0 for each it leaves to another.",
        lambda: [((name,), int(name in held)) for held in (set(leases.held()),)
                 for name in names], labels=["lease"]))


def shared_state(st: StorageConfig) -> Any:
    """Where the state several nodes share lives: PostgreSQL with storage.shared.url, else
    None (the data directory's SQLite file)."""
    if not st.shared.url:
        return None
    from storage.shared.postgres import PostgresState  # only a cluster needs psycopg
    return PostgresState(st.shared.url, os.environ.get(st.shared.password_env, ""))


def build_services(cfg: Config, limits_config: LimitsConfig, build_labels: dict[str, str],
                   loki_build_labels: dict[str, str]) -> Services:
    """`limits_config` is handed over by app.py, the one reader of the global limits; every
    service asks the Overrides built from it for a tenant's values."""
    st = cfg.storage
    db = Database(cfg.data_dir, synchronous=st.synchronous,
                  read_connections=st.read_connections)

    # rule groups, alerts, delete requests, patterns and Grafana's objects: in PostgreSQL
    # when nodes share them, and once-per-cluster work then runs where a lease says
    remote_state = shared_state(st)
    shared = remote_state or db
    leases = SharedLeases(remote_state) if remote_state else LocalLeases()
    # what other nodes write is read again this often (one node has nothing to re-read)
    refresh = REFRESH_SECONDS if remote_state else None

    limits = Overrides(limits_config, cfg.runtime_config.file, cfg.runtime_config.period,
                       shared=remote_state, node=leases.node)
    ingest_limits = IngestLimits(limits.of)
    inflight_bytes = InflightBytes(cfg.distributor.max_inflight_bytes)

    # storage.backend: clickhouse keeps the log data there: the sealer and the query
    # workers (which read the SQLite file) do not run, the pattern miner reads new lines
    # and the compactor removes them there (docs/scale-out.md)
    logs = clickhouse_logs(st, remote_state) if st.backend == "clickhouse" else None
    metrics = Metrics(db.size_bytes, lambda: db.commits, build=build_labels,
                      loki_build=loki_build_labels)
    if logs is not None:
        metrics.registry.register(clickhouse_collector(logs))
    if isinstance(leases, SharedLeases):
        metrics.registry.register(lease_collector(
            leases, (ruler_module.LEASE, compactor_module.LEASE, patterns_module.LEASE)))
    workers = cfg.querier.worker_processes if logs is None else 0
    query_pool = QueryPool(workers, db.path) if workers > 0 else None
    pattern_cfg = cfg.pattern_ingester
    # with query workers, the miner's templates and work live in one of them
    miners = WorkerMiners(query_pool.pattern_job) if query_pool else \
        LocalMiners(shared, logs.new_entries) if logs else None
    patterns = Patterns(shared, pattern_cfg.enabled, pattern_cfg.retain_for, miners,
                        **({"newest": logs.newest_seq} if logs else {}), leases=leases)
    mining = patterns.enabled
    retention = RetentionPolicy(cfg.compactor.retention_enabled, limits)
    if logs is not None:
        # each line is stored with the retention_stream rule it falls under, for the TTL
        logs.rule_of = retention.rule_of
    # the miner's counts follow lines a delete request removed from disk
    deletions = Deletions(db, cfg, limits, requests=shared, refresh=refresh,
                          removed_listeners=[patterns.forget_lines] if mining else [])
    querier = Querier(
        db, limits, max_concurrent=cfg.querier.max_concurrent,
        max_outstanding=cfg.query_scheduler.max_outstanding_requests_per_tenant,
        retention=retention, deletions=deletions, pool=query_pool, store=logs)
    # head rows are mined before the sealer moves them into blocks
    sealer = Sealer(db, window_ns=st.block_window, grace_ns=st.seal_grace_period,
                    max_rows=st.block_max_rows, enabled=st.sealing_enabled and logs is None,
                    gate=patterns.catch_up if mining else None,
                    compact_elsewhere=logs.compact if logs else None)
    tail_hub = TailHub(lambda tenant: limits.of(tenant).max_concurrent_tail_requests)
    written_listeners = [sealer.notify, *([patterns.notify] if mining else []),
                         tail_hub.on_written]
    # under load a checked push is answered once in the push log, and stored a batch at a
    # time (services/ingest/pending.py); ClickHouse stores each push itself
    pending = None if logs is not None else PendingPushes(
        db, PushLog(os.path.join(cfg.data_dir, PUSH_LOG_DIR), sync=st.synchronous.lower()
                    in ("full", "extra")),
        limits.of, append_for(db, st.block_window),
        functools.partial(tell_written, written_listeners),
        prepare_elsewhere=query_pool.prepare_records if query_pool else None,
        window_ns=st.block_window)
    ingester = Ingester(db, limits, ingest_limits=ingest_limits,
                        written_listeners=written_listeners, appender=logs,
                        workers=query_pool, pending=pending, window_ns=st.block_window)
    compactor = Compactor(db, retention, interval_ns=cfg.compactor.compaction_interval,
                          delay_ns=cfg.compactor.retention_delete_delay, leases=leases,
                          deletions=deletions,
                          removal=logs.removal if logs else None)
    ruler = Ruler(shared, querier, cfg, leases=leases, refresh=refresh)
    states = ServiceRegistry(list(MODULE_NAMES))
    shutdown = ShutdownControl(cfg.data_dir, states, sealer, ingester)
    grafana = GrafanaService(shared, cfg.grafana)

    for collector in (gate_collector(querier.gate, querier),
                      inflight_module.collector(inflight_bytes),
                      sealer_module.collector(sealer),
                      overrides_module.collector(limits),
                      ingest_limits_module.collector(ingest_limits),
                      compactor_module.collector(compactor),
                      ruler_module.collector(ruler),
                      patterns_module.collector(patterns),
                      *([pool_collector(query_pool)] if query_pool else []),
                      *([pending_module.collector(pending)] if pending else [])):
        metrics.registry.register(collector)

    lifecycle = [
        # first: what the push log holds is stored before anything reads, and what waits in
        # it is stored before a prepared shutdown seals the head
        *([Lifecycle(pending.start, pending.stop)] if pending else []),
        # a prepared shutdown seals the head while the sealer still runs
        Lifecycle(stop=shutdown.on_stop),
        # the shared state first: a node without it does not start, and ClickHouse's
        # migrations take a lock there
        *([Lifecycle(start=remote_state.start)] if remote_state else []),
        *([Lifecycle(start=logs.start)] if logs else []),
        Lifecycle(start=grafana.start),
        Lifecycle(sealer.start, sealer.stop),
        Lifecycle(limits.start, limits.stop),
        Lifecycle(deletions.start, deletions.stop),
        Lifecycle(compactor.start, compactor.stop),
        Lifecycle(ruler.start, ruler.stop),
        Lifecycle(patterns.start, patterns.stop),
        Lifecycle(stop=tail_hub.stop),
        *([Lifecycle(stop=query_pool.stop)] if query_pool else []),
        # last to stop: everything above may still read or write log data
        *([Lifecycle(stop=logs.stop)] if logs else []),
        *([Lifecycle(stop=leases.release_all),
           Lifecycle(stop=remote_state.stop)] if remote_state else []),
    ]
    return Services(
        config=cfg, db=db, states=states, metrics=metrics, limits=limits,
        ingest_limits=ingest_limits, inflight_bytes=inflight_bytes, ingester=ingester,
        querier=querier, sealer=sealer, tail_hub=tail_hub, retention=retention,
        deletions=deletions, compactor=compactor, ruler=ruler, patterns=patterns,
        shutdown=shutdown, otlp_mappers=TenantMappers(limits), grafana=grafana,
        shared=shared, leases=leases,
        lifecycle=lifecycle)
