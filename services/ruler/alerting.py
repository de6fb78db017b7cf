"""Alerting and recording rules between evaluations, as Prometheus' rules package keeps them:
one alert instance per result sample, inactive -> pending -> firing, `for` and
`keep_firing_for`, resolved alerts kept 15 minutes, and which alerts need sending."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote_plus

from services.ruler.prom_templates import expand_alert_template, parse_alert_template
from services.ruler.rulegroups import Rule

RESOLVED_RETENTION_NS = 15 * 60 * 10**9
ZERO_TIME = "0001-01-01T00:00:00Z"


def rfc3339(ns: int) -> str:
    """Go's time.Time JSON form (RFC 3339, fraction trimmed); the zero time for 0."""
    if not ns:
        return ZERO_TIME
    dt = datetime.fromtimestamp(ns // 10**9, tz=timezone.utc)
    frac = f"{ns % 10**9:09d}".rstrip("0")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def go_float_e(v: float) -> str:
    """strconv.FormatFloat(v, 'e', -1, 64): the shortest digits, exponent form."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    for prec in range(17):
        text = f"{v:.{prec}e}"
        if float(text) == v:
            return text
    return f"{v:.17e}"


@dataclass
class Alert:
    labels: dict[str, str]
    annotations: dict[str, str]
    value: float
    state: str                  # pending | firing | inactive
    active_at: int              # ns
    fired_at: int = 0
    resolved_at: int = 0
    last_sent_at: int = 0
    keep_firing_since: int = 0
    valid_until: int = 0

    def needs_sending(self, ts: int, resend_delay: int) -> bool:
        if self.state == "pending":
            return False
        if self.state == "inactive":
            # resolved: sent once, with endsAt
            return self.resolved_at > self.last_sent_at
        return self.last_sent_at + resend_delay < ts

    def api_json(self) -> dict[str, Any]:
        return {"labels": dict(sorted(self.labels.items())),
                "annotations": dict(sorted(self.annotations.items())),
                "state": self.state, "activeAt": rfc3339(self.active_at),
                "value": go_float_e(self.value)}


def label_key(labels: dict[str, str]) -> str:
    return json.dumps(sorted(labels.items()), separators=(",", ":"))


@dataclass
class RuleState:
    """A rule of a running group: its health and, for alerting rules, its alerts."""
    rule: Rule
    key: str                                  # "<index>:<name>", stable across reloads
    health: str = "unknown"
    last_error: str = ""
    last_evaluation: int = 0                  # ns
    evaluation_time: float = 0.0              # s
    alerts: dict[str, Alert] = field(default_factory=dict)
    _templates: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.last_evaluation:
            return "unknown"
        states = {a.state for a in self.alerts.values()}
        return "firing" if "firing" in states else "pending" if "pending" in states \
            else "inactive"

    def active_alerts(self) -> list[Alert]:
        return [a for a in self.alerts.values() if a.state != "inactive"]

    def _expand(self, text: str, labels: dict[str, str], value: float,
                external_labels: dict[str, str], external_url: str) -> str:
        t = self._templates.get(text)
        if t is None:
            t = self._templates[text] = parse_alert_template(text, self.rule.alert,
                                                             external_url)
        return expand_alert_template(t, labels, value, external_labels, external_url)

    def eval_alerting(self, samples: list[tuple[dict[str, str], float]], ts: int,
                      external_labels: dict[str, str], external_url: str) -> None:
        """Prometheus' AlertingRule.Eval on the query's samples at `ts`."""
        r = self.rule
        found: dict[str, Alert] = {}
        for sample_labels, value in samples:
            labels = {k: v for k, v in sample_labels.items() if k != "__name__"}
            for name, text in r.labels.items():
                labels[name] = self._expand(text, sample_labels, value, external_labels,
                                            external_url)
            labels["alertname"] = r.alert
            annotations = {name: self._expand(text, sample_labels, value, external_labels,
                                              external_url)
                           for name, text in r.annotations.items()}
            key = label_key(labels)
            if key in found:
                raise ValueError("vector contains metrics with the same labelset after "
                                 "applying alert labels")
            found[key] = Alert(labels, annotations, value, "pending", ts)
        for key, new in found.items():
            old = self.alerts.get(key)
            if old is not None and old.state != "inactive":
                old.value, old.annotations = new.value, new.annotations
                continue
            self.alerts[key] = new
        for key, a in list(self.alerts.items()):
            if key not in found:
                keep_firing = False
                if a.state == "firing" and r.keep_firing_for_ns > 0:
                    if not a.keep_firing_since:
                        a.keep_firing_since = ts
                    keep_firing = ts - a.keep_firing_since < r.keep_firing_for_ns
                if a.state == "pending" or (a.resolved_at and
                                            ts - a.resolved_at > RESOLVED_RETENTION_NS):
                    del self.alerts[key]
                if a.state != "inactive" and not keep_firing:
                    a.state, a.resolved_at = "inactive", ts
                if not keep_firing:
                    continue
            else:
                a.keep_firing_since = 0
            if a.state == "pending" and ts - a.active_at >= r.for_ns:
                a.state, a.fired_at = "firing", ts

    def to_send(self, ts: int, resend_delay: int, interval: int) -> list[Alert]:
        """The alerts due for Alertmanager now, marked sent (Prometheus' sendAlerts)."""
        out = []
        for a in self.alerts.values():
            if a.needs_sending(ts, resend_delay):
                a.last_sent_at = ts
                a.valid_until = ts + 4 * max(resend_delay, interval)
                out.append(a)
        return out

    # -- persistence ------------------------------------------------------------------------------
    def state_rows(self) -> list[tuple]:
        return [(self.key, label_key(a.labels), a.state, a.active_at, a.fired_at,
                 a.resolved_at, a.last_sent_at, a.keep_firing_since, a.value,
                 json.dumps(a.annotations, sort_keys=True)) for a in self.alerts.values()]

    def restore(self, row: tuple) -> None:
        _, labels, state, active_at, fired_at, resolved_at, last_sent_at, keep, value, ann = row
        a = Alert(dict(json.loads(labels)), json.loads(ann), value, state, active_at,
                  fired_at, resolved_at, last_sent_at, keep)
        self.alerts[label_key(a.labels)] = a


def alertmanager_payload(alert: Alert, expr: str, external_url: str,
                         external_labels: dict[str, str]) -> dict[str, Any]:
    """One alert of Alertmanager's v2 API (POST /api/v2/alerts)."""
    labels = dict(alert.labels)
    for k, v in external_labels.items():
        labels.setdefault(k, v)
    ends = alert.resolved_at if alert.state == "inactive" else alert.valid_until
    return {"labels": labels, "annotations": alert.annotations,
            "startsAt": rfc3339(alert.fired_at or alert.active_at), "endsAt": rfc3339(ends),
            "generatorURL": generator_url(external_url, expr)}


def generator_url(external_url: str, expr: str) -> str:
    return (f"{external_url.rstrip('/')}/graph?g0.expr={quote_plus(expr)}&g0.tab=1")


def now_ns() -> int:
    return time.time_ns()
