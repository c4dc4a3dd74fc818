"""Which run and conversation a log record belongs to, carried in context variables.

Plain Python, in the core so that every layer may tag its records (`runs` uses it; the LOGGING
setting installs the filter). The contract for the run code:

    from skills_app.core.logcontext import log_context

    async def execute_run(run_id, ...):
        with log_context(run_id=run_id, conversation_id=conversation_id):
            ...  # every record logged from here carries run_id and conversation_id

Context variables follow the code that runs under them: an asyncio task copies the context it was
created in (so start the run's task, or enter `log_context`, inside the run's own coroutine),
and asgiref's `sync_to_async` carries it into its thread. Leaving the `with` block restores what
was there before, so nested runs (a subagent's run inside its parent's) log their own ids and
the parent's come back afterwards. Records logged elsewhere simply have no ids.

`RunContextFilter` is installed on the log handlers by the LOGGING setting; it copies the ids onto
every record as `record.run_id` / `record.conversation_id` (None when unknown) and a ready-made
`record.log_context` text (" run=5 conversation=3", or "") for the text format.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

_run_id: ContextVar[int | None] = ContextVar("skillscope_run_id", default=None)
_conversation_id: ContextVar[int | None] = ContextVar("skillscope_conversation_id", default=None)


@contextmanager
def log_context(*, run_id: int | None = None, conversation_id: int | None = None) -> Iterator[None]:
    """Tag every record logged inside the block with these ids (None keeps the outer value)."""
    tokens: list[tuple[ContextVar[int | None], Token[int | None]]] = []
    if run_id is not None:
        tokens.append((_run_id, _run_id.set(run_id)))
    if conversation_id is not None:
        tokens.append((_conversation_id, _conversation_id.set(conversation_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current_ids() -> tuple[int | None, int | None]:
    """(run_id, conversation_id) of the code running now; None for each one not known."""
    return _run_id.get(), _conversation_id.get()


class RunContextFilter(logging.Filter):
    """Adds run_id, conversation_id and log_context to every record; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id, conversation_id = current_ids()
        # A record may already carry ids passed with `extra=`; those win over the context.
        run_id = getattr(record, "run_id", None) or run_id
        conversation_id = getattr(record, "conversation_id", None) or conversation_id
        record.run_id = run_id
        record.conversation_id = conversation_id
        parts = []
        if run_id is not None:
            parts.append(f" run={run_id}")
        if conversation_id is not None:
            parts.append(f" conversation={conversation_id}")
        record.log_context = "".join(parts)
        return True
