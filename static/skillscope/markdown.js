// Markdown for text while it streams, with the libraries the server uses for the stored answer
// (skills_app/chat/markdown.py): markdown-it with the same options, then a sanitiser with the
// same allow-lists (DOMPurify here, nh3 there). Only code highlighting differs: a fenced block
// is plain until the stored answer, highlighted by Pygments, replaces this preview.
// Needs static/vendor/markdown-it and static/vendor/dompurify loaded first (their README.md).
(() => {
  "use strict";

  // nh3's allow-lists in chat/markdown.py: the tags, each tag's attributes, the one style
  // property, the link schemes (relative addresses stay), and the rel every link gets.
  const ALLOWED_TAGS = [
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "li", "ol", "p", "pre", "s", "span", "strong", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
  ];
  const ALLOWED_ATTRIBUTES = {
    a: ["href", "title", "class"],
    code: ["class"],
    span: ["class"],
    td: ["style"],
    th: ["style"],
    ol: ["start"],
  };
  const ALLOWED_STYLES = ["text-align"];
  const URL_SCHEMES = ["http", "https", "mailto"];
  const LINK_REL = "noopener noreferrer nofollow";

  // commonmark with raw HTML off (HTML the model writes shows as text), tables, strikethrough.
  const md = window.markdownit("commonmark", { html: false, linkify: false }).enable([
    "table",
    "strikethrough",
  ]);
  const escapeHtml = md.utils.escapeHtml;
  // An image is a link to it, never an <img> that loads it (as `_image_as_link` on the server).
  md.renderer.rules.image = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const src = token.attrGet("src") || "";
    const alt = self.renderInlineAsText(token.children || [], options, env) || src;
    return `<a href="${escapeHtml(src)}" class="image-link">${escapeHtml(alt)}</a>`;
  };

  // Its own DOMPurify instance, so these hooks change no other use of the library.
  const purify = window.DOMPurify(window);
  const attributesOf = new Map(
    Object.entries(ALLOWED_ATTRIBUTES).map(([tag, names]) => [tag.toUpperCase(), new Set(names)]),
  );
  purify.addHook("uponSanitizeAttribute", (node, data) => {
    const allowed = attributesOf.get(node.nodeName);
    if (!allowed || !allowed.has(data.attrName)) {
      data.keepAttr = false;
    } else if (data.attrName === "style") {
      // Only the allowed properties stay, as nh3's filter_style_properties keeps them.
      const kept = [];
      for (const declaration of data.attrValue.split(";")) {
        const colon = declaration.indexOf(":");
        if (colon < 0) continue;
        const name = declaration.slice(0, colon).trim().toLowerCase();
        if (ALLOWED_STYLES.includes(name)) kept.push(`${name}:${declaration.slice(colon + 1).trim()}`);
      }
      // Nothing kept leaves an empty style="", as nh3 does.
      data.attrValue = kept.join(";");
    }
  });
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName === "A") node.setAttribute("rel", LINK_REL);
  });
  const PURIFY_CONFIG = {
    ALLOWED_TAGS,
    ALLOWED_ATTR: [...new Set(Object.values(ALLOWED_ATTRIBUTES).flat())],
    // A scheme from the list, or no scheme at all (a relative address).
    ALLOWED_URI_REGEXP: new RegExp(
      `^(?:(?:${URL_SCHEMES.join("|")}):|[^a-z]|[a-z+.\\-]+(?:[^a-z+.\\-:]|$))`,
      "i",
    ),
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  };

  // Sanitised HTML as a fragment: only the allowed tags, attributes, styles and link schemes.
  function sanitize(html) {
    return purify.sanitize(html, PURIFY_CONFIG);
  }

  // The Markdown `text` as a fragment of safe elements.
  function render(text) {
    return sanitize(md.render(text || ""));
  }

  window.SkillscopeMarkdown = {
    render,
    sanitize,
    allowList: { ALLOWED_TAGS, ALLOWED_ATTRIBUTES, ALLOWED_STYLES, URL_SCHEMES, LINK_REL },
  };
})();
