"""The streaming preview and the stored answer render Markdown alike: the vendored markdown-it and
DOMPurify, configured by static/skillscope/markdown.js, run in Chromium; the server's
markdown-it-py + nh3 (skills_app/chat/markdown.py) is the judge. Both outputs are parsed into
trees and compared. The one intended difference is highlighting: the server's Pygments spans
inside a code block are unwrapped before comparing, since the preview shows plain code."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from skills_app.chat import markdown
from tests.browser.pages import REPO

pytestmark = pytest.mark.browser

SCRIPTS = (
    REPO / "static" / "vendor" / "markdown-it" / "markdown-it.min.js",
    REPO / "static" / "vendor" / "dompurify" / "purify.min.js",
    REPO / "static" / "skillscope" / "markdown.js",
)

MARKDOWN_SAMPLES = {
    "headings": "# One\n## Two\n### Three *soft*\n#### Four\n##### Five\n###### Six\n\nUnder\n===\n",
    "emphasis": "Some *light*, __heavy__, ***both***, ~~gone~~ and `a *literal*` word.\n",
    "escapes and entities": 'Not \\*emphasis\\*, 3 < 4 & 5 > 2, &copy; &amp; &#35; "quotes"\n',
    "lists": "- apples\n- pears\n\n3. third\n4. fourth\n\n* loose one\n\n* loose two\n",
    "nested lists": "1. top\n   - inner a\n   - inner b\n     1. deeper\n2. next\n",
    "code fences": (
        "```python\ndef area(r):\n    return 3.14 * r ** 2\n```\n\n"
        "~~~\nplain <b>tilde</b>\n~~~\n\n"
        "```nosuchlanguage\nx = 1\n```\n\n"
        "    indented code\n"
    ),
    "an unclosed fence, as mid-stream": "Here:\n\n```js\nconst x = '<img src=x>';\n",
    "inline code": "Use ``a `tick` inside`` or `<script>` as text.\n",
    "links": (
        '[site](https://example.org/a?b=1&c=2 "A title"), [page](/docs/x), '
        "[mail](mailto:someone@example.org), <https://example.org/auto>, [ref][r]\n\n"
        "[r]: http://example.org/ref\n"
    ),
    "hostile links": (
        "[js](javascript:alert(1)) [JS](JAVASCRIPT:alert(2)) [tab](java\tscript:alert(3)) "
        "[vb](vbscript:msgbox) [data](data:text/html;base64,PHNjcmlwdD4=) "
        "[angle](<javascript:alert(4)>) [enc](jav&#x61;script:alert(5))\n"
    ),
    "images": (
        "![a cat](https://example.org/cat.png) ![](https://example.org/empty.png) "
        "![bad](javascript:alert(1)) ![gif](data:image/gif;base64,R0lGOD)\n"
    ),
    "raw html": (
        '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n'
        'inline <b onclick="x()">bold</b> and <a href="javascript:y()">link</a>\n\n'
        '<div style="color:red">block</div>\n'
    ),
    "table": (
        "| Left | Centre | Right | None |\n|:-----|:------:|------:|------|\n"
        "| a | **b** | `c` | [d](https://example.org/d) |\n| 1 | 2 | 3 |\n"
    ),
    "quote, rule, breaks": "> quoted *text*\n> > nested\n\n---\n\nline one  \nline two\\\nline three\n",
    "half-written, as mid-stream": "Start **bold but not closed and [a link](https://exa",
}

# Raw HTML straight to both sanitisers: markdown-it emits none of it (raw HTML is off), so this
# holds the allow-lists together for what the sanitiser alone must stop.
SANITIZER_SAMPLES = {
    "tags": (
        "<h2>t</h2><p>p <em>e</em> <strong>s</strong> <del>d</del> <s>s</s> <code>c</code><br>"
        "</p><div>div keeps its text</div><section><span>in a section</span></section><hr>"
        '<blockquote>q</blockquote><ul><li>u</li></ul><ol start="4" type="a"><li>o</li></ol>'
    ),
    "scripts and handlers": (
        "<script>alert(1)</script><style>p{color:red}</style><img src=x onerror=alert(2)>"
        '<p onclick="alert(3)" id="x" class="c" data-x="1" aria-label="l">p</p>'
        '<svg><circle onload=alert(4)></circle></svg><iframe src="https://example.org"></iframe>'
    ),
    "attributes by tag": (
        '<a href="https://example.org" title="t" class="k" target="_blank" rel="opener">a</a>'
        '<code class="language-py" title="no">c</code><span class="k" style="color:red">s</span>'
        '<p class="no">p</p><a>no address</a>'
    ),
    "link schemes": (
        '<a href="javascript:alert(1)">js</a><a href=" java&#x09;script:alert(2)">tab</a>'
        '<a href="data:text/html,x">data</a><a href="foo:bar">foo</a><a href="/rel?x=1">rel</a>'
        '<a href="#top">frag</a><a href="mailto:a@example.org">mail</a><a href="HTTP://E.ORG">up</a>'
    ),
    "table styles": (
        '<table><thead><tr><th style="text-align:center">h</th></tr></thead><tbody>'
        '<tr><td style="color:red; text-align: right">d</td><td style="position:fixed">e</td>'
        "</tr></tbody></table>"
    ),
}


class Tree(HTMLParser):
    """HTML as nested lists: ["tag", sorted attributes, children...] and text strings."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root: list[Any] = ["#root", []]
        self.stack = [self.root]

    VOID = frozenset({"br", "hr", "img", "input", "meta", "link"})

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node: list[Any] = [tag, sorted((k, v or "") for k, v in attrs)]
        self.stack[-1].append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID:
            assert self.stack[-1][0] == tag, f"unbalanced </{tag}>"
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        parent = self.stack[-1]
        if len(parent) > 2 and isinstance(parent[-1], str):
            parent[-1] += data
        else:
            parent.append(data)


def tree(html: str, *, unwrap_code_spans: bool = False) -> list[Any]:
    parser = Tree()
    parser.feed(html)
    parser.close()
    root = parser.root
    return _unwrapped(root, in_code=False) if unwrap_code_spans else root


def _unwrapped(node: list[Any], *, in_code: bool) -> list[Any]:
    """Pygments' spans inside <code> replaced by their text (the intended difference)."""
    out: list[Any] = [node[0], node[1]]
    for child in node[2:]:
        if isinstance(child, str):
            pieces = [child]
        elif in_code and child[0] == "span":
            pieces = _text(child)
        else:
            pieces = [_unwrapped(child, in_code=in_code or child[0] == "code")]
        for piece in pieces:
            if isinstance(piece, str) and len(out) > 2 and isinstance(out[-1], str):
                out[-1] += piece
            else:
                out.append(piece)
    return out


def _text(node: list[Any]) -> list[str]:
    return ["".join(c if isinstance(c, str) else "".join(_text(c)) for c in node[2:])]


def elements(node: list[Any]) -> list[tuple[str, list[str]]]:
    """Every element under `node` as (tag, attribute names)."""
    found = []
    for child in node[2:]:
        if not isinstance(child, str):
            found.append((child[0], [name for name, _ in child[1]]))
            found.extend(elements(child))
    return found


@pytest.fixture(scope="module")
def page(browser: Browser):
    """A blank page with the preview's scripts, as the chat page loads them."""
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_content("<!doctype html><html><body></body></html>")
    for script in SCRIPTS:
        page.add_script_tag(path=str(script))
    yield page
    context.close()
    assert errors == []


def in_browser(page: Page, function: str, samples: dict[str, str]) -> dict[str, str]:
    """Each sample through window.SkillscopeMarkdown[function], serialised by the browser."""
    return page.evaluate(
        """([name, samples]) => Object.fromEntries(Object.entries(samples).map(([key, text]) => {
            const holder = document.createElement('div');
            holder.append(window.SkillscopeMarkdown[name](text));
            return [key, holder.innerHTML];
        }))""",
        [function, samples],
    )


def test_the_preview_renders_markdown_as_the_server_does(page):
    rendered = in_browser(page, "render", MARKDOWN_SAMPLES)
    for name, text in MARKDOWN_SAMPLES.items():
        server = markdown.markdown_html(text)
        assert tree(rendered[name]) == tree(server, unwrap_code_spans=True), name
    # The comparison sees what matters: hostile text is inert on both sides.
    raw = elements(tree(rendered["raw html"]))
    assert {"script", "img", "b", "div"}.isdisjoint(tag for tag, _ in raw)
    assert not any(name.startswith("on") for _, names in raw for name in names)
    assert "a" not in {tag for tag, _ in elements(tree(rendered["hostile links"]))}
    assert ("code", ["class"]) in elements(tree(rendered["code fences"]))


def test_the_preview_sanitises_html_as_the_server_does(page):
    cleaned = in_browser(page, "sanitize", SANITIZER_SAMPLES)
    for name, html in SANITIZER_SAMPLES.items():
        assert tree(cleaned[name]) == tree(markdown.sanitized_html(html)), name


def test_the_preview_uses_the_servers_allow_lists(page):
    lists = page.evaluate("() => window.SkillscopeMarkdown.allowList")
    assert set(lists["ALLOWED_TAGS"]) == markdown.ALLOWED_TAGS
    assert {tag: set(names) for tag, names in lists["ALLOWED_ATTRIBUTES"].items()} == (
        markdown.ALLOWED_ATTRIBUTES
    )
    assert set(lists["ALLOWED_STYLES"]) == markdown.ALLOWED_STYLES
    assert set(lists["URL_SCHEMES"]) == markdown.URL_SCHEMES
    assert lists["LINK_REL"] == markdown.LINK_REL
