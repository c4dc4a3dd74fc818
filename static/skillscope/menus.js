// Disclosure menus (<details class="menu">: Rename, Model, Export on the chat page, Rename in the
// list): one open at a time, Escape or a click elsewhere closes the open one, and focus goes into
// a menu when it opens and back to its button when Escape closes it.
(() => {
  "use strict";

  const MENUS = "details.menu";

  function focusInside(menu) {
    const first = menu.querySelector("input:not([type=hidden]), select, textarea, button, a[href]");
    first?.focus();
  }

  document.addEventListener(
    "toggle",
    (event) => {
      const menu = event.target;
      if (!(menu instanceof HTMLDetailsElement) || !menu.matches(MENUS) || !menu.open) return;
      for (const other of document.querySelectorAll(`${MENUS}[open]`)) {
        if (other !== menu) other.open = false;
      }
      // Opened by the keyboard or a click on its button: start where the person will type.
      if (menu.contains(document.activeElement) || document.activeElement === document.body) {
        focusInside(menu);
      }
    },
    true,
  );

  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented) return;
    const open = document.activeElement?.closest?.(`${MENUS}[open]`) || document.querySelector(`${MENUS}[open]`);
    if (!open) return;
    event.preventDefault();
    open.open = false;
    open.querySelector("summary")?.focus();
  });

  document.addEventListener("click", (event) => {
    for (const open of document.querySelectorAll(`${MENUS}[open]`)) {
      if (!open.contains(event.target)) open.open = false;
    }
  });
})();
