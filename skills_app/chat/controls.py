"""Markup of our own that frames the transcript: the run's controls, the live area, the title.

The same for every viewer (nothing in it comes from a conversation's content except the title,
which is made from visible text only: `chat.titles`), so it needs no visibility filter.
"""

from __future__ import annotations

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

# Where a form of a shared fragment takes the viewer's CSRF token. Fragments are rendered once for
# every tab (no request, no token); the chat page puts the token in on page load
# (`with_csrf`), which is when a page without JavaScript uses these forms as plain POSTs. Over
# the websocket the forms are sent by htmx and need none. Text from a conversation is escaped
# before it reaches the HTML, so only our templates can write this comment.
CSRF_SLOT = mark_safe("<!--csrf-->")


def with_csrf(html: str, token: str) -> SafeString:
    """A fragment with the viewer's CSRF token in each of its forms."""
    field = f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
    return mark_safe(html.replace(CSRF_SLOT, field))


def stop_button(status: str) -> str:
    """The Stop button, shown while a run is active (replaced whole on run.started/finished).

    It carries the run's status (queued, running, done, stopped, failed, interrupted) for whoever
    watches; a queued run can be stopped before a worker takes it.
    """
    running = status in {"running", "queued"}
    context = {"running": running, "status": status, "oob": True}
    return render_to_string("skills_app/chat/_stop_button.html", context)


def queued_notice(run_id: int) -> str:
    """ "Waiting for a worker": shown from `run.queued` until the run starts or ends."""
    return render_to_string("skills_app/chat/_run_queued.html", {"run_id": run_id})


def queued_notice_gone(run_id: int) -> str:
    """Takes the place of the run's waiting notice, when the tab shows one (an update)."""
    return f'<div id="run-queued-{run_id}" hidden></div>'


def live_area() -> str:
    """The live area emptied: the streamed text became a stored row, or the run ended."""
    return '<div id="live" class="live-area" hx-swap-oob="innerHTML"></div>'


def title_html(conversation_id: int, title: str) -> str:
    """The new title for the chat header and the sidebar (updates of elements the tab may have)."""
    return render_to_string(
        "skills_app/chat/_title.html", {"conversation_id": conversation_id, "title": title}
    )
