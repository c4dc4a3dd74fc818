"""What bash's own builtins that run or evaluate text do with their words.

The handlers in BUILTINS (dispatched by `shell_runners.inspect`, after wrappers are looked
through) see the real command's words. Code written in the command (`eval 'rm x'`,
`trap '...' EXIT`, `mapfile -C '...'`, `compgen -C/-W`, a literal here-string fed to
`source /dev/stdin`) is parsed and walked like the rest, so deny rules see it; such a command is
*ask* at best. Code built at run time (`eval "$x"`, `source <(...)`, `hash -p`, `enable -f`,
`alias`, `fc`) is *blind*: bash could run anything, so a Bash deny rule denies it. Names these
builtins write (`read x`, `printf -v x`, `declare x=...`, `getopts`, `mapfile`) go to `Values`,
and the subscripts in them are arithmetic.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Protocol

from .shell_values import Values
from .shell_words import Word

_DECLARE = frozenset({"declare", "typeset", "local", "export", "readonly"})
INPUT_PATHS = ("/dev/", "/proc/")


class Analyst(Protocol):
    """What the walker offers the handlers."""

    values: Values
    changes_dir: bool

    def ask(self, reason: str) -> None: ...
    def blind(self, reason: str) -> None: ...
    def code(self, text: str, depth: int) -> None: ...
    def expression(self, text: str, depth: int) -> None: ...
    def target(self, path: str, literal: bool) -> None: ...
    def subject(self, text: str) -> None: ...


Handler = Callable[[Analyst, list[Word], "str | None", int], None]


def name_argument(an: Analyst, word: Word, how: str) -> None:
    """A variable name given to a builtin (`read NAME`): a write, and its subscript evaluated."""
    if not word.exact:
        an.blind(f"{how} writes a variable whose name is computed ({word.text}); with a "
                 "subscript such a name runs code. Write the variable name literally")  # fmt: skip
        an.values.suspects_all = f"it may be set by {how} through a computed name"
        return
    name, bracket, rest = word.text.partition("[")
    name = name.partition("=")[0].rstrip("+")
    if bracket:
        subscript = rest.rsplit("]", 1)[0]
        an.values.arithmetic(subscript, f"the subscript of {name} given to {how}")
        an.expression(subscript, 0)
    an.values.write(name, None, f"by {how}")


def declaration(an: Analyst, head: str, items: list[Word]) -> None:
    """declare/typeset/local/export/readonly: options, names, `name=value` items."""
    integer = False
    for word in items:
        text = word.text
        if not word.exact:
            name = text.partition("=")[0]
            if "=" in text and re.fullmatch(r"[A-Za-z_]\w*\+?", name):
                an.values.write(name.rstrip("+"), None, f"by {head} from a computed value")
                if integer:
                    an.values.integer.add(name.rstrip("+"))
                an.ask(f"`{head}` gets a computed value ({text}); assign the variable first "
                       f"(NAME=value), then `{head} NAME`")  # fmt: skip
                continue
            an.blind(f"`{head}` gets a computed name or option ({text}); it may evaluate a "
                     "subscript or make a name reference. Write the names and options literally")  # fmt: skip
            continue
        if text[:1] in "-+" and len(text) > 1:
            if text[0] == "-" and "i" in text:
                integer = True
                an.ask(f"`{head} -i` makes every assignment to its names arithmetic, which bash "
                       "evaluates as code; assign plain numbers without -i")  # fmt: skip
            if text[0] == "-" and "n" in text:
                an.values.suspects_all = f"`{head} -n` makes a name reference"
                an.ask(
                    f"`{head} -n` makes a name reference: a write to one name changes another; use the variable itself"
                )
            continue
        name, eq, value = text.partition("=")
        base = name.partition("[")[0].rstrip("+")
        if "[" in name:
            subscript = name.partition("[")[2].rsplit("]", 1)[0]
            an.values.arithmetic(subscript, f"the subscript of {base} in `{head}`")
            an.expression(subscript, 0)
        if eq:
            an.values.write(base, value, f"by `{head} {text}`")
        if integer:
            an.values.integer.add(base)
            if eq:
                an.values.arithmetic(value, f"`{head} -i {base}=...`")


def _declare(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    declaration(an, posixpath.basename(words[0].text), words[1:])


def _eval(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    code = words[1:]
    if all(w.exact for w in code):
        an.ask("eval runs its arguments as code; write the command itself instead")
        an.code(" ".join(w.text for w in code), depth)
    else:
        an.blind("eval runs text built at run time; write the command itself instead")


def _source(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    an.ask(
        "source runs a file's commands in this shell, where the rules cannot see them; run the script as a program (bash FILE) if you need it"
    )
    an.values.suspects_all = "a sourced file may set any variable"
    if len(words) < 2 or not words[1].exact:
        an.blind("source reads a file whose name is computed; name the file literally")
    elif words[1].text.startswith(INPUT_PATHS):
        run_fed(an, fed, depth, "source")


def run_fed(an: Analyst, fed: str | None, depth: int, who: str) -> None:
    if fed is None:
        an.blind(f"{who} reads its commands from input the rules cannot see; pass them literally")
    else:
        an.code(fed, depth)


def _trap(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    args = [w for w in words[1:] if w.text != "--"]
    if not args or args[0].text in ("-p", "-l", "-P", "-", ""):
        return
    if args[0].exact:
        an.ask("trap runs its text as code when a signal or exit comes; run the command directly")
        an.code(args[0].text, depth)
    else:
        an.blind("trap runs text built at run time; write the command literally")


def _mapfile(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    i = 1
    while i < len(words):
        text = words[i].text
        if text in ("-C",) and i + 1 < len(words):
            callback = words[i + 1]
            if callback.exact:
                an.ask(
                    "mapfile -C runs its callback as code for the lines it reads; read the lines first, then run the command"
                )
                an.code(callback.text, depth)
            else:
                an.blind(
                    "mapfile -C runs a callback built at run time; write the callback literally"
                )
            i += 2
        elif text in ("-c", "-d", "-n", "-O", "-s", "-u"):
            i += 2
        elif text.startswith("-"):
            i += 1
        else:
            name_argument(an, words[i], "mapfile")
            i += 1


def _compgen(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    head = posixpath.basename(words[0].text)
    an.ask(f"{head} runs its -C command and expands its -W words; list the words directly")
    for i, word in enumerate(words[1:], 1):
        if not word.exact:
            an.blind(
                f"an argument of {head} is computed, so it may be code; write its arguments literally"
            )
            return
        value = words[i + 1] if i + 1 < len(words) else None
        if word.text == "-C" and value is not None:
            an.code(value.text, depth)
        elif word.text == "-W" and value is not None:
            an.expression(value.text, depth)


def _read(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    i = 1
    while i < len(words):
        text = words[i].text
        if text == "-a" and i + 1 < len(words):
            name_argument(an, words[i + 1], "read -a")
            i += 2
        elif text in ("-d", "-i", "-n", "-N", "-p", "-t", "-u"):
            i += 2
        elif text.startswith("-") and words[i].exact:
            i += 1
        else:
            name_argument(an, words[i], "read")
            i += 1


def _value_option(option: str, how: str) -> Handler:
    def handle(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
        for i, word in enumerate(words[:-1]):
            if word.text == option:
                name_argument(an, words[i + 1], how)

    return handle


def _getopts(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    if len(words) > 2:
        name_argument(an, words[2], "getopts")


def _test(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    for i, word in enumerate(words[:-1]):
        if word.text == "-v":
            operand = words[i + 1]
            if not operand.exact:
                an.blind("test -v with a computed name evaluates its subscript, which may run "
                         "code; write the name literally")  # fmt: skip
            elif "[" in operand.text:
                name, _, rest = operand.text.partition("[")
                an.values.arithmetic(rest.rsplit("]", 1)[0], f"the subscript in test -v {name}")
                an.expression(rest.rsplit("]", 1)[0], depth)


def _let(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    for word in words[1:]:
        if word.exact:
            an.values.arithmetic(word.text, "`let`")
        else:
            an.blind("let evaluates a computed text as arithmetic, where a subscript can run "
                     "code; write the expression literally")  # fmt: skip


def _unset(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    for word in words[1:]:
        if not word.exact:
            an.ask(f"unset gets a computed name ({word.text}); write the name literally")
        elif "[" in word.text:
            name, _, rest = word.text.partition("[")
            an.values.arithmetic(rest.rsplit("]", 1)[0], f"the subscript in unset {name}")
            an.expression(rest.rsplit("]", 1)[0], depth)


def _hash(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    if any(w.text.startswith("-") and "p" in w.text for w in words[1:]) or not all(
        w.exact for w in words[1:]
    ):
        an.blind("hash -p makes a command name run another program; call the program by its "
                 "own name")  # fmt: skip


def _enable(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    if any(w.text.startswith("-") and "f" in w.text for w in words[1:]) or not all(
        w.exact for w in words[1:]
    ):
        an.blind(
            "enable -f loads a builtin from a shared library, code the rules cannot read; use a program instead"
        )
    else:
        an.ask(
            "enable changes which builtins exist, so a name may run another program; call the program by its path"
        )


def _alias(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    an.blind("alias defines commands the rules cannot see; write the command itself")
    for word in words[1:]:
        name, eq, value = word.text.partition("=")
        if eq and word.exact:
            an.code(value, depth)


def _other(reason: str, *, blind: bool = False) -> Handler:
    def handle(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
        (an.blind if blind else an.ask)(reason)

    return handle


def _cd(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    an.changes_dir = True


def _tee(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    for word in words[1:]:
        if not word.text.startswith("-"):
            an.target(word.text, word.literal)


BUILTINS: dict[str, Handler] = {
    "eval": _eval, "source": _source, ".": _source, "trap": _trap, "mapfile": _mapfile,
    "readarray": _mapfile, "compgen": _compgen, "complete": _compgen, "read": _read,
    "printf": _value_option("-v", "printf -v"), "wait": _value_option("-p", "wait -p"),
    "getopts": _getopts, "test": _test, "[": _test, "let": _let, "unset": _unset, "hash": _hash,
    "enable": _enable, "alias": _alias, "cd": _cd, "pushd": _cd, "popd": _cd, "tee": _tee,
    "fc": _other("fc runs commands from history or an editor; write the command itself", blind=True),
    "coproc": _other("coproc runs a command in the background, joined by pipes; run the command directly"),
    **dict.fromkeys(_DECLARE, _declare),
}  # fmt: skip
