"""axe-core (the copy bundled by axe-playwright-python) run over a page as it is, in Chromium."""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

_AXE = Axe()
# WCAG 2.1 A and AA plus axe's best practices: what a person with a screen reader or a keyboard
# trips over. Region rules are kept: everything must sit in a landmark.
OPTIONS: dict[str, Any] = {
    "resultTypes": ["violations"],
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"],
    },
}


def violations(page: Page) -> list[str]:
    """One line per violation and element: rule, impact, the element and what axe says.

    axe's 570 KB script is evaluated once per document, not once per check: several checks of
    one page (its states, its widths) would compile it again each time (a quarter of their cost).
    """
    # At rest: a colour scheme switched or a width changed starts CSS transitions (the Django
    # admin's links fade their colour), and axe would measure the contrast of a colour between two.
    page.evaluate(
        "Promise.all(document.getAnimations()"
        ".filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)"
        ".map(a => a.finished.catch(() => null)))"
    )
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(_AXE.axe_script)
    response = page.evaluate("options => axe.run(document, options)", OPTIONS)
    found = []
    for violation in response["violations"]:
        for node in violation["nodes"]:
            found.append(
                f"{violation['id']} ({violation['impact']}): {' '.join(node['target'])} — "
                f"{node.get('failureSummary', '').splitlines()[-1].strip()}"
            )
    return found
