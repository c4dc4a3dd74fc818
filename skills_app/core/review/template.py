"""A reviewed command that takes the user's arguments, and whether a call is that command.

A body may ask the model to run `python3 ${CLAUDE_SKILL_DIR}/scripts/greet.py "$ARGUMENTS"`.
The reviewer saw that line, not the arguments someone will type, so a call is that command only
when it is the same single command with each argument slot filled by plain words:

- the call and the reviewed line each parse (tree-sitter-bash) as exactly one simple command,
  with nothing the rules cannot see, no redirection, no `cd`, no `VAR=value` prefix;
- the words match one by one; the skill folder variable stands for the staged folder;
- a slot (`$1`, `$ARGUMENTS[0]`, a named argument, or `"$ARGUMENTS"` in quotes) is exactly one
  word; a bare `$ARGUMENTS` standing alone is any number of words (the arguments as typed);
- no argument word may start with `-` unless the reviewed line put text before the slot in the
  same word (`--name=$1`): a typed `--exec=...` never reaches an option of the reviewed program;
- no word of the call may hold `$` or a backquote (an expansion the rules cannot see).

So arguments can fill the slots the reviewer saw and nothing else: `Bob"; rm -rf ~; echo "`
makes three commands, which is not the reviewed one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..permissions.shell import ShellAnalysis, analyze
from .commands import SKILL_DIR_VARS

_TOKEN = "SKSLOT{}Q"
_TOKEN_RE = re.compile(r"SKSLOT(\d+)Q")


@dataclass(frozen=True, slots=True)
class Slot:
    """Where an argument goes in a word: text before and after it; `rest` takes many words."""

    prefix: str = ""
    suffix: str = ""
    rest: bool = False


@dataclass(frozen=True, slots=True)
class Template:
    words: tuple[str | Slot, ...]


def placeholder_pattern(names: Sequence[str] = ()) -> re.Pattern[str]:
    """The argument placeholders of a body (and its declared `arguments:` names)."""
    declared = [n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n) and n != "ARGUMENTS"]
    named = "".join(f"|\\${re.escape(n)}(?![\\w])" for n in sorted(declared, key=len, reverse=True))
    return re.compile(r"\$ARGUMENTS\[\d+\]|\$ARGUMENTS(?![\w\[])|\$\d+" + named)


def resolve_skill_dir(text: str, skill_dir: str) -> str:
    """`text` with the skill folder variables replaced by the staged folder."""
    for var in SKILL_DIR_VARS:
        text = text.replace(var, skill_dir)
    return text


def _single(analysis: ShellAnalysis) -> str:
    """Why an analysed command line is not one plain simple command ("" when it is)."""
    if len(analysis.commands) != 1:
        return "it is more than one command"
    if analysis.opaque:
        return "part of it is computed when it runs"
    if analysis.writes:
        return "it redirects output to a file"
    if analysis.changes_dir:
        return "it changes directory"
    if analysis.commands[0].assignments:
        return "it sets a variable first"
    return ""


def compile_template(command: str, *, skill_dir: str, names: Sequence[str] = ()) -> Template | str:
    """The reviewed command as words and slots, or why calls cannot be matched against it."""
    pattern = placeholder_pattern(names)
    text = resolve_skill_dir(command, skill_dir)
    found = list(pattern.finditer(text))
    if not found:
        return "it takes no arguments"  # matched exactly instead
    slots: list[bool] = []  # per placeholder: a bare $ARGUMENTS (takes many words)
    parts: list[str] = []
    cursor = 0
    for i, m in enumerate(found):
        parts += [text[cursor : m.start()], _TOKEN.format(i)]
        quoted = text[m.start() - 1 : m.start()] in ("'", '"')
        slots.append(m[0] == "$ARGUMENTS" and not quoted)
        cursor = m.end()
    parts.append(text[cursor:])
    analysis = analyze("".join(parts))
    why = _single(analysis)
    if why:
        return f"it uses the arguments and {why}"
    words: list[str | Slot] = []
    rests = 0
    for word in analysis.commands[0].words:
        tokens = list(_TOKEN_RE.finditer(word))
        if not tokens:
            if "$" in word or "`" in word:
                return "it reads a shell variable"
            words.append(word)
            continue
        if len(tokens) > 1:
            return "one word of it holds two arguments"
        token = tokens[0]
        rest = slots[int(token[1])] and token[0] == word
        rests += rest
        words.append(Slot(word[: token.start()], word[token.end() :], rest))
    if rests > 1:
        return "it places all the arguments twice"
    return Template(tuple(words))


def _fits(slot: Slot, word: str) -> bool:
    if not (word.startswith(slot.prefix) and word.endswith(slot.suffix)):
        return False
    if len(word) < len(slot.prefix) + len(slot.suffix):
        return False
    value = word[len(slot.prefix) : len(word) - len(slot.suffix)]
    return not (not slot.prefix and value.startswith("-"))


def _word_fits(item: str | Slot, word: str) -> bool:
    return _fits(item, word) if isinstance(item, Slot) else item == word


def matches(template: Template, command: str) -> bool:
    """True when `command` is the reviewed command with its argument slots filled (see above)."""
    analysis = analyze(command)
    if _single(analysis):
        return False
    words = analysis.commands[0].words
    if any("$" in w or "`" in w for w in words):
        return False
    items = template.words
    rest_at = next(
        (i for i, item in enumerate(items) if isinstance(item, Slot) and item.rest), None
    )
    if rest_at is None:
        return len(words) == len(items) and all(map(_word_fits, items, words))
    head, tail = items[:rest_at], items[rest_at + 1 :]
    if len(words) < len(head) + len(tail):
        return False
    middle = words[len(head) : len(words) - len(tail)]
    return (
        all(map(_word_fits, head, words[: len(head)]))
        and all(map(_word_fits, tail, words[len(words) - len(tail) :]))
        and not any(w.startswith("-") for w in middle)
    )


__all__ = [
    "Slot",
    "Template",
    "compile_template",
    "matches",
    "placeholder_pattern",
    "resolve_skill_dir",
]
