"""Loki's own path names as aliases of logstore's (`/loki/...` for `/logstore/...`, ...).

Grafana's Loki data source, logcli, Promtail and Alloy hard-code Loki's paths, so every
route is registered under both names from one table: the same handler object answers both,
and no endpoint can exist under one name only. The `/logstore` names stay the documented ones.
"""

from __future__ import annotations

import copy
import re
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


# Loki's `route` label: the path template of the matched route with every run of characters
# other than letters and digits turned into `_`, trimmed of `_` and lowercased
# (`/loki/api/v1/label/{name}/values` -> `loki_api_v1_label_name_values`), as dskit's
# middleware names gorilla/mux templates. loki-mixin's panels and alerts select on these.
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]+")
_ROUTE_NAMES: dict[str, str] = {}   # one entry per route template of the app, no more
# Loki registers the ruler's `/{namespace}` and `/{namespace}/{groupName}` as two routes;
# logstore has one route whose `rest` holds either
_RULES_REST = "/{rest}"


def loki_route_name(template: str) -> str:
    """The label Loki gives a route, whichever spelling (`/logstore/...` or `/loki/...`) the
    template is in: both spellings of a route are one series."""
    name = _NOT_ALNUM.sub("_", loki_alias(template) or template).strip("_").lower()
    return name or "root"


def route_label(scope: Any) -> str:
    """The `route` label of a request once routed; `other` when no route matched (404, 405),
    so unknown paths never become label values."""
    template = scope.get("path_template")
    if not template:
        return "other"
    name = _ROUTE_NAMES.get(template)
    if name is None:
        name = _ROUTE_NAMES[template] = loki_route_name(template.removesuffix(_RULES_REST))
    if template.endswith(_RULES_REST):
        rest = scope.get("path_params", {}).get("rest", "").strip("/")
        return name + ("_namespace_groupname" if "/" in rest else "_namespace")
    return name
