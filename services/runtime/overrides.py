"""Per-tenant limits: `limits_config` for everyone, a runtime file's `overrides` per tenant.

As in Loki, `runtime_config.file` names a YAML file of the form

    overrides:
      tenant-a:
        retention_period: 7d
        retention_stream: [{selector: '{level="debug"}', priority: 1, period: 1d}]

whose keys are those of `limits_config` (unknown keys are an error naming them). The file is
read at start (a bad one stops the start) and again every `runtime_config.period`; a bad
reload keeps the last good overrides, logs why and shows in /metrics, as Loki does.
`Overrides.of(tenant)` (services/runtime/limits.py) is the tenant's whole LimitsConfig: the
defaults with its keys replaced. Only the keys of `limits.TENANT_KEYS` may be set.

Nodes of a cluster (`storage.shared.url`) share the text: a node publishes its file's text to
the shared state when it starts and whenever the file changes (and parses), and every node,
with a file or without, applies the newest published text within a `period`. So a change to
one node's file reaches them all; nodes given different files follow the one read last
(docs/scale-out.md). A published text this node cannot parse (its own `limits_config` may
differ) is kept out as a bad file is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

import yaml

from config import ConfigError, LimitsConfig, check_limits, limits_diff
from logql.errors import StoreUnavailable
from services.runtime.base import cancel_task
from services.runtime.limits import TENANT_KEYS, Limits
from services.runtime.metrics import ScrapeCollector, gauge
from storage.shared import runtime_config as shared_text

log = logging.getLogger("logstore.overrides")
# keys a Loki runtime file may hold besides `overrides`; logstore has no use for them
_IGNORED_TOP = {"configs", "multi_kv_config", "ingester_limits", "ingester_stream_chunks"}


def parse_overrides(text: str, defaults: LimitsConfig, where: str) -> dict[str, LimitsConfig]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"runtime config file {where} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"runtime config file {where} must hold a mapping at the top level")
    for key in data:
        if key != "overrides" and key not in _IGNORED_TOP:
            raise ConfigError(f"unknown runtime configuration key {key!r} in {where}")
    per_tenant = data.get("overrides") or {}
    if not isinstance(per_tenant, dict):
        raise ConfigError(f"runtime config file {where}: overrides must be a mapping")
    out: dict[str, LimitsConfig] = {}
    for tenant, keys in per_tenant.items():
        path = f"overrides.{tenant}"
        if keys is None:
            keys = {}
        if not isinstance(keys, dict):
            raise ConfigError(f"runtime config file {where}: {path} must be a mapping")
        try:
            out[str(tenant)] = check_limits(defaults, keys, path, TENANT_KEYS)
        except ConfigError as exc:
            raise ConfigError(f"runtime config file {where}: {exc}") from None
    return out


class Overrides(Limits):
    """The tenants' limits, kept up to date with the runtime file."""

    def __init__(self, defaults: LimitsConfig, path: str = "", period_ns: int = 10 * 10**9,
                 shared: Any = None, node: str = "local"):
        super().__init__(defaults)
        self.path = path
        self.period = period_ns / 1e9
        self.last_reload_ok = True
        self.reloads = 0
        # the text the overrides in force came from, and the file's last good text (a
        # node of a cluster may apply another node's text while its own file is unchanged)
        self._text: str | None = None
        self._file_text: str | None = None
        # a cluster's shared state (storage.shared), this node's name in it, and the
        # version of the shared text this node has seen and published
        self.shared = shared
        self.node = node
        self.shared_version = 0
        self._published: str | None = None
        self._task: asyncio.Task | None = None
        self._listeners: list[Callable[[], None]] = []
        if path:
            self.tenants = self._read()

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _load(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as fh:
                return fh.read()
        except OSError as exc:
            raise ConfigError(f"cannot read runtime config file {self.path}: "
                              f"{exc.strerror}") from None

    def _read(self) -> dict[str, LimitsConfig]:
        text = self._load()
        tenants = parse_overrides(text, self.defaults, self.path)
        self._text = self._file_text = text
        return tenants

    def reload(self) -> bool:
        """Read the file again if it changed; False (keeping the old overrides) if the new
        one is bad."""
        try:
            text = self._load()
            if text == self._file_text:
                return True
            tenants = parse_overrides(text, self.defaults, self.path)
        except (OSError, ConfigError) as exc:
            self.last_reload_ok = False
            log.error("runtime config reload failed, keeping the last good one: %s", exc)
            return False
        self._file_text = text
        self._apply(text, tenants)
        return True

    def _apply(self, text: str, tenants: dict[str, LimitsConfig]) -> None:
        self.tenants = tenants
        self._text = text
        self.last_reload_ok = True
        self.reloads += 1
        log.info("runtime config reloaded: overrides for %d tenants", len(self.tenants))
        for listener in self._listeners:
            listener()

    async def share(self) -> None:
        """A node of a cluster: publish the file's text when it is new to the shared state,
        then apply the newest text published (this node's or another's). A shared state
        that cannot be reached leaves the overrides as they are until the next period."""
        if self.shared is None:
            return
        try:
            if self._file_text is not None and self._file_text != self._published:
                text = self._file_text
                self.shared_version = await self.shared.write(
                    lambda conn: shared_text.publish(conn, text, self.node, time.time_ns()))
                self._published = text
            found = await self.shared.read(shared_text.published)
        except StoreUnavailable as exc:
            log.warning("the shared runtime config cannot be read or written now: %s", exc)
            return
        if found is None or found[0] == self.shared_version:
            return
        version, text = found
        self.shared_version = version
        if text == self._text:
            return
        try:
            tenants = parse_overrides(text, self.defaults, "(shared by the cluster)")
        except ConfigError as exc:
            self.last_reload_ok = False
            log.error("the cluster's runtime config (version %d) is kept out, keeping the "
                      "last good one: %s", version, exc)
            return
        self._apply(text, tenants)

    def as_yaml(self, diff: bool) -> str:
        """What GET /runtime_config shows: every tenant's overrides (only what differs from
        limits_config with mode=diff)."""
        shown = {}
        for tenant, limits in sorted(self.tenants.items()):
            shown[tenant] = limits_diff(limits, self.defaults) if diff else \
                limits_diff(limits, None)
        return yaml.safe_dump({"overrides": shown}, sort_keys=False, default_flow_style=False)

    async def start(self) -> None:
        # a node of a cluster starts with the cluster's overrides (its own file's, if it
        # has one: a file read at start counts as a change)
        await self.share()
        if self.path or self.shared is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                 name="runtime-config")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            if self.path:
                self.reload()
            await self.share()


def collector(overrides: Overrides) -> ScrapeCollector:
    return ScrapeCollector(
        gauge("logstore_runtime_config_last_reload_successful",
              "Whether the last runtime config reload was accepted.",
              lambda: 1.0 if overrides.last_reload_ok else 0.0),
        gauge("logstore_runtime_config_tenants",
              "Tenants with limits overridden in the runtime config.",
              lambda: len(overrides.tenants)))
