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
# Findings where a skill goes past a limit of the Agent Skills spec that Claude Code and the
# official skills repository do not enforce: warnings (the skill installs and loads), but
# `skills validate --strict` fails on them.
SPEC_OVERSHOOT_RULES = frozenset({"description-length", "body-size"})
# Every warning `skills validate --strict` fails on: a description over the spec's limit, and
# what the Agent Skills spec requires that Claude Code lets pass (a frontmatter, `name` equal to
# the folder name, a `description`, no keys nothing reads, YAML that parses as written). With
# them, --strict gives the reference validator's verdict except for the deliberate differences
# listed in docs/interop.md.
# A body over the spec's advised size is not among them: the spec recommends the limit, the
# reference does not check it, and two official skills pass it.
STRICT_RULES = frozenset(
    {
        "description-length", "frontmatter-missing", "name-missing", "name-matches-directory",
        "description-missing", "unknown-key", "yaml-colon",
    }
)  # fmt: skip
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


def known_spelling(key: str) -> str | None:
    """The known key `key` misspells by case or by `_`/`-`, or None."""
    for candidate in (key, key.lower()):
        for k in (candidate.replace("_", "-"), candidate.replace("-", "_"), candidate):
            if k in KNOWN_KEYS and k != key:
                return k
    return None


def check_keys(fm: dict[str, Any], f: Fields) -> None:
    """Warn about frontmatter keys nothing reads, suggesting a known spelling."""
    for key in fm:
        if key not in KNOWN_KEYS:
            alt = known_spelling(str(key))
            if alt and alt.lower() == str(key).lower():
                hint = f"keys are case-sensitive: did you mean `{alt}`? `{key}` is not read"
            elif alt:
                hint = f"did you mean `{alt}`?"
            else:
                hint = "it is kept but nothing reads it"
            f.problem("warning", "unknown-key", key, f"unknown frontmatter key `{key}`: {hint}")


def check_name(name: str, f: Fields) -> None:
    """Check the folder name and `name:` against the name rules and each other."""
    dir_name = name.rsplit(":", 1)[-1]
    fm_name = f.text("name")
    if fm_name is None:
        msg = (
            f"no `name:`; the folder name {dir_name!r} is used. The Agent Skills spec requires "
            f"a name equal to the folder name: add `name: {dir_name}`"
        )
        f.problem("warning", "name-missing", None, msg)
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
        when = fm.get("when_to_use")
        if description and not (isinstance(when, str) and when.strip()):
            # Claude Code lists only skills with a description or when_to_use of their own.
            msg = "no `description:` and no `when_to_use:`, so the skill is left out of the model's catalog (the model cannot pick it; /name still works). Add a description of what the skill does and when to use it"
            f.problem("warning", "description-missing", None, msg)
        elif description:
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
        # A warning: Claude Code and the official skills accept longer descriptions; the catalog
        # cuts each entry to its own limit (SKILL_CATALOG_ENTRY_CAP) either way.
        msg = (
            f"description is {len(description)} characters, over the Agent Skills spec's "
            f"{MAX_DESCRIPTION}; the skill still loads, and the catalog shows at most its "
            "per-entry limit of it. Shorten it and move detail into the body"
        )
        f.problem("warning", "description-length", "description", msg)
    return description


# --- body lint -----------------------------------------------------------------------------

# The slash comes first (the look-behind then checks the two characters before it) because a
# leading look-behind runs at every position of the body and dominated the cold-scan time.
# After `>` a path continues a placeholder (`<workspace>/out/x`): relative to it, not absolute.
_ABS_PATH = re.compile(r"/(?<![\w.:/}\])~$>-]/)[\w.-]+/[\w./-]*\w")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[\w\\.-]+")
# URL routes, not files: after an HTTP method, as a link or attribute target, as the argument of
# a routing or fetching call, under a versioned or API prefix, or with route parameters after it.
_ROUTE_BEFORE = re.compile(
    r"(?:\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+`?"
    r"|\]\(\s*<?"
    r"|\b(?:href|src|action|url|endpoint|path|route)\s*[=:]\s*[\"'`]"
    r"|\b(?:get|post|put|patch|delete|route|fetch|request|url|path|axios\.\w+)\(\s*[\"'`])$",
    re.I,
)
_ROUTE_PREFIX = re.compile(r"(?:v\d+(?:\.\d+)?\w*|api|apis|graphql|oauth2?|webhooks?|rest)", re.I)
_ROUTE_AFTER = re.compile(r"/?[:{<?]")
_ROUTE_LOOKBACK = 80
# Paths that exist on every machine (/dev/null), scratch space, and the docs' placeholder.
_PORTABLE = ("/dev/", "/tmp/", "/path/to/")
_HOME_ROOTS = frozenset({"home", "Users", "root"})
_SYSTEM_ROOTS = frozenset(
    {"etc", "usr", "opt", "var", "srv", "mnt", "media", "Volumes", "Library", "private", "bin",
     "sbin", "lib", "System", "Applications", "snap", "nix", "proc", "sys"}
)  # fmt: skip
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\n]*?[\"'])?\s*\)")
_TICKED = re.compile(r"`(?:\./)?((?:references|scripts|assets)/[^`\s]+)`")
_SKILL_DIR_REF = re.compile(r"\$\{CLAUDE_SKILL_DIR\}/([^\s`'\")\]}>|]+)")
_MAX_REPORTS = 5


def absolute_paths(body: str, limit: int = _MAX_REPORTS) -> list[tuple[int, str]]:
    """(offset, why) of the first `limit` absolute filesystem paths in the body, in body order."""
    found: list[tuple[int, str]] = []
    for m in _ABS_PATH.finditer(body):
        if len(found) >= limit:
            break
        start, text = m.start(), m[0]
        # What precedes the path on its line, bounded so a huge one-line body stays linear.
        line_start = max(
            body.rfind("\n", max(0, start - _ROUTE_LOOKBACK), start) + 1, start - _ROUTE_LOOKBACK, 0
        )
        first = text[1:].split("/", 1)[0]
        if (
            text.startswith(_PORTABLE)
            or _ROUTE_PREFIX.fullmatch(first)
            or _ROUTE_BEFORE.search(body, line_start, start)
            or _ROUTE_AFTER.match(body, m.end())
        ):
            continue
        if first in _HOME_ROOTS:
            why = "an absolute path into someone's home folder"
        elif first in _SYSTEM_ROOTS:
            why = "an absolute path into a system folder"
        else:
            why = "an absolute path from the root of the file system"
        found.append((start, why))
    if ":\\" in body:
        for m, _ in zip(_WINDOWS_PATH.finditer(body), range(limit), strict=False):
            found.append((m.start(), "a Windows path with a drive letter"))
    return sorted(found)[:limit]


def lint_body(body: str, first_line: int, directory: Path, file: str, probs: list[Problem]) -> None:
    """Warn about a large body, absolute paths and references to files the folder lacks."""
    lines = body.count("\n") + 1 if body else 0
    tokens = len(body) // 4
    if lines > MAX_BODY_LINES or tokens > MAX_BODY_TOKENS:
        msg = f"the body is {lines} lines / ~{tokens} tokens (advice: under {MAX_BODY_LINES} lines and ~{MAX_BODY_TOKENS} tokens); move detail into references/ files"
        probs.append(Problem("warning", "body-size", msg, file, None))

    def line_of(offset: int) -> int:
        return first_line + body.count("\n", 0, offset)

    for offset, why in absolute_paths(body):
        # The message names the rule, the line and the reason, never the body's own text.
        msg = (
            f"{why}, which will not exist on another machine; use ${{CLAUDE_SKILL_DIR}}/... for "
            "the skill's own files or a relative path (URL routes such as /v1/... are not flagged)"
        )
        probs.append(Problem("warning", "absolute-path", msg, file, line_of(offset)))

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
