"""Reading tree-sitter nodes: word values, and the nodes where bash evaluates a value as code.

`Reader` is the half of the walker (`shell._Walker`) that reads single nodes: a word node's
pieces (`Seg`) and the words they become, and the visitors for expansions (`${x@P}`, `${!x}`,
substring offsets), arithmetic (`$((...))`, `((...))`, `for ((...))`), subscripts, `[[ ]]`
tests, assignments, loops and here-document bodies. What they find goes to `Values` (names
written and read as arithmetic) or is reported with `ask` / `blind`.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from .shell_values import Values, is_integer
from .shell_words import Seg, Word, ansi_c, expand, unescape

DYNAMIC = frozenset(
    {
        "simple_expansion", "expansion", "command_substitution", "process_substitution",
        "arithmetic_expansion",
    }
)  # fmt: skip
_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_EXPANSION = re.compile(
    r"\$\{(!?)(#?)([A-Za-z_]\w*|[0-9]+|[@*#?$!-])(\[[^\]]*\])?(.*)\}", re.DOTALL
)
_PLAIN = re.compile(r"[A-Za-z0-9_./:=,+%@-]+")
_UNQUOTED = re.compile(r"\\(.)|([^\\]+)|\\$", re.DOTALL)
_ARITH_START = re.compile(r"\$\(\(|\$\[")


class Reader:
    """Reads words and the value-evaluating nodes of the tree being walked."""

    values: Values

    def __init__(self, *, ifs_default: bool, locale_fixed: bool) -> None:
        self.ifs_default = ifs_default
        self.locale_fixed = locale_fixed
        self.sources: list[str] = []  # the text each tree being walked was parsed from
        self.parent: Node | None = None  # the parent of the node being visited

    def ask(self, reason: str) -> None:
        raise NotImplementedError

    def blind(self, reason: str) -> None:
        raise NotImplementedError

    def expression(self, text: str, depth: int) -> None:
        raise NotImplementedError

    def code(self, text: str, depth: int) -> None:
        raise NotImplementedError

    def text(self, node: Node) -> str:
        """The original text of a node of the tree being walked."""
        return self.sources[-1][node.start_byte : node.end_byte]

    # --- words ----------------------------------------------------------------------------

    def segments(self, node: Node, quoted: bool = False) -> list[Seg]:
        """A word node as pieces: literal text (quoted or not) and computed parts."""
        kind, raw = node.type, self.text(node)
        if kind == "command_name":
            return self._pieces(node, quoted)
        if kind in ("word", "number", "brace_expression", "extglob_pattern"):
            return _unquoted_word(raw) if not quoted else [Seg(unescape(raw), True)]
        if kind == "raw_string":
            return [Seg(raw[1:-1], True)]
        if kind == "ansi_c_string":
            return [Seg(ansi_c(raw[2:-1]), True)]
        if kind == "translated_string":
            if not self.locale_fixed:
                return [Seg(raw, True, True, kind)]
            return self._pieces(node, True)
        if kind == "string":
            return self._pieces(node, True)
        if kind == "concatenation":
            return self._pieces(node, quoted)
        if kind in DYNAMIC:
            return [Seg(raw, quoted, True, kind)]
        if kind == "string_content":
            return [Seg(re.sub(r"\\([$`\"\\])", r"\1", raw), True)]
        dynamic = any(c.type in DYNAMIC for c in descendants(node))
        return [Seg(raw, quoted, dynamic, kind if dynamic else "")]

    def _pieces(self, node: Node, quoted: bool) -> list[Seg]:
        """The children's pieces, with any text between them (tree-sitter skips some) kept."""
        out: list[Seg] = []
        position = node.start_byte
        for child in node.children:
            if child.type in ('"', '$"', "$"):
                position = child.end_byte
                continue
            gap = self.sources[-1][position : child.start_byte]
            if gap.strip():
                out += [Seg(unescape(gap), True)] if quoted else _unquoted_word(gap)
            out += self.segments(child, quoted)
            position = child.end_byte
        tail = self.sources[-1][position : node.end_byte]
        if tail.strip() and tail not in ('"', "'"):
            out += [Seg(unescape(tail), True)] if quoted else _unquoted_word(tail)
        return out

    def words(self, node: Node, *, braces: bool) -> list[Word]:
        """The words a written word becomes: brace-expanded (when bash does) and split at $IFS."""
        if node.type == "word" and _PLAIN.fullmatch(raw := self.text(node)):
            return [Word(raw, literal=True)]  # the common case, without the machinery
        words, complete = expand(self.segments(node), braces=braces, ifs_default=self.ifs_default)
        if not complete:
            self.blind("brace expansion makes too many words to read; write them out")
        return words

    def assignment_word(self, node: Node) -> Word:
        """`NAME=value` (or `NAME[i]=value`) as one word, the value read as bash reads it."""
        value = node.child_by_field_name("value")
        head = self.text(node)[: (value.start_byte - node.start_byte) if value else None]
        if value is None:
            return Word(head, literal=True)
        words, _ = expand(self.segments(value), braces=False, ifs_default=False)
        text = "".join(w.text for w in words)
        return Word(head + text, literal=all(w.literal for w in words))

    def redirect_words(self, node: Node, words: list[Word]) -> list[Word]:
        """The command's words as bash reads them around redirections tree-sitter misplaces:
        in `time >f rm x` it takes `rm x` for more targets of `>f` (bash: words of the
        command), and in `{fd}>f rm x` it takes `{fd}` for the command name (bash: the
        descriptor variable of the redirection)."""
        if self.parent is None or self.parent.type != "redirected_statement":
            return words
        redirects = [c for c in self.parent.children if c.type == "file_redirect"]
        if (
            words
            and re.fullmatch(r"\{[A-Za-z_]\w*\}", words[0].text)
            and any(r.start_byte == node.end_byte for r in redirects)
        ):
            words = words[1:]
        for redirect in redirects:
            targets = [
                c
                for i, c in enumerate(redirect.children)
                if redirect.field_name_for_child(i) == "destination"
            ]
            for target in targets[1:]:
                words = [*words, *self.words(target, braces=True)]
        return words

    def fed_code(self, node: Node) -> str | None:
        """The literal here-document or here-string given to a command, or None."""
        holders = [node]
        if self.parent is not None and self.parent.type == "redirected_statement":
            holders.append(self.parent)
        for holder in holders:
            for child in holder.children:
                if child.type == "heredoc_redirect":
                    body = next((c for c in child.children if c.type == "heredoc_body"), None)
                    if body is not None and not any(c.type in DYNAMIC for c in descendants(body)):
                        return self.text(body)
                if child.type == "herestring_redirect" and child.children:
                    words = self.words(child.children[-1], braces=False)
                    if len(words) == 1 and words[0].exact:
                        return words[0].text
        return None

    # --- nodes where a value is evaluated ------------------------------------------------

    def arithmetic(self, node: Node, depth: int) -> None:
        raw = self.text(node)
        if node.type == "arithmetic_expansion":
            inner = raw[3:-2] if raw.startswith("$((") else raw[2:-1]
            self.values.arithmetic(inner, f"`{raw[:40]}`")
        elif node.type == "c_style_for_statement":
            start, end = raw.find("(("), raw.find("))")
            self.values.arithmetic(raw[start + 2 : end], "`for ((...))`")
        elif node.children and node.children[0].type == "((":
            self.values.arithmetic(raw[2:-2], f"`{raw[:40]}`")

    def substitution(self, node: Node, depth: int) -> None:
        raw = self.text(node)
        if raw.startswith("$((") and raw.endswith("))"):
            # Arithmetic that tree-sitter read as `$( (...) )`.
            self.values.arithmetic(raw[3:-2], f"`{raw[:40]}`")
        if raw.startswith("`") and "\\" in raw:
            # Inside backquotes bash removes the backslash of \$, \` and \\ before it parses the
            # text, so `echo \`rm x\`` nests a substitution that tree-sitter reads as text.
            inner = re.sub(r"\\([$`\\])", r"\1", raw[1:-1] if raw.endswith("`") else raw[1:])
            self.code(inner, depth)
            if '\\"' in inner:  # inside double quotes \" loses its backslash too
                self.code(inner.replace('\\"', '"'), depth)

    def process(self, node: Node, depth: int) -> None:
        self.ask("process substitution (`<(...)`, `>(...)`) runs a command beside this one; "
                 "run it as its own step")  # fmt: skip

    def expansion(self, node: Node, depth: int) -> None:
        raw = self.text(node)
        m = _EXPANSION.fullmatch(raw)
        if m is None:
            return
        bang, _length, name, subscript, rest = m.groups()
        if bang and not subscript and not rest:
            self.blind(f"`{raw}` expands the variable whose name {name} holds, and such a name "
                       "may carry a subscript that runs code; use the variable directly")  # fmt: skip
        elif bang:
            self.ask(
                f"`{raw}` lists names or keys, which depend on run time; name the variables directly"
            )
        if rest.startswith("@"):
            if rest[1:2] == "P":
                self.blind(f"`{raw}` expands {name}'s value as a prompt, which runs any `$(...)` "
                           "in it; write the text itself")  # fmt: skip
            else:
                self.ask(f"`{raw}` transforms {name}'s value at run time; write the value itself")
        elif rest.startswith(":") and rest[1:2] not in ("-", "=", "?", "+"):
            for part in _top_level_colons(rest[1:]):
                self.values.arithmetic(part, f"the offset in `{raw}`")
        elif rest[:1] == "=" or rest[:2] == ":=":
            value = rest.lstrip(":")[1:]
            self.values.write(name, value if is_integer(value) else None, f"by `{raw}`")

    def subscript(self, node: Node, depth: int) -> None:
        index = node.child_by_field_name("index")
        if index is not None and self.text(index) not in ("@", "*"):
            self.values.arithmetic(self.text(index), f"the subscript `{self.text(node)}`")

    def test(self, node: Node, depth: int) -> None:
        double = bool(node.children) and node.children[0].type == "[["
        for child in [node, *descendants(node)]:
            operator = child.child_by_field_name("operator")
            op = self.text(operator) if operator is not None else ""
            if double and child.type == "binary_expression" and op in _ARITH_TESTS:
                for side in ("left", "right"):
                    operand = child.child_by_field_name(side)
                    if operand is not None:
                        self.values.arithmetic(self.operand(operand), f"`[[ ... {op} ... ]]`")
            if child.type == "unary_expression" and op == "-v":
                operand = next((c for c in child.named_children if c.type != "test_operator"), None)
                if operand is not None:
                    self.test_v(operand, depth)

    def operand(self, node: Node) -> str:
        words = self.words(node, braces=False)
        if len(words) == 1 and words[0].literal:
            return words[0].text
        return self.text(node)

    def test_v(self, node: Node, depth: int) -> None:
        words = self.words(node, braces=False)
        if len(words) != 1 or not words[0].exact:
            self.blind("test -v with a computed name evaluates its subscript, which may run "
                       "code; write the name literally")  # fmt: skip
        elif "[" in words[0].text:
            sub = words[0].text.partition("[")[2].rsplit("]", 1)[0]
            self.values.arithmetic(sub, f"the subscript in `-v {words[0].text}`")
            self.expression(sub, depth)

    def assignment(self, node: Node, depth: int) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is None or (self.parent and self.parent.type == "c_style_for_statement"):
            return  # an arithmetic assignment: its result is a number
        if name_node.type == "subscript":
            name_node = name_node.child_by_field_name("name") or name_node
        name = self.text(name_node)
        value = node.child_by_field_name("value")
        if value is None:
            self.values.write(name, "", "")
        elif value.type == "array":
            for element in value.named_children:
                raw = self.text(element)
                if raw.startswith("[") and "]" in raw:  # `[i]=v`: i is a subscript
                    self.values.arithmetic(raw[1 : raw.index("]")], f"the subscript in `{raw}`")
            elements = [w for c in value.named_children for w in self.words(c, braces=True)]
            inert = all(w.exact and is_integer(w.text) for w in elements)
            self.values.write(name, "0" if inert else None, f"by `{self.text(node)[:40]}`")
        else:
            word = self.assignment_word(node)
            literal = word.text.partition("=")[2] if word.literal else None
            shown = f"to {literal!r}" if literal is not None else f"by `{self.text(node)[:40]}`"
            self.values.write(name, literal, shown)

    def loop(self, node: Node, depth: int) -> None:
        variable = node.child_by_field_name("variable")
        if variable is None:
            return
        name = self.text(variable)
        if node.children and node.children[0].type == "select":
            self.values.write(name, None, "by select, from its input")
            return
        values = [node.children[i] for i in range(node.child_count)
                  if node.field_name_for_child(i) == "value"]  # fmt: skip
        words = [w for v in values for w in self.words(v, braces=True)]
        inert = bool(words) and all(w.exact and is_integer(w.text) for w in words)
        self.values.write(name, "0" if inert else None, f"by `for {name} in ...`")

    def heredoc(self, node: Node, depth: int) -> None:
        raw = self.text(node)
        for m in _ARITH_START.finditer(raw):
            close = "]" if m.group() == "$[" else "))"
            end = raw.find(close, m.end())
            inner = raw[m.end() : end if end != -1 else len(raw)]
            self.values.arithmetic(inner, "arithmetic in a here-document")


def _unquoted_word(raw: str) -> list[Seg]:
    """Unquoted word text: a backslash quotes the next character."""
    out: list[Seg] = []
    for m in _UNQUOTED.finditer(raw):
        if m.group(1) is not None:
            out.append(Seg(m.group(1), True))
        elif m.group(2) is not None:
            out.append(Seg(m.group(2)))
    return out


def _top_level_colons(text: str) -> list[str]:
    parts, depth, current = list[str](), 0, list[str]()
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == ":" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    return [*parts, "".join(current)]


def descendants(node: Node) -> list[Node]:
    out, stack = [], list(node.children)
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return out
