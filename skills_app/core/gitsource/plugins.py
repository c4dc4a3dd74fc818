"""Which skills a source's folder holds: one skill, a folder of skills, a plugin, a marketplace.

Layouts, looked for in this order at the source's path:
- `SKILL.md`: the folder is one skill;
- `.claude-plugin/marketplace.json` (Claude Code's plugin marketplace): each plugin it lists
  whose `source` is a folder of this repository (`"./plugins/x"`, relative to
  `metadata.pluginRoot` when set) is read as a plugin; plugins hosted elsewhere (`github`, `url`,
  `git-subdir` sources) are listed as not imported: add them as sources of their own;
- `.claude-plugin/plugin.json` (Claude Code) or `plugin.json` (Agent Plugins): one plugin;
- otherwise every sub-folder with a `SKILL.md` is a skill (a folder of skills), or, failing
  that, every sub-folder of `skills/`.

A plugin's skills are its `skills/<name>/` folders, or the folders its marketplace entry or
Claude Code `plugin.json` lists under `"skills"` (each a skill folder, or a folder of them), as
the official marketplace does with `"source": "./"` and `"skills": ["./skills/pdf", ...]`;
installed as `plugin:name`, the namespacing Claude Code gives them.
Every path a manifest gives is checked: relative, inside the repository, not into `.git`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..lint import name_format_problem
from .errors import GitSourceError
from .location import check_subpath
from .tree import GitEntry

MARKETPLACE = ".claude-plugin/marketplace.json"
CLAUDE_PLUGIN = ".claude-plugin/plugin.json"
AGENT_PLUGIN = "plugin.json"


@dataclass(frozen=True, slots=True)
class SkillFolder:
    """One skill found in a source: its name (plugin:name for plugins), its files, where it sat."""

    name: str | None  # None: a single skill at the root, named by its frontmatter or the source
    files: tuple[GitEntry, ...]  # paths relative to the skill's folder
    origin: str  # the folder inside the source's path, for messages ("" = the root)


@dataclass(slots=True)
class Found:
    skills: list[SkillFolder] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was left out, and why


Reader = Callable[[GitEntry], bytes]


def _under(files: Sequence[GitEntry], prefix: str) -> tuple[GitEntry, ...]:
    return tuple(
        GitEntry(f.path[len(prefix) :], f.mode, f.sha) for f in files if f.path.startswith(prefix)
    )


def _has_skill_md(files: Sequence[GitEntry], prefix: str) -> bool:
    return any(f.path.lower() == f"{prefix}skill.md".lower() for f in files)


def _json(files: Sequence[GitEntry], path: str, read: Reader) -> Any:
    entry = next((f for f in files if f.path == path), None)
    if entry is None:
        return None
    try:
        return json.loads(read(entry).decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GitSourceError(f"{path} is not valid JSON ({exc}); fix it and sync again") from None


def _relative(raw: Any, where: str) -> str:
    """A manifest's folder path, checked to stay inside the repository."""
    if not isinstance(raw, str) or not raw.strip():
        raise GitSourceError(f"{where}: the path must be text such as ./plugins/name")
    text = raw.strip()
    if text.startswith(("/", "\\")) or (len(text) > 1 and text[1] == ":") or "://" in text:
        raise GitSourceError(
            f"{where}: {text!r} is not a path inside the repository; give one such as "
            "./plugins/name"
        )
    try:
        return check_subpath(text)
    except GitSourceError as exc:
        raise GitSourceError(f"{where}: {exc.message}") from None


def _plugin_name(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise GitSourceError(f'{where} has no "name"; a plugin needs one')
    why = name_format_problem(raw)
    if why or raw != raw.strip().lower():
        raise GitSourceError(f"{where}: the plugin name is not usable ({why or 'uppercase'})")
    return raw


def _plugin(
    files: Sequence[GitEntry],
    base: str,
    name: str,
    found: Found,
    read: Reader,
    listed: Any = None,
) -> None:
    """The skills of the plugin whose root is `base` ("" or "dir/").

    `listed` is the marketplace entry's `"skills"` (a path or a list of them, relative to the
    plugin's root); otherwise the plugin.json's; otherwise `skills/`. A listed folder is a skill
    when it has a SKILL.md, else a folder of skills.
    """
    where = f"{base}{CLAUDE_PLUGIN}"
    if listed is None:
        manifest = _json(files, f"{base}{CLAUDE_PLUGIN}", read)
        if isinstance(manifest, dict) and "skills" in manifest:
            listed = manifest["skills"]
    else:
        where = f"{MARKETPLACE} plugin {name}"
    folders = ["skills"]
    if listed is not None:
        paths = listed if isinstance(listed, list) else [listed]
        folders = [_relative(p, f"{where} skills") for p in paths]
    count = 0
    for folder in folders:
        prefix = f"{base}{folder}/" if folder else base
        if _has_skill_md(files, prefix):
            skill = folder.rsplit("/", 1)[-1]
            found.skills.append(SkillFolder(f"{name}:{skill}", _under(files, prefix), prefix))
            count += 1
            continue
        names = sorted(
            {
                f.path[len(prefix) :].split("/", 1)[0]
                for f in files
                if f.path.startswith(prefix) and "/" in f.path[len(prefix) :]
            }
        )
        for skill in names:
            if _has_skill_md(files, f"{prefix}{skill}/"):
                found.skills.append(
                    SkillFolder(
                        f"{name}:{skill}", _under(files, f"{prefix}{skill}/"), f"{prefix}{skill}/"
                    )
                )
                count += 1
    if not count:
        found.notes.append(f"plugin {name} ({base or './'}) has no skills/<name>/SKILL.md")


def find_skill_folders(files: Sequence[GitEntry], read: Reader) -> Found:
    """The skills in a source's listed files (see the module docstring); GitSourceError if none.

    `read` gives a manifest's bytes (bounded by the caller); nothing else is read here.
    """
    found = Found()
    if _has_skill_md(files, ""):
        found.skills.append(SkillFolder(None, tuple(files), ""))
        return found
    market = _json(files, MARKETPLACE, read)
    if market is not None:
        _marketplace(files, market, found, read)
    else:
        plugin = _json(files, CLAUDE_PLUGIN, read) or _json(files, AGENT_PLUGIN, read)
        if isinstance(plugin, dict):
            _plugin(files, "", _plugin_name(plugin.get("name"), "plugin.json"), found, read)
        else:
            _folder_of_skills(files, found)
    if not found.skills:
        notes = f" ({'; '.join(found.notes)})" if found.notes else ""
        raise GitSourceError(
            "no skill found at the source's path: expected a SKILL.md, a folder of skill folders, "
            f"a plugin (.claude-plugin/plugin.json or plugin.json) or {MARKETPLACE}{notes}"
        )
    return found


def _folder_of_skills(files: Sequence[GitEntry], found: Found) -> None:
    for prefix in ("", "skills/"):
        tops = sorted(
            {
                f.path[len(prefix) :].split("/", 1)[0]
                for f in files
                if f.path.startswith(prefix) and "/" in f.path[len(prefix) :]
            }
        )
        skills = [t for t in tops if _has_skill_md(files, f"{prefix}{t}/")]
        for top in skills:
            found.skills.append(
                SkillFolder(top, _under(files, f"{prefix}{top}/"), f"{prefix}{top}/")
            )
        if skills:
            return


def _marketplace(files: Sequence[GitEntry], market: Any, found: Found, read: Reader) -> None:
    if not isinstance(market, dict) or not isinstance(market.get("plugins"), list):
        raise GitSourceError(f'{MARKETPLACE} needs a "plugins" list')
    meta = market.get("metadata")
    root = ""
    if isinstance(meta, dict) and meta.get("pluginRoot"):
        root = _relative(meta["pluginRoot"], f"{MARKETPLACE} metadata.pluginRoot")
    seen: set[str] = set()
    for number, entry in enumerate(market["plugins"], start=1):
        where = f"{MARKETPLACE} plugin {number}"
        if not isinstance(entry, dict):
            raise GitSourceError(f"{where} is not an object")
        name = _plugin_name(entry.get("name"), where)
        if name in seen:
            raise GitSourceError(f"{where}: the plugin name {name!r} is listed twice")
        seen.add(name)
        source = entry.get("source")
        if not isinstance(source, str):
            kind = source.get("source") if isinstance(source, dict) else type(source).__name__
            found.notes.append(
                f"plugin {name} is hosted elsewhere ({kind}); add its repository as a source of "
                "its own"
            )
            continue
        folder = _relative(source, f"{where} ({name}) source")
        if root and not source.strip().startswith("./"):
            folder = check_subpath(f"{root}/{folder}")
        base = f"{folder}/" if folder else ""
        if not any(f.path.startswith(base) for f in files):
            raise GitSourceError(
                f"{where} ({name}): the folder {source!r} is not in the repository"
            )
        _plugin(files, base, name, found, read, entry.get("skills"))
