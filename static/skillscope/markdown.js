// Markdown for text while it streams, built as DOM nodes: never HTML strings, so nothing the
// model writes can become markup. It allows what the server's final render allows
// (chat/rendering.py: markdown-it with raw HTML off, then nh3 with the same tags and the link
// schemes http, https and mailto): the same elements, links only to those schemes or relative
// addresses, images as links. The stored answer replaces this preview with the server's HTML.
(() => {
  "use strict";

  const LINK_REL = "noopener noreferrer nofollow";
  const SCHEMES = new Set(["http", "https", "mailto"]);
  const PUNCTUATION = /[!-/:-@[-`{-~]/;

  function el(tag, text) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The scheme a browser would see: it drops ASCII whitespace and control characters first
  // ("java\tscript:" is "javascript:"). No scheme: a relative address, as nh3 keeps them.
  function safeHref(raw) {
    const url = raw.trim();
    const squeezed = url.replace(/[\u0000-\u0020\u007f]/g, "");
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(squeezed);
    if (scheme) return SCHEMES.has(scheme[1].toLowerCase()) ? url : null;
    return squeezed.includes(":") && !/^[^:]*[/?#]/.test(squeezed) ? null : url;
  }

  function link(href, label, parent, className) {
    const safe = safeHref(href);
    if (safe === null) {
      // What nh3 does with a refused address: the text stays, the link goes.
      inline(label, parent);
      return;
    }
    const a = el("a");
    a.setAttribute("href", safe);
    a.setAttribute("rel", LINK_REL);
    if (className) {
      a.className = className;
      a.textContent = label || safe;
    } else {
      inline(label, a);
    }
    parent.append(a);
  }

  // [label](href "title") starting at `i` (text[i] === "["): [end, label, href] or null.
  function bracketLink(text, i) {
    let depth = 0;
    for (let j = i; j < text.length; j += 1) {
      const c = text[j];
      if (c === "\\") {
        j += 1;
      } else if (c === "[") {
        depth += 1;
      } else if (c === "]") {
        depth -= 1;
        if (depth === 0) {
          if (text[j + 1] !== "(") return null;
          const close = text.indexOf(")", j + 2);
          if (close < 0) return null;
          const target = text.slice(j + 2, close).trim();
          const href = target.replace(/\s+("[^"]*"|'[^']*')$/, "").replace(/^<(.*)>$/, "$1");
          return [close + 1, text.slice(i + 1, j), href];
        }
      }
    }
    return null;
  }

  // Emphasis by its delimiter (`**`, `__`, `*`, `_`, `~~`), when it closes later in the text.
  const DELIMITERS = [
    ["**", "strong"],
    ["__", "strong"],
    ["~~", "s"],
    ["*", "em"],
    ["_", "em"],
  ];

  function inline(text, parent) {
    let buffer = "";
    const flush = () => {
      if (buffer) parent.append(document.createTextNode(buffer));
      buffer = "";
    };
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === "\\" && i + 1 < text.length && PUNCTUATION.test(text[i + 1])) {
        buffer += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "`") {
        const run = /^`+/.exec(text.slice(i))[0];
        const end = text.indexOf(run, i + run.length);
        if (end > 0) {
          flush();
          parent.append(el("code", text.slice(i + run.length, end).replace(/^ (.*) $/s, "$1")));
          i = end + run.length;
          continue;
        }
        buffer += run;
        i += run.length;
        continue;
      }
      if (c === "!" && text[i + 1] === "[") {
        const found = bracketLink(text, i + 1);
        if (found) {
          flush();
          link(found[2], found[1], parent, "image-link");
          i = found[0];
          continue;
        }
      }
      if (c === "[") {
        const found = bracketLink(text, i);
        if (found) {
          flush();
          link(found[2], found[1], parent);
          i = found[0];
          continue;
        }
      }
      if (c === "<") {
        const auto = /^<((?:https?|mailto):[^\s<>]*)>/i.exec(text.slice(i));
        if (auto) {
          flush();
          link(auto[1], auto[1], parent);
          i += auto[0].length;
          continue;
        }
      }
      const delimiter = DELIMITERS.find(([mark]) => text.startsWith(mark, i));
      if (delimiter && text[i + delimiter[0].length] && !/\s/.test(text[i + delimiter[0].length])) {
        const [mark, tag] = delimiter;
        const end = text.indexOf(mark, i + mark.length + 1);
        if (end > 0 && !/\s/.test(text[end - 1])) {
          flush();
          const node = el(tag);
          inline(text.slice(i + mark.length, end), node);
          parent.append(node);
          i = end + mark.length;
          continue;
        }
      }
      buffer += c;
      i += 1;
    }
    flush();
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
  const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
  const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

  function cells(line) {
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => cell.trim());
  }

  function blocks(lines, parent) {
    let i = 0;
    let paragraph = [];
    const endParagraph = () => {
      if (!paragraph.length) return;
      const p = el("p");
      inline(paragraph.join("\n"), p);
      parent.append(p);
      paragraph = [];
    };
    while (i < lines.length) {
      const line = lines[i];
      const fence = FENCE.exec(line);
      if (fence) {
        endParagraph();
        const body = [];
        i += 1;
        // An open fence runs to the end of what has arrived so far.
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
        i += 1;
        const pre = el("pre");
        const code = el("code", body.join("\n") + (body.length ? "\n" : ""));
        if (fence[2]) code.className = `language-${fence[2]}`;
        pre.append(code);
        parent.append(pre);
        continue;
      }
      if (!line.trim()) {
        endParagraph();
        i += 1;
        continue;
      }
      const heading = HEADING.exec(line);
      if (heading) {
        endParagraph();
        const h = el(`h${heading[1].length}`);
        inline(heading[2] || "", h);
        parent.append(h);
        i += 1;
        continue;
      }
      if (RULE.test(line)) {
        endParagraph();
        parent.append(el("hr"));
        i += 1;
        continue;
      }
      if (QUOTE.test(line)) {
        endParagraph();
        const inner = [];
        while (i < lines.length && QUOTE.test(lines[i])) inner.push(QUOTE.exec(lines[i++])[1]);
        const quote = el("blockquote");
        blocks(inner, quote);
        parent.append(quote);
        continue;
      }
      const item = ITEM.exec(line);
      if (item && (!paragraph.length || item[1] === "")) {
        endParagraph();
        const ordered = /\d/.test(item[2]);
        const list = el(ordered ? "ol" : "ul");
        if (ordered && parseInt(item[2], 10) !== 1) list.setAttribute("start", String(parseInt(item[2], 10)));
        while (i < lines.length) {
          const next = ITEM.exec(lines[i]);
          if (next && /\d/.test(next[2]) === ordered && next[1].length <= item[1].length + 1) {
            const li = el("li");
            inline(next[3], li);
            list.append(li);
            i += 1;
          } else if (lines[i].trim() && /^\s+/.test(lines[i]) && list.lastChild) {
            list.lastChild.append(document.createTextNode("\n"));
            inline(lines[i].trim(), list.lastChild);
            i += 1;
          } else {
            break;
          }
        }
        parent.append(list);
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) && lines[i + 1].includes("-")) {
        endParagraph();
        const table = el("table");
        const head = el("thead");
        const row = el("tr");
        for (const cell of cells(line)) {
          const th = el("th");
          inline(cell, th);
          row.append(th);
        }
        head.append(row);
        table.append(head);
        const body = el("tbody");
        i += 2;
        while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
          const tr = el("tr");
          for (const cell of cells(lines[i])) {
            const td = el("td");
            inline(cell, td);
            tr.append(td);
          }
          body.append(tr);
          i += 1;
        }
        table.append(body);
        parent.append(table);
        continue;
      }
      paragraph.push(line);
      i += 1;
    }
    endParagraph();
  }

  // The Markdown `text` as a fragment of safe elements.
  function render(text) {
    const fragment = document.createDocumentFragment();
    blocks(text.replace(/\r\n?/g, "\n").split("\n"), fragment);
    return fragment;
  }

  window.SkillscopeMarkdown = { render, safeHref };
})();
