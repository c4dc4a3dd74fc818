"""Markdown of an answer to sanitised HTML: commonmark without raw HTML, tables, highlighted
code, links that open safely, images as links (never loaded).

The allow-lists below are the whole of what an answer may put on the page; nh3 drops the rest.
The streaming preview (static/skillscope/markdown.js) configures markdown-it's JS build and
DOMPurify the same way; tests/browser/test_markdown_agreement.py holds the two sides together.
"""

from __future__ import annotations

from collections.abc import Sequence

import nh3
from django.utils.html import escape
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

LINK_REL = "noopener noreferrer nofollow"
ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "s", "span", "strong", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
}  # fmt: skip
# No <img>: an image in an answer is a link (`_image_as_link`). A model steered by injected text
# could otherwise send data to any host with a zero-click image load; the CSP backs this up.
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
    "code": {"class"},
    "span": {"class"},
    "td": {"style"},
    "th": {"style"},
    "ol": {"start"},
}
# Table alignment is the only inline style markdown-it emits; nothing else may style the page.
ALLOWED_STYLES = {"text-align"}
# Links only to these schemes; a relative address (no scheme) stays.
URL_SCHEMES = {"http", "https", "mailto"}

_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """Pygments spans for a fenced block; empty string lets markdown-it escape it plainly."""
    if not lang:
        return ""
    try:
        lexer = get_lexer_by_name(lang.strip().split()[0], stripall=False)
    except ClassNotFound:
        return ""
    return highlight(code, lexer, _FORMATTER)


def _image_as_link(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """`![alt](url)` as a link to the image, never an <img> that loads it."""
    token = tokens[idx]
    src = str(token.attrs.get("src", ""))
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    return f'<a href="{escape(src)}" class="image-link">{escape(alt)}</a>'


# commonmark with raw HTML switched off: HTML in model output shows as text, never as markup.
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight}).enable(
    ["table", "strikethrough"]
)
_MD.add_render_rule("image", _image_as_link)


def markdown_html(text: str) -> str:
    """Markdown to sanitised HTML: tables, highlighted code, safe links, no raw HTML."""
    return sanitized_html(_MD.render(text or ""))


def sanitized_html(html: str) -> str:
    """Only the allowed tags, attributes, style and link schemes of `html`, every link with rel."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        # No attribute on every tag: without "*", nh3 would keep `lang` and `title` anywhere.
        attributes={"*": set(), **ALLOWED_ATTRIBUTES},
        filter_style_properties=ALLOWED_STYLES,
        url_schemes=URL_SCHEMES,
        link_rel=LINK_REL,
    )
