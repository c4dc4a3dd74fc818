"""Where the skills are in an upload: one skill at the root or in one folder, or a plugin."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .. import frontmatter
from ..lint import name_format_problem
from ..skilltypes import SkillFileError
from ..tree import MAX_TREE_DEPTH
from .members import Member, UploadError


@dataclass(frozen=True, slots=True)
class Candidate:
    """One skill found in an upload: its command name and its files, relative to its folder."""

    name: str
    files: tuple[Member, ...]
    origin: str  # where it sat in the upload, for messages ("" = the root)


@dataclass(slots=True)
class Layout:
    skills: list[Candidate]
    ignored: list[str] = field(default_factory=list)


def _frontmatter_name(data: bytes) -> str | None:
    """`name:` of a SKILL.md when it is readable and a valid skill name; lint reports the rest."""
    # The same bounded reader as discovery and lint: an alias bomb fails here, fast, and the
    # lint of the staged skill then reports why.
    try:
        fm = frontmatter.read(data.decode("utf-8"), Path("SKILL.md"))[0]
    except (UnicodeDecodeError, SkillFileError):
        return None
    name = fm.get("name")
    if isinstance(name, str) and name_format_problem(name) is None:
        return unicodedata.normalize("NFKC", name.strip())
    return None


def _is_skill_file(path: str) -> bool:
    return path.rsplit("/", 1)[-1].lower() == "skill.md"


def _under(members: list[Member], prefix: str) -> tuple[Member, ...]:
    return tuple(
        Member(m.path[len(prefix) :], m.data, m.executable)
        for m in members
        if m.path.startswith(prefix)
    )


def _depth_check(candidate: Candidate) -> None:
    for m in candidate.files:
        folders = m.path.count("/")
        if folders > MAX_TREE_DEPTH:
            where = f"{candidate.origin}{m.path}"
            raise UploadError(
                f"{where} is {folders} folders deep inside the skill; skills are read at most "
                f"{MAX_TREE_DEPTH} folders deep, so move it up"
            )


def find_skills(members: list[Member], *, stem: str | None) -> Layout:
    """Which skills an upload holds (see the module docstring of `uploads` for the layouts).

    `stem` is the archive's file name without extension (None for folders): it names a skill
    whose SKILL.md sits at the root without a `name:`, and a plugin whose `skills/` is at the root.
    """
    if not members:
        raise UploadError("the upload is empty; choose a skill folder or a zip of one")
    paths = [m.path for m in members]
    root_files = [p for p in paths if "/" not in p]
    tops = sorted({p.split("/", 1)[0] for p in paths if "/" in p})
    skill_tops = [t for t in tops if any(p.lower() == f"{t.lower()}/skill.md" for p in paths)]

    root_skill = next((m for m in members if m.path.lower() == "skill.md"), None)
    if root_skill is not None:
        name = _frontmatter_name(root_skill.data) or stem
        if not name:
            raise UploadError(
                "SKILL.md is at the root of the upload but has no valid `name:`; add one, or put "
                "the files in a folder named after the skill"
            )
        layout = Layout([Candidate(name, tuple(members), "")])
    elif skill_tops:
        if len(skill_tops) > 1:
            raise UploadError(
                f"the upload holds {len(skill_tops)} skill folders ({', '.join(skill_tops)}) where "
                "one is expected; upload one skill at a time, or arrange several as a plugin: "
                "<plugin>/skills/<name>/SKILL.md"
            )
        top = skill_tops[0]
        others = [p for p in [*root_files, *tops] if p != top]
        if others:
            raise UploadError(
                f"the skill folder {top}/ has company outside it ({', '.join(sorted(others)[:5])}); "
                f"put every file inside {top}/ or remove the others"
            )
        layout = Layout([Candidate(top, _under(members, f"{top}/"), f"{top}/")])
    else:
        layout = _plugin_layout(members, paths, tops, stem)
    for candidate in layout.skills:
        _depth_check(candidate)
    return layout


def _plugin_layout(
    members: list[Member], paths: list[str], tops: list[str], stem: str | None
) -> Layout:
    if any(p.startswith("skills/") for p in paths):
        base, plugin = "", stem
    elif len(tops) == 1 and any(p.startswith(f"{tops[0]}/skills/") for p in paths):
        base, plugin = f"{tops[0]}/", tops[0]
    else:
        base, plugin = None, None
    names: list[str] = []
    if base is not None:
        names = sorted(
            {
                p[len(base) :].split("/")[1]
                for p in paths
                if p.startswith(f"{base}skills/")
                and p[len(base) :].count("/") == 2
                and _is_skill_file(p)
            }
        )
    if not names:
        deeper = sorted(p for p in paths if _is_skill_file(p))
        hint = f" (found only {', '.join(deeper[:3])})" if deeper else ""
        raise UploadError(
            f"no SKILL.md where one is expected{hint}; the upload must hold my-skill/SKILL.md, "
            "SKILL.md at its root, or a plugin with skills/<name>/SKILL.md"
        )
    if not plugin:
        raise UploadError(
            "the skills/ folder is at the root of the upload, so the plugin has no name; "
            "put it in a folder named after the plugin (<plugin>/skills/<name>/SKILL.md)"
        )
    why = name_format_problem(plugin)
    if why:
        raise UploadError(f"the plugin name is not usable: {why}; rename the archive or folder")
    skills = [
        Candidate(f"{plugin}:{n}", _under(members, f"{base}skills/{n}/"), f"{base}skills/{n}/")
        for n in names
    ]
    kept = {f"{base}skills/{n}/" for n in names}
    ignored = [p for p in paths if not any(p.startswith(k) for k in kept)]
    return Layout(skills, ignored)


def archive_stem(filename: str) -> str:
    """The archive's file name without folders and extension."""
    return PurePosixPath(filename.replace("\\", "/")).stem
