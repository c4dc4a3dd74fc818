"""Pure text matchers behind permission rules: Bash command splitting, globs, paths and domains.

Bash wrappers stripped before matching: `timeout [opts] N`, `nice [-n N]`, `nohup`, `time [-p]`
and bare `xargs`; `VAR=x` prefixes and `env` are NOT stripped (they can change what a command
does). In Bash and Skill patterns `\\*` is a literal star.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

_WRAPPER = re.compile(
    r"""^(?:
        timeout(?:\s+(?:-[sk]\s*\S+|--(?:signal|kill-after)=\S+|--preserve-status|--foreground|-v))*
            \s+\d+(?:\.\d+)?[smhd]?
      | nice(?:\s+(?:-n\s*-?\d+|-\d+|--adjustment=-?\d+))?
      | nohup | time(?:\s+-p)? | xargs
    )\s+""",
    re.VERBOSE,
)


def escape_stars(text: str) -> str:
    """Make every `*` in text literal, so a pattern names exactly that text."""
    return text.replace("*", "\\*")


@lru_cache(maxsize=4096)
def command_regex(spec: str) -> re.Pattern[str]:
    """Compile a Bash/Skill pattern: `*` spans anything; a trailing ` *` keeps the word boundary."""
    tail = ""
    if spec.endswith(" *"):
        spec, tail = spec[:-2].rstrip(), r"(?:\s.*)?"
    out, i = [], 0
    while i < len(spec):
        if spec.startswith("\\*", i):
            out.append(re.escape("*"))
            i += 2
            continue
        out.append(".*" if spec[i] == "*" else re.escape(spec[i]))
        i += 1
    return re.compile("".join(out) + tail, re.DOTALL)


def literal_text(spec: str) -> str | None:
    """The exact text a wildcard-free pattern stands for, or None when it has a `*`."""
    out, i = [], 0
    while i < len(spec):
        if spec.startswith("\\*", i):
            out.append("*")
            i += 2
        elif spec[i] == "*":
            return None
        else:
            out.append(spec[i])
            i += 1
    return "".join(out)


def glob_regex(pattern: str) -> str:
    """Translate a gitignore-style glob (`*`, `**`, `?`, `[...]`, `\\x`) into a regex."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif pattern.startswith("**", i) and (i == 0 or pattern[i - 1] == "/"):
            if i + 2 < n and pattern[i + 2] == "/":
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*" if i + 2 == n else "[^/]*")
                i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            negate = body[:1] in ("!", "^")
            body = "".join("\\" + c if c in "\\[]^" else c for c in body[negate:])
            out.append(
                f"[{'^' if negate else ''}{body}]" if body else re.escape(pattern[i : close + 1])
            )
            i = close + 1
        else:
            out.append(re.escape(ch))
            i += 1
    return "".join(out)


def glob_escape(text: str) -> str:
    """Escape glob metacharacters so text matches only itself."""
    return re.sub(r"([\\*?\[])", r"\\\1", text)


def norm_path(path: str) -> str:
    """Normalise a POSIX path, folding a leading `//` to `/`."""
    result = posixpath.normpath(path)
    return "/" + result.lstrip("/") if result.startswith("//") else result


@lru_cache(maxsize=4096)
def _path_regex(spec: str, workspace: str) -> re.Pattern[str]:
    """Anchor a Read/Edit pattern to an absolute glob and compile it."""
    base = glob_escape(workspace)
    if spec.startswith("//"):
        base, rest = "/", spec[2:]
    elif spec.startswith("/"):
        rest = spec[1:]
    else:
        rest = spec
        anchored = spec.startswith(("./", "../")) or spec in (".", "..")
        # gitignore: a pattern with no slash (except a trailing one) matches at any depth
        if not anchored and "/" not in spec.rstrip("/"):
            rest = "**/" + spec
    rest = rest.rstrip("/")
    full = norm_path(posixpath.join(base, rest)) if rest else base
    return re.compile(glob_regex(full), re.DOTALL)


def path_matches(spec: str, target: str, workspace: str) -> bool:
    """True when the pattern matches the path or one of its parent directories (gitignore)."""
    regex = _path_regex(spec, workspace)
    path = target
    while True:
        if regex.fullmatch(path):
            return True
        parent = posixpath.dirname(path)
        if parent == path:
            return False
        path = parent


def is_inside(path: str, root: str) -> bool:
    """True when path is root or lies below it."""
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def domain_of(url: str) -> str:
    """The URL's host without a trailing dot, or "" when it has none or does not parse."""
    try:
        return (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""


def domain_matches(pattern: str, url: str) -> bool:
    """True when the URL's host matches a `domain:` pattern (`*.` covers subdomains only)."""
    host = domain_of(url)
    pattern = pattern.lower()
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    label = "".join("[^.]*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(label, host) is not None


# ---------------------------------------------------------------- Bash commands


@dataclass(frozen=True, slots=True)
class Shell:
    parts: tuple[str, ...]  # top-level commands between &&, ||, ;, |, &, newline
    substituted: tuple[bool, ...]  # the part contains $(...), `...`, <(...) or >(...)
    nested: tuple[str, ...]  # commands inside substitutions: deny and ask rules see them too


def _find_close(text: str, start: int) -> int:
    """Index of the ')' closing a '(' opened just before start, or len(text)."""
    depth, quote, i = 1, "", start
    while i < len(text):
        ch = text[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\":
            i += 1
        elif quote == '"':
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


@lru_cache(maxsize=1024)
def split_shell(command: str, depth: int = 0) -> Shell:
    """Split a command at control operators outside quotes, noting substitutions."""
    parts: list[str] = []
    flags: list[bool] = []
    nested: list[str] = []
    buf: list[str] = []
    quote, substituted, i, n = "", False, 0, len(command)

    def flush() -> None:
        text = "".join(buf).strip()
        if text:
            parts.append(text)
            flags.append(substituted)
        buf.clear()

    while i < n:
        ch = command[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
            buf.append(ch)
            i += 1
        elif ch == "\\" and i + 1 < n:
            buf.append(" " if command[i + 1] == "\n" else command[i : i + 2])
            i += 2
        elif (
            command.startswith("$(", i)
            or ch == "`"
            or (not quote and command.startswith(("<(", ">("), i))
        ):
            if ch == "`":
                end = command.find("`", i + 1)
                end, inner = (n, command[i + 1 :]) if end == -1 else (end, command[i + 1 : end])
            else:
                end = _find_close(command, i + 2)
                inner = command[i + 2 : end]
            if depth < 16:
                inner_shell = split_shell(inner, depth + 1)
                nested.extend(inner_shell.parts + inner_shell.nested)
            buf.append(command[i : end + 1])
            substituted, i = True, end + 1
        elif quote == '"' or ch in "'\"":
            quote = ("" if ch == '"' else quote) if quote else ch
            buf.append(ch)
            i += 1
        else:
            prev = command[i - 1] if i else ""
            nxt = command[i + 1] if i + 1 < n else ""
            redirect = (ch == "&" and (prev in ("<", ">") or nxt == ">")) or (
                ch == "|" and prev == ">"
            )
            if ch in ";\n&|" and not redirect:
                flush()
                substituted = False
                i += 2 if ch in "&|" and nxt in ("&", "|") else 1
            else:
                buf.append(ch)
                i += 1
    flush()
    return Shell(tuple(parts), tuple(flags), tuple(nested))


def strip_wrappers(part: str) -> str:
    """Remove leading timeout/nice/nohup/time/xargs wrappers from one command."""
    while match := _WRAPPER.match(part):
        part = part[match.end() :]
    return part


def bash_subjects(command: str) -> list[str]:
    """Everything a deny or ask rule is matched against: the whole, each part, nested parts."""
    shell = split_shell(command)
    subjects = [command]
    for part in shell.parts + shell.nested:
        subjects += [part, strip_wrappers(part)]
    return subjects
