// Keyboard shortcuts, and the sheet that lists them (a modal <dialog>: it keeps focus inside,
// Escape closes it, its heading names it). Chosen not to clash with what browsers keep for
// themselves: Ctrl/⌘+Shift+O (new chat, as on claude.ai and ChatGPT), Ctrl/⌘+K (search, as on
// claude.ai, Slack and GitHub), Alt/Option+Shift+C (copy the last answer: Ctrl+Shift+C opens the
// browser's element inspector), Escape (stop) and "?" outside a text field (this sheet).
(() => {
  "use strict";

  const mac = /Mac|iPhone|iPad/.test(navigator.userAgentData?.platform || navigator.platform || "");

  function typing(element) {
    return Boolean(element?.closest?.("input, textarea, select, [contenteditable]:not([contenteditable=false])"));
  }

  function visible(element) {
    return element && !element.hidden && element.offsetParent !== null;
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (_err) {
      return "";
    }
  }

  function newChat() {
    const url = document.body.dataset.newChatUrl;
    if (!url) return false;
    const existing = document.querySelector(`form[action="${CSS.escape(url)}"]`);
    if (existing) {
      existing.requestSubmit();
      return true;
    }
    const form = document.createElement("form");
    form.method = "post";
    form.action = url;
    form.hidden = true;
    const token = document.createElement("input");
    token.type = "hidden";
    token.name = "csrfmiddlewaretoken";
    token.value = csrfToken();
    form.append(token);
    document.body.append(form);
    form.submit();
    return true;
  }

  function search() {
    const field = document.querySelector("#sidebar input[type=search]") || document.querySelector("main input[type=search]");
    if (!field) {
      // A page without the list (Skills, Usage...): to the conversation list, its search focused.
      const url = document.body.dataset.searchUrl;
      if (!url) return false;
      window.location.assign(`${url}#search`);
      return true;
    }
    // On a phone the list is a closed drawer: its button opens it and puts the cursor in the field.
    const toggle = document.querySelector("button.sidebar-toggle[data-sidebar-toggle]");
    if (!visible(field) && field.closest("#sidebar") && visible(toggle)) toggle.click();
    field.focus();
    field.select();
    return true;
  }

  function copyLastAnswer() {
    const buttons = document.querySelectorAll("#transcript .copy-answer");
    const last = buttons[buttons.length - 1];
    if (!last) return false;
    last.click();
    return true;
  }

  function stop() {
    const button = document.getElementById("stop-button");
    if (!visible(button)) return false;
    button.click();
    return true;
  }

  function start() {
    const sheet = document.getElementById("shortcuts");
    if (!sheet) return;
    let opener = null;

    if (mac) {
      for (const key of sheet.querySelectorAll("kbd")) {
        if (key.textContent === "Ctrl") key.textContent = "⌘";
        else if (key.textContent === "Alt") key.textContent = "Option";
      }
    }

    function openSheet() {
      if (sheet.open) return;
      opener = document.activeElement;
      document.querySelector("details.menu[open]")?.removeAttribute("open");
      sheet.showModal();
    }
    sheet.addEventListener("close", () => {
      if (opener?.isConnected) opener.focus();
      opener = null;
    });
    // The page behind a modal dialog is inert, but Tab past its last control would leave for the
    // browser's bar: round and round inside instead.
    sheet.addEventListener("keydown", (event) => {
      if (event.key !== "Tab") return;
      const stops = [...sheet.querySelectorAll("a[href], button, input, select, textarea")].filter(
        (el) => !el.disabled && el.offsetParent !== null,
      );
      if (!stops.length) return;
      const first = stops[0];
      const last = stops[stops.length - 1];
      if (event.shiftKey && (document.activeElement === first || document.activeElement === sheet)) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && document.activeElement === last) {
        event.preventDefault();
        first.focus();
      }
    });
    // A click on the backdrop (outside the sheet's box) closes it too.
    sheet.addEventListener("click", (event) => {
      if (event.target === sheet) sheet.close();
    });

    for (const button of document.querySelectorAll("[data-shortcuts-open]")) {
      button.hidden = false;
      button.addEventListener("click", openSheet);
    }

    if (window.location.hash === "#search") {
      // After the page's own scripts (the phone drawer's button) are set up.
      document.addEventListener("DOMContentLoaded", () => {
        search();
        history.replaceState(null, "", window.location.pathname + window.location.search);
      });
    }

    document.addEventListener("keydown", (event) => {
      if (event.defaultPrevented || event.isComposing || sheet.open) return;
      const primary = event.ctrlKey || event.metaKey;
      const key = event.key.toLowerCase();
      let done = false;
      if (primary && event.shiftKey && !event.altKey && key === "o") done = newChat();
      else if (primary && !event.shiftKey && !event.altKey && key === "k") done = search();
      // By the key's place: Option changes the letter a Mac reports.
      else if (event.altKey && event.shiftKey && !primary && event.code === "KeyC") done = copyLastAnswer();
      else if (event.key === "Escape" && !primary && !event.altKey) {
        const busy = document.querySelector("dialog[open], details.menu[open], body.sidebar-open");
        done = !busy && stop();
      } else if (event.key === "?" && !primary && !event.altKey && !typing(event.target)) {
        openSheet();
        done = true;
      }
      if (done) event.preventDefault();
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
