// Skillscope chat on htmx's websocket extension. htmx connects, sends the forms (ws-send) and
// swaps the fragments (hx-swap-oob) of the JSON frames the server pushes. What stays here: resuming after the last
// seq on every (re)connect, appending streamed text, replacing elements the page already has,
// and the "/" menu of the composer.
(() => {
  "use strict";
  // Controls that only work with this script (Edit's on-demand form) are shown from here on.
  document.documentElement.classList.add("js");
  setUpSidebar();
  setUpVersions();
  const chat = document.getElementById("chat");
  if (!chat) return;

  const live = document.getElementById("live");
  const form = document.getElementById("composer");
  const input = document.getElementById("message-input");
  const menu = document.getElementById("slash-menu");
  const skills = JSON.parse(document.getElementById("skills-data").textContent || "[]");

  function status(text) {
    // Looked up each time: the server's answer to a resume replaces the element (out of band).
    const line = document.getElementById("connection");
    // Set only when it changes: a screen reader announces "Reconnecting…" once, not per try.
    if (line && line.textContent !== text) line.textContent = text;
  }

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  }

  // -- the socket: resume after the last applied seq -----------------------------------------

  // Reconnecting: first try within a second, then a capped, jittered backoff (never more than
  // RECONNECT_CAP_MS apart; htmx's default waits up to 64 s), and at once when the page is shown
  // again or the network is back. The extension reconnects by itself after 1006, 1011, 1012 and
  // 1013; after any other close that is not a refusal (1001 from a server going away) we do.
  // The cap is under the 5 s a tab has to stream again once its server serves again: a tab
  // waiting 5 s between tries could not, whatever the server did.
  const RECONNECT_CAP_MS = 3000;
  function reconnectDelay(retries) {
    const ceiling = Math.min(RECONNECT_CAP_MS, 800 * 2 ** retries);
    return ceiling / 2 + (Math.random() * ceiling) / 2;
  }
  htmx.config.wsReconnectDelay = reconnectDelay;
  const EXTENSION_RETRIES = [1006, 1011, 1012, 1013];
  const REFUSED = [4401, 4403];
  const DATABASE_AWAY = 4503;
  let socketWrapper = null;
  let openSocket = null;
  let connected = false;
  let ownRetries = 0;
  let ownTimer = null;

  function reconnectNow() {
    if (connected || !socketWrapper) return;
    if (ownTimer) clearTimeout(ownTimer);
    ownTimer = null;
    // The extension's own timer, if one is pending, opens one more socket later: that one
    // replaces this one (a close with 1005, ignored below) and resumes after the same seq.
    socketWrapper.reconnect();
  }
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") reconnectNow();
  });
  window.addEventListener("online", reconnectNow);

  chat.addEventListener("htmx:wsOpen", (event) => {
    socketWrapper = event.detail.socketWrapper;
    openSocket = event.detail.event.target;
    connected = true;
    ownRetries = 0;
    const seq = parseInt(document.getElementById("chat-seq").dataset.seq || "0", 10) || 0;
    event.detail.socketWrapper.send(JSON.stringify({ action: "resume", after: seq }));
    resendUnacknowledged(event.detail.socketWrapper);
  });

  // -- actions: each one has an id, shows pending until the server acknowledges it ------------

  // A frame written to a socket that was closing (its web process stopped) may never have been
  // read: an action without an acknowledgement is sent again, with the same id, on the next
  // connection. The server takes an action once per id (chat/receipts.py).
  const unacknowledged = new Map(); // action id -> {body, button, label, sent}

  chat.addEventListener("htmx:wsConfigSend", (event) => {
    const detail = event.detail;
    const submitter = detail.triggeringEvent && detail.triggeringEvent.submitter;
    const button = submitter || event.target.querySelector("button[type=submit], button:not([type])");
    if (button && button.getAttribute("aria-busy") === "true") {
      // Pressed again while the first press is on its way: nothing is sent, and the form is
      // not posted the no-JavaScript way either (the extension leaves that to its caller here).
      detail.triggeringEvent?.preventDefault();
      event.preventDefault();
      return;
    }
    const id = newId();
    const fields = Object.assign({}, detail.parameters, { action_id: id });
    if (detail.headers) fields.HEADERS = detail.headers;
    detail.messageBody = JSON.stringify(fields);
    unacknowledged.set(id, { body: detail.messageBody, button, label: null, sent: false });
    if (button) {
      unacknowledged.get(id).label = button.textContent;
      // aria-disabled, not disabled: a disabled button drops the keyboard's focus to the page.
      button.setAttribute("aria-disabled", "true");
      button.setAttribute("aria-busy", "true");
      // Icon buttons (Regenerate) keep their look: their name says it.
      if (button.textContent.trim()) button.textContent = "Sending…";
    }
  });

  // Sent on a socket now (the extension keeps what is sent while closed, and sends it on open).
  chat.addEventListener("htmx:wsAfterSend", (event) => {
    for (const pending of unacknowledged.values()) {
      if (pending.body === event.detail.message) pending.sent = true;
    }
  });

  // crypto.randomUUID needs a secure context; a site on plain HTTP still gets a v4 uuid.
  function newId() {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function resendUnacknowledged(wrapper) {
    for (const pending of unacknowledged.values()) {
      // Those never sent go out from the extension's queue right after this.
      if (pending.sent) wrapper.sendImmediately(pending.body);
    }
  }

  function acknowledged(id) {
    const pending = unacknowledged.get(id);
    if (!pending) return;
    unacknowledged.delete(id);
    const button = pending.button;
    if (!button) return;
    button.removeAttribute("aria-disabled");
    button.removeAttribute("aria-busy");
    if (pending.label !== null && button.textContent === "Sending…") button.textContent = pending.label;
  }

  chat.addEventListener("htmx:wsClose", (event) => {
    const closed = event.detail.event;
    socketWrapper = event.detail.socketWrapper;
    // A socket the extension discarded for a newer one (client-side close, 1005) is no news.
    if (closed.code === 1005 || (openSocket && closed.target !== openSocket && connected)) return;
    connected = false;
    if (closed.code === 4401) {
      // The account changed (a role taken, signed out elsewhere): the whole page is shown
      // again as the account now allows, or the login page is.
      status("Your access changed — reloading…");
      window.location.reload();
    } else if (closed.code === 4403) {
      status("This conversation cannot be opened here. Log in again or go back to the list.");
    } else {
      // 4503: the server is up but cannot reach its database (chat/database_away.py).
      status(closed.code === DATABASE_AWAY ? "The server cannot reach its database; retrying…" : "Connection lost — reconnecting…");
      if (!EXTENSION_RETRIES.includes(closed.code) && !REFUSED.includes(closed.code)) {
        if (ownTimer) clearTimeout(ownTimer);
        ownTimer = setTimeout(reconnectNow, reconnectDelay(ownRetries++));
      }
    }
  });

  // -- frames: every frame is JSON, {"type", ...}; one with "html" is swapped by htmx ----------

  let stick = false;
  // The frame being handled: its type for the handlers after the swap, its html for htmx.
  let current = null;
  chat.addEventListener("htmx:wsBeforeMessage", (event) => {
    stick = nearBottom();
    current = null;
    const message = event.detail.message;
    let frame;
    try {
      frame = JSON.parse(message);
    } catch (_err) {
      event.preventDefault();
      return;
    }
    const seq = frame.seq ?? frame.last_seq;
    if (Number.isInteger(seq)) document.getElementById("chat-seq").dataset.seq = String(seq);
    if (typeof frame.html === "string") {
      current = { message, frame };
      return; // htmx swaps it: the "chat-frames" extension hands it the html
    }
    event.preventDefault();
    if (frame.type === "action.ack") {
      acknowledged(frame.action_id);
    } else if (frame.type === "text.delta" || frame.type === "thinking.delta") {
      appendText(frame);
      if (stick) window.scrollTo(0, document.body.scrollHeight);
    }
  });

  // The socket's frames reach htmx's websocket extension as JSON: this gives it their fragments.
  htmx.defineExtension("chat-frames", {
    transformResponse(text, xhr) {
      if (xhr) return text; // an ordinary request of an element inside the chat
      if (current && current.message === text) return current.frame.html;
      return "";
    },
  });

  chat.addEventListener("htmx:wsAfterMessage", () => {
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  });

  // -- streamed text: appended as text, never as HTML ------------------------------------------

  function appendText(frame) {
    const id = `live-${frame.run}-${frame.call}`;
    let row = document.getElementById(id);
    if (!row) {
      row = document.createElement("div");
      row.className = "row row-assistant live";
      row.id = id;
      const bubble = document.createElement("div");
      bubble.className = "bubble assistant";
      row.append(bubble);
      live.append(row);
    }
    const bubble = row.querySelector(".bubble");
    let block = bubble.querySelector(`:scope > [data-index="${frame.index}"]`);
    if (!block) {
      block = newBlock(frame.type === "thinking.delta");
      block.dataset.index = String(frame.index);
      const after = [...bubble.children].find((el) => Number(el.dataset.index) > frame.index);
      bubble.insertBefore(block, after || null);
    }
    const target = block.querySelector(".thinking-text") || block;
    // Offset 0 starts the block: after a reconnect it brings the whole text saved so far.
    const before = frame.offset === 0 ? "" : streamed.get(target) ?? target.textContent;
    streamed.set(target, before + frame.text);
    renderSoon(target);
    document.getElementById("empty-hint")?.remove();
  }

  // -- streamed text as Markdown: rebuilt from the text so far, as safe DOM (markdown.js) ------

  const streamed = new WeakMap();
  const dirty = new Set();
  let renderTimer = null;

  function renderSoon(target) {
    dirty.add(target);
    if (renderTimer === null) renderTimer = setTimeout(renderDirty, 16);
  }

  function renderDirty() {
    renderTimer = null;
    for (const target of dirty) {
      target.replaceChildren(window.SkillscopeMarkdown.render(streamed.get(target) || ""));
    }
    dirty.clear();
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  }

  // The text a page load brought for answers still being written (`_live.html`).
  for (const target of live.querySelectorAll(".live-text[data-index], .thinking-text")) {
    streamed.set(target, target.textContent);
    renderSoon(target);
  }

  function newBlock(thinking) {
    if (!thinking) {
      const text = document.createElement("div");
      text.className = "live-text md";
      return text;
    }
    // The same markup as a stored thinking block: collapsed, the model's own words inside.
    const details = document.createElement("details");
    details.className = "thinking";
    const summary = document.createElement("summary");
    summary.textContent = "Thinking";
    const text = document.createElement("div");
    text.className = "thinking-text";
    details.append(summary, text);
    return details;
  }

  // Feedback refused (a note too long) comes back as the controls with the reason: shown in place.
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.xhr.status === 422 && event.detail.target?.classList?.contains("feedback")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // -- fragments: an element the page already has is replaced, never added twice -----------------

  document.body.addEventListener("htmx:oobBeforeSwap", (event) => {
    const { target, fragment } = event.detail;
    if (!fragment || !fragment.dataset || (target.id !== "transcript" && target.id !== "live")) {
      return;
    }
    if (fragment.dataset.replaces) document.getElementById(fragment.dataset.replaces)?.remove();
    const updateOnly = fragment.dataset.swap === "update";
    let handled = 0;
    for (const element of [...fragment.children]) {
      const existing = element.id && document.getElementById(element.id);
      if (existing) {
        // A control that had focus (an approval's button) is replaced: focus goes to the
        // message box instead of being lost at the top of the page.
        const hadFocus = existing.contains(document.activeElement);
        existing.replaceWith(element);
        htmx.process(element);
        if (hadFocus) input.focus();
        handled += 1;
      } else if (updateOnly) {
        element.remove(); // an update of something this page does not show
        handled += 1;
      }
    }
    if (handled && !fragment.children.length) event.detail.shouldSwap = false;
    document.getElementById("empty-hint")?.remove();
  });

  // -- the answer waits for the person: a line by the composer, with a link to the question ----

  const waiting = document.getElementById("waiting-note");

  function updateWaiting() {
    const pending = document.querySelector('#transcript .approval[data-status="pending"]');
    if (!pending) {
      waiting.hidden = true;
      return;
    }
    const link = waiting.querySelector("a");
    link.href = `#${pending.id}`;
    waiting.hidden = false;
  }

  waiting.addEventListener("click", (event) => {
    const link = event.target.closest("a");
    if (!link) return;
    const target = document.querySelector(link.getAttribute("href"));
    if (!target) return;
    event.preventDefault();
    target.scrollIntoView({ block: "center" });
    // Its first answer button (not a control inside the closed "why?" part).
    (target.querySelector(".actions button") || target.querySelector("summary"))?.focus({ preventScroll: true });
  });
  document.body.addEventListener("htmx:oobAfterSwap", updateWaiting);
  chat.addEventListener("htmx:wsAfterMessage", updateWaiting);
  updateWaiting();

  // -- jump to the newest: shown while the end of the conversation is out of view -------------

  const jump = document.getElementById("jump-newest");
  function updateJump() {
    jump.hidden = nearBottom();
  }
  jump.addEventListener("click", () => {
    window.scrollTo({ top: document.body.scrollHeight });
    input.focus({ preventScroll: true });
    jump.hidden = true;
  });
  window.addEventListener("scroll", updateJump, { passive: true });
  chat.addEventListener("htmx:wsAfterMessage", updateJump);

  // -- earlier messages: loaded above the rows being read, which stay where they are --------

  document.body.addEventListener("htmx:beforeSwap", (event) => {
    const target = event.detail.target;
    if (!target || target.id !== "load-earlier") return;
    // The distance to the end of the page does not change when rows come in above. The swap
    // replaces the control (no event of it reaches the page): restored at the next frame.
    const bottom = document.body.scrollHeight - window.scrollY;
    const focused = target.contains(document.activeElement);
    requestAnimationFrame(() => {
      window.scrollTo(0, document.body.scrollHeight - bottom);
      if (!focused) return;
      // Focus stays on the control (the next page's), else goes to the earliest row loaded.
      let next = document.querySelector("#load-earlier a");
      if (!next) {
        next = document.querySelector("#transcript-earlier .row:not([hidden])");
        if (next) next.tabIndex = -1;
      }
      next?.focus({ preventScroll: true });
    });
  });

  // -- the composer and its "/" menu ---------------------------------------------------------------

  // A draft survives a reload (per conversation, in this browser). Sent text is kept until the
  // server stores or queues it: a refusal puts it back in the box, never drops it.
  const draftKey = `skillscope-draft-${chat.dataset.conversationId}`;
  let unconfirmed = null;

  function saveDraft() {
    try {
      if (input.value) localStorage.setItem(draftKey, input.value);
      else localStorage.removeItem(draftKey);
    } catch (_err) {
      // Storage may be full or switched off: the draft only lives in the box then.
    }
  }

  if (!input.value) {
    try {
      input.value = localStorage.getItem(draftKey) || "";
    } catch (_err) {
      // as above
    }
  }
  input.addEventListener("input", saveDraft);

  form.addEventListener("htmx:wsAfterSend", () => {
    unconfirmed = input.value;
    input.value = "";
    saveDraft();
    closeMenu();
  });

  chat.addEventListener("htmx:wsAfterMessage", () => {
    const type = current?.frame.type;
    if (unconfirmed === null || !type) return;
    if (type === "message.stored" || type === "message.queued" || type === "turn.excluded") {
      unconfirmed = null;
    } else if (type === "error") {
      if (!input.value) {
        input.value = unconfirmed;
        saveDraft();
      }
      unconfirmed = null;
    }
  });

  // -- editing the latest message: a form built on demand, sent over the socket ---------------

  // On the chat section: rows loaded with "Load earlier messages" are outside #transcript.
  chat.addEventListener("click", (event) => {
    const button = event.target.closest(".edit-button");
    if (!button) return;
    const row = button.closest(".row-user");
    if (row.querySelector(".edit-form")) return;
    const edit = editForm(button.dataset.messageId, row.querySelector(".bubble").textContent);
    row.append(edit);
    htmx.process(edit); // in the page first: ws-send looks for the socket of an ancestor
    edit.querySelector("textarea").focus();
  });

  // A new message or a regenerated answer replaces what an open edit would have: the edit
  // closes, rather than stay open beside an answer to the old text.
  chat.addEventListener("htmx:wsConfigSend", (event) => {
    const sent = event.target;
    if (sent !== form && !sent.closest?.(".regenerate-form")) return;
    chat.querySelectorAll(".edit-form").forEach((edit) => edit.remove());
  });

  // The form goes, and focus returns to the Edit button that opened it.
  function closeEdit(edit) {
    const button = edit.closest(".row-user")?.querySelector(".edit-button");
    edit.remove();
    button?.focus();
  }

  function hidden(name, value) {
    const field = document.createElement("input");
    field.type = "hidden";
    field.name = name;
    field.value = value;
    return field;
  }

  function editForm(messageId, text) {
    const edit = document.createElement("form");
    edit.className = "edit-form";
    edit.setAttribute("ws-send", "");
    const area = document.createElement("textarea");
    area.name = "text";
    area.rows = 3;
    area.required = true;
    area.value = text;
    area.setAttribute("aria-label", "Edited message");
    const send = document.createElement("button");
    send.type = "submit";
    send.className = "primary";
    send.textContent = "Send edited message";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.addEventListener("click", () => closeEdit(edit));
    // As in the composer (and claude.ai's edit box): Enter sends, Shift+Enter adds a line.
    area.addEventListener("keydown", (event) => {
      if (event.isComposing || event.key !== "Enter" || event.shiftKey) return;
      event.preventDefault();
      if (area.value.trim()) edit.requestSubmit(send);
    });
    edit.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        closeEdit(edit);
      }
    });
    const hint = document.createElement("p");
    hint.className = "edit-hint muted";
    hint.id = `edit-hint-${messageId}`;
    hint.textContent = "Enter sends, Shift+Enter adds a line, Escape cancels.";
    area.setAttribute("aria-describedby", hint.id);
    const actions = document.createElement("div");
    actions.className = "actions";
    actions.append(hint, cancel, send);
    edit.append(hidden("action", "edit"), hidden("message_id", messageId), area, actions);
    // The edited message arrives as a new row; the form goes once it is sent.
    edit.addEventListener("htmx:wsAfterSend", () => edit.remove());
    return edit;
  }

  let options = [];
  let active = -1;

  // A textarea cannot be a combobox (aria-expanded is not allowed on it): it points at the
  // highlighted option (aria-activedescendant), and a live region says when the menu opens.
  const menuStatus = document.getElementById("slash-status");

  function closeMenu() {
    const wasOpen = !menu.hidden;
    menu.hidden = true;
    menu.replaceChildren();
    options = [];
    active = -1;
    input.removeAttribute("aria-activedescendant");
    menu.removeAttribute("aria-activedescendant");
    if (wasOpen) menuStatus.textContent = "";
  }

  function highlight() {
    [...menu.children].forEach((li, i) => li.setAttribute("aria-selected", i === active ? "true" : "false"));
    if (active >= 0) {
      input.setAttribute("aria-activedescendant", `slash-option-${active}`);
      menu.setAttribute("aria-activedescendant", `slash-option-${active}`);
      menu.children[active].scrollIntoView({ block: "nearest" });
    }
  }

  // The menu itself takes focus too (its list scrolls): the same keys work there.
  function menuKeys(event) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      active = (active + step + options.length) % options.length;
      highlight();
      return true;
    }
    if (event.key === "Home" || event.key === "End") {
      event.preventDefault();
      active = event.key === "Home" ? 0 : options.length - 1;
      highlight();
      return true;
    }
    if (event.key === "Enter" || (event.key === "Tab" && !event.shiftKey && event.target === input)) {
      event.preventDefault();
      choose(Math.max(active, 0));
      return true;
    }
    if (event.key === "Escape") {
      event.preventDefault();
      closeMenu();
      input.focus();
      return true;
    }
    return false;
  }

  menu.addEventListener("keydown", (event) => {
    if (options.length) menuKeys(event);
  });
  menu.addEventListener("focusout", (event) => {
    if (event.relatedTarget !== input && !menu.contains(event.relatedTarget)) closeMenu();
  });

  function option(skill, i) {
    const li = document.createElement("li");
    li.id = `slash-option-${i}`;
    li.setAttribute("role", "option");
    li.dataset.name = skill.name;
    const name = document.createElement("span");
    name.className = "option-name";
    name.textContent = "/" + skill.name;
    li.append(name);
    if (skill.hint) {
      const hint = document.createElement("span");
      hint.className = "option-hint";
      hint.textContent = skill.hint;
      li.append(" ", hint);
    }
    const desc = document.createElement("span");
    desc.className = "option-description";
    desc.textContent = skill.description;
    li.append(desc);
    if (skill.url) {
      // The skill's page (what it is for, who reviewed it, what it may run), in a new tab. Not
      // a link: an option may hold nothing focusable (axe: nested-interactive), so a click on
      // "About" opens it; the keyboard reaches every skill's page from the Skills page.
      const about = document.createElement("span");
      about.className = "option-about";
      about.textContent = "About";
      about.title = `About ${skill.name} (opens its page in a new tab)`;
      about.addEventListener("mousedown", (event) => {
        event.preventDefault();
        event.stopPropagation();
        window.open(skill.url, "_blank", "noopener");
      });
      li.append(about);
    }
    li.addEventListener("mousedown", (event) => {
      event.preventDefault();
      choose(i);
    });
    return li;
  }

  function openMenu() {
    const match = /^\/(\S*)$/.exec(input.value);
    if (!match) return closeMenu();
    const query = match[1].toLowerCase();
    const starts = skills.filter((s) => s.name.toLowerCase().startsWith(query));
    const contains = skills.filter((s) => !s.name.toLowerCase().startsWith(query) && s.name.toLowerCase().includes(query));
    options = starts.concat(contains);
    if (!options.length) return closeMenu();
    menu.replaceChildren(...options.map(option));
    active = 0;
    const wasHidden = menu.hidden;
    menu.hidden = false;
    // Open downwards when there is not enough room above the composer (e.g. an empty conversation).
    menu.classList.toggle("below", input.getBoundingClientRect().top < Math.min(menu.scrollHeight, 260) + 8);
    highlight();
    const count = `${options.length} skill${options.length === 1 ? "" : "s"}`;
    if (wasHidden || menuStatus.dataset.count !== count) {
      menuStatus.dataset.count = count;
      menuStatus.textContent = `${count} match. Up and down arrows choose, Enter takes one, Escape closes.`;
    }
  }

  function choose(i) {
    input.value = `/${options[i].name} `;
    closeMenu();
    input.focus();
  }

  input.addEventListener("input", openMenu);
  input.addEventListener("blur", (event) => {
    if (menu.contains(event.relatedTarget)) return; // into the menu's list: it stays open
    // Closed a moment later, unless focus came back meanwhile (a quick Tab away and back, then
    // "/", must not find its new menu closed by this old blur).
    setTimeout(() => {
      if (document.activeElement !== input && !menu.contains(document.activeElement)) closeMenu();
    }, 150);
  });
  input.addEventListener("keydown", (event) => {
    if (event.isComposing) return;
    if (!menu.hidden && options.length && menuKeys(event)) return;
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      if (input.value.trim()) form.requestSubmit();
    }
  });

  window.scrollTo(0, document.body.scrollHeight);

  // -- the sidebar: collapsible on a wide screen (remembered), a drawer on a phone -------------

  function setUpSidebar() {
    const sidebar = document.getElementById("sidebar");
    if (!sidebar) return;
    const phone = window.matchMedia("(max-width: 760px)");
    const backdrop = document.querySelector(".sidebar-backdrop");
    const key = "skillscope-sidebar";
    const body = document.body;
    let stored = null;
    try {
      stored = localStorage.getItem(key);
    } catch (_err) {
      stored = null;
    }
    body.classList.toggle("sidebar-collapsed", stored === "collapsed");

    function isOpen() {
      return phone.matches ? body.classList.contains("sidebar-open") : !body.classList.contains("sidebar-collapsed");
    }

    const toggle = document.querySelector(".chat-head .sidebar-toggle");
    // While the drawer is open on a phone, the page behind it is inert: Tab stays in the drawer.
    const behind = [document.querySelector(".topbar"), document.getElementById("chat"), document.querySelector(".skip-links")];

    function sync() {
      const open = isOpen();
      document.querySelectorAll("button[data-sidebar-toggle]").forEach((b) => b.setAttribute("aria-expanded", String(open)));
      const drawer = phone.matches && open;
      if (backdrop) backdrop.hidden = !drawer;
      behind.forEach((element) => element?.toggleAttribute("inert", drawer));
    }

    function closeDrawer() {
      body.classList.remove("sidebar-open");
      sync();
      toggle?.focus();
    }

    document.addEventListener("keydown", (event) => {
      if (!phone.matches || !body.classList.contains("sidebar-open")) return;
      if (event.key === "Escape") {
        event.preventDefault();
        closeDrawer();
      } else if (event.key === "Tab") {
        // Round and round inside the drawer (the page behind is inert, the browser's bar is not).
        const stops = [...sidebar.querySelectorAll("a[href], button, input, select, textarea")].filter(
          (el) => !el.disabled && el.offsetParent !== null,
        );
        if (!stops.length) return;
        const first = stops[0];
        const last = stops[stops.length - 1];
        if (event.shiftKey && document.activeElement === first) {
          event.preventDefault();
          last.focus();
        } else if (!event.shiftKey && document.activeElement === last) {
          event.preventDefault();
          first.focus();
        }
      }
    });

    document.querySelectorAll("[data-sidebar-toggle]").forEach((control) => {
      control.addEventListener("click", () => {
        if (phone.matches) {
          if (body.classList.contains("sidebar-open")) {
            closeDrawer();
            return;
          }
          body.classList.add("sidebar-open");
          sync();
          sidebar.querySelector("input[type=search]")?.focus();
          return;
        } else {
          const collapsed = body.classList.toggle("sidebar-collapsed");
          try {
            localStorage.setItem(key, collapsed ? "collapsed" : "open");
          } catch (_err) {
            // not remembered, still toggled
          }
        }
        sync();
      });
    });
    phone.addEventListener("change", () => {
      body.classList.remove("sidebar-open");
      sync();
    });
    sync();
  }
  // Versions of a regenerated answer: every version is on the page, the newest shown. "‹"/"›" on a
  // version's footer shows the one before or after it; focus stays on the control.
  function setUpVersions() {
    document.addEventListener("click", (event) => {
      const step = event.target.closest?.(".version-step");
      if (!step || step.disabled) return;
      const row = step.closest(".row[data-answer]");
      if (!row) return;
      const answer = row.dataset.answer;
      const wanted = Number(row.dataset.version) + Number(step.dataset.step);
      const rows = [...document.querySelectorAll(".row[data-answer]")].filter((r) => r.dataset.answer === answer);
      if (!rows.some((r) => Number(r.dataset.version) === wanted)) return;
      for (const r of rows) r.classList.toggle("version-hidden", Number(r.dataset.version) !== wanted);
      const shown = rows.filter((r) => Number(r.dataset.version) === wanted && r.querySelector(".versions"));
      const control = shown.length ? shown[shown.length - 1].querySelector(".versions") : null;
      // Counted from the page: a version rendered before the latest regeneration says "1/2" still.
      const count = Math.max(...rows.map((r) => Number(r.dataset.version)));
      if (control) {
        control.querySelector(".version-count").textContent = `${wanted}/${count}`;
        control.querySelector(".visually-hidden").textContent = `Version ${wanted} of ${count}`;
        control.querySelector('[data-step="-1"]').disabled = wanted <= 1;
        control.querySelector('[data-step="1"]').disabled = wanted >= count;
      }
      const steps = control ? [...control.querySelectorAll(".version-step")] : [];
      const same = steps.find((b) => b.dataset.step === step.dataset.step && !b.disabled);
      (same || steps.find((b) => !b.disabled))?.focus();
    });
  }
})();
