"""Every limit as one tenant's value: `limits.of(tenant).max_line_size`.

`limits_config` holds everyone's limits; the runtime file (services/overrides.py) replaces
keys for single tenants. Every reader asks `Limits.of(tenant)`, never `limits_config`
itself, so a key set for one tenant is applied wherever the global one is
(tests/test_architecture.py refuses a read of `limits_config` anywhere else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from config import LimitsConfig

if TYPE_CHECKING:
    from storage.streams import TenantSet


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
