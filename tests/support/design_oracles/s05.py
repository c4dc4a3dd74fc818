"""learn-claude-code s05 (seed 001, `001_2f86e32a3cf07d77.txt`), re-typed as the oracle.

Section 5 (工作原理（代码分析）) walks through `agents/s05_skill_loading.py`: `SkillLoader`
(`_load_all`, `_parse_frontmatter`, `get_descriptions`, `get_content`), `SYSTEM`,
`TOOL_HANDLERS`, load_skill's schema and `agent_loop` (`max_tokens=8000`). The article shows
neither the four other tools' schemas nor their handlers (`run_bash`, `run_read`, `run_write`,
`run_edit`): those come from the repository file the article reads, and are marked so here.

The article's `_parse_frontmatter` listing elides its return with "..."; issue #30 specifies
the body as `match.group(2)` leaves it (not stripped), which `parse_frontmatter` follows.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

MAX_TOKENS = 8000  # §5, agent_loop: client.messages.create(..., max_tokens=8000)


class SkillLoader:
    """§5 "这一节最核心的新组件，就是 SkillLoader"."""

    def __init__(self, skills_dir: Path) -> None:
        self.skills_dir = skills_dir
        self.skills: dict[str, dict[str, Any]] = {}
        self._load_all()

    def _load_all(self) -> None:
        # §5 "真正的扫描逻辑在 _load_all() 里".
        for f in sorted(self.skills_dir.rglob("SKILL.md")):
            text = f.read_text()
            meta, body = self._parse_frontmatter(text)
            name = meta.get("name", f.parent.name)
            self.skills[name] = {"meta": meta, "body": body, "path": str(f)}

    def _parse_frontmatter(self, text: str) -> tuple[dict[str, str], str]:
        # §5 "接着看 _parse_frontmatter()"; the elided lines: no match means no frontmatter.
        match = re.match(r"^---\n(.*?)\n---\n(.*)", text, re.DOTALL)
        if not match:
            return {}, text
        meta: dict[str, str] = {}
        for line in match.group(1).strip().splitlines():
            if ":" in line:
                key, val = line.split(":", 1)
                meta[key.strip()] = val.strip()
        return meta, match.group(2)

    def get_descriptions(self) -> str:
        # §5 "答案在 get_descriptions()".
        if not self.skills:
            return "(no skills available)"
        lines = []
        for name, skill in self.skills.items():
            desc = skill["meta"].get("description", "No description")
            tags = skill["meta"].get("tags", "")
            line = f"  - {name}: {desc}"
            if tags:
                line += f" [{tags}]"
            lines.append(line)
        return "\n".join(lines)

    def get_content(self, name: str) -> str:
        # §5 "接着再看第二层生成逻辑，也就是 get_content()".
        skill = self.skills.get(name)
        if not skill:
            return f"Error: Unknown skill '{name}'. Available: {', '.join(self.skills.keys())}"
        return f'<skill name="{name}">\n{skill["body"]}\n</skill>'


def system(workdir: Path, loader: SkillLoader) -> str:
    """§5 "首先是 Layer 1 进入 system prompt": SYSTEM."""
    return f"""You are a coding agent at {workdir}.
Use load_skill to access specialized knowledge before tackling unfamiliar topics.

Skills available:
{loader.get_descriptions()}"""


# §5 "再往下看 TOOLS 数组" shows load_skill's entry; the other four are the repository file's.
TOOLS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": "Read file contents.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["path"],
        },
    },
    {
        "name": "write_file",
        "description": "Write content to file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace exact text in file.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string"},
                "new_text": {"type": "string"},
            },
            "required": ["path", "old_text", "new_text"],
        },
    },
    {
        "name": "load_skill",
        "description": "Load specialized knowledge by name.",
        "input_schema": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Skill name to load"}},
            "required": ["name"],
        },
    },
]


# -- the handlers of TOOL_HANDLERS (the repository file's; the article shows the map only) -----


def safe_path(workdir: Path, p: str) -> Path:
    path = (workdir / p).resolve()
    if not path.is_relative_to(workdir):
        raise ValueError(f"Path escapes workspace: {p}")
    return path


def run_bash(workdir: Path, command: str) -> str:
    dangerous = ["rm -rf /", "sudo", "shutdown", "reboot", "> /dev/"]
    if any(d in command for d in dangerous):
        return "Error: Dangerous command blocked"
    try:
        r = subprocess.run(
            command, shell=True, cwd=workdir, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return "Error: Timeout (120s)"
    out = (r.stdout + r.stderr).strip()
    return out[:50000] if out else "(no output)"


def run_read(workdir: Path, path: str, limit: int | None = None) -> str:
    try:
        lines = safe_path(workdir, path).read_text().splitlines()
        if limit and limit < len(lines):
            lines = lines[:limit] + [f"... ({len(lines) - limit} more)"]
        return "\n".join(lines)[:50000]
    except Exception as e:
        return f"Error: {e}"


def run_write(workdir: Path, path: str, content: str) -> str:
    try:
        fp = safe_path(workdir, path)
        fp.parent.mkdir(parents=True, exist_ok=True)
        fp.write_text(content)
        return f"Wrote {len(content)} bytes"
    except Exception as e:
        return f"Error: {e}"


def run_edit(workdir: Path, path: str, old_text: str, new_text: str) -> str:
    try:
        fp = safe_path(workdir, path)
        content = fp.read_text()
        if old_text not in content:
            return f"Error: Text not found in {path}"
        fp.write_text(content.replace(old_text, new_text, 1))
        return f"Edited {path}"
    except Exception as e:
        return f"Error: {e}"
