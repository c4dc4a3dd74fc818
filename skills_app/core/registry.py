"""Skill sources -> skills: discovery, precedence, a stat-keyed cache and live reload.

Layouts found under a source root (depth-bounded, hidden folders, `.git` and `node_modules`
skipped, symlinks followed with each real folder visited once):
- `<root>/SKILL.md`: the root is itself a skill, named after the root folder;
- `<root>/<name>/SKILL.md` (and deeper grouping folders): named after the skill's folder;
- `<root>/<plugin>/skills/<name>/SKILL.md`: the plugin layout, named `plugin:name`.

Precedence (first wins; every loser is reported in `shadowed`, never silently dropped):
1. skills from `extra` (uploads), in the order the callable yields them;
2. the sources in the order given to the registry. The Django glue passes SKILLS_DIRS first
   (an earlier folder wins) and the bundled folder last, so anything an admin installs overrides
   a bundled skill of the same name, as in Claude Code;
3. inside one source, folders in sorted path order.

Cache: a directory listing is reused while the folder's (mtime_ns, inode) is unchanged, and a
parsed skill while every file and folder of it keeps its (mtime_ns, size, inode). A warm
`refresh()` therefore costs only stat() calls; any change re-reads just that skill.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from skills_app.core.skillfile import (
    Problem,
    SkillFileError,
    SkillSpec,
    TreeEntry,
    parse_skill_tree,
    walk_skill_tree,
)

MAX_DEPTH = 4
_SKIP_DIRS = frozenset({"node_modules", "__pycache__"})


@dataclass(frozen=True, slots=True)
class SkillSource:
    kind: str  # "bundled" | "dirs" | ...; becomes SkillSpec.source
    path: Path


@dataclass(frozen=True, slots=True)
class Shadowed:
    name: str
    winner: Path
    loser: Path
    winner_source: str
    loser_source: str


@dataclass(frozen=True, slots=True)
class LoadFailure:
    """A skill folder that could not be loaded (bad YAML, not UTF-8, unreadable)."""

    name: str
    path: Path
    source: str
    problem: Problem


@dataclass(slots=True)
class _Listing:
    stamp: tuple[int, int]
    has_skill_file: bool
    subdirs: tuple[str, ...]


@dataclass(slots=True)
class _Loaded:
    entries: list[TreeEntry]
    spec: SkillSpec | None
    failure: LoadFailure | None


class Found(NamedTuple):
    """A folder holding a SKILL.md, with the command name discovery gave it."""

    name: str
    path: str
    stat: os.stat_result


def skill_name_for(root: str, parts: tuple[str, ...]) -> str:
    """Command name of a skill folder at `parts` below `root` (see the module docstring)."""
    if not parts:
        return os.path.basename(os.path.normpath(root))
    if len(parts) == 3 and parts[1] == "skills":
        return f"{parts[0]}:{parts[2]}"
    return parts[-1]


def discover(
    root: Path | str,
    *,
    max_depth: int = MAX_DEPTH,
    previous: dict[str, _Listing] | None = None,
    listings: dict[str, _Listing] | None = None,
    seen: set[tuple[int, int]] | None = None,
) -> list[Found]:
    """Every skill folder under `root`, in sorted path order.

    Listings still valid in `previous` are reused; every listing used is stored in `listings`.
    """
    previous = {} if previous is None else previous
    listings = {} if listings is None else listings
    seen = set() if seen is None else seen
    root = str(root)
    found: list[Found] = []

    def visit(path: str, parts: tuple[str, ...], depth: int) -> None:
        try:
            st = os.stat(path)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        listing = _listing(path, st, previous)
        listings[path] = listing
        if listing.has_skill_file:
            found.append(Found(skill_name_for(root, parts), path, st))
            return
        if depth < max_depth:
            for child in listing.subdirs:
                visit(f"{path}{os.sep}{child}", (*parts, child), depth + 1)

    visit(root, (), 0)
    return found


def _listing(path: str, st: os.stat_result, previous: dict[str, _Listing]) -> _Listing:
    stamp = (st.st_mtime_ns, st.st_ino)
    cached = previous.get(path)
    if cached is not None and cached.stamp == stamp:
        return cached
    has_skill_file = False
    subdirs: list[str] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    if entry.name.lower() == "skill.md" and entry.is_file():
                        has_skill_file = True
                    elif (
                        not entry.name.startswith(".")
                        and entry.name not in _SKIP_DIRS
                        and entry.is_dir()
                    ):
                        subdirs.append(entry.name)
                except OSError:
                    continue
    except OSError:
        pass
    return _Listing(stamp, has_skill_file, tuple(sorted(subdirs)))


def _unchanged(entries: list[TreeEntry], dir_stat: os.stat_result) -> bool:
    if not entries or entries[0].stamp != (dir_stat.st_mtime_ns, dir_stat.st_size, dir_stat.st_ino):
        return False
    stat_ = os.stat
    try:
        for entry in entries[1:]:
            st = stat_(entry.path)
            if (st.st_mtime_ns, st.st_size, st.st_ino) != entry.stamp:
                return False
    except OSError:
        return False
    return True


class SkillRegistry:
    """Skills from several sources, re-checked cheaply on every `skills()` / `get()` call."""

    def __init__(
        self,
        sources: Sequence[SkillSource],
        *,
        extra: Callable[[], Iterable[SkillSpec]] | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        # Absolute paths, so SkillSpec.path is absolute whatever the caller's working folder.
        self.sources = tuple(SkillSource(s.kind, Path(os.path.abspath(s.path))) for s in sources)
        self._extra = extra
        self._max_depth = max_depth
        self._lock = threading.RLock()
        self._listings: dict[str, _Listing] = {}
        self._loaded: dict[tuple[str, str, str], _Loaded] = {}
        self._winners: dict[str, SkillSpec] = {}
        self._sorted: list[SkillSpec] = []
        self._candidates: list[SkillSpec] = []
        self._failures: list[LoadFailure] = []
        self._shadowed: list[Shadowed] = []
        self._source_problems: list[Problem] = []
        self._refreshed = False
        # How many times a SKILL.md was parsed; lets tests and the bench prove warm checks only stat.
        self.parse_count = 0

    def refresh(self) -> None:
        """Re-check every source; unchanged folders cost only stat() calls."""
        with self._lock:
            listings: dict[str, _Listing] = {}
            loaded: dict[tuple[str, str, str], _Loaded] = {}
            candidates: list[SkillSpec] = list(self._extra()) if self._extra else []
            failures: list[LoadFailure] = []
            source_problems: list[Problem] = []
            seen: set[tuple[int, int]] = set()
            for source in self.sources:
                if not os.path.isdir(source.path):
                    msg = f"skill folder {source.path} does not exist; create it or remove it from the configured skill folders"
                    source_problems.append(
                        Problem("warning", "source-missing", msg, str(source.path))
                    )
                    continue
                found = discover(
                    source.path,
                    max_depth=self._max_depth,
                    previous=self._listings,
                    listings=listings,
                    seen=seen,
                )
                for item in found:
                    key = (item.path, item.name, source.kind)
                    entry = self._load(key, item, source.kind)
                    loaded[key] = entry
                    if entry.spec is not None:
                        candidates.append(entry.spec)
                    elif entry.failure is not None:
                        failures.append(entry.failure)
            # Only what this pass visited is kept, so removed folders do not linger in the caches.
            self._listings = listings
            self._loaded = loaded
            self._resolve(candidates)
            self._failures = failures
            self._source_problems = source_problems
            self._refreshed = True

    def _load(self, key: tuple[str, str, str], item: Found, kind: str) -> _Loaded:
        cached = self._loaded.get(key)
        if cached is not None and _unchanged(cached.entries, item.stat):
            return cached
        self.parse_count += 1
        entries: list[TreeEntry] = []
        try:
            entries = walk_skill_tree(Path(item.path))
            spec = parse_skill_tree(Path(item.path), entries, name=item.name, source=kind)
            return _Loaded(entries, spec, None)
        except SkillFileError as exc:
            return _Loaded(
                entries, None, LoadFailure(item.name, Path(item.path), kind, exc.problem)
            )
        except OSError as exc:
            problem = Problem(
                "error", "unreadable", f"cannot read the skill: {exc}; check permissions", item.path
            )
            return _Loaded([], None, LoadFailure(item.name, Path(item.path), kind, problem))

    def _resolve(self, candidates: list[SkillSpec]) -> None:
        winners: dict[str, SkillSpec] = {}
        shadowed: list[Shadowed] = []
        for spec in candidates:
            winner = winners.get(spec.name)
            if winner is None:
                winners[spec.name] = spec
            else:
                shadowed.append(
                    Shadowed(spec.name, winner.path, spec.path, winner.source, spec.source)
                )
        self._winners = winners
        self._sorted = sorted(winners.values(), key=lambda s: s.name)
        self._candidates = candidates
        self._shadowed = shadowed

    def _ensure(self) -> None:
        if not self._refreshed:
            self.refresh()

    def skills(self) -> list[SkillSpec]:
        """Refresh, then every winning skill sorted by name."""
        self.refresh()
        return list(self._sorted)

    def get(self, name: str) -> SkillSpec | None:
        """Refresh, then the winning skill called `name`, or None."""
        self.refresh()
        return self._winners.get(name)

    def candidates(self) -> list[SkillSpec]:
        """Every loaded skill in precedence order, shadowed ones included (as of the last refresh)."""
        self._ensure()
        return list(self._candidates)

    @property
    def failures(self) -> list[LoadFailure]:
        """Skill folders that could not be loaded, as of the last refresh."""
        self._ensure()
        return list(self._failures)

    @property
    def errors(self) -> list[Problem]:
        """The problem (file, line, message) of each skill that could not be loaded."""
        return [f.problem for f in self.failures]

    @property
    def shadowed(self) -> list[Shadowed]:
        """Clash losers, as of the last refresh."""
        self._ensure()
        return list(self._shadowed)

    @property
    def source_problems(self) -> list[Problem]:
        """Configured source folders that do not exist."""
        self._ensure()
        return list(self._source_problems)
