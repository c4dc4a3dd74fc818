"""learn-claude-code s05's skill loader, for the `tool-result` profile "as the source design".

Seed 001, section 5 (工作原理, "SkillLoader"), gives the loader this module reproduces:

- every SKILL.md under `WORKDIR/skills`, in sorted path order (`sorted(rglob("SKILL.md"))`);
- the text as `Path.read_text()` gives it: UTF-8 with universal newlines (CRLF becomes LF), a
  byte-order mark kept (so such a file has no frontmatter for the match below);
- the frontmatter matched by `^---\\n(.*?)\\n---\\n(.*)` (DOTALL) and read line by line: a line
  with a colon is split at the first one, key and value stripped. No YAML: quotes and the `>` /
  `|` markers stay in the value, and continuation lines without a colon are dropped;
- the name from `name`, else the folder's; a later skill with the same name replaces the
  earlier one in its place (the loader keeps a dict);
- the body as written after the closing `---` line (see `parse_frontmatter`);
- Layer 1 (`get_descriptions`): `  - name: description [tags]` per skill, "No description"
  when there is no description key, "(no skills available)" when there are no skills;
- Layer 2 (`get_content`): `<skill name="NAME">\\n{body}\\n</skill>`, or an error naming the
  available skills.

Skillscope's skills come from several sources, so the design's `WORKDIR/skills` is the
conversation workspace's `skills/`, where a skill is staged under its folder name
(`skill_folder_name`): that path orders the catalog and gives the fallback name. Only this
profile, in design mode, reads skills this way; everything else uses `skillfile` (YAML).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from ..skillfile import SkillSpec
from ..tools.workspace import skill_folder_name

_FRONTMATTER = re.compile(r"^---\n(.*?)\n---\n(.*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class DesignSkill:
    """One skill as the design's loader sees it."""

    name: str
    meta: Mapping[str, str]
    body: str
    spec: SkillSpec


def read_text(path: Path) -> str:
    """The file as `Path.read_text()` reads it on a UTF-8 system (universal newlines)."""
    return _read(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=512)
def _read(path: str, _stamp: int) -> str:
    # Skillscope has already refused a SKILL.md that is not UTF-8, so this decodes.
    text = Path(path).read_bytes().decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """The design's `_parse_frontmatter`: (meta, body)."""
    match = _FRONTMATTER.match(text)
    if not match:
        return {}, text
    meta: dict[str, str] = {}
    for line in match.group(1).strip().splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            meta[key.strip()] = value.strip()
    # The article shows the match and the line loop, not the return; the body is as the match
    # leaves it, not stripped: `<skill name="x">\n\n# X...` for a SKILL.md
    # with a blank line after its frontmatter, its final newline kept (docs/profiles.md).
    return meta, match.group(2)


def design_path(spec: SkillSpec) -> PurePosixPath:
    """Where the skill's SKILL.md sits under the workspace's skills/ once staged."""
    return PurePosixPath("skills", skill_folder_name(spec.name), spec.skill_file.name)


def load_skills(specs: Sequence[SkillSpec]) -> dict[str, DesignSkill]:
    """The design's `_load_all` over the offered skills: name -> skill, in its order."""
    skills: dict[str, DesignSkill] = {}
    for spec in sorted(specs, key=design_path):
        meta, body = parse_frontmatter(read_text(spec.skill_file))
        name = meta.get("name", design_path(spec).parent.name)
        skills[name] = DesignSkill(name=name, meta=meta, body=body, spec=spec)
    return skills


def get_descriptions(skills: Mapping[str, DesignSkill]) -> str:
    """Layer 1, the design's `get_descriptions`."""
    if not skills:
        return "(no skills available)"
    lines = []
    for name, skill in skills.items():
        description = skill.meta.get("description", "No description")
        tags = skill.meta.get("tags", "")
        line = f"  - {name}: {description}"
        if tags:
            line += f" [{tags}]"
        lines.append(line)
    return "\n".join(lines)


def wrap(name: str, body: str) -> str:
    """Layer 2, the design's `get_content` for a known skill."""
    return f'<skill name="{name}">\n{body}\n</skill>'


def unknown(name: str, skills: Mapping[str, DesignSkill]) -> str:
    """The design's `get_content` for a name it does not know."""
    return f"Error: Unknown skill '{name}'. Available: {', '.join(skills)}"
