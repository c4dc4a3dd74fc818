"""The shape of the code: `skills_app/core/` is plain Python (no Django) without import cycles.

Imports are read from the source with `ast` (module level and inside functions, also under
`TYPE_CHECKING`), so a cycle hidden in a late import counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "skills_app" / "core"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
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
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _core_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(path) if m in modules and m != name}
    return graph


def test_core_never_imports_django():
    offenders = {
        _module_name(path): sorted(
            m for m in _imports(path) if m.split(".")[0] in {"django", "channels"}
        )
        for path in CORE.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_has_no_import_cycles():
    graph = _core_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    # A package importing its own submodules (to re-export them) is not a cycle of concern.
    real = [c for c in cycles if not all(m.startswith(c[0] + ".") for m in c[1:-1])]
    assert real == [], "\n".join(" -> ".join(c) for c in real)


def test_the_graph_sees_a_known_edge():
    """Positive control: the reader finds imports that exist."""
    graph = _core_graph()
    assert "skills_app.core.profiles" in graph["skills_app.core.request"]
    assert "skills_app.core.ports" in graph["skills_app.core.runner"]
