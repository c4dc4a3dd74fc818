// The share page's "Copy link" button: copies the new link from its read-only field.
(() => {
  "use strict";
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-copy-target]");
    if (!button) return;
    const field = document.getElementById(button.dataset.copyTarget);
    if (!field) return;
    field.select();
    let done = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(field.value);
        done = true;
      } else {
        done = document.execCommand("copy");
      }
    } catch (error) {
      done = false;
    }
    button.textContent = done ? "Copied" : "Select and copy the link";
  });
})();
