// Attaching files to a chat message: the Attach button, drag-and-drop onto the composer, and
// pasting files. Each file is uploaded at once (saved in the workspace's in/, a pending chip with
// a hidden `attachments` input the composer's ws-send carries); the chip leaves the composer when
// the server shows the sent message with that file. A refused send keeps the chips: the files
// are still pending on the server.
(() => {
  "use strict";
  const box = document.getElementById("attach");
  const form = document.getElementById("composer");
  if (!box || !form) return;

  const list = document.getElementById("attach-list");
  const picker = document.getElementById("attach-input");
  const errorLine = document.getElementById("attach-error");
  const input = document.getElementById("message-input");
  const uploadUrl = box.dataset.uploadUrl;
  let uploading = 0;
  // A real button (Tab reaches it, Enter and Space press it) that opens the file picker.
  document.getElementById("attach-button").addEventListener("click", () => picker.click());
  box.hidden = false;

  function csrf() {
    return form.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  }

  function showError(text) {
    errorLine.textContent = text;
    errorLine.hidden = !text;
  }

  function setBusy(delta) {
    uploading += delta;
    box.dataset.uploading = String(uploading);
    box.classList.toggle("uploading", uploading > 0);
  }

  function chip(file) {
    const li = document.createElement("li");
    li.className = "attachment-chip pending";
    li.dataset.attachmentId = String(file.id);
    li.dataset.url = file.url;
    const name = document.createElement("span");
    name.className = "attachment-name";
    name.textContent = file.name;
    const size = document.createElement("span");
    size.className = "attachment-size muted";
    size.textContent = file.size_text;
    const hidden = document.createElement("input");
    hidden.type = "hidden";
    hidden.name = "attachments";
    hidden.value = String(file.id);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "attachment-remove";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    remove.textContent = "×";
    remove.addEventListener("click", () => removeChip(li));
    li.append(name, " ", size, hidden, remove);
    return li;
  }

  async function upload(files) {
    if (!files || !files.length) return;
    showError("");
    const body = new FormData();
    for (const file of files) body.append("file", file, file.name || "pasted");
    setBusy(1);
    try {
      const response = await fetch(uploadUrl, {
        method: "POST",
        body,
        headers: { "X-CSRFToken": csrf() },
        credentials: "same-origin",
      });
      let data = {};
      try {
        data = await response.json();
      } catch (_err) {
        data = { error: `The upload failed (${response.status}). Try again.` };
      }
      if (!response.ok || data.error) {
        showError(data.error || `The upload failed (${response.status}). Try again.`);
        return;
      }
      for (const file of data.attachments) list.append(chip(file));
    } catch (_err) {
      showError("The upload failed: the server could not be reached. Try again.");
    } finally {
      setBusy(-1);
    }
  }

  async function removeChip(li) {
    const url = `${li.dataset.url}remove/`;
    const response = await fetch(url, {
      method: "POST",
      headers: { "X-CSRFToken": csrf() },
      credentials: "same-origin",
    });
    if (response.ok || response.status === 404) li.remove();
    else showError("That file could not be removed. Try again.");
  }

  picker.addEventListener("change", () => {
    upload([...picker.files]);
    picker.value = "";
  });

  // Drag-and-drop anywhere on the composer.
  form.addEventListener("dragover", (event) => {
    if (![...(event.dataTransfer?.types || [])].includes("Files")) return;
    event.preventDefault();
    form.classList.add("dropping");
  });
  form.addEventListener("dragleave", () => form.classList.remove("dropping"));
  form.addEventListener("drop", (event) => {
    form.classList.remove("dropping");
    if (!event.dataTransfer?.files?.length) return;
    event.preventDefault();
    upload([...event.dataTransfer.files]);
  });

  // Pasted files (a screenshot, a file copied in the file manager); pasted text stays text.
  input.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files || [])];
    if (!files.length) return;
    event.preventDefault();
    upload(files);
  });

  // While a file is still uploading, Send waits: the message must not leave without it. This
  // listener runs (capture, on the document) before htmx's own, and stops the submit there.
  document.addEventListener(
    "submit",
    (event) => {
      if (event.target !== form || uploading === 0) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      showError("Wait until the files have finished uploading, then send.");
    },
    true,
  );

  // A chip leaves the composer once the transcript shows the sent message with its file.
  function clearSent() {
    for (const li of [...list.children]) {
      const url = li.dataset.url;
      if (url && document.querySelector(`#transcript a[href="${CSS.escape(url)}"]`)) li.remove();
    }
  }
  document.body.addEventListener("htmx:oobAfterSwap", clearSent);
  document.body.addEventListener("htmx:wsAfterMessage", clearSent);
})();
