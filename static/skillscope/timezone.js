// Times in the person's own time zone. The server renders pages in the zone it has stored for
// them (body data-time-zone); this script tells it the browser's zone when they differ, and
// shows every <time data-local> (live fragments are rendered once for all tabs, in UTC) in the
// same zone as the page, so a reloaded page and a live fragment say the same time.
(() => {
  "use strict";
  const body = document.body;

  function zone() {
    return body.dataset.timeZone || "UTC";
  }

  function format(element) {
    const at = new Date(element.getAttribute("datetime"));
    if (Number.isNaN(at.getTime())) return;
    const options = { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZone: zone() };
    if (element.dataset.local === "datetime") Object.assign(options, { year: "numeric", month: "2-digit", day: "2-digit" });
    let parts;
    try {
      parts = Object.fromEntries(new Intl.DateTimeFormat("en-GB", options).formatToParts(at).map((p) => [p.type, p.value]));
    } catch (_err) {
      return; // a zone this browser does not know: the server's text stays
    }
    const time = `${parts.hour}:${parts.minute}`;
    element.textContent = element.dataset.local === "datetime" ? `${parts.year}-${parts.month}-${parts.day} ${time}` : time;
    element.title = zone();
  }

  function localise(root) {
    if (root.matches?.("time[data-local]")) format(root);
    root.querySelectorAll?.("time[data-local]").forEach(format);
  }

  new MutationObserver((mutations) => {
    for (const mutation of mutations) mutation.addedNodes.forEach((node) => node.nodeType === 1 && localise(node));
  }).observe(body, { childList: true, subtree: true });
  localise(document);

  const url = body.dataset.timeZoneUrl;
  let browserZone = "";
  try {
    browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (_err) {
    browserZone = "";
  }
  if (!url || !browserZone || browserZone === zone()) return;
  let token = "";
  try {
    token = JSON.parse(body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  } catch (_err) {
    token = "";
  }
  fetch(url, {
    method: "POST",
    body: new URLSearchParams({ time_zone: browserZone }),
    headers: { "X-CSRFToken": token },
    credentials: "same-origin",
  }).then((response) => {
    if (!response.ok) return; // refused (a zone the server does not know): times stay as they are
    body.dataset.timeZone = browserZone;
    localise(document);
  });
})();
