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
    """One line per violation and element: rule, impact, the element and what axe says."""
    results = _AXE.run(page, options=OPTIONS)
    found = []
    for violation in results.response["violations"]:
        for node in violation["nodes"]:
            found.append(
                f"{violation['id']} ({violation['impact']}): {' '.join(node['target'])} — "
                f"{node.get('failureSummary', '').splitlines()[-1].strip()}"
            )
    return found
