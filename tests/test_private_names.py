"""No module of the project reaches into another package's private names (issue 41).

A name with a leading underscore is a library's own business: a minor release may rename it
without notice, and code built on it breaks silently. Two ways in are checked, by reading the
source (ast), in skills_app/ and webapp/:

- `from x import _y` (and `import x._y`) where x is not the project's;
- `obj._attr` where `_attr` is defined nowhere in the project (no function, class, assignment,
  attribute or parameter of ours has that name), so it can only be someone else's;
- a class of ours that overrides a private name of a base class from another package, by
  defining it in its body or by assigning `self._x` where the base class's own code assigns
  `self._x` (an instance attribute, found by reading the base classes' source).

What is still allowed is listed in ALLOWED with its reason; each entry must still be needed.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from functools import cache
from typing import Any

from tests.support.paths import REPO

PACKAGES = ("skills_app", "webapp")

_EXIT = "os._exit is the standard library's documented way for a forked child to end at once"
_RE2 = (
    "google-re2 names no public type for a compiled pattern; used in annotations only (never "
    "evaluated at run time), so a rename breaks the type check, not the app"
)
_CHANNELS_TYPES = (
    "channels exports no public name for this type; imported under TYPE_CHECKING for "
    "annotations only, so a rename breaks the type check, not the app"
)

# (module path, name) → why it is allowed. A new entry needs a reason that holds for good.
ALLOWED: dict[tuple[str, str], str] = {
    ("skills_app/core/tools/bash.py", "_exit"): _EXIT,
    ("skills_app/core/tools/caps.py", "_exit"): _EXIT,
    ("skills_app/core/tools/reaper.py", "_exit"): _EXIT,
    ("skills_app/permissions/admin.py", "_default_manager"): (
        "Django documents Model._default_manager for code that works with any model"
    ),
    ("skills_app/core/tools/search.py", "_Regexp"): _RE2,
    ("skills_app/core/tools/walk.py", "_Regexp"): _RE2,
    ("skills_app/chat/database_away.py", "channels.consumer._ChannelScope"): _CHANNELS_TYPES,
    ("skills_app/chat/database_away.py", "channels.utils._ChannelApplication"): _CHANNELS_TYPES,
    ("webapp/wsorigin.py", "channels.consumer._ChannelScope"): _CHANNELS_TYPES,
    ("webapp/wsorigin.py", "channels.utils._ChannelApplication"): _CHANNELS_TYPES,
    ("skills_app/routing.py", "channels.consumer._ASGIApplicationProtocol"): _CHANNELS_TYPES,
    ("skills_app/routing.py", "channels.routing._ExtendedURLPattern"): _CHANNELS_TYPES,
    ("skills_app/core/llm.py", "anthropic.lib.streaming._messages.accumulate_event"): (
        "the SDK's own accumulation of raw stream events into the final message (what "
        "messages.stream() runs), without the helper events messages.stream() also builds for "
        "every delta; the SDK exports it nowhere else. The lock pins the SDK and "
        "tests/core/test_llm.py fails if it moves"
    ),
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(module: str | None, level: int) -> bool:
    return level > 0 or (module or "").split(".")[0] in PACKAGES


def _sources() -> list[tuple[str, ast.Module]]:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            relative = str(path.relative_to(REPO))
            found.append((relative, ast.parse(path.read_text(), filename=relative)))
    return found


def _defined_here(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """Every private name the project itself defines or assigns anywhere."""
    names: set[str] = set()
    for _path, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)  # dataclass fields set by keyword, slots...
    return {name for name in names if _is_private(name)}


def _imported(tree: ast.Module) -> dict[str, str]:
    """Local name → the dotted name it was imported as."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _resolve(dotted: str) -> Any:
    """The object a dotted name names (a module, then attributes), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part, None)
        return found
    return None


def _dotted(node: ast.expr, imported: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return imported.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, imported)
        return f"{base}.{node.attr}" if base else None
    return None


@cache
def _instance_attributes(cls: type) -> frozenset[str]:
    """The `self.x` names the code of a foreign class and its bases assigns."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        # Each method's own source: a library may re-home its classes' __module__ (httpx names
        # its public classes "httpx"), where getsource of the class finds nothing.
        for member in vars(klass).values():
            function = getattr(member, "__func__", member)
            if not inspect.isfunction(function):
                continue
            try:
                source = textwrap.dedent(inspect.getsource(function))
            except (OSError, TypeError):
                continue
            for node in ast.walk(ast.parse(source)):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                ):
                    names.add(node.attr)
    return frozenset(names)


def _self_stores(klass: ast.ClassDef) -> set[str]:
    return {
        node.attr
        for node in ast.walk(klass)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def _overrides(path: str, tree: ast.Module) -> set[tuple[str, str]]:
    """Private names a class of ours defines that a foreign base class has too."""
    imported = _imported(tree)
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            dotted = _dotted(base, imported)
            if dotted is None or _own(dotted, 0):
                continue
            foreign = _resolve(dotted)
            for item in node.body:
                names = []
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names = [item.name]
                elif isinstance(item, ast.Assign | ast.AnnAssign):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    names = [t.id for t in targets if isinstance(t, ast.Name)]
                for name in names:
                    if _is_private(name) and foreign is not None and hasattr(foreign, name):
                        found.add((path, f"{dotted}.{name}"))
            if isinstance(foreign, type):
                for name in _self_stores(node) & _instance_attributes(foreign):
                    if _is_private(name):
                        found.add((path, f"{dotted}.{name}"))
    return found


def _reaches(trees: list[tuple[str, ast.Module]]) -> set[tuple[str, str]]:
    ours = _defined_here(trees)
    found: set[tuple[str, str]] = set()
    for path, tree in trees:
        found |= _overrides(path, tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not _own(node.module, node.level):
                for alias in node.names:
                    if _is_private(alias.name) or any(
                        _is_private(part) for part in (node.module or "").split(".")
                    ):
                        found.add((path, f"{node.module}.{alias.name}"))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if not _own(alias.name, 0) and any(
                        _is_private(part) for part in alias.name.split(".")
                    ):
                        found.add((path, alias.name))
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and _is_private(node.attr)
                and node.attr not in ours
            ):
                found.add((path, node.attr))
    return found


def test_no_module_reaches_into_another_packages_private_names():
    found = _reaches(_sources())
    unexplained = sorted(found - set(ALLOWED))
    assert unexplained == [], (
        "private names of other packages (use their public API, or list the use in ALLOWED "
        "with the reason): " + ", ".join(f"{path}: {name}" for path, name in unexplained)
    )
    stale = sorted(set(ALLOWED) - found)
    assert stale == [], f"ALLOWED lists uses that are gone: {stale}"


def test_the_check_sees_each_way_in():
    """The scan finds a private import, a private submodule and a foreign private attribute,
    and leaves the project's own private names alone."""
    source = (
        "from anthropic._exceptions import APIError\n"
        "from channels_redis.core import _private_helper\n"
        "import anthropic._base_client\n"
        "class Ours:\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "    def use(self, layer):\n"
        "        return self._mine, layer._map_channel_keys_to_connection, self.__class__\n"
        "from django.db.backends.sqlite3.base import DatabaseWrapper\n"
        "class Wrapper(DatabaseWrapper):\n"
        "    def _commit(self):\n"
        "        pass\n"
        "    def _ours_alone(self):\n"
        "        pass\n"
        "from httpx2 import AsyncHTTPTransport\n"
        "class Transport(AsyncHTTPTransport):\n"
        "    def __init__(self):\n"
        "        self.channels = {}\n"
        "        self._own_count = 0\n"
        "        self._pool = None\n"
    )
    tree = ast.parse(source)
    assert _reaches([("example.py", tree)]) == {
        ("example.py", "anthropic._exceptions.APIError"),
        ("example.py", "channels_redis.core._private_helper"),
        ("example.py", "anthropic._base_client"),
        ("example.py", "_map_channel_keys_to_connection"),
        ("example.py", "django.db.backends.sqlite3.base.DatabaseWrapper._commit"),
        ("example.py", "httpx2.AsyncHTTPTransport._pool"),
    }
