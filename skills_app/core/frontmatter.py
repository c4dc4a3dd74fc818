"""The one SKILL.md frontmatter reader: split it off the body and load its YAML, bounded.

Used by discovery, lint and uploads alike (through `skillfile`). The bounds exist because
anyone who can upload a skill controls this input, and it is parsed on every Skills page:

- at most MAX_FRONTMATTER_BYTES of YAML (64 KiB: a name, a 1,024-character description and a
  few lists fit in a few KiB; hooks and metadata leave room to spare);
- no anchors (`&a`) and no aliases (`*a`): a 559-byte document whose aliases nest 10 wide and
  7 deep expands to 10^7 nodes ("billion laughs"). The events are scanned before anything is
  constructed, so such a file is refused in microseconds, not after gigabytes of memory;
- nesting at most MAX_DEPTH collections deep (the constructor recurses once per level).

Every refusal is a SkillFileError whose message names the rule and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .skilltypes import Problem, SkillFileError

MAX_FRONTMATTER_BYTES = 64 * 1024
MAX_DEPTH = 32

# The C loader is the same safe loader, several times faster; the cold-scan budget needs it.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FRONTMATTER = re.compile(r"\A---[ \t]*\n(.*?)^---[ \t]*(?:\n|\Z)", re.S | re.M)
_UNQUOTED_COLON = re.compile(r"^([\w-]+):[ \t]+([^'\"|>\[{&*!#\s].*?:\s.*)$", re.M)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def normalise(text: str) -> str:
    """Text with its BOM removed and every line ending made `\\n`."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def split(text: str, file: Path) -> tuple[str, str, int]:
    """(frontmatter YAML, the rest, the 1-based line the rest starts on) of normalised text."""
    m = _FRONTMATTER.match(text)
    if m:
        return m[1], text[m.end() :], text.count("\n", 0, m.end()) + 1
    if text.split("\n", 1)[0].rstrip() == "---":
        msg = "the frontmatter opened with --- is never closed; add a line with --- after it"
        raise SkillFileError(Problem("error", "frontmatter-unclosed", msg, str(file), 1))
    return "", text, 1


def _refuse(rule: str, message: str, file: Path, line: int | None) -> SkillFileError:
    return SkillFileError(Problem("error", rule, message, str(file), line))


def check_bounds(source: str, file: Path) -> None:
    """Refuse oversized YAML, anchors, aliases and deep nesting before anything is built."""
    size = len(source.encode("utf-8"))
    if size > MAX_FRONTMATTER_BYTES:
        raise _refuse(
            "frontmatter-size",
            f"the frontmatter is {size:,} bytes (limit {MAX_FRONTMATTER_BYTES:,}); keep "
            "name, description and settings there and move the rest into the body",
            file,
            1,
        )
    depth = 0
    # yaml.parse is lazy: it stops at the first bad event, before reading the rest.
    for event in yaml.parse(source, Loader=_Loader):
        line = event.start_mark.line + 2 if event.start_mark is not None else None
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _refuse(
                "yaml-alias",
                "the frontmatter uses a YAML anchor (&name) or alias (*name); they are not "
                "allowed here (aliases can expand a small file into billions of values): "
                "write each value out in full",
                file,
                line,
            )
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise _refuse(
                    "yaml-depth",
                    f"the frontmatter nests lists or mappings more than {MAX_DEPTH} deep; "
                    "flatten it",
                    file,
                    line,
                )
        elif isinstance(event, _CLOSE):
            depth -= 1


def _load(source: str, file: Path) -> Any:
    check_bounds(source, file)
    return yaml.load(source, Loader=_Loader)  # noqa: S506 - a safe loader


def load(source: str, file: Path, probs: list[Problem]) -> dict[str, Any]:
    """The frontmatter mapping; SkillFileError when it cannot be read or breaks a bound."""
    if not source.strip():
        return {}
    try:
        data = _load(source, file)
    except (ValueError, TypeError, OverflowError) as exc:
        # Values YAML recognises but cannot build, e.g. the date 2024-13-45.
        msg = f"the frontmatter has a value YAML cannot read ({exc}); quote it to keep it as text"
        raise SkillFileError(Problem("error", "yaml", msg, str(file), None)) from None
    except yaml.YAMLError as exc:
        # The client guide's tip: a value with an unquoted ": " is the usual culprit; retry quoted.
        fixed = _UNQUOTED_COLON.sub(lambda m: f"{m[1]}: {_yaml_quote(m[2])}", source)
        data = None
        if fixed != source:
            try:
                data = _load(fixed, file)
            except (yaml.YAMLError, ValueError, TypeError, OverflowError):
                data = None
        if not isinstance(data, dict):
            mark = getattr(exc, "problem_mark", None)
            # +1 for the opening ---, +1 for 1-based
            line = mark.line + 2 if mark is not None else 1
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


def read(text: str, file: Path) -> tuple[dict[str, Any], str, str, int, list[Problem]]:
    """(mapping, YAML text, the rest, the line the rest starts on, warnings) of SKILL.md text."""
    probs: list[Problem] = []
    yaml_text, rest, rest_line = split(normalise(text), file)
    return load(yaml_text, file, probs), yaml_text, rest, rest_line, probs
