"""Who may see hidden content: the one permission and the checks built on it."""

from __future__ import annotations

from typing import Any

# Holders see injected skill text, hidden messages and dynamic-context output; nobody else does.
INSPECT_PERMISSION = "skills_app.inspect_injected_content"
# Holders may run commands when no sandbox is available (SANDBOX=none, or auto without bwrap).
UNSANDBOXED_PERMISSION = "skills_app.run_unsandboxed_commands"


def can_inspect(user: Any) -> bool:
    """True when this user may see hidden content."""
    return bool(user is not None and user.is_authenticated and user.has_perm(INSPECT_PERMISSION))
