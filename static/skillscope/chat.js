// Skillscope chat: one websocket per tab, frames applied in seq order, resume after reconnects.
(() => {
  "use strict";
  const chat = document.getElementById("chat");
  if (!chat) return;

  const transcript = document.getElementById("transcript");
  const form = document.getElementById("composer");
  const input = document.getElementById("message-input");
  const stopButton = document.getElementById("stop-button");
  const statusLine = document.getElementById("connection");
  const menu = document.getElementById("slash-menu");
  const skills = JSON.parse(document.getElementById("skills-data").textContent || "[]");

  let lastSeq = parseInt(chat.dataset.lastSeq || "0", 10) || 0;
  let socket = null;
  let backoff = 500;
  let refused = false;

  // -- DOM helpers ------------------------------------------------------------------------

  function element(html) {
    const template = document.createElement("template");
    template.innerHTML = (html || "").trim();
    return template.content.firstElementChild;
  }

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  }

  function withScroll(change) {
    const stick = nearBottom();
    change();
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  }

  function dropHint() {
    const hint = document.getElementById("empty-hint");
    if (hint) hint.remove();
  }

  // Insert a partial, or replace the element with the same id (replays never duplicate).
  function put(html) {
    const el = element(html);
    if (!el) return;
    const existing = el.id && document.getElementById(el.id);
    if (existing) existing.replaceWith(el);
    else transcript.append(el);
    dropHint();
  }

  function replaceById(id, html) {
    const existing = document.getElementById(id);
    const el = element(html);
    if (existing && el) existing.replaceWith(el);
  }

  function liveBubble(index) {
    let row = transcript.querySelector(`.live[data-index="${index}"]`);
    if (!row) {
      row = element(
        '<div class="row row-assistant live"><div class="bubble assistant"><div class="live-text"></div></div></div>',
      );
      row.dataset.index = String(index);
      transcript.append(row);
      dropHint();
    }
    return row;
  }

  function dropLive() {
    transcript.querySelectorAll(".live").forEach((el) => el.remove());
  }

  function setRunning(running) {
    chat.dataset.running = running ? "true" : "false";
    stopButton.hidden = !running;
  }

  function status(text) {
    statusLine.textContent = text;
  }

  // -- frames from the server ----------------------------------------------------------------

  function apply(frame) {
    if (typeof frame.seq === "number") {
      if (frame.seq <= lastSeq) return;
      lastSeq = frame.seq;
      chat.dataset.lastSeq = String(lastSeq);
    }
    switch (frame.type) {
      case "run.started":
        setRunning(true);
        break;
      case "run.finished":
        setRunning(false);
        dropLive();
        if (frame.html) put(frame.html);
        break;
      case "block.start":
        if (frame.block_type === "text") liveBubble(frame.index);
        else if (frame.block_type === "tool_use") {
          const row = liveBubble(frame.index);
          row.classList.add("live-tool");
          row.querySelector(".live-text").textContent = `Calling ${frame.tool_name}…`;
        }
        break;
      case "text.delta": {
        // textContent, never HTML: the Markdown rendering arrives with the stored message.
        const text = liveBubble(frame.index).querySelector(".live-text");
        text.textContent += frame.text;
        break;
      }
      case "message":
        if (frame.role === "assistant") dropLive();
        if (frame.replaces) {
          const old = document.getElementById(frame.replaces);
          if (old) old.remove();
        }
        put(frame.html);
        break;
      case "tool.result": {
        if (frame.html) replaceById(`tool-result-${frame.tool_use_id}`, frame.html);
        const card = document.getElementById(`tool-${frame.tool_use_id}`);
        if (card) card.classList.toggle("is-error", !!frame.is_error);
        break;
      }
      case "skill.invocation":
        if (frame.html) replaceById(`skill-${frame.tool_use_id}`, frame.html);
        break;
      case "approval.requested":
      case "approval.answered":
        put(frame.html);
        break;
      case "error":
      case "info":
        if (frame.html) put(frame.html);
        else status(frame.message || "");
        break;
      case "resumed":
        status("");
        break;
      default:
        break;
    }
  }

  // -- the socket ------------------------------------------------------------------------------

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + chat.dataset.wsUrl);
    socket.addEventListener("open", () => {
      backoff = 500;
      socket.send(JSON.stringify({ action: "resume", after: lastSeq }));
    });
    socket.addEventListener("message", (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (_err) {
        return;
      }
      withScroll(() => apply(frame));
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4403) {
        refused = true;
        status("This conversation cannot be opened here. Log in again or go back to the list.");
        return;
      }
      status("Connection lost — reconnecting…");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 10000);
    });
  }

  function send(payload) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      status(refused ? "Not connected." : "Not connected yet — reconnecting, try again in a moment.");
      return false;
    }
    socket.send(JSON.stringify(payload));
    return true;
  }

  // -- composer and the / menu ------------------------------------------------------------------

  let options = [];
  let active = -1;

  function closeMenu() {
    menu.hidden = true;
    menu.replaceChildren();
    options = [];
    active = -1;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
  }

  function highlight() {
    [...menu.children].forEach((li, i) => li.setAttribute("aria-selected", i === active ? "true" : "false"));
    if (active >= 0) {
      input.setAttribute("aria-activedescendant", `slash-option-${active}`);
      menu.children[active].scrollIntoView({ block: "nearest" });
    }
  }

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
    menu.hidden = false;
    // Open downwards when there is not enough room above the composer (e.g. an empty conversation).
    menu.classList.toggle("below", input.getBoundingClientRect().top < Math.min(menu.scrollHeight, 260) + 8);
    input.setAttribute("aria-expanded", "true");
    highlight();
  }

  function choose(i) {
    input.value = `/${options[i].name} `;
    closeMenu();
    input.focus();
  }

  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    if (send({ action: "send", text })) {
      input.value = "";
      closeMenu();
    }
  }

  input.addEventListener("input", openMenu);
  input.addEventListener("blur", () => setTimeout(closeMenu, 150));
  input.addEventListener("keydown", (event) => {
    if (event.isComposing) return;
    if (!menu.hidden && options.length) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        const step = event.key === "ArrowDown" ? 1 : -1;
        active = (active + step + options.length) % options.length;
        highlight();
        return;
      }
      if (event.key === "Enter" || event.key === "Tab") {
        event.preventDefault();
        choose(Math.max(active, 0));
        return;
      }
      if (event.key === "Escape") {
        event.preventDefault();
        closeMenu();
        return;
      }
    }
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  stopButton.addEventListener("click", () => send({ action: "stop" }));

  // Retry and approval buttons live in pushed partials, so listen on the transcript.
  transcript.addEventListener("click", (event) => {
    const target = event.target.closest("button");
    if (!target) return;
    if (target.dataset.action === "retry") {
      send({ action: "retry" });
      return;
    }
    if (target.dataset.answer) {
      const box = target.closest(".approval");
      const reason = box.querySelector('input[name="reason"]');
      send({
        action: "approve",
        approval_id: parseInt(box.dataset.approvalId, 10),
        answer: target.dataset.answer,
        reason: reason ? reason.value : "",
      });
    }
  });

  setRunning(chat.dataset.running === "true");
  connect();
  window.scrollTo(0, document.body.scrollHeight);
})();
