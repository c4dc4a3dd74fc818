"""SKILL.md -> SkillSpec: frontmatter parsing and lint against the Agent Skills rules.

Severity policy. *Errors* break the Agent Skills spec (name format, description missing with no
fallback / too long / not a string, compatibility too long, a boolean that is not a boolean, a
field of the wrong type); `validate` and uploads refuse them. *Warnings* are advice (unknown keys,
name differing from the directory, description taken from the body, large body, absolute paths,
references to files that are not in the folder). Discovery is lenient, as the Agent Skills client
guide recommends: a skill with errors still loads, with its problems attached. Only a skill that
cannot be read at all (YAML that does not parse, not UTF-8, no SKILL.md) raises SkillFileError,
and the registry skips it and reports the error.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

import yaml

# The C loader is the same safe loader, several times faster; the cold-scan budget needs it.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

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
# Never part of a skill: VCS data, dependency trees and bytecode change without the skill changing.
SKIP_NAMES = frozenset({".git", "node_modules", "__pycache__", ".DS_Store"})
MAX_TREE_DEPTH = 6
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True, slots=True)
class Problem:
    severity: str  # "error" | "warning"
    rule: str
    message: str
    file: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.severity} [{self.rule}] {self.message}"


@dataclass(frozen=True, slots=True)
class SkillSpec:
    name: str
    description: str
    body: str
    path: Path
    skill_file: Path
    source: str
    digest: str
    frontmatter: Mapping[str, Any]
    when_to_use: str | None
    argument_hint: str | None
    arguments: tuple[str, ...]
    disable_model_invocation: bool
    user_invocable: bool
    allowed_tools: tuple[str, ...]
    disallowed_tools: tuple[str, ...]
    model: str | None
    effort: str | None
    context: str | None
    agent: str | None
    hooks: Mapping[str, Any]
    paths: tuple[str, ...]
    version: str | None
    mode: bool
    license: str | None
    compatibility: str | None
    metadata: Mapping[str, Any]
    problems: tuple[Problem, ...]

    @property
    def model_invocable(self) -> bool:
        """True unless `disable-model-invocation` is set."""
        return not self.disable_model_invocation

    @property
    def errors(self) -> list[Problem]:
        """Problems with severity "error"."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """Problems with severity "warning"."""
        return [p for p in self.problems if p.severity == "warning"]


class SkillFileError(Exception):
    """A skill that cannot be read at all; `.problem` says which file, where and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


class TreeEntry(NamedTuple):
    """One file or folder of a skill, with the stat fields the registry cache compares."""

    rel: str
    path: str
    is_dir: bool
    stamp: tuple[int, int, int]  # (mtime_ns, size, inode)


def find_skill_file(directory: Path) -> Path | None:
    """Return the SKILL.md of a folder (name matched case-insensitively), or None."""
    try:
        names = [
            e.name for e in os.scandir(directory) if e.name.lower() == "skill.md" and e.is_file()
        ]
    except OSError:
        return None
    if not names:
        return None
    return directory / ("SKILL.md" if "SKILL.md" in names else sorted(names)[0])


def walk_skill_tree(directory: Path) -> list[TreeEntry]:
    """List a skill's folders and files (symlinks followed once, bounded depth), sorted."""
    out: list[TreeEntry] = []
    seen: set[tuple[int, int]] = set()

    def visit(path: str, rel: str, depth: int) -> None:
        st = os.stat(path)
        if (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        out.append(TreeEntry(rel, path, True, (st.st_mtime_ns, st.st_size, st.st_ino)))
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.name in SKIP_NAMES:
                continue
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_dir():
                    if depth < MAX_TREE_DEPTH:
                        visit(entry.path, child_rel, depth + 1)
                elif entry.is_file():
                    fst = entry.stat()
                    stamp = (fst.st_mtime_ns, fst.st_size, fst.st_ino)
                    out.append(TreeEntry(child_rel, entry.path, False, stamp))
            except OSError:
                continue  # a dangling symlink is not part of the skill

    visit(str(directory), "", 0)
    return out


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _digest_update(h: Any, rel: str, data: bytes) -> None:
    h.update(f"{rel}\0{len(data)}\0".encode())
    h.update(data)


def skill_digest(directory: Path) -> str:
    """sha256 over the skill's files: for each file sorted by relative path, path + size + bytes."""
    h = hashlib.sha256()
    for entry in sorted(walk_skill_tree(directory), key=lambda e: e.rel):
        if not entry.is_dir:
            _digest_update(h, entry.rel, _read(entry.path))
    return h.hexdigest()


def parse_skill_dir(directory: Path, *, name: str | None = None, source: str = "dirs") -> SkillSpec:
    """Parse the skill in `directory`; raises SkillFileError when it cannot be read."""
    directory = Path(directory).absolute()
    if not directory.is_dir():
        raise SkillFileError(
            Problem(
                "error",
                "missing-skill-file",
                f"{directory} is not a folder; point at the skill's folder",
                str(directory),
            )
        )
    return parse_skill_tree(directory, walk_skill_tree(directory), name=name, source=source)


def parse_skill_tree(
    directory: Path, entries: list[TreeEntry], *, name: str | None = None, source: str = "dirs"
) -> SkillSpec:
    """Parse a skill from an already-walked tree, reading every file once (digest + SKILL.md)."""
    files = sorted((e for e in entries if not e.is_dir), key=lambda e: e.rel)
    top = {e.rel: e for e in files if "/" not in e.rel and e.rel.lower() == "skill.md"}
    chosen = top.get("SKILL.md") or (top[sorted(top)[0]] if top else None)
    if chosen is None:
        msg = f"{directory} has no SKILL.md; add one with a `description:` in YAML frontmatter"
        raise SkillFileError(Problem("error", "missing-skill-file", msg, str(directory)))
    h = hashlib.sha256()
    raw = b""
    for entry in files:
        data = _read(entry.path)
        _digest_update(h, entry.rel, data)
        if entry is chosen:
            raw = data
    skill_file = Path(chosen.path)
    text = _decode(raw, skill_file)
    return _build(text, directory, name or directory.name, source, skill_file, h.hexdigest())


def parse_skill_text(
    text: str,
    *,
    directory: Path,
    name: str,
    source: str = "dirs",
    skill_file: Path | None = None,
    digest: str | None = None,
) -> SkillSpec:
    """Parse SKILL.md text for a skill living in `directory` (digest from the folder if it exists)."""
    directory = Path(directory)
    skill_file = skill_file or directory / "SKILL.md"
    if digest is None:
        if directory.is_dir() and find_skill_file(directory):
            digest = skill_digest(directory)
        else:
            h = hashlib.sha256()
            _digest_update(h, skill_file.name, text.encode("utf-8"))
            digest = h.hexdigest()
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return _build(text, directory, name, source, skill_file, digest)


def lint_skill_dir(directory: Path) -> list[Problem]:
    """Every problem of the skill in `directory`, errors and warnings; never raises."""
    try:
        return list(parse_skill_dir(Path(directory)).problems)
    except SkillFileError as exc:
        return [exc.problem]
    except OSError as exc:
        return [
            Problem(
                "error",
                "unreadable",
                f"cannot read the skill: {exc}; check permissions",
                str(directory),
            )
        ]


# --- parsing -------------------------------------------------------------------------------

_FRONTMATTER = re.compile(r"\A---[ \t]*\n(.*?)^---[ \t]*(?:\n|\Z)", re.S | re.M)
_KEY_LINE = re.compile(r"^([^\s#:][^:\n]*):", re.M)
_UNQUOTED_COLON = re.compile(r"^([\w-]+):[ \t]+([^'\"|>\[{&*!#\s].*?:\s.*)$", re.M)


def _decode(data: bytes, file: Path) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{file.name} is not UTF-8 (bad byte at offset {exc.start}, line {line}); re-save it as UTF-8"
        raise SkillFileError(Problem("error", "encoding", msg, str(file), line)) from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def _load_yaml(source: str, file: Path, probs: list[Problem]) -> dict[str, Any]:
    try:
        data = yaml.load(source, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        # The client guide's tip: a value with an unquoted ": " is the usual culprit; retry quoted.
        fixed = _UNQUOTED_COLON.sub(lambda m: f"{m[1]}: {_yaml_quote(m[2])}", source)
        data = None
        if fixed != source:
            try:
                data = yaml.load(fixed, Loader=_Loader)  # noqa: S506
            except yaml.YAMLError:
                data = None
        if not isinstance(data, dict):
            mark = getattr(exc, "problem_mark", None)
            line = (
                mark.line + 2 if mark is not None else 1
            )  # +1 for the opening ---, +1 for 1-based
            what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            msg = f"the frontmatter is not valid YAML ({what}); fix it, e.g. quote values that contain ': '"
            raise SkillFileError(Problem("error", "yaml", msg, str(file), line)) from None
        msg = "a value contains an unquoted ': '; it was read as quoted text, but quote it in the file"
        probs.append(Problem("warning", "yaml-colon", msg, str(file), None))
    if data is None:
        return {}
    if not isinstance(data, dict):
        msg = f"the frontmatter is a YAML {type(data).__name__}, not a mapping; write `key: value` lines"
        raise SkillFileError(Problem("error", "frontmatter-shape", msg, str(file), 2))
    return data


def _yaml_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class _Fields:
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


def split_tool_rules(value: str) -> list[str]:
    """Split an allowed-tools string on spaces/commas that are outside parentheses."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in value:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        if depth == 0 and (ch.isspace() or ch == ","):
            if cur:
                out.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _split_words(value: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", value) if w]


def _split_commas(value: str) -> list[str]:
    return [w.strip() for w in value.split(",") if w.strip()]


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


def _first_paragraph(body: str) -> str:
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


def _build(
    text: str, directory: Path, name: str, source: str, skill_file: Path, digest: str
) -> SkillSpec:
    probs: list[Problem] = []
    m = _FRONTMATTER.match(text)
    if m:
        yaml_text, rest = m[1], text[m.end() :]
        body_line = text.count("\n", 0, m.end()) + 1
    elif text.split("\n", 1)[0].rstrip() == "---":
        msg = "the frontmatter opened with --- is never closed; add a line with --- after it"
        raise SkillFileError(Problem("error", "frontmatter-unclosed", msg, str(skill_file), 1))
    else:
        yaml_text, rest, body_line = "", text, 1
    fm = _load_yaml(yaml_text, skill_file, probs) if yaml_text.strip() else {}
    body = rest.lstrip("\n")
    body_line += len(rest) - len(body)
    f = _Fields(fm, yaml_text, skill_file, probs)

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

    raw_desc = fm.get("description")
    if raw_desc is None or (isinstance(raw_desc, str) and not raw_desc.strip()):
        description = _first_paragraph(body)
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

    compatibility = f.text("compatibility")
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY:
        msg = f"compatibility is {len(compatibility)} characters (limit {MAX_COMPATIBILITY}); shorten it"
        f.problem("error", "compatibility-length", "compatibility", msg)
    model = f.text("model")
    if model is not None and model.strip().lower() == "inherit":
        model = None
    effort = f.text("effort")
    if effort is not None and effort not in EFFORTS:
        f.problem(
            "warning",
            "effort-value",
            "effort",
            f"effort {effort!r} is ignored; use one of {', '.join(sorted(EFFORTS))}",
        )
        effort = None
    context = f.text("context")
    if context is not None and context != "fork":
        f.problem(
            "warning",
            "context-value",
            "context",
            f"context {context!r} is ignored; the only value is `fork`",
        )
        context = None

    fields: dict[str, Any] = {
        "name": name,
        "description": description,
        "body": body,
        "path": directory,
        "skill_file": skill_file,
        "source": source,
        "digest": digest,
        "frontmatter": fm,
        "when_to_use": f.text("when_to_use"),
        "argument_hint": f.text("argument-hint"),
        "arguments": f.items("arguments", _split_words),
        "disable_model_invocation": f.flag("disable-model-invocation", False),
        "user_invocable": f.flag("user-invocable", True),
        "allowed_tools": f.items("allowed-tools", split_tool_rules),
        "disallowed_tools": f.items("disallowed-tools", split_tool_rules),
        "model": model,
        "effort": effort,
        "context": context,
        "agent": f.text("agent"),
        "hooks": f.mapping("hooks"),
        "paths": f.items("paths", _split_commas),
        "version": f.text("version"),
        "mode": f.flag("mode", False),
        "license": f.text("license"),
        "compatibility": compatibility,
        "metadata": f.mapping("metadata"),
    }
    f.flag("background", True)  # only validated: nothing here runs forked skills in the background
    _lint_body(body, body_line, directory, str(skill_file), probs)
    return SkillSpec(**fields, problems=tuple(probs))


# --- body lint -----------------------------------------------------------------------------

# The slash comes first (the look-behind then checks the two characters before it) because a
# leading look-behind runs at every position of the body and dominated the cold-scan time.
_ABS_PATH = re.compile(r"/(?<![\w.:/}\])~$-]/)[\w.-]+/[\w./-]*\w")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[\w\\.-]+")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^\n]*?[\"'])?\s*\)")
_TICKED = re.compile(r"`(?:\./)?((?:references|scripts|assets)/[^`\s]+)`")
_SKILL_DIR_REF = re.compile(r"\$\{CLAUDE_SKILL_DIR\}/([^\s`'\")\]}>|]+)")
_MAX_REPORTS = 5


def _lint_body(
    body: str, first_line: int, directory: Path, file: str, probs: list[Problem]
) -> None:
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
        msg = f"absolute path {m[0]!r} will not exist on another machine; use ${{CLAUDE_SKILL_DIR}}/... or a relative path"
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
            msg = f"the body refers to {rel!r}, which is not in the skill folder; add the file or fix the path"
            probs.append(Problem("warning", "missing-reference", msg, file, line_of(offset)))
            reported += 1
            if reported >= _MAX_REPORTS:
                break
