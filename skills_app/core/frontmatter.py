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

Where YAML's reading and a skill author's meaning part, the author wins, as in the Agent Skills
reference validator (which reads every value as text): a plain scalar of a text field is kept as
written (`name: yes` is the name "yes", `version: 1.10` is "1.10", not a boolean or a float).
Duplicate keys (YAML keeps the last silently; Claude Code's parser refuses the frontmatter) and a
frontmatter block that does not start on the first line are reported, not guessed at.
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
# Fields whose value is text: a plain scalar YAML would type (yes, 1.10, 2024-01-01) is kept as
# written. Flags, lists and mappings are read as YAML types.
TEXT_KEYS = frozenset(
    {
        "name", "description", "when_to_use", "argument-hint", "model", "effort", "context",
        "agent", "shell", "version", "license", "compatibility",
    }
)  # fmt: skip
_LEADING_BLANKS = re.compile(r"\A(?:[ \t]*\n)+(?=---[ \t]*\n)")
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def normalise(text: str) -> str:
    """Text with its BOM removed and every line ending made `\\n`."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def split(text: str, file: Path, probs: list[Problem] | None = None) -> tuple[str, str, int]:
    """(frontmatter YAML, the rest, the 1-based line the rest starts on) of normalised text.

    A frontmatter block after blank lines is read, with an error in `probs`: Claude Code and the
    spec read none there, so the whole block would become the skill's body and description.
    """
    m = _FRONTMATTER.match(text)
    if m:
        return m[1], text[m.end() :], text.count("\n", 0, m.end()) + 1
    blanks = _LEADING_BLANKS.match(text)
    if blanks and (m := _FRONTMATTER.match(text[blanks.end() :])):
        text = text[blanks.end() :]
        if probs is not None:
            count = blanks.group().count("\n")
            msg = (
                f"the frontmatter starts on line {count + 1}, after {count} blank line(s); the "
                "--- must be the very first line, or Claude Code and the spec read no frontmatter "
                "and take the whole block as the body. Delete the blank lines"
            )
            probs.append(Problem("error", "frontmatter-misplaced", msg, str(file), 1))
        return m[1], text[m.end() :], text.count("\n", 0, m.end()) + 1 + blanks.group().count("\n")
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


def _load(source: str, file: Path) -> tuple[Any, Any]:
    """(the constructed value, its node) of one YAML document, bounds checked first."""
    check_bounds(source, file)
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


def _as_written(data: dict[str, Any], node: Any) -> None:
    """Keep text fields as written when YAML typed a plain scalar (`name: yes` is "yes")."""
    last = {key_node.value: value_node for key_node, value_node in node.value}
    for key, value_node in last.items():
        if (
            key in TEXT_KEYS
            and isinstance(value_node, yaml.ScalarNode)
            and data.get(key) is not None
            and not isinstance(data.get(key), str)
        ):
            data[key] = value_node.value


def duplicate_keys(node: Any, file: Path, probs: list[Problem], depth: int = 0) -> None:
    """An error for each key a mapping repeats (YAML keeps the last without a word)."""
    if not isinstance(node, yaml.MappingNode):
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                duplicate_keys(item, file, probs, depth + 1)
        return
    first: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        line = key_node.start_mark.line + 2  # +1 for the opening ---, +1 for 1-based
        if key in first:
            where = "a key" if depth == 0 else "a nested key"
            msg = (
                f"{where} `{key}` is given twice (lines {first[key]} and {line}); YAML keeps only "
                "the last and Claude Code refuses the whole frontmatter. Keep one"
            )
            probs.append(Problem("error", "duplicate-key", msg, str(file), line))
        else:
            first[key] = line
        duplicate_keys(value_node, file, probs, depth + 1)


def load(source: str, file: Path, probs: list[Problem]) -> dict[str, Any]:
    """The frontmatter mapping; SkillFileError when it cannot be read or breaks a bound."""
    if not source.strip():
        return {}
    node: Any = None
    try:
        data, node = _load(source, file)
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
                data, node = _load(fixed, file)
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
    duplicate_keys(node, file, probs)
    _as_written(data, node)
    return data


def _yaml_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def read(text: str, file: Path) -> tuple[dict[str, Any], str, str, int, list[Problem]]:
    """(mapping, YAML text, the rest, the line the rest starts on, warnings) of SKILL.md text."""
    probs: list[Problem] = []
    yaml_text, rest, rest_line = split(normalise(text), file, probs)
    return load(yaml_text, file, probs), yaml_text, rest, rest_line, probs
