"""What the chat does when a run ends: title the conversation (runs send the next queued message).

Subscribers to `RunFinished`, handed to runs by the app's entry point (`skills_app/wiring.py`):
runs call them in the run's own task once the run itself is over, so a stop does not wait for
them and whoever waits for the run (the command line, a test) waits for them too.
"""

from __future__ import annotations

from skills_app.chat import titles
from skills_app.core.events import RunFinished


async def title(conversation_id: int, finished: RunFinished) -> None:
    """A conversation still called "New conversation" gets a title from its first answer."""
    await titles.title_after_answer(conversation_id)


AFTER_RUN = (title,)
