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


# A limit is read as one tenant's value, `limits.of(tenant).<key>` (services/runtime/limits.py): a
# read of the global `limits_config` anywhere else would ignore the tenant's runtime
# overrides while /runtime_config shows them (issue 24). app.py hands it to the limits module
# and config.py defines it; neither is under PACKAGES.
GLOBAL_LIMITS_READERS = {"services.runtime.limits"}


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
                    "ask services/runtime/limits.py for the tenant's limits, limits.of(tenant)")


def test_the_limits_rule_sees_a_read():
    assert global_limits_reads(ROOT / "app.py")  # where the global is handed over


# -- wiring (issue 24) ------------------------------------------------------------------------
# Every service is a typed field of services/runtime/context.Services, built once by
# services/runtime/wiring.build_services: nothing is found by a string key, routes never touch the
# database (the services own their transactions) and never build a service themselves.
CONTEXT = ROOT / "services" / "runtime" / "context.py"
REGISTRY_TYPES = {"dict", "Dict", "Mapping", "MutableMapping", "defaultdict", "OrderedDict"}
LOOSE_TYPES = {"Any", "object"}


def _tree(source: str) -> ast.Module:
    return ast.parse(source)


def registry_violations(source: str) -> list[str]:
    """`.extras` anywhere, a field named `extras`, and in a Services class a field that is
    a registry by key (dict[str, ...], Mapping, ...) or typed loosely (Any)."""
    found = []
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.Attribute) and node.attr == "extras":
            found.append(f"line {node.lineno}: .extras")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == "extras":
            found.append(f"line {node.lineno}: a field named extras")
        elif isinstance(node, ast.ClassDef) and node.name == "Services":
            for item in node.body:
                if not isinstance(item, ast.AnnAssign):
                    continue
                names = {n.id for n in ast.walk(item.annotation) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(item.annotation)
                          if isinstance(n, ast.Attribute)}
                outer = item.annotation.value if isinstance(item.annotation, ast.Subscript) \
                    else item.annotation
                outer_name = outer.id if isinstance(outer, ast.Name) else \
                    outer.attr if isinstance(outer, ast.Attribute) else ""
                if outer_name in REGISTRY_TYPES or names & LOOSE_TYPES:
                    found.append(f"line {item.lineno}: Services.{ast.unparse(item.target)}: "
                                 f"{ast.unparse(item.annotation)}")
    return found


def db_accesses(source: str) -> list[int]:
    """Lines of `<anything>.db` (and getattr(..., "db"))."""
    found = []
    for node in ast.walk(_tree(source)):
        if isinstance(node, ast.Attribute) and node.attr == "db":
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "getattr" and any(
                    isinstance(a, ast.Constant) and a.value == "db" for a in node.args):
            found.append(node.lineno)
    return found


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it was imported as, dotted (`Sealer` -> `services.upkeep.sealer.Sealer`)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    out[root] = root
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                out[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return out


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def service_classes() -> set[str]:
    """The services/ classes of the Services fields, Services itself and the builder."""
    tree = ast.parse(CONTEXT.read_text(), str(CONTEXT))
    aliases = _aliases(tree)
    services = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Services")
    found = {"Services", "build_services"}
    for item in services.body:
        if isinstance(item, ast.AnnAssign):
            for n in ast.walk(item.annotation):
                if isinstance(n, ast.Name) and aliases.get(n.id, "").startswith("services."):
                    found.add(n.id)
    return found


def service_constructions(source: str, classes: set[str]) -> list[str]:
    """Calls, in a route module, of a service class defined under services/ (by whatever
    name or module alias it was imported)."""
    tree = _tree(source)
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name is None:
            continue
        root, _, rest = name.partition(".")
        target = aliases.get(root, root) + ("." + rest if rest else "")
        if target.startswith("services.") and target.rsplit(".", 1)[-1] in classes:
            found.append(f"line {node.lineno}: {name}(...)")
    return found


ROUTES = sorted(m for m in MODULES if _under(m, "routes"))


@pytest.mark.parametrize("path", [*sorted(MODULES.values()), ROOT / "app.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_service_registry_by_string_key(path):
    found = registry_violations(path.read_text())
    if found:
        pytest.fail(f"{path.relative_to(ROOT)}: {'; '.join(found)} - a service is a typed "
                    "field of services/runtime/context.Services, built in services/runtime/wiring.py")


def test_services_is_where_the_rules_look():
    tree = ast.parse(CONTEXT.read_text())
    assert any(isinstance(n, ast.ClassDef) and n.name == "Services" for n in tree.body)
    assert {"Ingester", "Querier", "Sealer", "GrafanaService"} <= service_classes()


@pytest.mark.parametrize("module", ROUTES)
def test_routes_do_not_touch_the_database(module):
    lines = db_accesses(MODULES[module].read_text())
    if lines:
        pytest.fail(f"{module} reads .db (line {', '.join(map(str, lines))}): call a "
                    "service method that runs its own read or write")


@pytest.mark.parametrize("module", ROUTES)
def test_routes_do_not_build_services(module):
    found = service_constructions(MODULES[module].read_text(), service_classes())
    if found:
        pytest.fail(f"{module} builds a service ({'; '.join(found)}): build it in "
                    "services/runtime/wiring.py and read it from ctx")


def test_the_wiring_rules_catch_violations():
    assert registry_violations("ctx.extras['ruler'].start()")
    assert registry_violations("class AppContext:\n    extras: dict = {}\n")
    assert registry_violations(
        "class Services:\n    ruler: Ruler\n    others: dict[str, Any]\n")
    assert registry_violations("class Services:\n    ruler: typing.Any\n")
    assert registry_violations("class Services:\n    by_name: Mapping[str, Ruler]\n")
    assert not registry_violations(
        "class Services:\n    ruler: Ruler\n    lifecycle: list[Lifecycle]\n")

    assert db_accesses("async def h(ctx):\n    return await ctx.db.read(f)\n") == [2]
    assert db_accesses("getattr(ctx, 'db')")
    assert not db_accesses("async def h(ctx):\n    return await ctx.grafana.ping()\n")

    classes = {"TenantMappers", "Sealer"}
    assert service_constructions(
        "from services.ingest.otlp import TenantMappers\nm = TenantMappers(ctx.limits)\n", classes)
    assert service_constructions(
        "from services.ingest.otlp import TenantMappers as T\ndef f():\n    T(1)\n", classes)
    assert service_constructions("from services import otlp\notlp.TenantMappers(x)\n", classes)
    assert service_constructions("import services.upkeep.sealer\nservices.upkeep.sealer.Sealer(db)\n",
                                 classes)
    assert service_constructions("import services.upkeep.sealer as s\ns.Sealer(db)\n", classes)
    # a value type of a service module, or a service used but not built, is fine
    assert not service_constructions(
        "from services.grafana.search import Query\nQuery(b'')\n", classes)
    assert not service_constructions(
        "from services.ingest.otlp import TenantMappers\ndef f(m: TenantMappers):\n    m.of('t')\n",
        classes)
