"""The `system-prompt` profile's state: loaded skills, selected documents and selected tools.

The design keeps this state in temporary session keys that last for one invocation (the user's
turn); the request processor rebuilds the system prompt from it before every model call. Here
the state is a sequence of hidden rows (`kind="skill_state"`, never sent as messages), so the
request stays a pure function of the stored rows; `skill_state` reads the rows of the current
turn (or of the whole conversation, when the `skill_state` setting says "conversation").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transcript import STATE_KIND, StoredMessage, turn_start


@dataclass(slots=True)
class SkillState:
    """Loaded skills (name -> body), their selected documents and their selected tools."""

    loaded: dict[str, str] = field(default_factory=dict)
    docs: dict[str, dict[str, str]] = field(default_factory=dict)
    tools: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def selected_tools(self) -> set[str]:
        """Every tool a loaded skill selected: the turn's dynamic tool set."""
        return {tool for name in self.loaded for tool in self.tools.get(name, ())}


def current_rows(history: Sequence[StoredMessage], lifetime: str) -> Sequence[StoredMessage]:
    """The rows whose state is still in force: the current turn's, or all of them."""
    if lifetime == "conversation":
        return history
    start = turn_start(history)
    return history[start:] if start is not None else history


def skill_state(history: Sequence[StoredMessage], lifetime: str) -> SkillState:
    """The state in force, rebuilt from the stored state rows."""
    state = SkillState()
    for row in current_rows(history, lifetime):
        # A subagent's own state rows are stored in its parent's conversation too, marked.
        if row.kind != STATE_KIND or row.excluded or row.meta.get("subagent_run"):
            continue
        name = str(row.meta.get("skill", ""))
        op = row.meta.get("op")
        if op == "load":
            state.loaded[name] = row.plain_text
            state.tools[name] = tuple(row.meta.get("tools") or ())
        elif op == "docs":
            state.docs.setdefault(name, {}).update(row.meta.get("docs") or {})
        elif op == "tools":
            state.tools[name] = tuple(row.meta.get("tools") or ())
    return state


def state_message(skill: str, op: str, text: str = "", **meta: Any) -> StoredMessage:
    """A hidden row holding skill state; never sent as a message, merged into the system."""
    return StoredMessage.text(
        "user",
        text or f"{op} {skill}",
        kind=STATE_KIND,
        is_meta=True,
        to_model=False,
        meta={"skill": skill, "op": op, **meta},
    )


def declared_tools(body: str) -> tuple[str, ...]:
    """The tools a skill body declares in a `Tools:` section (one `- name` per line).

    The section starts at a line beginning with "Tools:" (any case) and runs over the bullet
    lines below it; blank lines and `#` comments are skipped, any other line ends it.
    """
    found: list[str] = []
    inside = False
    fenced = False
    for line in body.splitlines():
        text = line.strip()
        if text.startswith("```"):
            fenced = not fenced
            inside = False
            continue
        if fenced:
            continue
        if not inside:
            inside = text.lower().startswith("tools:")
            continue
        if not text or text.startswith("#"):
            continue
        if not text.startswith("-"):
            inside = False
            continue
        name = text[1:].strip().strip("`")
        if name and name not in found:
            found.append(name)
    return tuple(found)
