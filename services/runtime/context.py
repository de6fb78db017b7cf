"""Everything a request handler needs: the app's services as typed fields, built once in
dependency order by services/runtime/wiring.py and injected into handlers (routes/deps.py), and the
tenant rules every route applies to a request."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Protocol

from config import Config
from services.runtime import logs
from services.runtime.base import Lifecycle, ServiceRegistry
from services.upkeep.compactor import Compactor
from services.upkeep.deletes import Deletions
from services.upkeep.retention_policy import RetentionPolicy
from services.runtime.errors import PlainError
from services.grafana.service import GrafanaService
from services.ingest.inflight import InflightBytes
from services.ingest.ingest_limits import IngestLimits
from services.ingest.ingester import Ingester
from services.runtime.metrics import Metrics
from services.ingest.otlp import TenantMappers
from services.runtime.overrides import Overrides
from services.patterns.patterns import Patterns
from services.read.querier import Querier
from services.ruler.ruler import Ruler
from services.upkeep.sealer import Sealer
from services.upkeep.shutdown import ShutdownControl
from services.read.tail import TailHub
from storage.db import Database
from storage.shared import Leases, SharedState
from storage.streams import TenantSet


class Request(Protocol):
    """What the tenant rules read of a request (an HTTP request or a WebSocket)."""
    headers: Mapping[str, str]


_TENANT_OK = re.compile(r"^[a-zA-Z0-9!\-_.*'()]+$")
NO_AUTH_TENANT = "fake"


@dataclass
class Services:
    config: Config
    db: Database
    states: ServiceRegistry        # Loki's module states, as /services and /ready show them
    metrics: Metrics
    limits: Overrides              # every limit as a tenant's value (services/runtime/limits.py)
    ingest_limits: IngestLimits
    inflight_bytes: InflightBytes
    ingester: Ingester
    querier: Querier
    sealer: Sealer
    tail_hub: TailHub
    retention: RetentionPolicy
    deletions: Deletions
    compactor: Compactor
    ruler: Ruler
    patterns: Patterns
    shutdown: ShutdownControl
    otlp_mappers: TenantMappers
    grafana: GrafanaService
    shared: SharedState            # db, or PostgreSQL with storage.shared.url
    leases: Leases                 # who does once-per-cluster work (storage/shared/leases.py)
    # started in this order once the database is open, stopped in this order before it
    # closes (app.py's lifespan)
    lifecycle: list[Lifecycle]

    def tenant(self, request: Request, *, newline: bool = False,
               multi: bool = False, offered: str = "") -> str:
        """The request's tenant, or a 401/400 as Loki answers. `offered` is an org id the
        request names elsewhere than the header (the tail's WebSocket subprotocol, which a
        browser can set: routes/loki/tail.py); the header wins, and both obey the same rules."""
        if not self.config.auth_enabled:
            return NO_AUTH_TENANT
        org = request.headers.get("x-scope-orgid", "").strip() or offered.strip()
        if not org:
            raise PlainError(401, "no org id", newline=newline)
        if "|" in org and not multi:
            raise PlainError(400, "multiple org IDs present", newline=newline)
        for tenant in org.split("|"):
            if not tenant:
                raise PlainError(401, "no org id", newline=newline)
            check_tenant_id(tenant, newline)
        return org

    def read_scope(self, request: Request) -> str | TenantSet:
        """The tenant(s) a read endpoint reads: with `querier.multi_tenant_queries_enabled`,
        `X-Scope-OrgID: a|b` reads both (a TenantSet; results carry `__tenant_id__`), and a
        header naming one tenant, even twice, reads it alone, as Loki's querier does."""
        multi = self.config.querier.multi_tenant_queries_enabled
        org = self.tenant(request, multi=multi)
        if "|" not in org:
            return org
        ids = TenantSet(org.split("|"))
        return ids[0] if len(ids) == 1 else ids

    def set_log_level(self, level: str) -> None:
        self.config.server.log_level = level
        logs.set_level(level)


def check_tenant_id(tenant: str, newline: bool = False) -> None:
    if tenant in (".", ".."):
        raise PlainError(400, "tenant ID is '.' or '..'", newline=newline)
    if len(tenant) > 150:
        raise PlainError(400, "tenant ID is too long: max 150 characters", newline=newline)
    if not _TENANT_OK.match(tenant):
        bad = next(c for c in tenant if not _TENANT_OK.match(c))
        raise PlainError(400, f"tenant ID '{tenant}' contains unsupported character '{bad}'",
                         newline=newline)
