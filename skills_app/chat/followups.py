"""What the chat does when a run ends: send the next queued message, then title the conversation.

Subscribers to `RunFinished`, handed to runs by the app's entry point (`skills_app/wiring.py`):
runs call them in the run's own task once the run itself is over, so a stop does not wait for
them and whoever waits for the run (the command line, a test) waits for them too.
"""

from __future__ import annotations

from skills_app.chat import titles
from skills_app.chat.actions import send_queued
from skills_app.core.events import RunFinished


async def send_next_queued(conversation_id: int, finished: RunFinished) -> None:
    """The oldest message queued while the run was busy is sent now."""
    await send_queued(conversation_id)


async def title(conversation_id: int, finished: RunFinished) -> None:
    """A conversation still called "New conversation" gets a title from its first answer."""
    await titles.title_after_answer(conversation_id)


# In this order: the next message starts while the title is being made.
AFTER_RUN = (send_next_queued, title)
