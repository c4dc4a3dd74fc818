"""What a Bash command runs and writes, read with a real parser (tree-sitter-bash).

`analyze(command)` walks the whole syntax tree and returns every simple command anywhere in it:
in pipelines and lists, subshells `( )`, groups `{ }`, `if`/`for`/`while`/`case`, function
bodies, `$( )`, backticks, `<( )` and `>( )`. Words are read as bash reads them
(`shell_words`): backslash-newlines joined, quotes and backslashes removed, `$'...'` and `$"..."`
decoded, brace expansion done, split at an unquoted `$IFS`; so `\\rm`, `r''m`, `"rm"`,
`$'\\x72m'`, `r\\<newline>m`, `{rm,x}`, `{r..r}m` and `rm${IFS}x` are all `rm`. Wrappers are
looked through (`shell_wrappers`: `command`, `builtin`, `exec`, `nice`, `timeout`, `nohup`,
`env A=1`, `env -S`, `time`, `coproc`...), and code written inside the command is parsed again,
up to MAX_DEPTH levels (`shell_builtins`: `bash -c`, `eval`, `trap`, `mapfile -C`, literal
here-documents fed to a shell, `find -exec`...).

Expansions are code. Two lists say where the rules cannot see everything (see docs/security.md,
"Expansions are code"):

- `opaque`: why the command is *ask* at best: anything dynamic the parser resolved or read
  but an allow rule must not wave through (eval of literal text, `$IFS`, process substitution,
  a parameter transformation, coproc, find -exec...).
- `hidden` (a subset): where bash could run a command the parser cannot read: a command name
  from an expansion, `eval "$x"`, `${x@P}`, `${!x}`, arithmetic or a subscript over a value that
  is not a literal integer (`shell_values`), `PATH=`/`BASH_ENV=`/`PS4=`, `hash -p`, alias, text
  that does not parse. With a Bash deny rule in force such a command is denied: it could be the
  denied one.

Writes: every output redirection and every file argument of `tee` (and find's `-fprint`), with
`/dev/null`, `/dev/stdout`, `/dev/stderr` and descriptor copies left out; a target built from
`$OUTPUT_DIR`, `$WORK_DIR`, `$SKILLS_DIR`, `$HOME` or `$TMPDIR` (set by the server, not
reassigned in the command) is anchored at WORKSPACE; any other computed target is None.
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

from ..tools.env import env_name_problem
from .shell_builtins import declaration
from .shell_reader import Reader
from .shell_runners import handles, inspect
from .shell_values import IFS_WRITTEN, LOCALE_NAMES, Values, code_name
from .shell_words import Word, loose_subjects, parser_text, readings, without_coproc
from .shell_wrappers import OTHER_RUNNERS, Resolved, resolve, suffix_subjects

MAX_DEPTH = 8
MAX_CHARS = 100_000
_LANGUAGE = Language(tree_sitter_bash.language())
_LOCAL = threading.local()
# Where a write target built from the server's folder variables is anchored; no shell word can
# hold a NUL, so no literal target can pass for it.
WORKSPACE = "\x00workspace"
_KNOWN_DIRS = {"OUTPUT_DIR": "out", "WORK_DIR": "work", "SKILLS_DIR": "skills", "HOME": "",
               "TMPDIR": "work/.tmp"}  # fmt: skip
_KNOWN_VARIABLE = re.compile(r"\$(?:\{(OUTPUT_DIR|WORK_DIR|SKILLS_DIR|HOME|TMPDIR)\}|"
                             r"(OUTPUT_DIR|WORK_DIR|SKILLS_DIR|HOME|TMPDIR)\b)")  # fmt: skip
_OUTPUT_OPS = frozenset({">", ">>", "&>", "&>>", ">|", "<>", ">&"})
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_ARITH_ADVICE = (
    "; bash runs any `a[$(...)]` in such a value. Use literal numbers, or give the variable a "
    "literal integer in this command"
)


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command the shell would run, as written and as words after quote removal."""

    text: str  # as written (without its redirections), e.g. `\\rm -rf "$d"`
    words: tuple[str, ...]  # as bash reads them; a computed piece keeps its written form
    assignments: tuple[str, ...]  # leading NAME=value words, as written
    deny_subjects: tuple[str, ...]  # every form a deny or ask rule is matched against
    # The command under the wrappers looked through (env's NAME=value first), when every word
    # of it is known; () otherwise. Allow rules may match it.
    resolved: tuple[str, ...] = ()

    @property
    def joined(self) -> str:
        """The words separated by single spaces."""
        return " ".join(self.words)


@dataclass(frozen=True, slots=True)
class ShellAnalysis:
    commands: tuple[SimpleCommand, ...]
    # Files written by redirections and tee; None = unknown; WORKSPACE/... = under the root.
    writes: tuple[str | None, ...]
    opaque: tuple[str, ...]  # why this command is ask at best (includes every hidden reason)
    changes_dir: bool  # cd/pushd/popd: a relative write target may be anywhere
    # When part of the text does not parse: every run of words from any position, so a deny
    # rule still finds its command in the broken part (deny errs on the side of denying).
    loose_subjects: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()  # where bash may run a command the parser cannot read


class _Walker(Reader):
    def __init__(self, top: str) -> None:
        super().__init__(
            ifs_default=not IFS_WRITTEN.search(top), locale_fixed=not LOCALE_NAMES.search(top)
        )
        self.top = top  # the whole command, for the reassignment check of known folders
        self.commands: list[SimpleCommand] = []
        self.writes: list[str | None] = []
        self.opaque: list[str] = []
        self.hidden: list[str] = []
        self.changes_dir = False
        self.loose: list[str] = []
        self.values = Values()
        self.extra: list[str] = []  # deny subjects a handler adds to the command being read
        self.env_names: list[str] = []  # names given to programs by env NAME=value

    # --- what the handlers report -------------------------------------------------------------

    def ask(self, reason: str) -> None:
        self.opaque.append(reason)

    def blind(self, reason: str) -> None:
        self.opaque.append(reason)
        self.hidden.append(reason)

    def subject(self, text: str) -> None:
        self.extra.append(text)

    def code(self, text: str, depth: int) -> None:
        self.source(text, depth + 1)

    def expression(self, text: str, depth: int) -> None:
        """Text bash expands (a subscript, compgen -W words): its substitutions run."""
        if not any(c in text for c in "$`<>"):
            return
        for reading in readings(text):
            tree = self.parse(": " + reading, depth + 1)
            if tree is None:
                return
            for top in tree.root_node.children:
                for child in top.children[1:] if top.type == "command" else [top]:
                    self.node(child, depth + 1)
            self.sources.pop()

    # --- trees ----------------------------------------------------------------------------

    def parse(self, text: str, depth: int) -> Tree | None:
        """Parse text and push it as the current source (the caller pops it); None if too deep."""
        if depth > MAX_DEPTH:
            self.blind(f"code is nested more than {MAX_DEPTH} levels deep; write it flatter")
            return None
        tree = _parser().parse(parser_text(text).encode("ascii"))
        if tree.root_node.has_error:
            self.blind("part of the command could not be parsed; write it in a simpler form")
            self.loose += loose_subjects(text)
        self.sources.append(text)
        return tree

    def source(self, text: str, depth: int) -> None:
        """Walk shell source text (the command, or code found inside one), read both ways when
        it holds a backslash-newline (joined as bash joins it, and as written)."""
        for reading in readings(text):
            if _COPROC.search(reading):
                self.ask(
                    "coproc runs a command in the background, joined by pipes; run the command directly"
                )
            tree = self.parse(without_coproc(reading), depth)
            if tree is None:
                return
            try:
                self.node(tree.root_node, depth)
            finally:
                self.sources.pop()

    def node(self, node: Node, depth: int) -> None:
        # Iterative: a long pipeline or deep nesting must not exhaust Python's stack.
        # The parent travels with each node: Node.parent walks down from the root each time,
        # which is quadratic in deep trees.
        stack: list[tuple[Node, Node | None]] = [(node, None)]
        while stack:
            current, self.parent = stack.pop()
            handler = _VISIT.get(current.type)
            if handler is not None:
                handler(self, current, depth)
            elif current.type == "compound_statement":
                self.arithmetic(current, depth)
            stack.extend((child, current) for child in reversed(current.children))

    # --- commands -------------------------------------------------------------------------

    def command(self, node: Node, depth: int) -> None:
        assignments: list[str] = []
        words = []
        for index, child in enumerate(node.children):
            field = node.field_name_for_child(index)
            if child.type == "variable_assignment":
                assignments.append(self.text(child))
            elif field in ("name", "argument"):
                words += self.words(child, braces=True)
        words = self.redirect_words(node, words)
        if not words:
            return  # assignments (and redirections) only
        text = self.text(node)
        if text == "}":
            return  # the end of a group tree-sitter did not see open (`! { ...; }`)
        resolution = resolve(words)
        if resolution.blind:
            self.blind(f"{resolution.blind}; write the program's name literally")
        real = list(resolution.words)
        outer, self.extra = self.extra, []  # code walked inside may read commands of its own
        fed = self.fed_code(node)
        self.runs_a_word(resolution, words)
        if not resolution.blind and real:
            head = posixpath.basename(real[0].text)
            if handles(head) or head not in OTHER_RUNNERS:
                inspect(self, real, fed, depth)
            else:
                self.unknown_runner(real, fed, depth)
            self.env_names += [a.partition("=")[0] for a in resolution.assignments]
        if any(w.ifs for w in words):
            self.ask("`$IFS` splits a word here; write a space instead")
        if any(w.dollar for w in words):
            self.blind("brace expansion builds a `$` expansion; write the expansion directly")
        plain = tuple(w.text for w in words)
        exact = resolution.known and not resolution.blind and all(w.exact for w in real)
        resolved = (*resolution.assignments, *(w.text for w in real)) if exact else ()
        subjects = [text, " ".join(plain), " ".join([*assignments, *plain])]
        subjects += suffix_subjects(plain)
        subjects += [" ".join(w.text for w in real), *self.extra]
        self.extra = outer
        if real:
            subjects.append(
                " ".join((posixpath.basename(real[0].text), *(w.text for w in real[1:])))
            )
        self.commands.append(
            SimpleCommand(text, plain, tuple(assignments), tuple(dict.fromkeys(subjects)), resolved)
        )

    def runs_a_word(self, resolution: Resolved, words: list[Word]) -> None:
        """command, builtin, env -S and exec with expansions take a command as data."""
        for via in dict.fromkeys(resolution.via):
            if via in ("command", "builtin"):
                self.ask(f"`{via}` runs its first argument as a command; write the command itself")
            if via == "exec" and not all(w.literal for w in words):
                self.ask("exec with expansions replaces the shell with a computed command line; "
                         "write the command itself")  # fmt: skip
        if resolution.split:
            self.ask("`env -S` splits a string into a command; write the command itself")

    def unknown_runner(self, words: list[Word], fed: str | None, depth: int) -> None:
        """A wrapper whose options are not read: every later word may start the real command."""
        head = posixpath.basename(words[0].text)
        for i in range(1, len(words)):
            if not words[i].exact:
                self.blind(f"an argument of {head} is computed ({words[i].text}), so it may be "
                           "the command it runs; write it literally")  # fmt: skip
                return
        for i in range(1, len(words)):
            if words[i].text.startswith("-"):
                continue
            real = list(resolve(words[i:]).words)
            if real and handles(posixpath.basename(real[0].text)):
                inspect(self, real, fed, depth + 1)
                return

    def declaration(self, node: Node, depth: int) -> None:
        head = node.children[0].type if node.children else "declare"
        items: list[Word] = []
        for child in node.children[1:]:
            if child.type == "variable_assignment":
                items.append(self.assignment_word(child))
            else:
                items += self.words(child, braces=False)
        declaration(self, head, items)

    def unset(self, node: Node, depth: int) -> None:
        words = [_UNSET] + [w for c in node.children[1:] for w in self.words(c, braces=False)]
        inspect(self, words, None, depth)

    # --- writes ---------------------------------------------------------------------------

    def redirect(self, node: Node, depth: int) -> None:
        operator = next((c.type for c in node.children if c.type in _OUTPUT_OPS), None)
        destination = node.child_by_field_name("destination")
        if operator is None or destination is None:
            return
        words = self.words(destination, braces=False)
        text = " ".join(w.text for w in words)
        literal = len(words) == 1 and words[0].exact
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

    # --- the end --------------------------------------------------------------------------

    def finish(self) -> None:
        """Decide what only the whole command shows: values evaluated as code, risky names."""
        for finding in self.values.findings():
            self.blind(finding + _ARITH_ADVICE)
        if self.values.contexts:
            self.ask(f"{self.values.contexts[0]} is arithmetic, which bash evaluates as code (a "
                     "subscript in a value runs commands), so no rule allows it unasked; write "
                     "the numbers literally, or compare them with `[ a -eq b ]`")  # fmt: skip
        for name in dict.fromkeys([*self.values.writes, *self.env_names]):
            if code_name(name):
                self.blind(f"it sets {name}, which changes which program or code bash runs; "
                           f"leave {name} as the server set it")  # fmt: skip
            elif (problem := env_name_problem(name, server=True)) and name.isupper():
                self.ask(f"it sets {name}: {problem}; pass the setting as an argument or in a file")


_UNSET = Word("unset", literal=True)
_COPROC = re.compile(r"(^|[\s;&|(])coproc\s")
_VISIT: dict[str, Callable[[_Walker, Node, int], None]] = {
    "command": _Walker.command,
    "declaration_command": _Walker.declaration,
    "file_redirect": _Walker.redirect,
    "arithmetic_expansion": _Walker.arithmetic,
    "c_style_for_statement": _Walker.arithmetic,
    "command_substitution": _Walker.substitution,
    "process_substitution": _Walker.process,
    "expansion": _Walker.expansion,
    "subscript": _Walker.subscript,
    "test_command": _Walker.test,
    "variable_assignment": _Walker.assignment,
    "for_statement": _Walker.loop,
    "heredoc_body": _Walker.heredoc,
    "unset_command": _Walker.unset,
}


def _parser() -> Parser:
    """This thread's parser (a parser must not be shared between threads)."""
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = Parser(_LANGUAGE)
    return parser


@lru_cache(maxsize=1024)
def analyze(command: str) -> ShellAnalysis:
    """Every simple command, write target and blind spot of a Bash command."""
    walker = _Walker(command)
    if len(command) > MAX_CHARS:
        walker.blind(f"the command is longer than {MAX_CHARS} characters; split it")
    else:
        walker.source(command, 0)
        walker.finish()
    return ShellAnalysis(
        tuple(walker.commands),
        tuple(walker.writes),
        tuple(dict.fromkeys(walker.opaque)),
        walker.changes_dir,
        tuple(dict.fromkeys(walker.loose)),
        tuple(dict.fromkeys(walker.hidden)),
    )
