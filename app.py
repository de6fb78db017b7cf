"""logstore: create_app(config) -> Litestar, the module-level `app` for granian, and main().

`granian --interface asgi app:app` reads its configuration from $LOGSTORE_CONFIG and the
LOGSTORE_* environment variables; `logstore -config.file=FILE ...` (cli.py) sets those and
starts granian itself.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator

import config as config_module
from config import Config, ConfigError
from services.runtime import logs

if TYPE_CHECKING:
    from litestar import Litestar

# The web framework, the routes, the services and storage are imported where the app is
# built, not here: `logstore serve` runs in a parent process that only starts granian, and
# should not hold a second copy of all of it (about 35 MB).

log = logging.getLogger("logstore")

GIL_SWITCH_INTERVAL = 0.0002  # seconds


def route_modules() -> list:
    from routes.loki import (admin, delete, drilldown, index, legacy, meta, openapi, otlp, push,
                             query, rules, tail)
    from routes.grafana import api as grafana
    from routes import ui
    return [push, otlp, meta, admin, grafana, query, tail, legacy, delete, rules, index,
            drilldown, openapi, ui]


def tune_process() -> None:
    from services.runtime import memory

    # Reads are Python work on reader threads; with Python's 5 ms GIL switch interval four
    # heavy queries kept the event loop waiting long enough to take one-line pushes from
    # 3 ms to a p50 of 265 ms (bench/REPORT.md, issue 15). 0.2 ms hands the GIL back 25 times as often:
    # p50 31 ms, at a cost to the queries of a few per cent.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    memory.limit_arenas()  # before the writer and reader threads allocate
    # A push of 500 streams allocates some hundred thousand tracked objects: at Python's
    # default of a collection every 700 of them, the collector's passes (full ones
    # among them, walking every live object) took a fifth of the server's time while 20,000
    # new streams were pushed (7.4-7.5 s -> 6.2-6.6 s, bench/REPORT.md "Issue 22"); peak
    # RSS did not move
    gc.set_threshold(memory.GC_GEN0_THRESHOLD, 10, 10)


def create_app(cfg: Config | None = None) -> Litestar:
    from litestar import Litestar
    from litestar.di import Provide

    from logql.errors import StoreUnavailable
    from routes.loki import admin
    from routes.errors import EXCEPTION_HANDLERS
    from routes.paths import with_loki_paths
    from routes.prefix import under_prefix
    from routes.after_pushes import after_pushes
    from routes.timing import timed
    from routes.unread_body import close_if_body_unread
    from services.runtime.base import State
    from services.runtime.wiring import build_services

    if cfg is None:
        with logs.held():
            # under `logstore serve` the parent process has warned of ignored keys already
            cfg = config_module.load_config(
                warn_ignored="LOGSTORE_SERVE_PID" not in os.environ)
    logs.configure(cfg.server.log_level, cfg.server.log_format)
    tune_process()
    # the one place limits_config is read: everything else asks a tenant's limits of the
    # Overrides built from it
    services = build_services(cfg, cfg.limits_config, admin.build_labels(),
                              admin.loki_build_labels())
    states = services.states

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        states.set_all(State.STARTING)
        try:
            applied = services.db.open()
        except Exception as exc:
            states["store"].set(State.FAILED, str(exc))
            raise
        if applied:
            log.info("applied migrations: %s", ", ".join(applied))
        try:
            for hooks in services.lifecycle:
                if hooks.start is not None:
                    await hooks.start()
        except StoreUnavailable as exc:
            # a node without its shared state would serve other nodes' rules and dashboards
            # as missing: it does not start (its service manager starts it again)
            log.error("logstore cannot start: %s", exc)
            states["store"].set(State.FAILED, str(exc))
            raise
        states.set_all(State.RUNNING)
        log.info("logstore is ready", extra=_about(cfg))
        try:
            yield
        finally:
            log.info("stopping logstore")
            states.stopping = True
            states.set_all(State.STOPPING)
            for hooks in services.lifecycle:
                if hooks.stop is not None:
                    await hooks.stop()
            services.db.close()
            states.set_all(State.TERMINATED)
            log.info("logstore stopped")

    handlers = with_loki_paths((h for module in route_modules() for h in module.handlers),
                               cfg.server.loki_paths)
    app = Litestar(
        route_handlers=handlers,
        # handlers ask for `ctx: Ctx` (routes/deps.py) and read the typed fields
        dependencies={"ctx": Provide(lambda: services, use_cache=True, sync_to_thread=False)},
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=[lifespan],
        request_max_body_size=None,  # push enforces its own limit with Loki's 413 message
        openapi_config=None,
        debug=False,
        logging_config=None,
    )
    app.state.services = services
    # around the router, not in `middleware=`: Litestar runs those only once a route matched,
    # and 404s and 405s are requests too; inside the timing, so a path outside
    # server.http_path_prefix is counted as the 404 it gets
    handler = under_prefix(app.asgi_handler, cfg.server.http_path_prefix)
    if services.ingester.pending is not None:
        handler = after_pushes(handler, services.ingester.pending)
    app.asgi_handler = close_if_body_unread(timed(handler, services.metrics))
    return app


def _about(cfg: Config) -> dict[str, str]:
    """The facts the startup lines carry as logfmt keys."""
    from services.runtime.version import logstore_version

    running = logstore_version()
    return {"version": running,
            "address": f"http://{cfg.server.http_listen_address}:{cfg.server.http_listen_port}",
            "data_dir": os.path.abspath(cfg.data_dir)}


def _module_app() -> Litestar | None:
    # granian imports `app:app`; a configuration error there should say what is wrong
    logs.capture_warnings()
    try:
        return create_app()
    except ConfigError as exc:
        print(f"logstore: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def main(argv: list[str] | None = None) -> int:
    """The `logstore` console script (cli.py)."""
    from cli import main as cli_main
    return cli_main(argv)


def seal_backlog(conn: Any, cfg: Config) -> None:
    """`logstore migrate`: seal every head group that is due, printing progress, then make
    sure the file can give freed pages back (a database from before sealing cannot yet)."""
    from storage.blocks import sealing

    st = cfg.storage
    groups = sealing.sealable_groups(conn, time.time_ns(), st.block_window,
                                     st.seal_grace_period, st.block_max_rows)
    total = sum(g.rows for g in groups)
    if total:
        print(f"sealing {total} head rows into blocks", flush=True)
        last = [time.monotonic()]

        def progress(done: int) -> None:
            if time.monotonic() - last[0] >= 5 or done == total:
                last[0] = time.monotonic()
                print(f"sealed {done} of {total} rows ({100 * done // total}%)", flush=True)

        sealing.seal_now(conn, groups, st.block_max_rows, progress)
    if sealing.make_reclaimable(conn):
        print("vacuumed: freed pages now go back to the file system", flush=True)
    else:
        before = None
        while True:
            conn.execute("BEGIN IMMEDIATE")
            left = sealing.reclaim_space(conn)
            conn.execute("COMMIT")
            if left < sealing.MIN_FREE_PAGES or left == before:
                break
            before = left
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def serve(cfg: Config, config_path: str | None) -> int:
    from granian import Granian
    from granian.constants import Interfaces

    from storage.db import DB_FILENAME, DatabaseTooNew, check_not_newer
    from storage.dir_lock import DataDirInUse, DataDirLock

    # refused here, with exit code 1, rather than in the worker once granian runs
    try:
        DataDirLock(cfg.data_dir).hold_for_workers()  # held until this process exits
        check_not_newer(os.path.join(cfg.data_dir, DB_FILENAME))
    except (DataDirInUse, DatabaseTooNew, OSError) as exc:
        print(f"logstore: {exc}", file=sys.stderr)
        return 1
    # the worker process imports app:app and rebuilds the config from these
    if config_path:
        os.environ["LOGSTORE_CONFIG"] = os.path.abspath(config_path)
    os.environ["LOGSTORE_HOST"] = cfg.server.http_listen_address
    os.environ["LOGSTORE_PORT"] = str(cfg.server.http_listen_port)
    os.environ["LOGSTORE_DATA_DIR"] = os.path.abspath(cfg.data_dir)
    os.environ["LOGSTORE_LOG_LEVEL"] = cfg.server.log_level
    os.environ["LOGSTORE_LOG_FORMAT"] = cfg.server.log_format
    logs.capture_warnings()
    log.info("starting logstore", extra=_about(cfg))
    # /ingester/shutdown?terminate=true stops this process (services/upkeep/shutdown.py)
    os.environ["LOGSTORE_SERVE_PID"] = str(os.getpid())
    # The server is forked from this process and keeps what was imported here (the config,
    # logging, LogQL's parser): frozen, those objects are left out of both processes' garbage
    # collections, which would write to every one of them and so copy their pages into each
    # process (PSS of the tree, idle: 93 -> 89-90 MB, bench/REPORT.md)
    gc.freeze()
    # one worker: SQLite has one writer, and group commit needs every push in one process
    Granian("app:app", address=cfg.server.http_listen_address, port=cfg.server.http_listen_port,
            interface=Interfaces.ASGI, workers=1, log_level=_granian_level(cfg.server.log_level),
            log_dictconfig=logs.granian_dictconfig(cfg.server.log_format),
            websockets=True).serve()
    return 0


def _granian_level(level: str) -> Any:
    from granian.log import LogLevels
    return {"debug": LogLevels.debug, "info": LogLevels.info, "warn": LogLevels.warning,
            "error": LogLevels.error}[level]


_app: Litestar | None = None


def __getattr__(name: str) -> Any:
    # `app` is built on first access (granian's import of app:app), not when the console
    # script imports main(): the serve command must set the environment first
    global _app
    if name == "app":
        if _app is None:
            _app = _module_app()
        return _app
    raise AttributeError(name)


if __name__ == "__main__":
    raise SystemExit(main())
