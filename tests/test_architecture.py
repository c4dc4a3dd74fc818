"""The shape of the code: layers import downwards only, and `skills_app/core/` is plain Python.

Imports are read from the source with `ast` (module level and inside functions, also under
`TYPE_CHECKING`), so an upward edge or a cycle hidden in a late import counts too.

The layers, lowest first (DESIGN "Shape of the code"; docs/architecture.md "Layers" lists the
same names as LAYERS below):

    core <- models, trail <- registry/permissions/policy <- visibility/hidden <- runs
         <- chat/audit/triggers/compare/skills/accounts/ops <- entry points (adminkit, checks,
            and every package's admin and URL modules)

A module may import its own layer and the layers below it, and the packages import each other in
one direction, features included; no module imports another module's private names. Where a
package needs something from a layer above (runs rendering fragments, runs telling chat a run
ended), the layer above hands it down as a port or a subscriber, wired by an entry point.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "skills_app"
CORE = APP / "core"

# Top-level names under skills_app (packages or modules), lowest layer first.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("core",)),
    # The data: rows (models), the audit trail's writer (trail), a conversation's files
    # (workspaces), what people sent as fingerprints (sent_texts), request types for views, the
    # streamed text's rows (textlog), a thread with its own connection (database_thread).
    (
        "models",
        (
            "models",
            "migrations",
            "workspaces",
            "http",
            "trail",
            "sent_texts",
            "textlog",
            "database_thread",
        ),
    ),
    ("registry/permissions", ("registry", "permissions", "policy", "mcp")),
    ("visibility/hidden", ("visibility", "hidden", "hidden_library")),
    ("runs", ("runs",)),
    (
        "features",
        (
            "chat",
            "audit",
            "triggers",
            "compare",
            "skills",
            "accounts",
            "ops",
            "telemetry",
            "templatetags",
        ),
    ),
    (
        "entry points",
        (
            "admin",
            "adminkit",
            "apps",
            "checks",
            "context_processors",
            "management",
            "routing",
            "urls",
            "wiring",
        ),
    ),
)
ENTRY = len(LAYERS) - 1
# What Django loads by name from outside (a package's admin and URL configuration) stands with
# the entry points, above its package's own logic: the registry's admin shows skill files through
# `adminkit` (the admin's half of the visibility rule, above the registry). Pages are no exception:
# `views` modules sit in their package's layer.
ENTRY_MODULES = ("admin", "urls")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _imports(path: Path) -> frozenset[str]:
    """Absolute names of the modules this file imports."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # `from package import module` imports the module; `from module import name` the module.
            submodules = {f"{target}.{alias.name}" for alias in node.names}
            known = {s for s in submodules if _is_module(s)}
            found.update(known or {target})
    return frozenset(found)


@cache
def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _core_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


@cache
def _app_modules() -> dict[str, Path]:
    files = [*APP.rglob("*.py"), *(ROOT / "webapp").rglob("*.py")]
    return {_module_name(p): p for p in files}


def layer_of(module: str) -> int | None:
    """The layer of a module of ours (None: not ours, e.g. django)."""
    parts = module.split(".")
    if parts[0] == "webapp":
        return ENTRY
    if parts[0] != "skills_app" or len(parts) < 2:
        return None
    index = next((i for i, (_label, names) in enumerate(LAYERS) if parts[1] in names), None)
    if index is None:
        raise AssertionError(
            f"{module} is in no layer: add skills_app.{parts[1]} to LAYERS in "
            "tests/test_architecture.py"
        )
    if len(parts) > 2 and _named(parts[-1], ENTRY_MODULES):
        return ENTRY
    return index


def _named(last: str, names: tuple[str, ...]) -> bool:
    return any(
        last == name or last.startswith(f"{name}_") or last.endswith(f"_{name}") for name in names
    )


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] == "webapp" else ".".join(parts[:2])


def upward_edges() -> list[str]:
    """Every import from a module to one in a higher layer, as `a -> b (layer x imports layer y)`."""
    found = []
    for name, path in sorted(_app_modules().items()):
        here = layer_of(name)
        for target in sorted(_imports(path)):
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{name} -> {target} ({LAYERS[here][0]} imports {LAYERS[there][0]})")
    return found


def package_cycles() -> list[list[str]]:
    """Cycles among the packages and modules directly under skills_app, features included.

    Every module is its package's node, pages (`views`) too: of two packages, one imports the
    other, never both. A package's admin and URL modules alone are a node of their own, named
    with the entry-point layer: Django loads them by name, and nothing of ours below the entry
    points may import them (`upward_edges`), so a cycle through one is made of entry-point
    modules only, and those are nodes here too.
    """
    graph: dict[str, set[str]] = {}
    for name, path in _app_modules().items():
        source = _unit(name)
        for target in _imports(path):
            if layer_of(target) is not None and _unit(target) != source:
                graph.setdefault(source, set()).add(_unit(target))
    return _cycles(graph)


def _unit(module: str) -> str:
    """The node of a module in the package graph: its package, or for an admin or URL module
    of a lower package, the package named with the entry-point layer."""
    package = _package(module)
    here, home = layer_of(module), layer_of(package)
    return package if here == home or here is None else f"{package} ({LAYERS[here][0]})"


def private_imports() -> list[str]:
    """Imports of a private name (`_x`) from another module of ours, sibling or not."""
    found = []
    for name, path in sorted(_app_modules().items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if layer_of(target) is None or target == name:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{name} imports {target}.{alias.name}")
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_core_never_imports_django():
    offenders = {
        _module_name(path): sorted(
            m for m in _imports(path) if m.split(".")[0] in {"django", "channels"}
        )
        for path in CORE.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


# What speaks a network protocol: the client libraries, TLS and sockets. The core reaches the
# network only through what it is handed (the MCP client factory of `core.mcp.connect`, the
# model SDK), so none of these is imported under skills_app/core.
NETWORK_MODULES = frozenset(
    {"httpx", "httpx2", "httpcore", "httpcore2", "aiohttp", "ssl", "socket", "urllib.request"}
)
# The exceptions, each a (module, import) pair with its reason.
NETWORK_ALLOWED: dict[tuple[str, str], str] = {
    ("skills_app.core.gitsource.location", "socket"): (
        "the default Resolver of a skill source's host: a name lookup that refuses private "
        "addresses, never a connection; callers may hand in their own resolver"
    ),
}


def _network_imports(module: str, path: Path) -> list[str]:
    found = []
    for name in sorted(_imports(path)):
        network = name in NETWORK_MODULES or name.split(".")[0] in NETWORK_MODULES
        if network and (module, name) not in NETWORK_ALLOWED:
            found.append(f"{module} imports {name}")
    return found


def test_core_has_no_network_protocol_code():
    found = [
        line
        for path in sorted(CORE.rglob("*.py"))
        for line in _network_imports(_module_name(path), path)
    ]
    assert found == [], "network code under skills_app/core:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import httpx2\n",
        "from httpx2 import AsyncClient\n",
        "import ssl\n",
        "from urllib.request import urlopen\n",
        "import urllib.request\n",
        "def late():\n    import socket\n",
    ],
)
def test_a_network_import_in_the_core_is_named(tmp_path, monkeypatch, source):
    """Negative control: a planted network import (also one inside a function) is named."""
    path = _plant(tmp_path, monkeypatch, "skills_app.core.fetching", source)
    assert _network_imports("skills_app.core.fetching", path) != []


def test_a_plain_url_parse_in_the_core_is_not_network_code(tmp_path, monkeypatch):
    source = "from urllib.parse import urlsplit\nimport ipaddress\n"
    path = _plant(tmp_path, monkeypatch, "skills_app.core.parsing", source)
    assert _network_imports("skills_app.core.parsing", path) == []


def _plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> Path:
    """A file with `source` that the import reader takes for `module`."""
    planted = tmp_path / f"{module.rpartition('.')[2]}.py"
    planted.write_text(source)
    real_name = _module_name
    monkeypatch.setattr(
        f"{__name__}._module_name", lambda p: module if p == planted else real_name(p)
    )
    return planted


def test_core_has_no_import_cycles():
    graph = _core_graph()
    cycles = _cycles(graph)
    # A package importing its own submodules (to re-export them) is not a cycle of concern.
    real = [c for c in cycles if not all(m.startswith(c[0] + ".") for m in c[1:-1])]
    assert real == [], "\n".join(" -> ".join(c) for c in real)


def test_every_module_has_a_layer():
    assert {name: layer_of(name) for name in _app_modules()}  # raises naming a stray module


def test_no_module_imports_a_higher_layer():
    edges = upward_edges()
    assert edges == [], "imports that go up a layer:\n" + "\n".join(edges)


def test_packages_import_each_other_without_cycles():
    cycles = package_cycles()
    assert cycles == [], "package cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_imports_a_private_name_of_another():
    found = private_imports()
    assert found == [], "private names imported from another module:\n" + "\n".join(found)


# The way out: what turns an announced event into the frame a viewer gets.
WAY_OUT = (
    "skills_app.chat.relay",
    "skills_app.chat.fragments",
    "skills_app.chat.frames",
    "skills_app.chat.event_views",
    "skills_app.chat.items",
    "skills_app.chat.rendering",
)


def calls_into_runs(modules: tuple[str, ...]) -> dict[str, list[str]]:
    """For each module, the modules of `runs` it reaches through imports of ours (transitively)."""
    ours = _app_modules()
    found = {}
    for start in modules:
        seen, todo, reached = {start}, [start], set()
        while todo:
            for target in _imports(ours[todo.pop()]):
                if target.startswith("skills_app.runs"):
                    reached.add(target)
                elif target in ours and target not in seen:
                    seen.add(target)
                    todo.append(target)
        if reached:
            found[start] = sorted(reached)
    return found


def test_the_way_out_calls_nothing_in_runs():
    """A stored event comes back up as data: rendering it for a viewer reads rows, not runs."""
    assert calls_into_runs(WAY_OUT) == {}


def test_a_way_out_that_reaches_runs_is_named(tmp_path, monkeypatch):
    _planted(
        tmp_path,
        monkeypatch,
        {
            "skills_app.chat.relay": "from skills_app.chat import items\n",
            "skills_app.chat.items": "from skills_app.runs import streams\n",
        },
    )
    assert calls_into_runs(("skills_app.chat.relay",)) == {
        "skills_app.chat.relay": ["skills_app.runs.streams"]
    }


def test_the_graph_sees_a_known_edge():
    """Positive control: the reader finds imports that exist, at module level and in functions."""
    graph = _core_graph()
    assert "skills_app.core.profiles" in graph["skills_app.core.request"]
    assert "skills_app.core.ports" in graph["skills_app.core.runner"]
    assert "skills_app.runs.supervisor" in _imports(APP / "chat" / "actions.py")


@pytest.mark.parametrize(
    "source, module, edge",
    [
        (
            "def late():\n    from skills_app.chat import titles\n",
            "skills_app.runs.example",
            "skills_app.runs.example -> skills_app.chat.titles (runs imports features)",
        ),
        (
            "from skills_app.runs.factory import build_runner\n",
            "skills_app.hidden",
            "skills_app.hidden -> skills_app.runs.factory (visibility/hidden imports runs)",
        ),
        (
            "from skills_app.chat import urls\n",
            "skills_app.audit.planted",
            "skills_app.audit.planted -> skills_app.chat.urls (features imports entry points)",
        ),
    ],
)
def test_an_upward_import_is_named(tmp_path, monkeypatch, source, module, edge):
    """Negative control: a planted upward import (also one inside a function) fails, by name."""
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    planted = tmp_path / path.name
    planted.write_text(source)
    modules = {**_app_modules(), module: planted}
    real_name = _module_name
    monkeypatch.setattr(f"{__name__}._app_modules", lambda: modules)
    monkeypatch.setattr(
        f"{__name__}._module_name", lambda p: module if p == planted else real_name(p)
    )
    assert edge in upward_edges()


def test_a_package_cycle_is_named():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def _planted(tmp_path, monkeypatch, sources: dict[str, str]) -> None:
    """Read `sources` (module name -> text) as if they were modules of the app."""
    planted = {}
    for module, source in sources.items():
        path = tmp_path / f"{module}.py"
        path.write_text(source)
        planted[module] = path
    modules = {**_app_modules(), **planted}
    names = {path: module for module, path in planted.items()}
    real_name = _module_name
    monkeypatch.setattr(f"{__name__}._app_modules", lambda: modules)
    monkeypatch.setattr(f"{__name__}._module_name", lambda p: names.get(p) or real_name(p))


def test_a_cycle_between_features_is_named(tmp_path, monkeypatch):
    """Negative control: two features importing each other (one late, in a function) fail."""
    _planted(
        tmp_path,
        monkeypatch,
        {
            "skills_app.compare.planted": "from skills_app.ops import health\n",
            "skills_app.ops.planted": "def late():\n    from skills_app.compare import views\n",
        },
    )
    assert ["skills_app.compare", "skills_app.ops", "skills_app.compare"] in package_cycles()


def test_a_page_of_a_lower_package_belongs_to_its_package(tmp_path, monkeypatch):
    """Negative control: a registry page using the triggers (which use the registry) is a cycle
    of the two packages, and an upward import besides."""
    _planted(
        tmp_path,
        monkeypatch,
        {"skills_app.registry.planted_views": "from skills_app.triggers import runs\n"},
    )
    assert _unit("skills_app.registry.planted_views") == "skills_app.registry"
    assert ["skills_app.registry", "skills_app.triggers", "skills_app.registry"] in (
        package_cycles()
    )
    assert (
        "skills_app.registry.planted_views -> skills_app.triggers.runs "
        "(registry/permissions imports features)"
    ) in upward_edges()


def test_a_cycle_between_two_packages_of_one_layer_is_named(tmp_path, monkeypatch):
    """Negative control: the rules read the registry, so a registry module reading the rules
    (here late, in a function) closes a cycle."""
    _planted(
        tmp_path,
        monkeypatch,
        {
            "skills_app.registry.planted": (
                "def late():\n    from skills_app.permissions import blocked\n"
            )
        },
    )
    assert ["skills_app.registry", "skills_app.permissions", "skills_app.registry"] in (
        package_cycles()
    )


def test_an_admin_module_is_a_node_only_nothing_below_may_import(tmp_path, monkeypatch):
    """A lower package's admin stands with the entry points; importing it from below is an
    upward edge, so no cycle can run through it unseen."""
    _planted(
        tmp_path,
        monkeypatch,
        {"skills_app.triggers.planted": "from skills_app.registry import admin\n"},
    )
    assert _unit("skills_app.registry.admin") == "skills_app.registry (entry points)"
    assert (
        "skills_app.triggers.planted -> skills_app.registry.admin (features imports entry points)"
    ) in upward_edges()


def test_a_private_import_from_a_sibling_is_named(tmp_path, monkeypatch):
    _planted(
        tmp_path,
        monkeypatch,
        {"skills_app.chat.planted": "from .usage import _hidden\nfrom . import titles\n"},
    )
    found = [f for f in private_imports() if f.startswith("skills_app.chat.planted ")]
    assert found == ["skills_app.chat.planted imports skills_app.chat.usage._hidden"]
