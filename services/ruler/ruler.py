"""The ruler: rule groups per tenant (SQLite is the source of truth), each evaluated every
`interval` (default `ruler.evaluation_interval`) at the aligned evaluation time, its rules in
order, as instant metric queries through the same Querier the query API uses.

Alerting rules keep their alerts (services/ruler/alerting.py); an evaluation persists those
it added, changed or ended, so a restart keeps `for:` timers and what was already sent;
due alerts go to the notifier (services/ruler/notifier.py). Recording rule samples go to the
remote writer (services/ruler/remote_write.py). A rule whose query fails gets health `err` and its
error; the others still run. A group whose evaluation outlasts its interval skips the ticks
it missed and counts them, as Prometheus does.

Nodes sharing the state (storage.shared.url) all keep every group, but only the holder of
the "ruler" lease (storage/shared/leases.py) evaluates them, sends alerts and remote-writes
samples. Every `refresh` seconds each node asks for the lease and re-reads the groups other
nodes created, changed or deleted; a node that does not evaluate re-reads the alerts the
holder persisted, so the one that takes over goes on with them (`for:` timers included)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from logql import parse_expr
from services.ruler.alerting import RuleState, alertmanager_payload, label_key
from services.runtime.base import cancel_task
from services.runtime.errors import PlainError
from services.runtime.metrics import ScrapeCollector, counter, gauge
from services.ruler.notifier import Notifier
from services.ruler.remote_write import RemoteWriter
from services.ruler.rulegroups import RuleGroup, decode_group, to_yaml, validate_group
from storage import rules as store
from storage.shared import Leases

log = logging.getLogger("logstore.ruler")
GroupKey = tuple[str, str, str]  # tenant, namespace, group name
LEASE = "ruler"


@dataclass
class GroupRun:
    tenant: str
    namespace: str
    group: RuleGroup
    interval: int                                    # ns
    rules: list[RuleState]
    body: str = ""                                   # as stored: another node changed it?
    last_evaluation: int = 0                         # ns
    evaluation_time: float = 0.0                     # s
    iterations: int = 0
    missed: int = 0
    # the alert_states rows as stored, by (rule_key, labels): an evaluation writes the others
    persisted: dict[store.StateKey, tuple] = field(default_factory=dict)
    task: asyncio.Task | None = None


def next_tick(ts: int, now: int, interval: int) -> tuple[int, int]:
    """The evaluation time after `ts`, and how many ticks an evaluation that ended at `now`
    overran and skips (Prometheus' missed iterations)."""
    nxt = ts + interval
    if now <= nxt:
        return nxt, 0
    skipped = (now - nxt) // interval + 1
    return nxt + skipped * interval, skipped


def _samples(result_type: str, result: Any) -> list[tuple[dict[str, str], float]]:
    if result_type == "vector":
        return [(dict(s["metric"]), float(s["value"][1])) for s in result]
    if result_type == "scalar":
        return [({}, float(result[1]))]
    raise ValueError("rule result is not a vector or scalar")


class Ruler:
    def __init__(self, db: Any, querier: Any, cfg: Any, *, leases: Leases,
                 refresh: float | None = None, clock: Callable[[], int] = time.time_ns):
        """`refresh`: seconds between looks at what other nodes wrote (None: this node is
        the only one, and evaluates)."""
        self.db = db
        self.leases = leases
        self.refresh = refresh
        # evaluations run only while this is set: the lease is held and the alerts the
        # previous holder left were read
        self.leading = refresh is None
        self._sync_task: asyncio.Task | None = None
        self.querier = querier
        self.cfg = cfg.ruler
        self.clock = clock
        urls = [u.strip() for u in self.cfg.alertmanager_url.split(",") if u.strip()]
        self.notifier = Notifier(urls, self.cfg.notification_queue_capacity,
                                 self.cfg.notification_timeout)
        self.remote = RemoteWriter(db, self.cfg.remote_write, sends=lambda: self.leading)
        self.runs: dict[GroupKey, GroupRun] = {}
        # a follower's look at each group's alert states: the states_version it read last
        self.state_versions: dict[GroupKey, int] = {}
        self.running = False
        self.evaluations = 0
        self.failures = 0
        self._loaded = False
        self._parsed: dict[str, Any] = {}

    # -- lifetime ----------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.load()
        self.running = True
        for run in self.runs.values():
            self._schedule(run)
        await self.notifier.start()
        await self.remote.start()
        if self.refresh is not None:
            self._sync_task = asyncio.get_running_loop().create_task(self._sync_loop(),
                                                                     name="rules-sync")

    async def stop(self) -> None:
        task, self._sync_task = self._sync_task, None
        await cancel_task(task)
        await self.pause()
        await self.notifier.stop()
        await self.remote.stop()

    async def pause(self) -> None:
        """Stop evaluating on the clock (groups stay; `evaluate` still runs them): tests
        that drive evaluation times themselves."""
        self.running = False
        for run in self.runs.values():
            task, run.task = run.task, None
            await cancel_task(task)

    async def load(self) -> None:
        """Every stored group, with its alerts as they were persisted."""
        if self._loaded:
            return
        self._loaded = True
        for tenant, namespace, name, body in await self.db.read(store.groups):
            await self._install(tenant, namespace, decode_group(body.encode()), body)

    async def _sync_loop(self) -> None:
        assert self.refresh is not None
        while True:
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the shared state is away: try again
                self.leading = False
                log.warning("reading the shared rule groups failed: %s: %s",
                            type(exc).__name__, exc)
            await asyncio.sleep(self.refresh)

    async def sync(self) -> None:
        """Whether this node evaluates, and the groups as every node left them."""
        held = await self.leases.holds(LEASE)
        rows = await self.db.read(store.group_versions)
        stored = {(t, ns, name): body for t, ns, name, body, _ in rows}
        versions = {(t, ns, name): version for t, ns, name, _, version in rows}
        for key in [k for k in self.runs if k not in stored]:
            await cancel_task(self.runs.pop(key).task)
        for key, body in stored.items():
            run = self.runs.get(key)
            if run is None or run.body != body:
                await self._install(key[0], key[1], decode_group(body.encode()), body)
        if held and self.leading:
            self.state_versions = {}  # its own states: read all again once it follows
        else:
            # only the groups whose states were written since the last look: a version read
            # before its states can only make the next look read them once more
            changed = [k for k in self.runs if self.state_versions.get(k) != versions.get(k)]
            if changed:
                states = await self.db.read(store.alert_states_of, changed)
                for key in changed:
                    _restore(self.runs[key], states.get(key, []))
            self.state_versions = {k: versions[k] for k in self.runs if k in versions}
        self.leading = held

    async def _install(self, tenant: str, namespace: str, group: RuleGroup,
                       body: str) -> None:
        key = (tenant, namespace, group.name)
        old = self.runs.pop(key, None)
        if old is not None:
            await cancel_task(old.task)
        states = [RuleState(rule, f"{i}:{rule.name}") for i, rule in enumerate(group.rules)]
        run = GroupRun(tenant, namespace, group,
                       group.interval_ns or self.cfg.evaluation_interval, states, body)
        _restore(run, await self.db.read(store.alert_states, tenant, namespace, group.name))
        if old is not None:  # rules unchanged in place keep their health and alerts
            for s in states:
                prev = next((p for p in old.rules if p.key == s.key and p.rule == s.rule), None)
                if prev is not None:
                    s.health, s.last_error = prev.health, prev.last_error
                    s.last_evaluation, s.evaluation_time = prev.last_evaluation, \
                        prev.evaluation_time
        self.runs[key] = run
        if self.running:
            self._schedule(run)

    def _schedule(self, run: GroupRun) -> None:
        run.task = asyncio.get_running_loop().create_task(
            self._loop(run), name=f"rules-{run.namespace}-{run.group.name}")

    async def _loop(self, run: GroupRun) -> None:
        interval = run.interval
        ts = -(-self.clock() // interval) * interval
        while True:
            await asyncio.sleep(max(0.0, (ts - self.clock()) / 1e9))
            try:
                if await self._evaluates():
                    await self.evaluate(run, ts)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a broken group must not end the loop
                log.exception("evaluating rule group %s/%s failed", run.namespace,
                              run.group.name)
            ts = self.next_evaluation(run, ts)

    async def _evaluates(self) -> bool:
        if self.leading and not await self.leases.holds(LEASE):
            # another node took over: its alerts are read (sync) before this one goes on
            self.leading = False
        return self.leading

    def next_evaluation(self, run: GroupRun, ts: int) -> int:
        """When the group runs next after an evaluation at `ts` ended now; the ticks it
        overran are counted as missed iterations, as Prometheus counts them."""
        nxt, skipped = next_tick(ts, self.clock(), run.interval)
        run.missed += skipped
        return nxt

    # -- evaluation --------------------------------------------------------------------------------
    async def evaluate(self, run: GroupRun, ts: int) -> None:
        """One evaluation of the group at `ts` (ns): every rule in order."""
        began = time.perf_counter()
        for state in run.rules:
            await self._evaluate_rule(run, state, ts)
        run.evaluation_time = time.perf_counter() - began
        run.last_evaluation = ts
        run.iterations += 1
        await self._persist(run)

    async def _persist(self, run: GroupRun) -> None:
        """The alerts the evaluation added, changed or ended, written; the others are as
        stored. When most changed (a resend changes every firing alert's last_sent_at), the
        group's rows are rewritten: that costs less than an upsert each."""
        rows = _state_rows(run)
        changed = [row for key, row in rows.items() if run.persisted.get(key) != row]
        gone = [key for key in run.persisted if key not in rows]
        group = (run.tenant, run.namespace, run.group.name)
        if 2 * len(changed) > len(rows):
            await self.db.write(lambda conn: store.replace_alert_states(
                conn, *group, list(rows.values())))
        elif changed or gone:
            await self.db.write(lambda conn: store.update_alert_states(
                conn, *group, changed, gone))
        run.persisted = rows

    async def _evaluate_rule(self, run: GroupRun, state: RuleState, ts: int) -> None:
        rule = state.rule
        began = time.perf_counter()
        self.evaluations += 1
        try:
            expr = self._parsed.get(rule.expr)
            if expr is None:
                expr = self._parsed[rule.expr] = parse_expr(rule.expr)
            limit = self.querier.limits.of(run.tenant).max_entries_limit_per_query
            out = await self.querier.query(run.tenant, expr, start=ts, end=ts, limit=limit,
                                           backward=True, instant=True)
            samples = _samples(out.result_type, out.result)
            limit = run.group.limit
            if rule.record:
                recorded = self._recorded(rule, samples, ts)
                if limit and len(recorded) > limit:
                    raise ValueError(f"exceeded limit {limit} with {len(recorded)} series")
                await self.remote.enqueue(run.tenant, recorded)
            else:
                state.eval_alerting(samples, ts, self.cfg.external_labels,
                                    self.cfg.external_url)
                active = len(state.active_alerts())
                if limit and active > limit:
                    state.alerts.clear()
                    raise ValueError(f"exceeded limit of {limit} with {active} alerts")
                due = state.to_send(ts, self.cfg.resend_delay, run.interval)
                self.notifier.send([alertmanager_payload(a, rule.expr, self.cfg.external_url,
                                                         self.cfg.external_labels)
                                    for a in due])
            state.health, state.last_error = "ok", ""
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is the rule's lastError
            self.failures += 1
            state.health, state.last_error = "err", str(exc) or type(exc).__name__
            log.warning("rule %s in group %s/%s failed: %s", rule.name, run.namespace,
                        run.group.name, state.last_error)
        state.last_evaluation = ts
        state.evaluation_time = time.perf_counter() - began

    @staticmethod
    def _recorded(rule: Any, samples: list[tuple[dict[str, str], float]],
                  ts: int) -> list[tuple[dict[str, str], int, float]]:
        out, seen = [], set()
        for labels, value in samples:
            labels = {k: v for k, v in labels.items() if k != "__name__"}
            for k, v in rule.labels.items():
                if v:
                    labels[k] = v
                else:
                    labels.pop(k, None)
            labels["__name__"] = rule.record
            key = label_key(labels)
            if key in seen:
                raise ValueError("vector contains metrics with the same labelset after "
                                 "applying rule labels")
            seen.add(key)
            out.append((labels, ts // 10**6, value))
        return out

    # -- the API -----------------------------------------------------------------------------------
    async def namespaces(self, tenant: str, namespace: str | None = None
                         ) -> dict[str, list[RuleGroup]]:
        out: dict[str, list[RuleGroup]] = {}
        for _, ns, _, body in await self.db.read(store.groups, tenant, namespace):
            out.setdefault(ns, []).append(decode_group(body.encode()))
        return out

    async def set_group(self, tenant: str, namespace: str, body: bytes) -> None:
        group = decode_group(body)
        validate_group(group)
        text = to_yaml(group.to_dict())
        await self.db.write(lambda conn: store.put_group(conn, tenant, namespace, group.name,
                                                         text))
        await self._install(tenant, namespace, group, text)

    async def delete_group(self, tenant: str, namespace: str, name: str) -> None:
        if not await self.db.write(lambda conn: store.delete_group(conn, tenant, namespace,
                                                                   name)):
            raise PlainError(404, "group does not exist", newline=True)
        run = self.runs.pop((tenant, namespace, name), None)
        if run is not None:
            await cancel_task(run.task)

    async def delete_namespace(self, tenant: str, namespace: str) -> None:
        names = await self.db.write(lambda conn: store.delete_namespace(conn, tenant,
                                                                        namespace))
        if not names:
            raise PlainError(404, "group namespace does not exist", newline=True)
        for name in names:
            run = self.runs.pop((tenant, namespace, name), None)
            if run is not None:
                await cancel_task(run.task)

    def runs_of(self, tenant: str) -> list[GroupRun]:
        return [r for (t, _, _), r in sorted(self.runs.items()) if t == tenant]


def _restore(run: GroupRun, rows: list) -> None:
    """The group's alerts as persisted (alert_states rows), in place of those it held.
    Rows of rules the group no longer has stay `persisted`: the next evaluation deletes them."""
    by_key = {s.key: s for s in run.rules}
    for s in run.rules:
        s.alerts.clear()
    for row in rows:
        state = by_key.get(row[0])
        if state is not None and state.rule.alert:
            state.restore(row)
    run.persisted = {(row[0], row[1]): tuple(row) for row in rows}


def _state_rows(run: GroupRun) -> dict[store.StateKey, tuple]:
    return {(row[0], row[1]): row for s in run.rules for row in s.state_rows()}


def collector(r: Ruler) -> ScrapeCollector:
    group = ["tenant", "rule_group"]

    def per_group(attr: str) -> Callable[[], list]:
        return lambda: [([run.tenant, f"{run.namespace};{run.group.name}"], getattr(run, attr))
                        for run in r.runs.values()]

    def per_alertmanager(attr: str) -> Callable[[], list]:
        return lambda: [([url], getattr(r.notifier, attr)[url]) for url in r.notifier.urls]

    def per_client(attr: str) -> Callable[[], list]:
        return lambda: [([client], v) for client, v in getattr(r.remote, attr).items()]

    def buffered() -> list | None:
        if not r.remote.enabled:
            return None
        counts = r.db.read_sync(store.buffered)
        return [([client], counts.get(client, 0)) for client in r.remote.clients]

    return ScrapeCollector(
        counter("logstore_ruler_group_iterations", "Rule group evaluations.",
                per_group("iterations"), group),
        counter("logstore_ruler_group_iterations_missed",
                "Evaluations skipped because the previous one outlasted the group's interval.",
                per_group("missed"), group),
        gauge("logstore_ruler_group_last_duration_seconds",
              "How long the group's last evaluation took.", per_group("evaluation_time"), group),
        counter("logstore_ruler_evaluations", "Rule evaluations.", lambda: r.evaluations),
        counter("logstore_ruler_evaluation_failures", "Rule evaluations that failed.",
                lambda: r.failures),
        counter("logstore_ruler_notifications_sent", "Alerts sent to Alertmanager.",
                per_alertmanager("sent"), ["alertmanager"]),
        counter("logstore_ruler_notifications_errors",
                "Alerts Alertmanager did not take after retries.",
                per_alertmanager("errors"), ["alertmanager"]),
        counter("logstore_ruler_notifications_dropped",
                "Alerts dropped because the queue was full.", lambda: r.notifier.dropped),
        gauge("logstore_ruler_notification_queue_length", "Alerts waiting to be sent.",
              lambda: len(r.notifier.queue)),
        gauge("logstore_ruler_notification_queue_capacity", "Capacity of the alert queue.",
              lambda: r.notifier.capacity),
        counter("logstore_ruler_remote_write_samples_sent", "Samples a receiver took.",
                per_client("sent"), ["client"]),
        counter("logstore_ruler_remote_write_samples_failed",
                "Samples a receiver refused (4xx), dropped.", per_client("failed"), ["client"]),
        counter("logstore_ruler_remote_write_samples_dropped",
                "Buffered samples dropped to stay within max_buffered_samples.",
                per_client("dropped"), ["client"]),
        counter("logstore_ruler_remote_write_retries",
                "Sends retried after a 5xx, 429 or connection failure.",
                per_client("retries"), ["client"]),
        gauge("logstore_ruler_remote_write_buffered_samples",
              "Samples waiting in SQLite for a receiver.", buffered, ["client"]))
