"""What programs that run other programs do with their words: shells, find, xargs, watch...

`inspect(analyst, words, fed, depth)` is called with the words of the real command (wrappers
already looked through) and hands them to the handler for that name: the builtins of
`shell_builtins`, or the runners here. A shell's `-c` code, a literal here-document or
here-string it reads, `find -exec`'s command and `su -c`/`flock -c`/`script -c`/`watch` code are
parsed and walked like the rest (ask at best); code they get at run time is blind. `find
-delete` is read as `rm` of its starting points, so a deny rule on rm denies it.
"""

from __future__ import annotations

import posixpath
import re

from .shell_builtins import BUILTINS, INPUT_PATHS, Analyst, Handler, run_fed
from .shell_words import Word
from .shell_wrappers import resolve

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "posh", "yash"})
_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O"})
_STARTUP_OPTIONS = frozenset({"-i", "-l", "--login", "--rcfile", "--init-file", "--debugger"})
_CODE_OPTION = {"su": "-c", "runuser": "-c", "flock": "-c", "script": "-c"}
_RUNS_ITS_ARGUMENTS = SHELLS | {"eval", "source", ".", "find", "xargs", "env", "nice", "nohup",
                                "timeout", "stdbuf", "setsid", "sudo", "doas", "time", "exec",
                                "command", "builtin", "flock", "su", "runuser", "script", "watch",
                                "chroot", "busybox", "parallel", "unbuffer", "ionice", "taskset"}  # fmt: skip
_FIND_EXEC = ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch")
_FIND_WRITES = ("-fprint", "-fprint0", "-fprintf", "-fls")
_XARGS_VALUED = frozenset("aEdILlnPs")


def _quote(word: str) -> str:
    if re.fullmatch(r"[\w@%+=:,./-]+", word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def _shell(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    head = posixpath.basename(words[0].text)
    i = 1
    while i < len(words):
        word = words[i]
        if not word.exact:
            an.blind(
                f"an argument of {head} is computed, so it may be code or an option; write its arguments literally"
            )
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
                an.blind(f"{head} -c expects code that is missing; give the code after -c")
            elif not code[0].exact:
                an.blind(f"{head} -c runs code built at run time; write the command itself")
            else:
                an.ask(
                    f"{head} -c runs a string as code in another shell; run the command directly"
                )
                an.code(code[0].text, depth)
            return
        if text in ("-s", "-", "--"):
            break
        if not text.startswith(("-", "+")):
            if text.startswith(INPUT_PATHS):
                run_fed(an, fed, depth, head)
            return  # runs a script file: its commands are the file's business
        i += 1
    an.ask(f"{head} reads commands from its input; run the commands directly")
    run_fed(an, fed, depth, head)


def _code_option(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    head = posixpath.basename(words[0].text)
    for i, word in enumerate(words):
        if word.text == _CODE_OPTION[head] and word.exact:
            code = words[i + 1 : i + 2]
            if code and code[0].exact:
                an.ask(f"{head} {word.text} runs a string as code; run the command directly")
                an.code(code[0].text, depth)
            else:
                an.blind(
                    f"{head} {word.text} runs code built at run time; write the code literally"
                )


def _watch(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    args = [w for w in words[1:] if not w.text.startswith("-")]
    if args and all(w.exact for w in args):
        an.ask("watch runs its arguments as shell code, again and again; run the command directly")
        an.code(" ".join(w.text for w in args), depth)
    elif args:
        an.blind("watch runs code built at run time; write the command literally")


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
            an.ask(
                f"find {text} runs a command for every file it finds; list the files, then run the command on them"
            )
            if inner and "{}" in inner[0].text:
                an.blind(
                    f"find {text} runs a command named by the files it finds; name the command literally"
                )
            elif inner:
                an.code(" ".join(_quote(w.text) for w in inner), depth)
        elif text == "-delete":
            an.ask(
                "find -delete removes every file it finds; list them (find -print), then remove them with rm"
            )
            # find's own rm: a deny rule on rm denies it, in rm's usual spellings.
            for flags in ("", "-r ", "-f ", "-rf ", "-d ", "-R "):
                an.subject(f"rm {flags}{' '.join(starts)}")
        elif text in _FIND_WRITES and i + 1 < len(words):
            an.target(texts[i + 1], words[i + 1].exact)


def _xargs(an: Analyst, words: list[Word], fed: str | None, depth: int) -> None:
    an.ask(
        "xargs adds arguments read from its input to the command it runs; pass the arguments directly"
    )
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
    if i >= len(words):
        return  # runs echo
    real = list(resolve(words[i:]).words)
    head = posixpath.basename(real[0].text) if real else ""
    if (
        head in _RUNS_ITS_ARGUMENTS
        or not real
        or any(replace and replace in w.text for w in real[:1])
    ):
        an.blind(
            f"xargs passes its input to {words[i].text}, which may run it as a command; run the command directly"
        )
    inspect(an, real, None, depth + 1)


_HANDLERS: dict[str, Handler] = {
    **BUILTINS,
    "find": _find,
    "fd": _find,
    "xargs": _xargs,
    "watch": _watch,
    **dict.fromkeys(SHELLS, _shell),
    **dict.fromkeys(_CODE_OPTION, _code_option),
}


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
