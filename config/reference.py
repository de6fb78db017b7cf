"""Loki's configuration keys, so a Loki file can be told apart from a typo.

config/loki_reference.json holds the key tree of Loki 3.x's configuration reference (every
3.x release; tools/loki_reference.py regenerates it and describes its shape). A key
logstore has no field for is looked up here: known to Loki, it is ignored with a warning;
unknown, it is an error. Sections logstore ignores are still walked, so a typo deep inside
`storage_config` is reported like any other.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cache
from typing import Any

_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loki_reference.json")

# Loki accepts the first three although its reference does not show them (`doc:"hidden"`);
# earlier logstore releases accepted the others (Loki 2.x keys among them), so a file that
# started logstore before still does
_HIDDEN: dict[tuple[str, ...], Any] = {
    ("http_prefix",): None, ("internal_server",): None, ("compactor_client",): None,
    ("storage", "writer_max_batch_rows"): None, ("memberlist_kv",): None,
    ("pattern_ingester_client",): None, ("cache_config",): None,
    ("limits_config", "query_timeout_default"): None, ("compactor", "shared_store"): None,
}

MISSING = object()


@dataclass
class KeyReport:
    """What a walk over a configuration found: Loki keys logstore ignores and keys nobody
    knows, each as its dotted path; and values that were refused."""
    ignored: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def problem(self) -> str | None:
        """One message naming every unknown key and refused value, or None."""
        parts = []
        if len(self.unknown) == 1:
            parts.append(f"unknown configuration key {self.unknown[0]!r}")
        elif self.unknown:
            parts.append("unknown configuration keys "
                         + ", ".join(repr(k) for k in self.unknown))
        parts.extend(self.errors)
        return "; ".join(parts) or None


@cache
def _blocks() -> dict[str, Any]:
    with open(_FILE, encoding="utf-8") as fh:
        return json.load(fh)["blocks"]


def releases() -> list[str]:
    with open(_FILE, encoding="utf-8") as fh:
        return json.load(fh)["refs"]


def _resolve(node: Any) -> Any:
    """A block reference as the mapping it names; anything else as it is."""
    return _blocks()[node] if isinstance(node, str) else node


def lookup(path: tuple[str, ...]) -> Any:
    """The reference node at `path` (mapping keys, list items and map values are stepped
    through by the key alone), or MISSING."""
    if path in _HIDDEN:
        return _HIDDEN[path]
    node: Any = _blocks()[""]
    for key in path:
        node = _resolve(node)
        if isinstance(node, list):  # ["list"|"map", block]: the key names an item
            node = _blocks()[node[1]]
        if node is None:
            return None  # below a free value every key is fine
        if key in node:
            node = node[key]
        elif "*" in node:
            node = node["*"]
        else:
            return MISSING
    return node


def walk(value: Any, node: Any, where: str, report: KeyReport) -> None:
    """Report every key in `value` (found at `where`) that `node` does not know."""
    node = _resolve(node)
    if node is None:
        return
    if isinstance(node, list):
        kind, block = node
        items = (enumerate(value) if kind == "list" and isinstance(value, list) else
                 value.items() if kind == "map" and isinstance(value, dict) else ())
        for name, item in items:
            shown = f"{where}[{name}]" if kind == "list" else f"{where}.{name}"
            walk(item, block, shown, report)
        return
    if not isinstance(value, dict):
        return
    for key, sub in value.items():
        full = f"{where}.{key}" if where else str(key)
        if key in node:
            walk(sub, node[key], full, report)
        elif "*" in node:
            walk(sub, node["*"], full, report)
        else:
            report.unknown.append(full)
