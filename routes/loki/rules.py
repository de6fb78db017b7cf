"""The ruler API (spec/http-api.md section 13): rule groups as YAML under
`/logstore/api/v1/rules` and `/api/compat/rules`, the Prometheus-shaped rules and alerts under
`/compat/api/v1`. Thin handlers over services/ruler/ruler.py."""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import unquote

from litestar import Request, Response, get, route
from litestar.exceptions import NotFoundException

from routes.deps import Ctx
from routes.respond import json_response
from services.ruler.alerting import rfc3339
from services.runtime.errors import JSONError, PlainError
from services.ruler.rulegroups import RuleGroup, to_yaml

PREFIXES = ("/logstore/api/v1/rules", "/api/compat/rules")
YAML = "application/yaml"


def _accepted() -> Response:
    return json_response({"status": "success", "data": None, "errorType": "", "error": ""},
                         202)


def _tenant(request: Request, ctx: Any) -> str:
    if not ctx.config.ruler.enable_api:
        raise NotFoundException()
    try:
        tenant = ctx.tenant(request)
    except PlainError:
        raise JSONError(500, "server", "no org id") from None
    return tenant


def _segments(request: Request) -> list[str]:
    """namespace[/group] from the raw path, so that `%2F` inside a name stays in it."""
    raw = request.scope.get("raw_path", b"").decode("latin-1")
    tail = raw.split("/rules/", 1)[1] if "/rules/" in raw else ""
    parts = [unquote(p) for p in tail.split("/")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise NotFoundException()
    for part, what in zip(parts, ("namespace", "groupname")):
        clean = posixpath.normpath(part)
        if part.startswith("/") or clean == ".." or clean.startswith("../"):
            raise JSONError(500, "server", f"invalid {what}: path traversal not allowed")
    return parts


def _label_filter(request: Request) -> list[tuple[str, str]]:
    text = request.query_params.get("labels", "")
    if not text:
        return []
    pairs = []
    for item in text.split(","):
        kv = item.split(":")
        pairs.append((kv[0], kv[1] if len(kv) > 1 else ""))
    return pairs


def _yaml(namespaces: dict[str, list[RuleGroup]], wanted: list[tuple[str, str]]) -> Response:
    out: dict[str, list[dict]] = {}
    for ns in sorted(namespaces):
        for group in namespaces[ns]:
            shown = group.to_dict()
            if wanted:
                shown["rules"] = [r for r, rule in zip(shown["rules"], group.rules)
                                  if any(rule.labels.get(k) == v for k, v in wanted)]
                if not shown["rules"]:
                    continue
            out.setdefault(ns, []).append(shown)
    return Response(to_yaml(out), status_code=200, media_type=YAML)


@get(list(PREFIXES))
async def list_rules(request: Request, ctx: Ctx) -> Response:
    tenant = _tenant(request, ctx)
    found = await ctx.ruler.namespaces(tenant)
    if not found:
        raise PlainError(404, "no rule groups found", newline=True)
    return _yaml(found, _label_filter(request))


@route([p + "/{rest:path}" for p in PREFIXES], http_method=["GET", "POST", "DELETE"],
       status_code=200)
async def rules_path(request: Request, ctx: Ctx) -> Response:
    tenant = _tenant(request, ctx)
    ruler = ctx.ruler
    parts = _segments(request)
    namespace = parts[0]
    if request.method == "POST":
        if len(parts) != 1:
            raise NotFoundException()
        await ruler.set_group(tenant, namespace, await request.body())
        return _accepted()
    if request.method == "DELETE":
        if len(parts) == 1:
            await ruler.delete_namespace(tenant, namespace)
        else:
            await ruler.delete_group(tenant, namespace, parts[1])
        return _accepted()
    found = await ruler.namespaces(tenant, namespace)
    if len(parts) == 1:
        if not found:
            raise PlainError(404, "no rule groups found", newline=True)
        return _yaml(found, _label_filter(request))
    group = next((g for g in found.get(namespace, []) if g.name == parts[1]), None)
    if group is None:
        raise PlainError(404, "group does not exist", newline=True)
    return Response(to_yaml(group.to_dict()), status_code=200, media_type=YAML)


# -- Prometheus-shaped views ---------------------------------------------------------------------

def _prom_tenant(request: Request, ctx: Any) -> str:
    if not ctx.config.ruler.enable_api:
        raise NotFoundException()
    org = request.headers.get("x-scope-orgid", "").strip()
    if ctx.config.auth_enabled and "|" in org:
        raise JSONError(400, "bad_data", "too many org ids found")
    try:
        return ctx.tenant(request)
    except PlainError:
        raise JSONError(500, "server", "no valid org id found") from None


def _many(request: Request, name: str) -> set[str]:
    return set(request.query_params.getall(name, [])) | \
        set(request.query_params.getall(name + "[]", []))


@get("/compat/api/v1/rules")
async def prometheus_rules(request: Request, ctx: Ctx) -> Response:
    tenant = _prom_tenant(request, ctx)
    kind = request.query_params.get("type", "").lower()
    if kind not in ("", "alert", "record"):
        raise JSONError(400, "bad_data", f'not supported value "{kind}"')
    files, groups, names = (_many(request, n) for n in ("file", "rule_group", "rule_name"))
    out = []
    for run in ctx.ruler.runs_of(tenant):
        if files and run.namespace not in files or groups and run.group.name not in groups:
            continue
        rules = [_rule_json(s) for s in run.rules
                 if (not names or s.rule.name in names)
                 and (not kind or (kind == "alert") == bool(s.rule.alert))]
        if not rules and (kind or names):
            continue
        out.append({"name": run.group.name, "file": run.namespace, "rules": rules,
                    "interval": _seconds(run.interval), "limit": run.group.limit,
                    "lastEvaluation": rfc3339(run.last_evaluation),
                    "evaluationTime": run.evaluation_time})
    out.sort(key=lambda g: g["file"])
    return json_response({"status": "success", "data": {"groups": out}, "errorType": "",
                          "error": ""})


def _seconds(ns: int) -> int | float:
    """Seconds as Go's JSON prints a float64: 60, not 60.0."""
    return ns // 10**9 if ns % 10**9 == 0 else ns / 1e9


def _rule_json(s: Any) -> dict[str, Any]:
    r = s.rule
    common = {"health": s.health, "lastError": s.last_error}
    if r.alert:
        return {"state": s.state, "name": r.alert, "query": r.expr,
                "duration": _seconds(r.for_ns), "labels": dict(sorted(r.labels.items())),
                "annotations": dict(sorted(r.annotations.items())),
                "alerts": [a.api_json() for a in s.active_alerts()], **common,
                "type": "alerting", "lastEvaluation": rfc3339(s.last_evaluation),
                "evaluationTime": s.evaluation_time}
    return {"name": r.record, "query": r.expr, "labels": dict(sorted(r.labels.items())),
            **common, "type": "recording", "lastEvaluation": rfc3339(s.last_evaluation),
            "evaluationTime": s.evaluation_time}


@get("/compat/api/v1/alerts")
async def prometheus_alerts(request: Request, ctx: Ctx) -> Response:
    tenant = _prom_tenant(request, ctx)
    alerts = [a.api_json() for run in ctx.ruler.runs_of(tenant)
              for s in run.rules if s.rule.alert for a in s.active_alerts()]
    return json_response({"status": "success", "data": {"alerts": alerts}, "errorType": "",
                          "error": ""})


handlers: list[Any] = [list_rules, rules_path, prometheus_rules, prometheus_alerts]
