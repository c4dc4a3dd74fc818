"""Database chores the multi-process test runs in a child process against its PostgreSQL.

The test process's own Django talks to the pytest database, so anything that must read or write
the deployment's database runs here: in the deployment's `DjangoHost` (`Deployment.db_tool`,
one process with Django set up for all of a test's calls), or as `python -m
tests.multiprocess.db_tool COMMAND ...`, printing JSON on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def setup_user(username: str) -> dict[str, Any]:
    """An ordinary user, a conversation of theirs, and a logged-in session cookie."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from skills_app.models import Conversation

    user = get_user_model().objects.create_user(username, password=f"{username}-pass-123")
    conversation = Conversation.objects.create(owner=user, title="Across processes")
    client = Client()
    client.force_login(user)
    return {"conversation": conversation.pk, "session": client.cookies["sessionid"].value}


def state(conversation_id: int) -> dict[str, Any]:
    """The runs, the stored rows, and the request the next user message would produce."""
    from skills_app.models import Conversation, Run, RunEvent
    from skills_app.runs import agent_setup

    conversation = Conversation.objects.get(pk=conversation_id)
    runs = list(
        Run.objects.filter(conversation=conversation)
        .order_by("pk")
        .values("pk", "status", "worker", "channel", "error_kind", "started_at", "claimed_at")
    )
    from skills_app.core.transcript import text_of

    rows = [
        {
            "role": r.role,
            "kind": r.kind,
            "to_model": r.to_model,
            "meta": r.meta,
            "text": text_of(r.content),
        }
        for r in conversation.messages.order_by("seq")
    ]
    # What the model gets after the user's next message (a Retry, say): that message is merged
    # into a trailing user turn, exactly as the stored rows would be.
    request = agent_setup.build_request(conversation).as_kwargs()
    messages = request["messages"]
    follow_up = {"type": "text", "text": "and now?"}
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"] = [*messages[-1]["content"], follow_up]
    else:
        messages.append({"role": "user", "content": [follow_up]})
    seqs = list(RunEvent.objects.filter(conversation=conversation).values_list("seq", flat=True))
    return {"runs": runs, "rows": rows, "request": request, "event_seqs": sorted(seqs)}


def seed(conversation_id: int) -> dict[str, Any]:
    """A finished exchange in the conversation: the user's message, a run, its answer, events."""
    from django.utils import timezone

    from skills_app.core.transcript import StoredMessage
    from skills_app.models import Conversation, Run
    from skills_app.runs import eventlog, store

    conversation = Conversation.objects.get(pk=conversation_id)
    texts = [
        "Summarise the quarterly figures, please.",
        "Revenue grew 12 % and costs 4 %; the margin is 31 % (ünïcode kept).",
    ]
    run = Run.objects.create(
        conversation=conversation,
        status=Run.DONE,
        started_by_id=conversation.owner_id,
        finished_at=timezone.now(),
    )
    for role, text in zip(("user", "assistant"), texts, strict=True):
        row = store.append_message(conversation.pk, StoredMessage.text(role, text), run_id=run.pk)
        eventlog.append_event(
            conversation.pk, "message", eventlog.message_event(row), run_id=run.pk
        )
    eventlog.append_event(
        conversation.pk, "run.finished", {"run_id": run.pk, "status": "done"}, run_id=run.pk
    )
    return {"texts": texts, "run": run.pk}


def hammer(username: str, writers: int, count: int) -> dict[str, Any]:
    """Append events and messages to a new conversation from several connections at once."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from skills_app.core.transcript import StoredMessage
    from skills_app.models import Conversation, Message, RunEvent
    from skills_app.runs import eventlog, store

    owner = get_user_model().objects.create_user(username)
    conversation_id = Conversation.objects.create(owner=owner).pk
    connection.close()  # the writers open their own

    start = threading.Barrier(writers)

    def write(writer: int) -> None:
        # Each thread has its own database connection: real concurrent transactions.
        try:
            start.wait(timeout=30)
            for i in range(count):
                eventlog.append_event(
                    conversation_id, "text.delta", {"index": 0, "text": f"{writer}:{i}"}
                )
                if i % 5 == 0:
                    store.append_message(
                        conversation_id, StoredMessage.text("user", f"{writer}:{i}")
                    )
        finally:
            connection.close()

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(write, range(writers)))
    return {
        "event_seqs": sorted(
            RunEvent.objects.filter(conversation_id=conversation_id).values_list("seq", flat=True)
        ),
        "message_seqs": sorted(
            Message.objects.filter(conversation_id=conversation_id).values_list("seq", flat=True)
        ),
    }


def claim_race(username: str, claimers: int, count: int) -> dict[str, Any]:
    """Queue `count` runs, then let `claimers` connections claim them in rounds, two at a time."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from skills_app.models import Conversation, Run
    from skills_app.runs import queue

    owner = get_user_model().objects.create_user(username)
    for i in range(count):
        conversation = Conversation.objects.create(owner=owner, title=f"queued {i}")
        Run.objects.create(conversation=conversation, status=Run.QUEUED, started_by=owner)
    connection.close()
    # Every round, all claimers ask at the same moment: they really compete for the same rows.
    rounds = count // 2
    together = threading.Barrier(claimers)

    def claim(claimer: int) -> list[int]:
        taken: list[int] = []
        try:
            for _ in range(rounds):
                together.wait(timeout=30)
                batch = queue.claim(worker=f"claimer {claimer}", channel="", limit=2)
                taken.extend(c.run_id for c in batch)
        finally:
            connection.close()
        return taken

    with ThreadPoolExecutor(claimers) as pool:
        per_claimer = list(pool.map(claim, range(claimers)))
    return {
        "per_claimer": per_claimer,
        "queued_left": Run.objects.filter(status=Run.QUEUED).count(),
    }


def deactivate(username: str) -> dict[str, Any]:
    """Deactivate a user, as an administrator's save does (the model's signals fire here)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username=username)
    user.is_active = False
    user.save()
    return {"user": user.pk, "active": user.is_active}


def run(argv: list[str]) -> dict[str, Any]:
    """One command (Django already set up): its JSON-able answer."""
    command, *args = argv
    if command == "setup":
        return setup_user(args[0])
    if command == "state":
        return state(int(args[0]))
    if command == "seed":
        return seed(int(args[0]))
    if command == "hammer":
        return hammer(args[0], int(args[1]), int(args[2]))
    if command == "claim_race":
        return claim_race(args[0], int(args[1]), int(args[2]))
    if command == "deactivate":
        return deactivate(args[0])
    raise SystemExit(
        f"unknown command {command!r}: use setup, state, seed, hammer, claim_race or deactivate"
    )


def main(argv: list[str]) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    json.dump(run(argv), sys.stdout, default=str)


if __name__ == "__main__":
    main(sys.argv[1:])
