"""Where bash evaluates a value as code: arithmetic, subscripts, and the variables they read.

Bash evaluates text as arithmetic in `$((...))`, `$[...]`, `((...))`, `for ((...))`, `let`, the
operands of `[[ a -eq b ]]`, every array subscript (`${a[i]}`, `a[i]=`, `read 'a[i]'`,
`printf -v 'a[i]'`, `test -v 'a[i]'`, `declare 'a[i]=1'`), substring offsets (`${x:i:n}`)
and assignments to a name declared `-i`. A variable named there is evaluated too, recursively,
and a subscript inside its value runs command substitutions: with `x='a[$(rm y)]'`,
`echo $((x))` runs `rm y`. So an arithmetic context is safe only when every variable it reads
holds a literal integer.

`Values` collects, over the whole command, every write to every name and every name read in an
arithmetic context, and decides at the end: a name is *inert* when every write the command makes
to it is a literal integer (or an arithmetic result), or when the command never writes it and it
is not one of bash's or the server's variables whose value comes from outside (REPLY, OPTARG,
BASH_REMATCH, PWD, positional parameters, SKILLSCOPE_HOOK_INPUT...). Writes the parser cannot
pin to a name (`read "$n"`, `declare -n`, `source f`) make every name a suspect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

INTEGER = re.compile(r"[-+]?(?:0[xX][0-9A-Fa-f]+|[0-9]+#[0-9A-Za-z@_]+|[0-9]+)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"\b[0-9]+#[0-9A-Za-z@_]+|\b0[xX][0-9A-Fa-f]+\b|\b[0-9]+\b")
_SIMPLE_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-])")
_BRACED = re.compile(r"(#?)([A-Za-z_][A-Za-z0-9_]*)(?:\[(.*)\])?(?:(:?[-=+?])(.*))?", re.DOTALL)
# Bash's and the server's variables whose values come from outside the command.
_OUTSIDE = frozenset(
    {
        "REPLY", "OPTARG", "BASH_REMATCH", "MAPFILE", "PWD", "OLDPWD", "COPROC", "BASH_COMMAND",
        "BASH_EXECUTION_STRING", "BASH_ARGV", "BASH_ARGV0", "BASH_SOURCE", "FUNCNAME",
        "READLINE_LINE", "COMP_LINE", "COMP_WORDS", "COMPREPLY", "_", "HOSTNAME", "BASH_ALIASES",
        "BASH_CMDS", "DIRSTACK", "GROUPS", "PIPESTATUS", "BASH_LINENO", "PS1", "PS2", "PS3", "PS4",
    }
)  # fmt: skip
_OUTSIDE_PREFIXES = ("SKILLSCOPE_", "CLAUDE_")
# Assigning these makes bash (or every program it starts) run code the command does not show.
_CODE_NAMES = frozenset(
    {
        "BASH_ENV", "ENV", "PATH", "PS4", "PS0", "PS1", "PS2", "PROMPT_COMMAND", "SHELLOPTS",
        "BASHOPTS", "BASH_CMDS", "BASH_ALIASES", "BASH_LOADABLES_PATH", "EXECIGNORE",
        "GCONV_PATH", "POSIXLY_CORRECT", "FUNCNEST",
    }
)  # fmt: skip
_CODE_PREFIXES = ("LD_", "BASH_FUNC_")
# These change how `$"..."` strings are translated.
LOCALE_NAMES = re.compile(r"(?<![$\w{])(TEXTDOMAIN|TEXTDOMAINDIR|LANGUAGE|LANG|LC_[A-Z]+)\b")
IFS_WRITTEN = re.compile(r"(?<![$\w{])IFS\b")


def is_integer(text: str) -> bool:
    """A literal integer bash's arithmetic reads as a number (and nothing else)."""
    return INTEGER.fullmatch(text) is not None


def code_name(name: str) -> bool:
    """Assigning this variable changes which code bash or the programs it starts run."""
    return name in _CODE_NAMES or name.startswith(_CODE_PREFIXES)


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index of the `close` matching an `open_` just before start (or len(text))."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return len(text)


@dataclass(slots=True)
class Arithmetic:
    """What one arithmetic text reads: variable names, and values it evaluates blind."""

    names: set[str] = field(default_factory=set)
    blind: list[str] = field(default_factory=list)  # e.g. "the output of `$(...)`"


def read_arithmetic(text: str, into: Arithmetic | None = None) -> Arithmetic:
    """The variables an arithmetic text reads and the computed values it evaluates."""
    found = into or Arithmetic()
    rest: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("$((", i) or text.startswith("$[", i):
            i += 1  # nested arithmetic: its text is read here as well
        elif text.startswith("$(", i) or text[i] == "`":
            found.blind.append("the output of a command substitution")
            i = (_matching(text, i + 2, "(", ")") if text[i] == "$" else text.find("`", i + 1)) + 1
            i = n if i == 0 else i
        elif text.startswith("${", i):
            end = _matching(text, i + 2, "{", "}")
            _braced(text[i + 2 : end], found)
            i = end + 1
        elif text[i] == "$" and (m := _SIMPLE_DOLLAR.match(text, i)):
            name = m.group(1)
            if name[0].isdigit() or name in "@*":
                found.blind.append(f"the positional parameter ${name}")
            elif _NAME.fullmatch(name):
                found.names.add(name)
            i = m.end()
        else:
            rest.append(text[i])
            i += 1
    plain = _NUMBER.sub(" ", "".join(rest).replace('"', " ").replace("'", " "))
    found.names.update(m.group() for m in _NAME.finditer(plain))
    return found


def _braced(inner: str, found: Arithmetic) -> None:
    m = _BRACED.fullmatch(inner)
    if m is None:
        if re.fullmatch(r"#?[0-9@*]+", inner):
            found.blind.append(f"the positional parameter ${{{inner}}}")
        elif not re.fullmatch(r"#?[#?$!-]", inner):
            found.blind.append(f"the value of ${{{inner}}}")
        return
    length, name, subscript, operator, word = m.groups()
    if not length:
        found.names.add(name)
    if subscript is not None and subscript not in ("@", "*"):
        read_arithmetic(subscript, found)
    if operator is not None:
        read_arithmetic(word or "", found)


@dataclass(slots=True)
class Values:
    """Every write to every name and every arithmetic read, over a whole command."""

    writes: dict[str, list[str]] = field(default_factory=dict)  # name -> why not inert ("" = inert)
    integer: set[str] = field(default_factory=set)  # declared -i
    suspects_all: str = ""  # why every name may hold anything
    reads: list[tuple[str, str]] = field(default_factory=list)  # (name, where it is evaluated)
    blind: list[str] = field(default_factory=list)  # computed values evaluated as arithmetic
    contexts: list[str] = field(default_factory=list)  # every place arithmetic is evaluated

    def write(self, name: str, value: str | None, how: str) -> None:
        """Record `name` being set: value is its literal text, or None when computed or read."""
        inert = value is not None and (value.strip() == "" or is_integer(value.strip()))
        why = "" if inert else f"it is set {how}"
        self.writes.setdefault(name, []).append(why)

    def arithmetic(self, text: str, where: str) -> None:
        """An arithmetic text bash will evaluate, at `where` (e.g. "`$((...))`")."""
        found = read_arithmetic(text)
        self.contexts.append(where)
        self.reads += [(name, where) for name in sorted(found.names)]
        self.blind += [f"{where} evaluates {what} as arithmetic" for what in found.blind]

    def why_suspect(self, name: str) -> str:
        """Why `name` may hold text that is not a number, or "" when it is inert."""
        if name in _OUTSIDE or name.startswith(_OUTSIDE_PREFIXES):
            return "its value comes from outside the command"
        if self.suspects_all:
            return self.suspects_all
        return next((w for w in self.writes.get(name, []) if w), "")

    def findings(self) -> list[str]:
        """Every place a value the parser cannot read is evaluated as code."""
        out = list(dict.fromkeys(self.blind))
        for name, where in dict.fromkeys(self.reads):
            why = self.why_suspect(name)
            if why:
                out.append(f"{where} evaluates the value of {name} as arithmetic, and {why}")
        for name in sorted(self.integer):
            why = self.why_suspect(name)
            if why:
                out.append(
                    f"{name} is declared -i, so assigning it evaluates arithmetic, and {why}"
                )
        return out
