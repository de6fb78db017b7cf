"""Imports point one way (docs/architecture.md): routes -> services -> (logql, storage).

Every import of every module is read from its source (imports inside functions included),
so a new module or a late import cannot slip past the rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("logql", "storage", "services", "routes")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(p for p in rel.parts if p != "__init__")
            out[name] = path
    return out


MODULES = _modules()


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


# (importer prefix, what it may not import, except these)
RULES = [
    ("logql", ["routes", "services", "litestar", "sqlite3", "aiosqlite", "config"], []),
    # the engine declares what it reads through (logql.reading) and knows nothing of storage
    ("logql", ["storage"], []),
    ("storage", ["routes", "services", "litestar"], []),
    # storage knows the label model, the shared error types and the protocol it implements,
    # nothing else of the language
    ("storage", ["logql"], ["logql.model", "logql.errors", "logql.reading"]),
    # handlers reach data through services only
    ("routes", ["storage"], []),
    ("services", ["routes", "litestar"], []),
    # the language core does not know how queries are evaluated or stored
    ("logql.syntax", ["logql.engine", "logql.pipeline", "logql.plan", "logql.template"], []),
    ("logql.gocompat", ["logql.syntax", "logql.engine", "logql.pipeline", "logql.plan",
                        "logql.template"], []),
    ("logql.template", ["logql.syntax", "logql.engine", "logql.pipeline", "logql.plan"], []),
    ("logql.pipeline", ["logql.engine", "logql.plan", "logql.syntax"], []),
    ("logql.errors", ["logql.syntax", "logql.engine", "logql.pipeline", "logql.plan",
                      "logql.template", "logql.gocompat", "logql.model"], []),
    ("logql.model", ["logql.syntax", "logql.engine", "logql.pipeline", "logql.plan",
                     "logql.template", "logql.gocompat"], []),
]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_one_way(module):
    found = imports_of(MODULES[module])
    for importer, banned, allowed in RULES:
        if not _under(module, importer):
            continue
        for name in found:
            if any(_under(name, b) for b in banned) and \
                    not any(_under(name, a) for a in allowed):
                pytest.fail(f"{module} imports {name} ({importer} may not import "
                            f"{', '.join(banned)})")


def test_no_import_cycles_between_modules():
    graph = {m: {n for n in imports_of(p) if n in MODULES and n != m}
             for m, p in MODULES.items()}
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if seen.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in seen:
                visit(n)
        stack.pop()
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m)


def test_the_rules_see_every_package():
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert "logql.engine.logs" in MODULES and "storage.reader" in MODULES


# A limit is read as one tenant's value, `limits.of(tenant).<key>` (services/limits.py): a
# read of the global `limits_config` anywhere else would ignore the tenant's runtime
# overrides while /runtime_config shows them (issue 24). app.py hands it to the limits module
# and config.py defines it; neither is under PACKAGES.
GLOBAL_LIMITS_READERS = {"services.limits"}


def global_limits_reads(path: Path) -> list[int]:
    """Lines of `<anything>.limits_config` (and getattr(..., "limits_config"))."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "limits_config":
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "getattr" and any(
                    isinstance(a, ast.Constant) and a.value == "limits_config"
                    for a in node.args):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_limits_are_read_per_tenant(module):
    if module in GLOBAL_LIMITS_READERS:
        return
    lines = global_limits_reads(MODULES[module])
    if lines:
        pytest.fail(f"{module} reads limits_config (line {', '.join(map(str, lines))}): "
                    "ask services/limits.py for the tenant's limits, limits.of(tenant)")


def test_the_limits_rule_sees_a_read():
    assert global_limits_reads(ROOT / "app.py")  # where the global is handed over
