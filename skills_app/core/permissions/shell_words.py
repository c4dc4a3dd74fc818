"""Words as bash reads them: line continuations, quotes, escapes, `$'...'`, brace expansion, `$IFS`.

tree-sitter-bash gives the structure of a command; this module gives each word the value bash
would give it before running anything, where that value is written in the command:

- `join_lines`: bash removes a backslash-newline before it splits words (`r\\<newline>m` is
  `rm`), except inside single quotes, `$'...'`, comments and quoted here-documents.
- `parser_text`: the text handed to tree-sitter, the same length as the command (so node offsets
  are offsets into it): non-ASCII characters become `a`, and a `{` that starts a word glued to more
  text (`{rm,x}`, which bash reads as a word and tree-sitter as a group) becomes `a` too.
- `Seg` / `expand`: a word as pieces (literal or not, quoted or not), brace-expanded
  (`{rm,x}` is `rm x`, `{r..r}m` is `rm`) and split at an unquoted `$IFS` while the command never
  assigns IFS (`rm${IFS}x` is `rm x`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

MAX_BRACE_WORDS = 256
MAX_BRACES = 64  # unquoted `{` in one word
_LOOSE_WORDS = 256
_META = " \t\n|&;()<>"
_SEQUENCE = re.compile(
    r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?"
)
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([^\s;&|<>()]+)")
_ANSI = re.compile(
    r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})"
    r"|U([0-9A-Fa-f]{1,8})|c(.))",
    re.DOTALL,
)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                   "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Seg:
    """A piece of a word: its value (or its text, when computed at run time) and how it is read."""

    text: str
    quoted: bool = False
    dynamic: bool = False
    kind: str = ""  # the node type of a dynamic piece: simple_expansion, expansion...


@dataclass(frozen=True, slots=True)
class Word:
    """One word after brace expansion and `$IFS` splitting."""

    text: str  # value; computed pieces keep their written form
    literal: bool  # no piece is computed at run time
    glob: bool = False  # an unquoted *, ? or [ : pathname expansion decides the value
    ifs: bool = False  # made by splitting at `$IFS`
    dollar: str = ""  # an unquoted `$` that brace expansion glued to other text

    @property
    def exact(self) -> bool:
        """Literal and not made by `$IFS` splitting: a value an allow rule may match."""
        return self.literal and not self.ifs and not self.dollar


def ansi_c(body: str) -> str:
    """The value of a `$'...'` string body, as bash decodes it."""

    def one(m: re.Match[str]) -> str:
        simple, octal, hex2, u4, u8, ctrl = m.groups()
        if simple is not None:
            return _SIMPLE_ESCAPES[simple]
        if ctrl is not None:
            return "\x1c" if ctrl == "\\" else chr(ord(ctrl.upper()) & 0x1F)
        number = int(octal, 8) & 0xFF if octal else int(hex2 or u4 or u8, 16)
        try:
            return chr(number)
        except (ValueError, OverflowError):
            return m.group()

    return _ANSI.sub(one, body)


def unescape(raw: str) -> str:
    """Backslash removal outside quotes: `\\x` is `x`."""
    return re.sub(r"\\(.)", r"\1", raw, flags=re.DOTALL)


def _skip_quote(text: str, i: int, end: str, escapes: bool) -> int:
    """Index just past the closing `end` of a quote opened before i."""
    n = len(text)
    while i < n:
        if escapes and text[i] == "\\":
            i += 2
            continue
        if text[i] == end:
            return i + 1
        i += 1
    return n


def join_lines(text: str) -> str:
    """The command with every backslash-newline bash removes before reading words removed."""
    if "\\\n" not in text:
        return text
    out: list[str] = []
    heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, quoted, strip tabs)
    i, n, in_dq, word_start = 0, len(text), False, True
    while i < n:
        ch = text[i]
        starts = False
        if ch == "\\" and i + 1 < n:
            if text[i + 1] != "\n":
                out.append(text[i : i + 2])
            i += 2
        elif ch == "'" and not in_dq:
            end = _skip_quote(text, i + 1, "'", escapes=False)
            out.append(text[i:end])
            i = end
        elif text.startswith("$'", i) and not in_dq:
            end = _skip_quote(text, i + 2, "'", escapes=True)
            out.append(text[i:end])
            i = end
        elif ch == '"':
            in_dq = not in_dq
            out.append(ch)
            i += 1
        elif ch == "#" and not in_dq and word_start:
            end = text.find("\n", i)
            end = n if end == -1 else end
            out.append(text[i:end])
            i = end
        elif not in_dq and (m := _HEREDOC.match(text, i)) and m.group(0)[2] != "<":
            delimiter = m.group(3).strip("'\"")
            quoted = bool(m.group(2)) or any(c in m.group(3) for c in "'\"\\")
            heredocs.append((delimiter, quoted, bool(m.group(1))))
            out.append(m.group(0))
            i = m.end()
        elif ch == "\n" and heredocs and not in_dq:
            out.append(ch)
            i += 1
            for delimiter, quoted, strip in heredocs:
                i = _heredoc_body(text, i, delimiter, quoted, strip, out)
            heredocs = []
            starts = True
        else:
            out.append(ch)
            i += 1
            starts = ch in _META
        word_start = starts
    return "".join(out)


def _heredoc_body(
    text: str, i: int, delimiter: str, quoted: bool, strip: bool, out: list[str]
) -> int:
    """Copy one here-document body (continuations removed unless quoted); the index after it."""
    n = len(text)
    while i < n:
        logical, raw_end = "", i
        while True:  # an unquoted body joins a line ending in a backslash with the next
            end = text.find("\n", raw_end)
            end = n if end == -1 else end
            line = text[raw_end:end]
            odd = (len(line) - len(line.rstrip("\\"))) % 2 == 1
            if quoted or not odd or end >= n:
                logical += line
                break
            logical += line[:-1]
            raw_end = end + 1
        next_i = min(end + 1, n)
        out.append(logical + text[end:next_i])
        i = next_i
        if (logical.lstrip("\t") if strip else logical) == delimiter:
            return i
    return n


def parser_text(text: str) -> str:
    """The text for tree-sitter: same length, ASCII only, glued `{` read as a word character."""
    # Only ASCII reaches the parser: astral characters crashed it (a segfault in tree-sitter
    # 0.26 under fuzzing). Every other character is a word character to bash, so "a" in its
    # place keeps the structure.
    chars = list(re.sub(r"[^\x00-\x7f]", "a", text))
    for i, ch in enumerate(chars):
        if ch != "{" or i + 1 >= len(chars) or chars[i + 1] in _META or chars[i + 1] == "}":
            continue
        if i and text[i - 1] == "$":
            continue  # `${`: a parameter expansion
        # bash reads `{` as the group keyword only when it is a word of its own; `{rm,x}` is
        # one word (brace expansion), which tree-sitter would read as a group.
        chars[i] = "a"
    return "".join(chars)


# ------------------------------------------------------------------ brace expansion and $IFS


Atom = tuple[str, bool, Seg | None]  # (character, quoted, dynamic piece or None)


def _atoms(segs: list[Seg]) -> list[Atom]:
    out: list[Atom] = []
    for seg in segs:
        if seg.dynamic:
            out.append(("", seg.quoted, seg))
        else:
            out += [(c, seg.quoted, None) for c in seg.text]
    return out


def _is(atom: Atom, char: str) -> bool:
    return atom[2] is None and not atom[1] and atom[0] == char


def _closing(atoms: list[Atom], start: int) -> tuple[int, list[int]] | None:
    """(index of the `}` matching the `{` at start, indexes of its top-level commas), or None."""
    depth, commas = 0, list[int]()
    for j in range(start + 1, len(atoms)):
        if _is(atoms[j], "{"):
            depth += 1
        elif _is(atoms[j], "}"):
            if depth == 0:
                return j, commas
            depth -= 1
        elif _is(atoms[j], ",") and depth == 0:
            commas.append(j)
    return None


def _sequence(body: list[Atom]) -> list[list[Atom]] | None:
    if any(a[2] is not None or a[1] for a in body):
        return None
    m = _SEQUENCE.fullmatch("".join(a[0] for a in body))
    if m is None:
        return None
    if m.group(1) is not None:
        first, last = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        padded = any(re.match(r"-?0\d", end) for end in (m.group(1), m.group(2)))
        width = max(len(m.group(1)), len(m.group(2))) if padded else 0
        values = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
        if len(values) > MAX_BRACE_WORDS:
            values = values[: MAX_BRACE_WORDS + 1]
        texts = [str(v).zfill(width) if width else str(v) for v in values]
    else:
        a, b = ord(m.group(4)), ord(m.group(5))
        step = abs(int(m.group(6) or 1)) or 1
        texts = [chr(c) for c in range(a, b + (1 if b >= a else -1), step if b >= a else -step)]
    return [[(c, False, None) for c in t] for t in texts]


def _brace(atoms: list[Atom], budget: list[int]) -> list[list[Atom]]:
    for i, atom in enumerate(atoms):
        if not _is(atom, "{") or (i and _is(atoms[i - 1], "$")):
            continue
        found = _closing(atoms, i)
        if found is None:
            continue
        close, commas = found
        body = atoms[i + 1 : close]
        if commas:
            cuts = [i, *commas, close]
            alternatives = [atoms[a + 1 : b] for a, b in zip(cuts, cuts[1:], strict=False)]
        else:
            seq = _sequence(body)
            if seq is None:
                continue
            alternatives = seq
        prefix, suffix = atoms[:i], atoms[close + 1 :]
        out: list[list[Atom]] = []
        tails = _brace(suffix, budget)
        for alternative in alternatives:
            for middle in _brace(alternative, budget):
                for tail in tails:
                    budget[0] -= 1
                    if budget[0] < 0:
                        return out
                    out.append(prefix + middle + tail)
        return out
    return [atoms]


def expand(segs: list[Seg], *, braces: bool, ifs_default: bool) -> tuple[list[Word], bool]:
    """The words one written word becomes, and False when brace expansion gave too many."""
    budget = [MAX_BRACE_WORDS]
    atoms = _atoms(segs)
    if braces and sum(1 for a in atoms if _is(a, "{")) > MAX_BRACES:
        braces, budget[0] = False, -1  # finding each `{`'s pair would take quadratic time
    alternatives = _brace(atoms, budget) if braces else [atoms]
    expanded = len(alternatives) > 1 or (alternatives and alternatives[0] is not atoms)
    words: list[Word] = []
    for alternative in alternatives:
        words += _split_ifs(alternative, ifs_default, bool(expanded))
    return words, budget[0] >= 0


def _is_ifs(seg: Seg) -> bool:
    return not seg.quoted and seg.text in ("$IFS", "${IFS}")


def _split_ifs(atoms: list[Atom], ifs_default: bool, braced: bool) -> list[Word]:
    pieces: list[list[Atom]] = [[]]
    split = False
    for atom in atoms:
        seg = atom[2]
        if seg is not None and ifs_default and _is_ifs(seg):
            pieces.append([])
            split = True
        else:
            pieces[-1].append(atom)
    words = []
    for piece in pieces:
        if not piece and split:
            continue  # bash drops the empty field an unquoted $IFS leaves at an edge
        if braced and not piece:
            continue  # `{,rm}`: an empty unquoted alternative is no word
        words.append(_word(piece, split, braced))
    return words


def _word(atoms: list[Atom], ifs: bool, braced: bool) -> Word:
    text, literal, glob, dollar = [], True, False, ""
    for char, quoted, seg in atoms:
        if seg is not None:
            text.append(seg.text)
            literal = False
            continue
        text.append(char)
        if not quoted and char in "*?[":
            glob = True
        if braced and not quoted and char in "$`":
            dollar = char
    return Word("".join(text), literal, glob, ifs, dollar)


_PIPELINE_KEYWORD = re.compile(
    r"(^|[;&|(){}`!\n]|\b(?:then|do|else|elif|if|while|until)\b)([ \t]*)(!|time(?:[ \t]+-p)?)(?=[ \t])"
)


def readings(text: str) -> list[str]:
    """The ways the text is read; every command any of them shows meets the deny rules, and an
    allow rule must cover the commands of all of them.

    The text with backslash-newlines joined as bash joins them, and (when that differs) as
    written: if the joining is wrong somewhere, the other reading still shows the commands. And
    with `!` and `time` before a pipeline blanked (they change no command), because tree-sitter
    misreads a group after them (`! { { rm x; }; }` gives a command named `{ {`).
    """
    joined = join_lines(text)
    found = [joined, text]

    def blank(m: re.Match[str]) -> str:
        return m.group(1) + m.group(2) + " " * len(m.group(3))

    found.append(_PIPELINE_KEYWORD.sub(blank, joined))
    return list(dict.fromkeys(found))


def without_coproc(text: str) -> str:
    """`coproc [NAME] cmd` as bash reads it: blank the keyword (and a NAME before a compound
    command) so that tree-sitter, which does not know coproc, sees the command itself."""

    def blank(m: re.Match[str]) -> str:
        return m.group(1) + " " * (len(m.group(0)) - len(m.group(1)))

    text = re.sub(r"(^|[\s;&|(])coproc\s+[A-Za-z_]\w*\s+(?=\{\s|\()", blank, text)
    return re.sub(r"(^|[\s;&|(])coproc(?=\s)", blank, text)


def loose_subjects(text: str) -> list[str]:
    """Every suffix of the text's words (quotes and backslashes removed), for broken commands."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: split roughly, dropping quote characters
        tokens = re.findall(r"[^\s;&|()<>`]+", re.sub(r"[\\'\"]", "", text))
    words = [t for t in tokens if not re.fullmatch(r"[;&|()<>`{}!]+", t)][:_LOOSE_WORDS]
    return [" ".join(words[i:]) for i in range(len(words))]
