"""Operational endpoints: ready, metrics, log_level, services, buildinfo, config, flush,
shutdown."""

from __future__ import annotations

import hmac
import platform
from typing import Any

import prometheus_client
from litestar import Request, Response, get, route

import config as config_module
from logql import parse_selector
from routes.errors import PLAIN, PlainError
from routes.params import read_params
from routes.respond import json_response
from routes.deps import Ctx
from services.runtime.version import logstore_version

VERSION = "3.7.0"  # the Loki API level we answer for: Grafana enables features by it


@get("/ready")
async def ready(ctx: Ctx) -> Response:
    if ctx.states.stopping:
        return Response("Application is stopping\n", status_code=503, media_type=PLAIN)
    if ctx.ingester.disk_full:
        return Response("Ingester not ready: the disk is full, pushes are refused until "
                        "there is space again\n", status_code=503, media_type=PLAIN)
    waiting = ctx.states.not_running()
    if waiting or not ctx.ingester.writer_alive:
        lines = "".join(f"{state}: {count}\n" for state, count in sorted(waiting.items()))
        if not ctx.ingester.writer_alive and not waiting:
            return Response(f"Ingester not ready: {ctx.ingester.writer_problem}\n",
                            status_code=503, media_type=PLAIN)
        return Response("Some services are not Running:\n" + lines, status_code=503,
                        media_type=PLAIN)
    # what lives outside this host is asked, so a store lost while running is seen here
    for probe in (ctx.querier.store.probe, ctx.shared.probe):
        problem = await probe()
        if problem:
            return Response(f"Ingester not ready: {problem}\n", status_code=503,
                            media_type=PLAIN)
    return Response("ready\n", status_code=200, media_type=PLAIN)


@get("/metrics")
async def metrics(ctx: Ctx) -> Response:
    body = prometheus_client.generate_latest(ctx.metrics.registry)
    return Response(body, status_code=200, media_type=prometheus_client.CONTENT_TYPE_LATEST)


ADMIN_TEXT = "this operational endpoint wants the server's admin token (Authorization: Bearer)"


def require_admin(request: Request, ctx: Any) -> None:
    """With `server.admin_token` set, a state-changing operational request must carry it;
    compared in constant time."""
    token = ctx.config.server.admin_token
    if not token:
        return
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                             token.encode()):
        raise PlainError(401, ADMIN_TEXT, newline=True)


@route("/log_level", http_method=["GET", "POST"])
async def log_level(request: Request, ctx: Ctx) -> Response:
    if request.method == "GET":
        return json_response({"message": f"Current log level is {ctx.config.server.log_level}"})
    require_admin(request, ctx)
    params = await read_params(request)
    level = params.get("log_level", "") or ""
    if level not in config_module.LOG_LEVELS:
        return json_response({"status": "failed",
                              "message": f'unrecognized log level "{level}"'}, 400)
    ctx.set_log_level(level)
    return json_response({"status": "success", "message": f"Log level set to {level}"})


@get("/services")
async def services(ctx: Ctx) -> Response:
    body = "".join(f"{s.name} => {s.state.value}\n" for s in ctx.states.services.values())
    return Response(body, status_code=200, media_type=PLAIN)


REVISION = f"logstore-{logstore_version()}"


def build_labels() -> dict[str, str]:
    """The labels of `logstore_build_info` on /metrics: logstore's own version."""
    return {"version": logstore_version(), "revision": REVISION, "branch": "main",
            "pythonversion": platform.python_version()}


def loki_build_labels() -> dict[str, str]:
    """The labels of `loki_build_info`: the facts buildinfo answers, Loki's label names."""
    return {"version": VERSION, "revision": REVISION, "branch": "main",
            "goversion": f"python{platform.python_version()}"}


@get("/logstore/api/v1/status/buildinfo")
async def buildinfo() -> Response:
    return json_response({
        "version": VERSION, "revision": REVISION, "branch": "main",
        "buildUser": "logstore", "buildDate": "2026-11-22T00:00:00Z",
        "goVersion": loki_build_labels()["goversion"],
    })


@get("/config")
async def show_config(request: Request, ctx: Ctx) -> Response:
    mode = request.query_params.get("mode", "")
    if mode in ("diff", "diffs"):
        data = config_module.diff_from_defaults(ctx.config)
    elif mode == "defaults":
        data = config_module.to_plain(config_module.Config())
    else:
        data = config_module.to_plain(ctx.config)
    return Response(config_module.render_yaml(data), status_code=200, media_type=PLAIN)


@get("/runtime_config")
async def show_runtime_config(request: Request, ctx: Ctx) -> Response:
    # the per-tenant overrides (runtime_config.file) as they apply now; mode=diff: only what
    # differs from limits_config
    diff = request.query_params.get("mode", "") in ("diff", "diffs")
    text = ctx.limits.as_yaml(diff)
    return Response(text, status_code=200, media_type=PLAIN)


@route("/flush", http_method=["GET", "POST"])
async def flush(request: Request, ctx: Ctx) -> Response:
    require_admin(request, ctx)
    # every acknowledged push is already committed; as Loki's ingesters flush their chunks,
    # the whole head is sealed into blocks now
    await ctx.sealer.seal_due(everything=True)
    return Response(b"", status_code=204)


@route("/flush/tenant", http_method=["POST"])
async def flush_tenant(request: Request, ctx: Ctx) -> Response:
    require_admin(request, ctx)
    tenant = ctx.tenant(request)
    params = await read_params(request)
    selector = params.get("streams") or ""
    # a bad selector is a ParseError: 400 with the parse error text
    matchers = parse_selector(selector, require_non_empty=False).matchers if selector else []
    await ctx.sealer.seal_tenant(tenant, matchers)
    return Response(b"", status_code=204)


@route("/ingester/prepare_shutdown", http_method=["GET", "POST", "DELETE"])
async def prepare_shutdown(request: Request, ctx: Ctx) -> Response:
    control = ctx.shutdown
    if request.method == "GET":
        return Response("set" if control.prepared() else "unset", status_code=200,
                        media_type=PLAIN)
    require_admin(request, ctx)
    if request.method == "POST":
        control.prepare()
    else:
        control.unprepare()
    return Response(b"", status_code=204)


@route("/ingester/shutdown", http_method=["GET", "POST"])
async def ingester_shutdown(request: Request, ctx: Ctx) -> Response:
    require_admin(request, ctx)
    params = await read_params(request)
    flags = {}
    for name, default in (("flush", True), ("delete_ring_tokens", False),
                          ("terminate", True)):
        text = (params.get(name) or "").strip().lower()
        if not text:
            flags[name] = default
        elif text in ("true", "1", "t"):
            flags[name] = True
        elif text in ("false", "0", "f"):
            flags[name] = False
        else:
            return Response(f"invalid {name} parameter: {text!r}\n", status_code=400,
                            media_type=PLAIN)
    try:
        await ctx.shutdown.shutdown(flush=flags["flush"], terminate=flags["terminate"])
    except RuntimeError as exc:
        return Response(f"{exc}\n", status_code=503, media_type=PLAIN)
    return Response(b"", status_code=204)


RING_NAMES = ["/ring", "/distributor/ring", "/ruler/ring", "/compactor/ring",
              "/indexgateway/ring", "/scheduler/ring", "/pattern/ring"]


@route(RING_NAMES, http_method=["GET", "POST"])
async def ring(request: Request, ctx: Ctx) -> Response:
    host = ctx.config.server.http_listen_address
    port = ctx.config.server.http_listen_port
    body = ("<!DOCTYPE html><html><head><title>Ring status</title></head><body>"
            "<h1>Ring status</h1><table border=\"1\"><thead><tr><th>Instance ID</th>"
            "<th>State</th><th>Address</th><th>Tokens</th></tr></thead><tbody>"
            f"<tr><td>logstore</td><td>ACTIVE</td><td>{host}:{port}</td><td>1</td></tr>"
            "</tbody></table></body></html>")
    return Response(body, status_code=200, media_type="text/html; charset=utf-8")


handlers: list[Any] = [ready, metrics, log_level, services, buildinfo, show_config,
                       show_runtime_config, flush,
                       flush_tenant, prepare_shutdown, ingester_shutdown, ring]
