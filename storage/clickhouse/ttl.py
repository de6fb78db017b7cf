"""Retention on ClickHouse by the tables' own `TTL` (docs/scale-out.md, "Retention").

A lightweight `DELETE` is a mutation that ClickHouse applies to every part it touches; a
sweep of the compactor sent one for each group of streams sharing a cutoff, every
`compactor.compaction_interval`. A `TTL ... DELETE` is applied by the merges ClickHouse runs
anyway. So the entries and rollups tables carry rules that remove:
- the lines of every tenant none of whose periods is "forever", after its longest period;
- the lines stored under each `retention_stream` rule (each row records the rule its
  stream fell under when it was pushed: `rule`, services/upkeep/compactor.py
  `rule_number`), after the longest period that any stream stored under it has now: a
  stream that another rule governs since may have a longer one.
The compactor leaves a stream to the TTL when a rule covers each of its lines at the
stream's own period; any other stream's expired lines are removed by `DELETE`s as before.
Reads hide expired lines at once either way (services/read/visibility.py).

The rules only ever remove what the compactor would remove:
- a line goes when the whole minute it is in ended `period + retention_delete_delay` ago:
  never one a read still shows, and the rollups (a row per rule too) lose the same whole
  minutes, so the counts of a minute that a cutoff cuts stay those of its lines;
- a tenant with its own limits (runtime overrides) has a rule naming it; every other tenant
  falls under the rule of `limits_config`.

The plan in force is recorded in the entries table's comment, so a sweep that finds the
same plan sends nothing; a changed plan is one `ALTER TABLE ... MODIFY TTL` per table,
which ClickHouse applies to the parts already written (`materialize_ttl_after_modify`).
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from logql.model import MINUTE_NS
from storage.clickhouse import cluster

NS = 10**9
# the last second a DateTime holds is in 2106: seconds are capped below it, so a line
# stamped far in the future does not wrap around to an early expiry
LAST_SECOND = 4102444800  # 2100-01-01T00:00:00Z
COMMENT_PREFIX = "logstore retention "

# the end of a line's minute, in seconds: a line expires with its whole minute (a
# timestamp past LAST_SECOND counts as that second, so that adding a minute cannot overflow)
_CAPPED_TS = f"least(ts, {LAST_SECOND * NS})"
_ENTRY_MINUTE_END = (f"intDiv({_CAPPED_TS} - positiveModulo({_CAPPED_TS}, {MINUTE_NS}) + "
                     f"{MINUTE_NS}, {NS})")
_ROLLUP_MINUTE_END = f"intDiv(least(minute, {LAST_SECOND * NS}) + {MINUTE_NS}, {NS})"
TABLES = {"entries": _ENTRY_MINUTE_END, "rollups": _ROLLUP_MINUTE_END}


class TtlPlan:
    """Which lines a TTL removes, after how long. `default`: the period (ns, the deletion
    delay included) of every tenant without limits of its own, None when they keep some
    lines forever; `tenants`: the same for each tenant that has its own limits; `rules`:
    the same for the lines stored under each retention_stream rule, by its number."""

    def __init__(self, default: int | None, tenants: Mapping[str, int | None],
                 rules: Mapping[int, int] | None = None):
        self.default = default
        self.tenants = dict(tenants)
        # retention_stream rule number -> period (ns, the delay included) after which the
        # entries stored under that rule go (the compactor's choice: the longest any stream
        # stored under it has now)
        self.rules_by_number = dict(rules or {})

    def period_of(self, tenant: str) -> int | None:
        return self.tenants[tenant] if tenant in self.tenants else self.default

    def rules(self, minute_end: str) -> list[str]:
        """The TTL rules over a table whose minute end (seconds) is `minute_end`: one per
        period of the retention_stream rules (the `rule` each row was stored under), one
        per period of the tenants with their own limits, then the default's for the rest."""
        out = [_rule(minute_end, period, f"rule IN ({', '.join(map(str, numbers))})")
               for period, numbers in _by_period(self.rules_by_number)]
        out += [_rule(minute_end, period, f"tenant IN ({_names(names)})")
                for period, names in _by_period(self.tenants)]
        if self.default is not None:
            out.append(_rule(minute_end, self.default,
                             f"tenant NOT IN ({_names(sorted(self.tenants))})"
                             if self.tenants else ""))
        return out

    def digest(self) -> str:
        """What the tables' comment records of the plan: '' for a plan without a rule, as
        for tables never given a TTL."""
        if not self.rules("m"):
            return ""
        text = repr((self.default, sorted(self.tenants.items())))
        if self.rules_by_number:
            text += repr(sorted(self.rules_by_number.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _by_period(periods: Mapping[Any, int | None]) -> list[tuple[int, list]]:
    """(period, the sorted keys that have it), shortest period first; keys whose period
    is None (forever) left out."""
    found: dict[int, list] = {}
    for key, period in sorted(periods.items()):
        if period is not None:
            found.setdefault(period, []).append(key)
    return sorted(found.items())


def _rule(minute_end: str, period: int, where: str) -> str:
    seconds = -(-period // NS)  # whole seconds, rounded up: never earlier than the period
    rule = (f"toDateTime(least({minute_end}, {LAST_SECOND - seconds})) + "
            f"toIntervalSecond({seconds}) DELETE")
    return f"{rule} WHERE {where}" if where else rule


def _names(tenants: list[str]) -> str:
    """Tenant ids as ClickHouse string literals (DDL takes no query parameters)."""
    return ", ".join("'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'" for t in tenants)


def applied(client: Any, db: str, cluster_name: str) -> str:
    """The digest of the plan the tables carry ('' when none was applied)."""
    comment = _table_fact(client, db, "entries", cluster_name, "comment")
    return comment[len(COMMENT_PREFIX):] if comment.startswith(COMMENT_PREFIX) else ""


def apply(client: Any, db: str, cluster_name: str, plan: TtlPlan) -> bool:
    """Give the entries and rollups tables the plan's TTL (none when it has no rule) unless
    they carry it already; whether anything was sent."""
    if applied(client, db, cluster_name) == plan.digest():
        return False
    with_ttl = {table for table in TABLES if _has_ttl(client, db, table, cluster_name)}
    for sql in statements(db, cluster_name, plan, with_ttl):
        client.command(sql)
    return True


def statements(db: str, cluster_name: str, plan: TtlPlan, with_ttl: set[str]) -> list[str]:
    """The ALTERs that give the tables the plan's TTL (`with_ttl`: the tables that carry
    one now). The comment goes last: a process that dies before it sends the TTL again
    next time, which changes nothing."""
    out = []
    for table, minute_end in TABLES.items():
        rules = plan.rules(minute_end)
        target = cluster.changing(db, table, cluster_name)
        if rules:
            out.append(f"ALTER TABLE {target} MODIFY TTL " + ", ".join(rules))
        elif table in with_ttl:
            out.append(f"ALTER TABLE {target} REMOVE TTL")
    digest = plan.digest()
    comment = COMMENT_PREFIX + digest if digest else ""
    out.append(f"ALTER TABLE {cluster.changing(db, 'entries', cluster_name)} "
               f"MODIFY COMMENT '{comment}'")
    return out


def _has_ttl(client: Any, db: str, table: str, cluster_name: str) -> bool:
    return " TTL " in _table_fact(client, db, table, cluster_name, "engine_full")


def _table_fact(client: Any, db: str, table: str, cluster_name: str, column: str) -> str:
    """A `system.tables` column of the table that holds the data ('' when it is missing):
    on a cluster, the local one."""
    name = table + (cluster.LOCAL if cluster_name else "")
    rows = client.query(f"SELECT {column} FROM system.tables WHERE database = {{d:String}} "
                        "AND name = {n:String}", {"d": db, "n": name})
    return rows[0][0] if rows else ""
