// The theme switch in the Settings menu. The server renders the chosen theme on <html> (no flash on
// load) and the form works without scripts; here a choice applies at once and htmx stores it.
(() => {
  "use strict";

  const SCHEMES = { system: "light dark", light: "light", dark: "dark" };
  const CODE_MEDIA = { system: "(prefers-color-scheme: dark)", light: "not all", dark: "all" };

  function apply(theme) {
    if (!(theme in SCHEMES)) return;
    document.documentElement.dataset.theme = theme;
    document.querySelector('meta[name="color-scheme"]')?.setAttribute("content", SCHEMES[theme]);
    document.getElementById("code-dark")?.setAttribute("media", CODE_MEDIA[theme]);
  }

  function start() {
    for (const form of document.querySelectorAll("form.theme-form")) {
      // Each choice is sent as it is made: the Save button is for pages without scripts.
      form.querySelector(".theme-save")?.setAttribute("hidden", "");
      form.addEventListener("change", (event) => {
        if (event.target.name === "theme") apply(event.target.value);
      });
      form.addEventListener("htmx:afterRequest", (event) => {
        const status = form.querySelector(".theme-status");
        if (!status) return;
        const xhr = event.detail.xhr;
        status.textContent = event.detail.successful
          ? ""
          : `The theme was not saved: ${xhr?.responseText || "the server could not be reached"}`;
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
