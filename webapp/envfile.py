"""Environment files read by systemd's rules, so a file works the same under systemd and elsewhere.

systemd's `EnvironmentFile=` is not a shell: `NAME=value # note` keeps `# note` in the value,
there is no `export`, no `$VAR` expansion, and a comment is only a line that *starts* with `#` or
`;`. This module implements systemd's parser (src/basic/env-file.c, v254 and later) as a state
machine over characters, so a file that works here works in a unit, and the deploy test can prove
the documented file loads:

- whitespace before a name, around `=`, and at the end of an unquoted value is dropped;
- `'...'` keeps everything literally; `"..."` unescapes `\\"`, `\\\\`, `\\$` and `` \\` `` and
  keeps other backslashes; a quoted part may be followed by more value (`"a b"c` is `a bc`);
- outside quotes, a backslash takes the next character literally, and backslash-newline
  continues the value on the next line (in every state but a comment);
- a line without `=` is ignored; a name that is not a valid environment name is dropped
  (systemd logs and ignores it; `problems()` reports it so an operator sees it).

Command line (no Django; usable before the virtual environment exists):

    python -m webapp.envfile FILE                  # print the variables, one per line, shell-quoted
    python -m webapp.envfile --check FILE          # exit 1 on a line systemd would read differently
                                                   # from what its author probably meant
    python -m webapp.envfile FILE -- CMD [ARG...]  # run CMD with a service-like environment:
                                                   # FILE plus PATH, HOME, USER, LOGNAME, LANG, TERM
    python -m webapp.envfile --defaults FILE -- CMD [ARG...]
                                                   # the caller's environment wins; FILE fills gaps
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_NEWLINE = "\n\r"
_WHITESPACE = " \t\n\r"
_COMMENT_START = "#;"
# Inside double quotes, a backslash before one of these is dropped (as a shell would).
_DOUBLE_QUOTE_ESCAPES = '"\\`$'
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# What a unit's process gets from systemd besides EnvironmentFile= (for the `-- CMD` mode).
SERVICE_BASE_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM")


@dataclass(frozen=True, slots=True)
class Assignment:
    """One `NAME=value` as systemd reads it, with the line where it ended (1-based)."""

    name: str
    value: str
    line: int
    valid: bool
    # An unquoted `#` or `;` after whitespace: almost always a comment its author meant to end the line.
    inline_comment: bool = False


def parse_assignments(text: str) -> list[Assignment]:
    """Every assignment in TEXT, in order, as systemd's env-file parser produces them."""
    out: list[Assignment] = []
    key: list[str] = []
    value: list[str] = []
    state = "pre_key"
    line = 1
    start_line = 1
    prev = "\n"
    inline_comment = False
    # Index into `key`/`value` where trailing whitespace began (None: no trailing whitespace).
    key_ws: int | None = None
    value_ws: int | None = None

    def push(*, chomp_value: bool) -> None:
        name = "".join(key[:key_ws] if key_ws is not None else key)
        chars = value[:value_ws] if (chomp_value and value_ws is not None) else value
        text_value = "".join(chars)
        valid = bool(_NAME.match(name))
        out.append(Assignment(name, text_value, start_line, valid, inline_comment))

    for c in text:
        if c == "\0":
            break  # systemd reads the file as a C string
        if state in ("pre_value", "value") and c in _COMMENT_START and prev in " \t":
            inline_comment = True
        prev = c
        if state == "pre_key":
            if c in _COMMENT_START:
                state = "comment"
            elif c not in _WHITESPACE:
                state = "key"
                key_ws = None
                start_line = line
                inline_comment = False
                key.append(c)
        elif state == "key":
            if c in _NEWLINE:
                state = "pre_key"
                line += 1
                key.clear()
            elif c == "=":
                state = "pre_value"
                value_ws = None
            else:
                if c not in _WHITESPACE:
                    key_ws = None
                elif key_ws is None:
                    key_ws = len(key)
                key.append(c)
        elif state == "pre_value":
            if c in _NEWLINE:
                line += 1
                push(chomp_value=False)
                state = "pre_key"
                key.clear()
                value.clear()
            elif c == "'":
                state = "single_quote"
            elif c == '"':
                state = "double_quote"
            elif c == "\\":
                state = "value_escape"
            elif c not in _WHITESPACE:
                state = "value"
                value.append(c)
        elif state == "value":
            if c in _NEWLINE:
                line += 1
                push(chomp_value=True)
                state = "pre_key"
                key.clear()
                value.clear()
            elif c == "\\":
                state = "value_escape"
                value_ws = None
            else:
                if c not in _WHITESPACE:
                    value_ws = None
                elif value_ws is None:
                    value_ws = len(value)
                value.append(c)
        elif state == "value_escape":
            state = "value"
            if c not in _NEWLINE:  # backslash-newline: a continuation line, eaten entirely
                value.append(c)
        elif state == "single_quote":
            if c == "'":
                state = "pre_value"
            else:
                value.append(c)
        elif state == "double_quote":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_quote_escape"
            else:
                value.append(c)
        elif state == "double_quote_escape":
            state = "double_quote"
            if c in _DOUBLE_QUOTE_ESCAPES:
                value.append(c)
            elif c != "\n":
                value.extend(("\\", c))
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c in _NEWLINE:
                state = "pre_key"
                line += 1
        elif state == "comment_escape":
            # Since systemd v254 a backslash does not continue a comment onto the next line.
            if c in _NEWLINE:
                state = "pre_key"
                line += 1
            else:
                state = "comment"

    if state in (
        "pre_value",
        "value",
        "value_escape",
        "single_quote",
        "double_quote",
        "double_quote_escape",
    ):
        push(chomp_value=state == "value")
    return out


def parse(text: str) -> dict[str, str]:
    """The variables systemd would set from TEXT: invalid names dropped, the last assignment wins."""
    return {a.name: a.value for a in parse_assignments(text) if a.valid}


def load(path: str | os.PathLike[str]) -> dict[str, str]:
    """The variables systemd's `EnvironmentFile=PATH` would set."""
    return parse(Path(path).read_text(encoding="utf-8"))


def problems(text: str) -> list[str]:
    """Lines systemd reads differently from what a shell user would expect, each with the fix."""
    found: list[str] = []
    for a in parse_assignments(text):
        if not a.valid:
            found.append(
                f"line {a.line}: {a.name!r} is not a valid variable name; systemd ignores this "
                "assignment (names are letters, digits and _, not starting with a digit; "
                "no `export`)"
            )
            continue
        if a.inline_comment:
            found.append(
                f"line {a.line}: the value of {a.name} contains {a.value!r}: systemd keeps a "
                "trailing `# comment` in the value; put comments on their own line"
            )
        if re.search(r"\$\{?[A-Za-z_]", a.value):
            found.append(
                f"line {a.line}: the value of {a.name} refers to a variable ({a.value!r}): "
                "EnvironmentFile= does not expand variables, the `$` stays as written"
            )
    return found


def service_environment(
    file_vars: Mapping[str, str], caller: Mapping[str, str], *, defaults: bool
) -> dict[str, str]:
    """The environment for a command: the file's variables over a base, or under the caller's."""
    if defaults:
        return {**file_vars, **caller}
    base = {name: caller[name] for name in SERVICE_BASE_VARIABLES if name in caller}
    return {**base, **file_vars}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m webapp.envfile [--check | --defaults] FILE [-- COMMAND [ARG...]]"
    command: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, command = args[:split], args[split + 1 :]
    check = "--check" in args
    defaults = "--defaults" in args
    files = [a for a in args if a not in ("--check", "--defaults")]
    if len(files) != 1 or files[0].startswith("-") or (check and command):
        print(usage, file=sys.stderr)
        return 2
    try:
        text = Path(files[0]).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{files[0]}: cannot be read: {exc}", file=sys.stderr)
        return 1
    issues = problems(text)
    for issue in issues:
        print(f"{files[0]}: {issue}", file=sys.stderr)
    if check:
        return 1 if issues else 0
    variables = parse(text)
    if not command:
        for name, value in variables.items():
            print(f"{name}={shlex.quote(value)}")
        return 0
    env = service_environment(variables, os.environ, defaults=defaults)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"{command[0]}: cannot be run: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main())
