"""What a Bash command runs and writes, read with a real parser (tree-sitter-bash).

`analyze(command)` walks the whole syntax tree and returns every simple command anywhere in it:
in pipelines and lists, subshells `( )`, groups `{ }`, `if`/`for`/`while`/`case`, function
bodies, `$( )`, backticks and `<( )`. Words are read after quote and backslash removal, so
`\\rm`, `r''m`, `"rm"` and `$'\\x72m'` are all `rm`. Code hidden in a string is parsed again,
up to MAX_DEPTH levels: `bash -c '...'` (and sh, dash, zsh...), `eval` with literal words, a
literal heredoc or here-string fed to a shell, `find -exec ... ;`, `trap '...'`, `su -c`,
`flock -c`, `script -c`, `watch`. Behind a wrapper (`env`, `command`, `builtin`, `exec`,
`nice`, `ionice`, `timeout`, `nohup`, `setsid`, `stdbuf`, `time`, `xargs`, `sudo`, `doas`,
`chroot`, `busybox`) every later word may start the real command, so each suffix is also a
subject for deny and ask rules (this may deny `timeout 5 echo rm` under `deny Bash(rm *)`:
deny errs on the side of denying).

What rules cannot see through is reported as `opaque` (the caller then asks at best, never
allows): a command name built from an expansion (`$CMD`, `$(echo rm)`) or a glob (`/bin/r?`),
`eval` of non-literal words, `alias`, a shell reading its program from stdin or a variable,
text that does not parse, nesting deeper than MAX_DEPTH, a command over MAX_CHARS.

Writes: every output redirection (`>`, `>>`, `&>`, `&>>`, `>|`, `<>`, `>& file`) and every
file argument of `tee`, with `/dev/null`, `/dev/stdout`, `/dev/stderr` and descriptor copies
(`2>&1`) left out; a target built from `$OUTPUT_DIR`, `$WORK_DIR`, `$SKILLS_DIR`, `$HOME` or
`$TMPDIR` (set by the server, not reassigned in the command) is anchored at WORKSPACE; any
other target built from an expansion is reported as None (unknown). Other
programs that write files (`cp`, `sed -i`) are governed by the Bash rules, not the Write rules.
"""

from __future__ import annotations

import codecs
import posixpath
import re
import shlex
import threading
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

MAX_DEPTH = 8
MAX_CHARS = 100_000
_LOOSE_WORDS = 256
_LANGUAGE = Language(tree_sitter_bash.language())
_LOCAL = threading.local()
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# Where a write target built from the server's folder variables is anchored; no shell word can
# hold a NUL, so no literal target can pass for it.
WORKSPACE = "\x00workspace"
_KNOWN_DIRS = {"OUTPUT_DIR": "out", "WORK_DIR": "work", "SKILLS_DIR": "skills", "HOME": "",
               "TMPDIR": "work/.tmp"}  # fmt: skip
_KNOWN_VARIABLE = re.compile(r"\$(?:\{(OUTPUT_DIR|WORK_DIR|SKILLS_DIR|HOME|TMPDIR)\}|"
                             r"(OUTPUT_DIR|WORK_DIR|SKILLS_DIR|HOME|TMPDIR)\b)")  # fmt: skip
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "posh", "yash"})
_WRAPPERS = frozenset(
    {
        "env", "command", "builtin", "exec", "nice", "ionice", "timeout", "nohup", "setsid",
        "stdbuf", "time", "xargs", "sudo", "doas", "chroot", "busybox", "chrt", "taskset",
        "unbuffer", "caffeinate", "systemd-run", "firejail", "nsenter", "unshare", "runuser",
        "!",
    }
)  # fmt: skip
# Programs that run their option's string argument as shell code.
_CODE_OPTION = {"su": "-c", "runuser": "-c", "flock": "-c", "script": "-c"}
_SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_OUTPUT_OPS = frozenset({">", ">>", "&>", "&>>", ">|", "<>", ">&"})
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_DYNAMIC = frozenset(
    {
        "simple_expansion", "expansion", "command_substitution", "process_substitution",
        "arithmetic_expansion",
    }
)  # fmt: skip
_GLOB = re.compile(r"[*?\[]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command the shell would run, as written and as words after quote removal."""

    text: str  # as written (without its redirections), e.g. `\\rm -rf "$d"`
    words: tuple[str, ...]  # unquoted; a word with an expansion keeps its written form
    assignments: tuple[str, ...]  # leading NAME=value words, as written
    deny_subjects: tuple[str, ...]  # every form a deny or ask rule is matched against

    @property
    def joined(self) -> str:
        """The words separated by single spaces."""
        return " ".join(self.words)


@dataclass(frozen=True, slots=True)
class ShellAnalysis:
    commands: tuple[SimpleCommand, ...]
    # Files written by redirections and tee; None = unknown; WORKSPACE/... = under the root.
    writes: tuple[str | None, ...]
    opaque: tuple[str, ...]  # why rules cannot see everything this command runs
    changes_dir: bool  # cd/pushd/popd: a relative write target may be anywhere
    # When part of the text does not parse: every run of words from any position, so a deny
    # rule still finds its command in the broken part (deny errs on the side of denying).
    loose_subjects: tuple[str, ...] = ()


class _Walker:
    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.writes: list[str | None] = []
        self.opaque: list[str] = []
        self.changes_dir = False
        self.loose: list[str] = []
        self.sources: list[str] = []  # the text each tree being walked was parsed from
        self.top = ""  # the whole command, for the reassignment check of known folders

    def source(self, text: str, depth: int) -> None:
        """Walk shell source text (the command, or code found inside one)."""
        if depth > MAX_DEPTH:
            self.opaque.append(f"code is nested more than {MAX_DEPTH} levels deep")
            return
        # Only ASCII reaches the parser: astral characters crashed it (a segfault in
        # tree-sitter 0.26 under fuzzing). Every other character is a word character to bash,
        # so "a" in its place keeps the structure, and byte offsets stay character offsets
        # into the original text, which node texts are read from.
        tree = _parser().parse(_NON_ASCII.sub("a", text).encode("ascii"))
        if tree.root_node.has_error:
            self.opaque.append("part of the command could not be parsed")
            self.loose += _loose_subjects(text)
        self.sources.append(text)
        try:
            self.node(tree.root_node, depth)
        finally:
            self.sources.pop()

    def text(self, node: Node) -> str:
        """The original text of a node of the tree being walked."""
        return self.sources[-1][node.start_byte : node.end_byte]

    def node(self, node: Node, depth: int) -> None:
        # Iterative: a long pipeline or deep nesting must not exhaust Python's stack.
        stack = [node]
        while stack:
            current = stack.pop()
            kind = current.type
            if kind == "command":
                self.command(current, depth)
            elif kind == "file_redirect":
                self.redirect(current)
            stack.extend(reversed(current.children))

    # --- words ----------------------------------------------------------------------------

    def word(self, node: Node) -> tuple[str, bool]:
        """(text after quote removal, literal) of a word-like node."""
        kind, raw = node.type, self.text(node)
        if kind in ("word", "command_name", "number"):
            if node.child_count and kind == "command_name":
                return self.word(node.children[0])
            return _unescape(raw), True
        if kind == "raw_string":
            return raw[1:-1], True
        if kind == "ansi_c_string":
            return _ansi_c(raw[2:-1]), True
        if kind in ("string", "translated_string", "concatenation"):
            parts: list[str] = []
            literal = True
            for child in node.children:
                if child.type in ('"', '$"'):
                    continue
                if child.type == "string_content":
                    parts.append(re.sub(r"\\([$`\"\\\n])", r"\1", self.text(child)))
                    continue
                text, lit = self.word(child)
                parts.append(text)
                literal = literal and lit
            return "".join(parts), literal
        if kind in _DYNAMIC:
            return raw, False
        return raw, not any(c.type in _DYNAMIC for c in _descendants(node))

    # --- commands -------------------------------------------------------------------------

    def command(self, node: Node, depth: int) -> None:
        assignments: list[str] = []
        words: list[tuple[str, bool]] = []
        for index, child in enumerate(node.children):
            field = node.field_name_for_child(index)
            if child.type == "variable_assignment":
                assignments.append(self.text(child))
            elif field in ("name", "argument"):
                words.append(self.word(child))
        if not words:
            return  # assignments (and redirections) only
        name, literal = words[0]
        unquoted = self.unquoted_name(node)
        if not literal or (unquoted != "[" and _GLOB.search(unquoted)):
            self.opaque.append("a command name is computed (a variable, substitution or glob)")
        text = self.text(node)
        plain = tuple(w for w, _ in words)
        self.analyse_words(words, depth, node)
        subjects = [text, " ".join(plain), " ".join([*assignments, *plain])]
        subjects += self.suffix_subjects(plain)
        self.commands.append(
            SimpleCommand(text, plain, tuple(assignments), tuple(dict.fromkeys(subjects)))
        )

    def suffix_subjects(self, words: tuple[str, ...]) -> list[str]:
        """The command under any wrappers: with a basename, and every suffix after a wrapper."""
        out: list[str] = []
        head = posixpath.basename(words[0])
        if head != words[0]:
            out.append(" ".join((head, *words[1:])))
        if head in _WRAPPERS:
            for i in range(1, len(words)):
                rest = (posixpath.basename(words[i]), *words[i + 1 :])
                out += [" ".join(words[i:]), " ".join(rest)]
        return out

    def analyse_words(self, words: list[tuple[str, bool]], depth: int, node: Node) -> None:
        """Code inside the words (shell -c, eval, find -exec...), and tee's files, recursively."""
        plain = [w for w, _ in words]
        head = posixpath.basename(plain[0])
        if head in ("cd", "pushd", "popd"):
            self.changes_dir = True
        if head == "tee":
            for text, literal in words[1:]:
                if not text.startswith("-"):
                    self.target(text, literal)
        if head == "alias":
            self.opaque.append("alias defines commands the rules cannot see")
        if head == "eval" or (head == "trap" and len(words) > 1):
            code = words[1:] if head == "eval" else words[1:2]
            if all(lit for _, lit in code):
                self.source(" ".join(t for t, _ in code), depth + 1)
            else:
                self.opaque.append(f"{head} runs text built at run time")
        if head in _SHELLS:
            self.shell(words, depth, node)
        if head in _CODE_OPTION:
            self.code_option(words, _CODE_OPTION[head], depth)
        if head == "watch":
            args = [w for w in words[1:] if not w[0].startswith("-")]
            if args:
                self.code([(" ".join(t for t, _ in args), all(lit for _, lit in args))], depth)
        if head in ("find", "fd"):
            self.find_exec(plain, depth)
        if head in _WRAPPERS:
            # Every later word may be where the wrapped command starts (options vary per tool).
            for i in range(1, len(words)):
                text, literal = words[i]
                if literal and not text.startswith("-") and not _ASSIGNMENT.match(text):
                    inner = posixpath.basename(text)
                    if inner in _SHELLS or inner == "eval" or inner in _CODE_OPTION:
                        self.analyse_words(words[i:], depth + 1, node)
                        break

    def shell(self, words: list[tuple[str, bool]], depth: int, node: Node) -> None:
        i = 1
        while i < len(words):
            text = words[i][0]
            if text in _SHELL_VALUE_OPTIONS:
                i += 2
                continue
            if text[:1] in "-+" and not text.startswith("--") and "c" in text[1:]:
                self.code(words[i + 1 : i + 2], depth)
                return
            if text in ("-s", "-", "--"):
                break
            if not text.startswith(("-", "+")):
                return  # runs a script file: its commands are the file's business
            i += 1
        fed = self.fed_code(node)
        if fed is None:
            self.opaque.append("a shell reads its commands from input the rules cannot see")
        else:
            self.source(fed, depth + 1)

    def code_option(self, words: list[tuple[str, bool]], option: str, depth: int) -> None:
        for i, (text, _lit) in enumerate(words):
            if text == option:
                self.code(words[i + 1 : i + 2], depth)

    def code(self, words: list[tuple[str, bool]], depth: int) -> None:
        if not words:
            self.opaque.append("a shell option expects code that is missing")
        elif not words[0][1]:
            self.opaque.append("a shell runs code built at run time")
        else:
            self.source(words[0][0], depth + 1)

    def find_exec(self, words: list[str], depth: int) -> None:
        for i, word in enumerate(words):
            if word in ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec"):
                end = next((j for j in range(i + 1, len(words)) if words[j] in (";", "+")), None)
                inner = words[i + 1 : end]
                if inner:
                    self.source(" ".join(_quote(w) for w in inner), depth + 1)

    def unquoted_name(self, node: Node) -> str:
        """The command name's text outside quotes, to spot glob characters the shell would expand."""
        name = node.child_by_field_name("name")
        if name is None:
            return ""
        parts = [name] if not name.children else list(name.children)
        out = []
        for part in parts:
            if part.type == "concatenation":
                out += [self.text(c) for c in part.children if c.type == "word"]
            elif part.type == "word":
                out.append(re.sub(r"\\.", "", self.text(part)))
        return "".join(out)

    def fed_code(self, node: Node) -> str | None:
        """The literal here-document or here-string given to a command, or None."""
        holders = [node]
        if node.parent is not None and node.parent.type == "redirected_statement":
            holders.append(node.parent)
        for holder in holders:
            for child in holder.children:
                if child.type == "heredoc_redirect":
                    body = next((c for c in child.children if c.type == "heredoc_body"), None)
                    if body is not None and not any(c.type in _DYNAMIC for c in _descendants(body)):
                        return self.text(body)
                if child.type == "herestring_redirect":
                    value = child.children[-1] if child.children else None
                    if value is not None:
                        text, literal = self.word(value)
                        if literal:
                            return text
        return None

    # --- writes ---------------------------------------------------------------------------

    def redirect(self, node: Node) -> None:
        operator = next((c.type for c in node.children if c.type in _OUTPUT_OPS), None)
        destination = node.child_by_field_name("destination")
        if operator is None or destination is None:
            return
        text, literal = self.word(destination)
        if operator == ">&" and (text.isdigit() or text == "-"):
            return  # a copy of a descriptor, not a file
        self.target(text, literal)

    def target(self, path: str, literal: bool) -> None:
        resolved = path if literal else self.known_dir(path)
        if resolved is None or not (resolved in _NOT_FILES or resolved.startswith("/dev/fd/")):
            self.writes.append(resolved)

    def known_dir(self, path: str) -> str | None:
        """A target built only from the folders the server sets (`$OUTPUT_DIR/x.txt`), as
        WORKSPACE/out/x.txt; None when anything else is computed or the command reassigns one."""

        def value(m: re.Match[str]) -> str:
            name = m[1] or m[2]
            # Any use of the bare name (NAME=, read NAME, export NAME...) may change its value.
            if re.search(rf"(?<![$\w{{]){name}\b", self.top):
                return "$"
            return f"{WORKSPACE}/{_KNOWN_DIRS[name]}".rstrip("/")

        expanded = _KNOWN_VARIABLE.sub(value, path)
        if not expanded.startswith(WORKSPACE) or any(c in expanded for c in "$`"):
            return None
        return expanded


def _parser() -> Parser:
    """This thread's parser (a parser must not be shared between threads)."""
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = Parser(_LANGUAGE)
    return parser


def _descendants(node: Node) -> list[Node]:
    out, stack = [], list(node.children)
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return out


def _unescape(raw: str) -> str:
    """Backslash removal outside quotes: `\\x` is `x`, a backslash-newline vanishes."""
    return re.sub(r"\\(.)", r"\1", raw.replace("\\\n", ""), flags=re.DOTALL)


def _ansi_c(body: str) -> str:
    """The value of a $'...' string."""
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


def _loose_subjects(text: str) -> list[str]:
    """Every suffix of the text's words (quotes and backslashes removed), for broken commands."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: split roughly, dropping quote characters
        tokens = re.findall(r"[^\s;&|()<>`]+", re.sub(r"[\\'\"]", "", text))
    words = [t for t in tokens if not re.fullmatch(r"[;&|()<>`{}!]+", t)][:_LOOSE_WORDS]
    return [" ".join(words[i:]) for i in range(len(words))]


def _quote(word: str) -> str:
    return (
        word if re.fullmatch(r"[\w@%+=:,./{}-]+", word) else "'" + word.replace("'", "'\\''") + "'"
    )


@lru_cache(maxsize=1024)
def analyze(command: str) -> ShellAnalysis:
    """Every simple command, write target and blind spot of a Bash command."""
    walker = _Walker()
    walker.top = command
    if len(command) > MAX_CHARS:
        walker.opaque.append(f"the command is longer than {MAX_CHARS} characters")
    else:
        walker.source(command, 0)
    return ShellAnalysis(
        tuple(walker.commands),
        tuple(walker.writes),
        tuple(dict.fromkeys(walker.opaque)),
        walker.changes_dir,
        tuple(dict.fromkeys(walker.loose)),
    )
