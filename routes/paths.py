"""Loki's own path names as aliases of logstore's (`/loki/...` for `/logstore/...`, ...).

Grafana's Loki data source, logcli, Promtail and Alloy hard-code Loki's paths, so every
route is registered under both names from one table: the same handler object answers both,
and no endpoint can exist under one name only. The `/logstore` names stay the documented ones.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

# (logstore prefix, Loki prefix); `/api/compat/` is not a case of `/compat/` (prefix match)
LOKI_PREFIXES: tuple[tuple[str, str], ...] = (
    ("/logstore/", "/loki/"),
    ("/compat/", "/prometheus/"),
    ("/api/compat/", "/api/prom/"),
)


def loki_alias(path: str) -> str | None:
    """Loki's name for a logstore path, or None for paths Loki names the same (`/ready`)."""
    for ours, theirs in LOKI_PREFIXES:
        if path.startswith(ours):
            return theirs + path[len(ours):]
    return None


def logstore_path(path: str) -> str:
    """The logstore name of a path given by its Loki name (itself if it is not one)."""
    for ours, theirs in LOKI_PREFIXES:
        if path.startswith(theirs):
            return ours + path[len(theirs):]
    return path


def is_loki_alias(path: str) -> bool:
    return any(path.startswith(theirs) for _, theirs in LOKI_PREFIXES)


def canonical_path(paths: Iterable[str]) -> str:
    """The documented name among a handler's paths (for metrics labels and logs)."""
    ours = sorted(p for p in paths if not is_loki_alias(p))
    return ours[0] if ours else sorted(paths)[0]


def with_loki_paths(handlers: Iterable[Any], enabled: bool) -> list[Any]:
    """Per-app copies of the route handlers, each also answering its Loki paths if enabled.

    Copies, because the module-level handler objects are shared by every app built in one
    process (tests build many) and `server.loki_paths` may differ between them."""
    out = []
    for handler in handlers:
        if not hasattr(handler, "paths"):  # a Router: its own prefix must need no alias
            if loki_alias(handler.path.rstrip("/") + "/"):
                raise ValueError(f"router {handler.path} would have no Loki alias")
            out.append(handler)
            continue
        aliases = {a for a in map(loki_alias, handler.paths) if a} if enabled else set()
        if aliases:
            handler = copy.copy(handler)
            handler.paths = set(handler.paths) | aliases
        out.append(handler)
    return out
