// Copy buttons on answers, code blocks and tool output. A button copies the text this page shows
// (what the server rendered for this viewer, after its visibility filter), never anything else:
// there is nothing hidden in the page to copy. The result is said in a live region.
(() => {
  "use strict";

  const TARGETS = [
    // [selector of what is copied, where the button goes, its accessible name]
    [".row-assistant:not(.live) .bubble.assistant", "answer", "Copy answer"],
    [".md pre", "code", "Copy code"],
    [".tool-output", "output", "Copy output"],
    [".approval-why pre", "output", "Copy arguments"],
  ];

  let status = null;

  function say(text) {
    if (!status) {
      status = document.createElement("p");
      status.id = "copy-status";
      status.className = "visually-hidden";
      status.setAttribute("role", "status");
      status.setAttribute("aria-live", "polite");
      document.body.append(status);
    }
    // Emptied first: the same words twice are announced twice.
    status.textContent = "";
    setTimeout(() => {
      status.textContent = text;
    }, 50);
  }

  // The text of an answer as a person reads it: its Markdown parts, thinking and cost left out.
  // An answer of several rows (text, a skill, more text) is copied whole, as one.
  function answerText(bubble) {
    const row = bubble.closest(".row");
    const bubbles = row?.dataset.turn ? turnRows(row).map((r) => r.querySelector(".bubble.assistant")) : [bubble];
    const parts = bubbles.flatMap((b) => (b ? [...b.querySelectorAll(":scope > .md")] : []));
    if (!parts.length) return bubble.innerText.trim();
    return parts.map((part) => part.innerText.trim()).join("\n\n");
  }

  // The rows of one answer on this page, in order.
  function turnRows(row) {
    const turn = row.dataset.turn;
    return [...document.querySelectorAll(".row-assistant[data-turn]")].filter((r) => r.dataset.turn === turn);
  }

  // One footer per answer: a row pushed live ends its turn, so the turn's earlier rows lose theirs.
  function keepOneFooter(row) {
    for (const earlier of turnRows(row)) {
      if (earlier === row) break;
      earlier.classList.remove("turn-end");
      earlier
        .querySelectorAll(".answer-actions, .usage, .demo-badge, :scope > .feedback, :scope > .regenerate-form")
        .forEach((node) => node.remove());
      earlier.querySelectorAll(".meta-line").forEach((line) => {
        if (!line.textContent.trim()) line.remove();
      });
    }
  }

  function textOf(target, kind) {
    if (kind === "answer") return answerText(target);
    const code = target.querySelector("code");
    return (code || target).textContent.replace(/\n$/, "");
  }

  async function write(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    // Plain http on another host: the older way, through a selected, off-screen text area.
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    if (!done) throw new Error("copy refused");
  }

  function button(target, kind, label) {
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = `copy-button copy-${kind}`;
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", label);
    copy.addEventListener("click", async () => {
      try {
        await write(textOf(target, kind));
        copy.textContent = "Copied";
        say(`${label.replace("Copy ", "")} copied to the clipboard.`.replace(/^./, (c) => c.toUpperCase()));
      } catch (_err) {
        copy.textContent = "Copy";
        say("Copying did not work here: select the text and copy it yourself.");
        return;
      }
      setTimeout(() => {
        copy.textContent = "Copy";
      }, 2000);
    });
    return copy;
  }

  function decorate(root) {
    for (const [selector, kind, label] of TARGETS) {
      const found = root.matches?.(selector) ? [root] : [];
      for (const target of found.concat([...(root.querySelectorAll?.(selector) || [])])) {
        // A replaced answer is copied only as a version of its answer (shown through "‹ 1/2 ›").
        if (target.closest(".row.replaced:not([data-version])")) continue;
        if (kind === "answer") {
          const row = target.closest(".row");
          if (row.dataset.turn) {
            // The footer sits under the answer's last row, whatever that row holds.
            if (!row.classList.contains("turn-end")) continue;
            keepOneFooter(row);
            if (row.querySelector(".copy-answer")) continue;
            if (!turnRows(row).some((r) => r.querySelector(".bubble.assistant > .md"))) continue;
          } else if (!target.querySelector(":scope > .md") || row.querySelector(".copy-answer")) continue;
          // One line of actions under the answer: Copy, Regenerate when it is offered, the thumbs.
          const actions = document.createElement("div");
          actions.className = "answer-actions";
          actions.append(button(target, kind, label));
          const regenerate = row.querySelector(":scope > .regenerate-form");
          if (regenerate) actions.append(regenerate);
          const feedback = row.querySelector(":scope > .feedback");
          if (feedback) actions.append(feedback);
          const versions = row.querySelector(":scope > .versions");
          if (versions) actions.append(versions);
          row.insertBefore(actions, target.nextSibling);
        } else if (!target.previousElementSibling?.classList.contains("copy-button")) {
          target.before(button(target, kind, label));
        }
      }
    }
  }

  function start() {
    // The transcript, and the rows "Load earlier messages" brings above it.
    for (const id of ["transcript", "transcript-earlier"]) {
      const transcript = document.getElementById(id);
      if (!transcript) continue;
      decorate(transcript);
      new MutationObserver((mutations) => {
        for (const mutation of mutations) {
          for (const node of mutation.addedNodes) {
            if (node.nodeType === Node.ELEMENT_NODE && !node.classList.contains("copy-button")) decorate(node);
          }
        }
      }).observe(transcript, { childList: true, subtree: true });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
