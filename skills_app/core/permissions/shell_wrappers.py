"""The command under its wrappers: `nice -n 5 timeout 9 env A=1 rm x` runs `A=1 rm x`.

`resolve` reads each wrapper's own options (command, builtin, exec, nice, nohup, time, timeout,
env, setsid, stdbuf, coproc, `!`) and returns the command it runs, with `env`'s assignments
(`NAME=value`) kept in front of it and `env -S 'rm x'` split into its words. A wrapper whose
options it does not know is not looked through (its words are still deny subjects, see
`shell.py`); a computed word before the command (`timeout $T rm x`, `env $X`) or a computed
command word makes the command unknowable: `blind` says why.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

from .shell_words import Word


@dataclass(frozen=True, slots=True)
class _Spec:
    flags: str = ""  # short options without a value
    valued: str = ""  # short options that take a value
    stops: str = ""  # options after which nothing runs (`command -v`)
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    positionals: int = 0  # operands before the command (timeout's duration)


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
# Reserved words tree-sitter may read as a command name; the words after them are a command line.
_KEYWORDS = frozenset({"{", "!", "time", "coproc"})
_SPLIT = re.compile(r"-[^-]*S|--split-string")
_SPECS = {
    "command": _Spec(flags="p", stops="vV"),
    "builtin": _Spec(),
    "exec": _Spec(flags="cl", valued="a"),
    "nohup": _Spec(),
    "nice": _Spec(),
    "time": _Spec(flags="p"),
    "coproc": _Spec(),
    "!": _Spec(),
    "{": _Spec(),  # the group keyword, which tree-sitter reads as a command after `!` or `time`
    "timeout": _Spec(
        flags="v",
        valued="sk",
        long_flags=frozenset({"--preserve-status", "--foreground", "--verbose"}),
        long_valued=frozenset({"--signal", "--kill-after"}),
        positionals=1,
    ),
    "setsid": _Spec(flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait"})),
    "stdbuf": _Spec(valued="ioe", long_valued=frozenset({"--input", "--output", "--error"})),
    "env": _Spec(
        flags="iv0",
        valued="uCS",
        long_flags=frozenset(
            {
                "--ignore-environment",
                "--null",
                "--debug",
                "--list-signal-handling",
                "--block-signal",
                "--default-signal",
                "--ignore-signal",
            }
        ),
        long_valued=frozenset({"--unset", "--chdir", "--split-string"}),
    ),  # fmt: skip
}
# Programs that run a command given in their arguments, with options not read here: their
# words are still deny subjects (every suffix), a computed word among them is blind, and allow
# rules see them as written.
OTHER_RUNNERS = frozenset(
    {
        "xargs", "sudo", "doas", "chroot", "busybox", "chrt", "taskset", "unbuffer", "caffeinate",
        "systemd-run", "firejail", "nsenter", "unshare", "runuser", "ionice", "strace", "ltrace",
        "valgrind", "fakeroot", "faketime", "numactl", "prlimit", "setpriv", "chpst", "bwrap",
        "nsjail", "pkexec", "sg", "torify", "proxychains", "proxychains4", "xvfb-run",
        "dbus-run-session", "flock", "watch", "parallel", "su", "script", "time", "nice",
        "nohup", "timeout", "setsid", "stdbuf", "env", "command", "builtin", "exec", "coproc", "{",
        "!",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Resolved:
    """The command a wrapped command runs."""

    words: tuple[Word, ...]  # the real command's words; () when nothing runs (`exec >f`)
    assignments: tuple[str, ...] = ()  # NAME=value given by env
    via: tuple[str, ...] = ()  # the wrappers looked through, outermost first
    blind: str = ""  # why the real command cannot be known
    known: bool = True  # False when a wrapper's options were not understood
    split: bool = False  # env -S split a string into words


def _literal(text: str) -> Word:
    return Word(text, literal=True)


def _split_string(text: str) -> list[Word] | None:
    """env -S's words, when written without escapes, `$` or `#` (else None)."""
    if any(c in text for c in "\\$#"):
        return None
    try:
        return [_literal(w) for w in shlex.split(text)]
    except ValueError:
        return None


def _options(head: str, words: list[Word]) -> tuple[int, list[str], list[Word]] | str | None:
    """(index of the command, env assignments, words after splitting -S) / why blind / None."""
    spec = _SPECS[head]
    words = list(words)
    assignments: list[str] = []
    i, operands = 1, 0
    while i < len(words):
        word = words[i]
        if not word.literal or word.dollar:
            if head in _KEYWORDS:
                break  # the command itself: resolve() says its name is computed
            return f"an argument of `{head}` ({word.text}) is computed, so it may be the command"
        text = word.text
        if text == "--":
            i += 1
            break
        if head == "env" and text.startswith(("-S", "--split-string")):
            value = text.partition("=")[2] if text.startswith("--") else text[2:]
            taken = 1
            if not value and "=" not in text:
                if i + 1 >= len(words) or not words[i + 1].literal or words[i + 1].dollar:
                    return "`env -S` splits a computed string into a command"
                value, taken = words[i + 1].text, 2
            split = _split_string(value)
            if split is None:
                return "`env -S` with escapes, `$` or `#` builds its command at run time"
            words[i : i + taken] = split
            continue
        if head == "nice" and re.fullmatch(r"-\d+|-n-?\d+|--adjustment=-?\d+", text):
            i += 1
            continue
        if head == "nice" and text in ("-n", "--adjustment"):
            i += 2
            continue
        if text.startswith("--"):
            name, eq, _ = text.partition("=")
            if name in spec.long_flags:
                i += 1
            elif name in spec.long_valued:
                i += 1 if eq else 2
            else:
                return None
            continue
        if text.startswith("-") and len(text) > 1 and not (head == "env" and text == "-"):
            for j, flag in enumerate(text[1:], 1):
                if flag in spec.stops:
                    return None
                if flag in spec.valued:
                    i += 1 if j < len(text) - 1 else 2
                    break
                if flag not in spec.flags:
                    return None
            else:
                i += 1
            continue
        if head in _KEYWORDS and _ASSIGNMENT.match(text):
            assignments.append(text)  # `! { A=1 cmd; }`: an assignment before the command
            i += 1
            continue
        if head == "env" and (text == "-" or "=" in text):  # env takes any NAME=VALUE
            if text != "-":
                assignments.append(text)
            i += 1
            continue
        if operands < spec.positionals:
            operands += 1
            i += 1
            continue
        break
    return i, assignments, words


def resolve(words: list[Word]) -> Resolved:
    """Look through every wrapper whose options are known; stop at the first that is not."""
    via: list[str] = []
    assignments: list[str] = []
    current = list(words)
    split = False
    while current:
        first = current[0]
        if not first.literal or first.glob or first.dollar:
            return Resolved(tuple(current), tuple(assignments), tuple(via),
                            f"the command name comes from an expansion ({first.text})")  # fmt: skip
        if first.text.startswith(("/proc/", "/dev/")):
            why = f"{first.text} names a program through /proc or /dev, hiding which it is"
            return Resolved(tuple(current), tuple(assignments), tuple(via), why)
        head = posixpath.basename(first.text)
        if head not in _SPECS:
            break
        split = split or (head == "env" and any(_SPLIT.match(w.text) for w in current[1:]))
        parsed = _options(head, current)
        if parsed is None:
            return Resolved(tuple(current), tuple(assignments), tuple(via), known=False)
        if isinstance(parsed, str):
            return Resolved(tuple(current), tuple(assignments), tuple(via), parsed)
        start, env_assignments, current = parsed
        via.append(head)
        assignments += env_assignments
        current = current[start:]
    return Resolved(tuple(current), tuple(assignments), tuple(via), split=split)


def suffix_subjects(words: tuple[str, ...]) -> list[str]:
    """The command under any runner: with a basename, and every suffix after a runner."""
    out: list[str] = []
    head = posixpath.basename(words[0])
    if head != words[0]:
        out.append(" ".join((head, *words[1:])))
    if head in OTHER_RUNNERS:
        for i in range(1, len(words)):
            rest = (posixpath.basename(words[i]), *words[i + 1 :])
            out += [" ".join(words[i:]), " ".join(rest)]
    return out
