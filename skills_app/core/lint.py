"""Lint of SKILL.md content: typed frontmatter access that records problems, and body checks.

Severity follows the policy in `skillfile`: errors break the Agent Skills spec, warnings are
advice. Every check appends Problems; none raises.

Lint messages are shown to people who may not see the skill's body (the Skills page, upload
errors), so body checks state the rule and the line, never the body text they found.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .skilltypes import Problem

KNOWN_KEYS = frozenset(
    {
        "name", "description", "when_to_use", "argument-hint", "arguments",
        "disable-model-invocation", "user-invocable", "allowed-tools", "disallowed-tools",
        "model", "effort", "context", "agent", "background", "hooks", "paths", "shell",
        "metadata", "license", "compatibility", "version", "mode",
    }
)  # fmt: skip
EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500
MAX_BODY_TOKENS = 5000
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_KEY_LINE = re.compile(r"^([^\s#:][^:\n]*):", re.M)


class Fields:
    """Typed access to frontmatter values that records a Problem for each bad value."""

    def __init__(
        self, fm: dict[str, Any], yaml_text: str, file: Path, probs: list[Problem]
    ) -> None:
        self.fm, self.yaml_text, self.file, self.probs = fm, yaml_text, str(file), probs
        self.lines: dict[str, int] | None = None

    def problem(self, severity: str, rule: str, key: str | None, message: str) -> None:
        if self.lines is None:  # only a skill with problems pays for locating its keys
            self.lines = {
                m[1].strip(): self.yaml_text.count("\n", 0, m.start()) + 2
                for m in _KEY_LINE.finditer(self.yaml_text)
            }
        line = self.lines.get(key) if key else None
        self.probs.append(Problem(severity, rule, message, self.file, line))

    def text(self, key: str) -> str | None:
        value = self.fm.get(key)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, (list, dict)):
            self.problem(
                "error",
                "field-type",
                key,
                f"`{key}` must be a string, not a {type(value).__name__}",
            )
            return None
        return str(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.fm.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        self.problem(
            "error", "bool-value", key, f"`{key}: {value!r}` is not a boolean; use true or false"
        )
        return default

    def items(self, key: str, split: Any) -> tuple[str, ...]:
        value = self.fm.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(split(value))
        if isinstance(value, list):
            return tuple(str(v).strip() for v in value if v is not None and str(v).strip())
        self.problem("error", "field-type", key, f"`{key}` must be a string or a YAML list")
        return ()

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.fm.get(key)
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        self.problem(
            "warning", "field-type", key, f"`{key}` must be a mapping; the value is ignored"
        )
        return {}


def name_format_problem(value: str) -> str | None:
    """Why `value` is not a valid skill name (Agent Skills rules, NFKC), or None when it is."""
    n = unicodedata.normalize("NFKC", value.strip())
    why = []
    if not n:
        why.append("it is empty")
    if len(n) > MAX_NAME:
        why.append(f"it is {len(n)} characters long (limit {MAX_NAME})")
    if n != n.lower():
        why.append("it has uppercase letters")
    if n.startswith("-") or n.endswith("-"):
        why.append("it starts or ends with a hyphen")
    if "--" in n:
        why.append("it contains '--'")
    bad = "".join(sorted({c for c in n if not (c.isalnum() or c == "-")}))
    if bad:
        why.append(f"it contains {bad!r}")
    if not why:
        return None
    return f"name {value!r} is not valid: {'; '.join(why)}. Use 1-64 lowercase letters, digits and single hyphens"


def first_paragraph(body: str) -> str:
    """The body's first prose paragraph (headings and fenced code skipped), joined on spaces."""
    para: list[str] = []
    fenced = False
    for line in body.split("\n"):
        s = line.strip()
        if s.startswith(("```", "~~~")):
            if para:
                break
            fenced = not fenced
            continue
        if fenced or (not para and s.startswith("#")):
            continue
        if not s:
            if para:
                break
            continue
        para.append(s)
    return " ".join(para)


def check_keys(fm: dict[str, Any], f: Fields) -> None:
    """Warn about frontmatter keys nothing reads, suggesting a known spelling."""
    for key in fm:
        if key not in KNOWN_KEYS:
            alt = next(
                (
                    k
                    for k in (str(key).replace("_", "-"), str(key).replace("-", "_"))
                    if k in KNOWN_KEYS
                ),
                None,
            )
            hint = f"did you mean `{alt}`?" if alt else "it is kept but nothing reads it"
            f.problem("warning", "unknown-key", key, f"unknown frontmatter key `{key}`: {hint}")


def check_name(name: str, f: Fields) -> None:
    """Check the folder name and `name:` against the name rules and each other."""
    dir_name = name.rsplit(":", 1)[-1]
    fm_name = f.text("name")
    for candidate, key in ((dir_name, None), (fm_name, "name")):
        if candidate is not None and (key is None or candidate != dir_name):
            why = name_format_problem(candidate)
            if why:
                f.problem("error", "name-format", key, why)
    if fm_name is not None and unicodedata.normalize(
        "NFKC", fm_name.strip()
    ) != unicodedata.normalize("NFKC", dir_name):
        msg = f"`name: {fm_name}` differs from the folder name {dir_name!r}; the command is /{name}. Rename one so they match"
        f.problem("warning", "name-matches-directory", "name", msg)


def description_of(fm: dict[str, Any], body: str, f: Fields) -> str:
    """The skill's description (from the body when missing), checking its type and length."""
    raw_desc = fm.get("description")
    if raw_desc is None or (isinstance(raw_desc, str) and not raw_desc.strip()):
        description = first_paragraph(body)
        if description:
            msg = "no `description:`; the body's first paragraph is used. Add a description of what the skill does and when to use it"
            f.problem("warning", "description-missing", None, msg)
        else:
            f.problem(
                "error",
                "description-missing",
                None,
                "no `description:` and no body text; add a description",
            )
    elif not isinstance(raw_desc, str):
        description = str(raw_desc)
        f.problem(
            "error", "description-type", "description", "`description` must be a string; quote it"
        )
    else:
        description = raw_desc
    if len(description) > MAX_DESCRIPTION:
        msg = f"description is {len(description)} characters (limit {MAX_DESCRIPTION}); shorten it and move detail into the body"
        f.problem("error", "description-length", "description", msg)
    return description


# --- body lint -----------------------------------------------------------------------------

# The slash comes first (the look-behind then checks the two characters before it) because a
# leading look-behind runs at every position of the body and dominated the cold-scan time.
_ABS_PATH = re.compile(r"/(?<![\w.:/}\])~$-]/)[\w.-]+/[\w./-]*\w")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[\w\\.-]+")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\n]*?[\"'])?\s*\)")
_TICKED = re.compile(r"`(?:\./)?((?:references|scripts|assets)/[^`\s]+)`")
_SKILL_DIR_REF = re.compile(r"\$\{CLAUDE_SKILL_DIR\}/([^\s`'\")\]}>|]+)")
_MAX_REPORTS = 5


def lint_body(body: str, first_line: int, directory: Path, file: str, probs: list[Problem]) -> None:
    """Warn about a large body, absolute paths and references to files the folder lacks."""
    lines = body.count("\n") + 1 if body else 0
    tokens = len(body) // 4
    if lines > MAX_BODY_LINES or tokens > MAX_BODY_TOKENS:
        msg = f"the body is {lines} lines / ~{tokens} tokens (advice: under {MAX_BODY_LINES} lines and ~{MAX_BODY_TOKENS} tokens); move detail into references/ files"
        probs.append(Problem("warning", "body-size", msg, file, None))

    def line_of(offset: int) -> int:
        return first_line + body.count("\n", 0, offset)

    absolute = list(_ABS_PATH.finditer(body))
    if ":\\" in body:
        absolute += _WINDOWS_PATH.finditer(body)
    for m in absolute[:_MAX_REPORTS]:
        msg = "an absolute path in the body will not exist on another machine; use ${CLAUDE_SKILL_DIR}/... or a relative path"
        probs.append(Problem("warning", "absolute-path", msg, file, line_of(m.start())))

    refs: dict[str, int] = {}
    for m in _LINK.finditer(body):
        target = m[1]
        if "://" in target or target.startswith(("#", "mailto:", "/", "$", "{", "~", "<")):
            continue
        refs.setdefault(unquote(target.split("#", 1)[0].split("?", 1)[0]), m.start())
    for pattern in (_TICKED, _SKILL_DIR_REF):
        for m in pattern.finditer(body):
            refs.setdefault(m[1].rstrip(".,;:"), m.start())
    reported = 0
    for rel, offset in refs.items():
        if not rel or any(c in rel for c in "*?$[{<"):
            continue  # a glob or a placeholder, not a file name
        if not os.path.exists(os.path.join(directory, rel)):
            msg = "the body refers to a file that is not in the skill folder; add the file or fix the path"
            probs.append(Problem("warning", "missing-reference", msg, file, line_of(offset)))
            reported += 1
            if reported >= _MAX_REPORTS:
                break
