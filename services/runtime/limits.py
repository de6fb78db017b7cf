"""Every limit as one tenant's value: `limits.of(tenant).max_line_size`.

`limits_config` holds everyone's limits; the runtime file (services/runtime/overrides.py) replaces
keys for single tenants. Every reader asks `Limits.of(tenant)`, never `limits_config`
itself, so a key set for one tenant is applied wherever the global one is
(tests/test_architecture.py refuses a read of `limits_config` anywhere else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from config import LimitsConfig

if TYPE_CHECKING:
    from storage.streams import TenantSet

# The keys a tenant's runtime overrides may set, each read through Limits.of where it is
# applied. A limits_config key left out of here is refused in the runtime file (config.
# check_limits) rather than shown by /runtime_config and silently not applied.
TENANT_KEYS = frozenset({
    # push validation (services/ingest/ingester.py)
    "max_line_size", "max_line_size_truncate", "max_line_size_truncate_identifier",
    "max_label_names_per_series", "max_label_name_length", "max_label_value_length",
    "reject_old_samples", "reject_old_samples_max_age", "creation_grace_period",
    "allow_structured_metadata", "max_structured_metadata_size",
    "max_structured_metadata_entries_count", "discover_service_name", "discover_log_levels",
    "log_level_fields",
    # ingest rates and streams (services/ingest/ingest_limits.py)
    "ingestion_rate_mb", "ingestion_burst_size_mb", "per_stream_rate_limit",
    "per_stream_rate_limit_burst", "max_global_streams_per_user", "max_streams_per_user",
    # OTLP attribute mapping (services/ingest/otlp.py)
    "otlp_config",
    # reads (services/read/querier.py, services/read/query_gate.py, services/read/tail.py)
    "max_entries_limit_per_query", "max_query_series", "max_query_length",
    "max_query_lookback", "max_query_range", "max_query_parallelism",
    "max_concurrent_tail_requests", "query_timeout", "volume_enabled", "volume_max_series",
    # retention and deletion (services/upkeep/compactor.py, services/upkeep/deletes.py)
    "retention_period", "retention_stream", "deletion_mode",
})


class Limits:
    def __init__(self, defaults: LimitsConfig):
        self.defaults = defaults
        # replaced whole, never changed in place, when the runtime file changes: a reader
        # thread holding the old mapping sees one consistent set
        self.tenants: dict[str, LimitsConfig] = {}

    def of(self, tenant: str | TenantSet) -> LimitsConfig:
        """The tenant's limits; a read of several tenants at once (a TenantSet) has no one
        tenant's overrides to take and takes limits_config, as before overrides existed."""
        if isinstance(tenant, str):
            return self.tenants.get(tenant, self.defaults)
        return self.defaults

    def in_force(self) -> list[LimitsConfig]:
        """limits_config and every tenant's limits: what a question about any tenant
        (does anything expire?) has to look at."""
        return [self.defaults, *self.tenants.values()]
