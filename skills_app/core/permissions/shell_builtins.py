"""What each command that runs or evaluates text does with its words.

`inspect(analyst, words, fed, depth)` is called with the words of the real command (wrappers
already looked through). Code bash will run that is written in the command (`eval 'rm x'`,
`bash -c '...'`, `trap '...' EXIT`, `mapfile -C '...'`, `find -exec ...`, a literal here-document
fed to a shell) is parsed and walked like the rest, so deny rules see it; such a command is *ask*
at best. Code built at run time (`eval "$x"`, `bash -c "$c"`, `xargs sh -c`, `hash -p`,
`enable -f`, `alias`) is *blind*: the shell could run anything, so a Bash deny rule denies it.
Names these builtins write (`read x`, `printf -v x`, `declare x=...`) go to `Values`, and their
subscripts are arithmetic.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Protocol

from .shell_values import Values
from .shell_words import Word

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "posh", "yash"})
_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O"})
_STARTUP_OPTIONS = frozenset({"-i", "-l", "--login", "--rcfile", "--init-file", "--debugger"})
_CODE_OPTION = {"su": "-c", "runuser": "-c", "flock": "-c", "script": "-c"}
_DECLARE = frozenset({"declare", "typeset", "local", "export", "readonly"})
_INPUT_PATHS = ("/dev/", "/proc/")
_RUNS_ITS_ARGUMENTS = SHELLS | {"eval", "source", ".", "find", "xargs", "env", "nice", "nohup",
                                "timeout", "stdbuf", "setsid", "sudo", "doas", "time", "exec",
                                "command", "builtin", "flock", "su", "runuser", "script", "watch",
                                "chroot", "busybox", "parallel", "unbuffer", "ionice", "taskset"}  # fmt: skip
_FIND_EXEC = ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch")
_FIND_WRITES = ("-fprint", "-fprint0", "-fprintf", "-fls")
_XARGS_VALUED = frozenset("aEdILlnPs")


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


def _quote(word: str) -> str:
    if re.fullmatch(r"[\w@%+=:,./-]+", word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


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
                continue
            an.blind(f"`{head}` gets a computed name or option ({text}); it may evaluate a "
                     "subscript or make a name reference. Write the names and options literally")  # fmt: skip
            continue
        if text[:1] in "-+" and len(text) > 1:
            if text[0] == "-" and "i" in text:
                integer = True
            if text[0] == "-" and "n" in text:
                an.values.suspects_all = f"`{head} -n` makes a name reference"
                an.ask(f"`{head} -n` makes a name reference: a write to one name changes another")
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
    an.ask("source runs a file's commands in this shell, where the rules cannot see them")
    an.values.suspects_all = "a sourced file may set any variable"
    if len(words) < 2 or not words[1].exact:
        an.blind("source reads a file whose name is computed; name the file literally")
    elif words[1].text.startswith(_INPUT_PATHS):
        _fed(an, fed, depth, "source")


def _fed(an: Analyst, fed: str | None, depth: int, who: str) -> None:
    if fed is None:
        an.blind(f"{who} reads its commands from input the rules cannot see; pass them literally")
    else:
        an.code(fed, depth)


def _trap(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    args = [w for w in words[1:] if w.text != "--"]
    if not args or args[0].text in ("-p", "-l", "-P", "-", ""):
        return
    if args[0].exact:
        an.ask("trap runs its text as code when a signal or exit comes")
        an.code(args[0].text, depth)
    else:
        an.blind("trap runs text built at run time; write the command literally")


def _shell(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    head = posixpath.basename(words[0].text)
    i = 1
    while i < len(words):
        word = words[i]
        if not word.exact:
            an.blind(f"an argument of {head} is computed, so it may be code or an option")
            return
        text = word.text
        if text in _STARTUP_OPTIONS or (text.startswith("-") and not text.startswith("--")
                                        and any(c in text for c in "il")):  # fmt: skip
            an.blind(f"{head} {text} reads start-up files from the workspace ($HOME), which "
                     "the rules cannot see; drop the option")  # fmt: skip
        if text in _SHELL_VALUE_OPTIONS:
            i += 2
            continue
        if text[:1] in "-+" and not text.startswith("--") and "c" in text[1:]:
            code = words[i + 1 : i + 2]
            if not code:
                an.blind(f"{head} -c expects code that is missing")
            elif not code[0].exact:
                an.blind(f"{head} -c runs code built at run time; write the command itself")
            else:
                an.ask(f"{head} -c runs a string as code in another shell")
                an.code(code[0].text, depth)
            return
        if text in ("-s", "-", "--"):
            break
        if not text.startswith(("-", "+")):
            if text.startswith(_INPUT_PATHS):
                _fed(an, fed, depth, head)
            return  # runs a script file: its commands are the file's business
        i += 1
    an.ask(f"{head} reads commands from its input")
    _fed(an, fed, depth, head)


def _code_option(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    head = posixpath.basename(words[0].text)
    for i, word in enumerate(words):
        if word.text == _CODE_OPTION[head] and word.exact:
            code = words[i + 1 : i + 2]
            if code and code[0].exact:
                an.ask(f"{head} {word.text} runs a string as code")
                an.code(code[0].text, depth)
            else:
                an.blind(f"{head} {word.text} runs code built at run time")


def _watch(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    args = [w for w in words[1:] if not w.text.startswith("-")]
    if args and all(w.exact for w in args):
        an.ask("watch runs its arguments as shell code, again and again")
        an.code(" ".join(w.text for w in args), depth)
    elif args:
        an.blind("watch runs code built at run time")


def _find(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    texts = [w.text for w in words]
    if not all(w.exact for w in words[1:]):
        an.blind("an argument of find is computed, so it may be an action such as -exec or "
                 "-delete; write find's arguments literally")  # fmt: skip
    starts = [t for t in texts[1:] if not t.startswith(("-", "(", "!", ")"))][:1] or ["."]
    for i, text in enumerate(texts):
        if text in _FIND_EXEC:
            end = next((j for j in range(i + 1, len(texts)) if texts[j] in (";", "+")), len(texts))
            inner = words[i + 1 : end]
            an.ask(f"find {text} runs a command for every file it finds")
            if inner and "{}" in inner[0].text:
                an.blind(f"find {text} runs a command named by the files it finds")
            elif inner:
                an.code(" ".join(_quote(w.text) for w in inner), depth)
        elif text == "-delete":
            an.ask("find -delete removes every file it finds")
            # find's own rm: a deny rule on rm denies it, in rm's usual spellings.
            for flags in ("", "-r ", "-f ", "-rf ", "-d ", "-R "):
                an.subject(f"rm {flags}{' '.join(starts)}")
        elif text in _FIND_WRITES and i + 1 < len(words):
            an.target(texts[i + 1], words[i + 1].exact)


def _xargs(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    an.ask("xargs adds arguments read from its input to the command it runs")
    replace = ""
    i = 1
    while i < len(words):
        word = words[i]
        if not word.exact:
            an.blind("an argument of xargs is computed, so it may be the command")
            return
        text = word.text
        if text == "--":
            i += 1
            break
        if text.startswith("--"):
            if text.startswith("--replace"):
                replace = text.partition("=")[2] or "{}"
            i += 1 if "=" in text or text in ("--null", "--no-run-if-empty", "--interactive",
                                              "--verbose", "--exit", "--open-tty") else 2  # fmt: skip
            continue
        if text.startswith("-") and len(text) > 1:
            flag = text[1]
            if flag in "iI":
                replace = text[2:] or ("{}" if flag == "i" else "")
                if flag == "I" and not replace and i + 1 < len(words):
                    replace, i = words[i + 1].text, i + 1
            elif flag in _XARGS_VALUED and len(text) == 2:
                i += 1
            i += 1
            continue
        break
    inner = words[i:]
    if not inner:
        return  # runs echo
    head = posixpath.basename(inner[0].text)
    if head in _RUNS_ITS_ARGUMENTS or (replace and replace in inner[0].text):
        an.blind(f"xargs passes its input to {inner[0].text}, which may run it as a command")
    inspect(an, list(inner), None, depth + 1)


def _mapfile(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    i = 1
    while i < len(words):
        text = words[i].text
        if text in ("-C",) and i + 1 < len(words):
            callback = words[i + 1]
            if callback.exact:
                an.ask("mapfile -C runs its callback as code for the lines it reads")
                an.code(callback.text, depth)
            else:
                an.blind("mapfile -C runs a callback built at run time")
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
    an.ask(f"{head} runs its -C command and expands its -W words")
    for i, word in enumerate(words[1:], 1):
        if not word.exact:
            an.blind(f"an argument of {head} is computed, so it may be code")
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
            an.ask(f"unset gets a computed name ({word.text})")
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
        an.blind("enable -f loads a builtin from a shared library, code the rules cannot read")
    else:
        an.ask("enable changes which builtins exist, so a name may run another program")


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


_HANDLERS: dict[str, Handler] = {
    "eval": _eval, "source": _source, ".": _source, "trap": _trap, "find": _find, "fd": _find,
    "xargs": _xargs, "mapfile": _mapfile, "readarray": _mapfile, "compgen": _compgen,
    "complete": _compgen, "read": _read, "printf": _value_option("-v", "printf -v"),
    "wait": _value_option("-p", "wait -p"), "getopts": _getopts, "test": _test, "[": _test,
    "let": _let, "unset": _unset, "hash": _hash, "enable": _enable, "alias": _alias,
    "fc": _other("fc runs commands from history or an editor", blind=True),
    "coproc": _other("coproc runs a command in the background, joined by pipes"),
    "watch": _watch, "cd": _cd, "pushd": _cd, "popd": _cd, "tee": _tee,
    **dict.fromkeys(_DECLARE, _declare), **dict.fromkeys(SHELLS, _shell),
    **dict.fromkeys(_CODE_OPTION, _code_option),
}  # fmt: skip


def handles(name: str) -> bool:
    """Whether `inspect` reads this command's words."""
    return name in _HANDLERS


def inspect(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    """Look at what the real command does with its words."""
    if not words or not words[0].exact:
        return
    handler = _HANDLERS.get(posixpath.basename(words[0].text))
    if handler is not None:
        handler(an, words, fed, depth)
