"""A summary of a conversation, made by the model, to start a new conversation that carries it.

Only what the user could see goes in: their messages, the model's text answers and which skills
loaded. Hidden rows, tool results and excluded (failed or refused) turns stay out, so the summary
can hold nothing the user was not shown, and a refused message is not sent again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from .events import ModelEvent
from .llm import ModelError, ModelRequest, final_message
from .model_catalog import get_model
from .transcript import StoredMessage, parse_status_message, text_of

SUMMARY_SYSTEM = (
    "You summarise a conversation between a user and an assistant so that it can go on in a new "
    "conversation. Write the summary for the assistant of the new conversation: the user's goal, "
    "what was decided or produced (file names, figures, conclusions), which skills were used, "
    "and what is still open. Be complete but brief; use short paragraphs or bullet points; do not "
    "address the user and do not invent anything that is not in the transcript."
)
SUMMARY_MAX_TOKENS = 4096
# The transcript may take at most this share of the model's context window (4 chars per token).
WINDOW_SHARE = 0.5
DEFAULT_CHAR_LIMIT = 400_000
OMITTED = "(The beginning of the conversation is left out: it was too long to summarise whole.)"


def _line(row: StoredMessage) -> str | None:
    if row.is_meta or row.excluded or row.meta.get("subagent_run"):
        return None
    if row.kind == "skill_status":
        status = parse_status_message(row.plain_text)
        if status is None:
            return None
        args = f" ({status['args']})" if status["args"] else ""
        return f'[The "{status["name"]}" skill was loaded{args}.]'
    text = row.plain_text.strip()
    if not text:
        return None
    if row.meta.get("summary_of"):
        return f"Summary of an earlier conversation:\n{text}"
    if row.role == "user" and row.kind in ("text", "command"):
        return f"User: {text}"
    if row.role == "assistant" and row.kind in ("text", "tool_use"):
        return f"Assistant: {text}"
    return None


def visible_transcript(rows: Sequence[StoredMessage], *, limit_chars: int) -> str:
    """The conversation as the user saw it, as plain text; its end when longer than the limit."""
    lines = [line for line in (_line(row) for row in rows) if line is not None]
    text = "\n\n".join(lines)
    if len(text) <= limit_chars:
        return text
    return OMITTED + "\n\n" + text[len(text) - limit_chars :]


def char_limit(model: str) -> int:
    """How much transcript a summary request may carry for this model."""
    info = get_model(model)
    if info is None:
        return DEFAULT_CHAR_LIMIT
    return min(DEFAULT_CHAR_LIMIT * 4, int(info.context_window * 4 * WINDOW_SHARE))


def summary_request(rows: Sequence[StoredMessage], *, model: str, title: str) -> ModelRequest:
    """The model call that summarises the visible part of a conversation."""
    transcript = visible_transcript(rows, limit_chars=char_limit(model))
    prompt = (
        f'Summarise the conversation "{title}" below, between <transcript> tags.\n\n'
        f"<transcript>\n{transcript or '(empty)'}\n</transcript>"
    )
    return ModelRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        tools=[],
        messages=[{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        max_tokens=SUMMARY_MAX_TOKENS,
        thinking=False,
        cache=False,
    )


async def summarise(events: AsyncIterator[ModelEvent]) -> tuple[str, dict[str, object]]:
    """The summary's text and the model's final message, from the stream of a `summary_request`;
    ModelError when there is no summary."""
    final = await final_message(events)
    content = final.get("content")
    blocks = content if isinstance(content, list) else []
    text = text_of(blocks, sep="\n\n").strip()
    if final.get("stop_reason") == "refusal" or not text:
        raise ModelError(
            "no_summary",
            "The model gave no summary of this conversation. Try again, or start a new "
            "conversation and paste what matters into it.",
        )
    return text, final


def demo_summary(request: ModelRequest) -> str:
    """The offline demo model's summary: a fixed digest of the transcript, not an understanding."""
    prompt = "".join(
        str(b.get("text", ""))
        for m in request.messages
        for b in m.get("content", [])
        if isinstance(b, dict)
    )
    transcript = prompt.partition("<transcript>\n")[2].rpartition("\n</transcript>")[0]
    said = [p[len("User: ") :] for p in transcript.split("\n\n") if p.startswith("User: ")]
    skills = [p for p in transcript.split("\n\n") if p.startswith("[The ")]
    lines = [
        "Summary by the offline demo model (it lists, it does not understand):",
        f"- The user wrote {len(said)} message{'s' if len(said) != 1 else ''}.",
    ]
    if said:
        lines.append(f"- First message: “{_short(said[0])}”")
        lines.append(f"- Last message: “{_short(said[-1])}”")
    if skills:
        lines.append(f"- Skills used: {len(skills)} load{'s' if len(skills) != 1 else ''}.")
    return "\n".join(lines)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 120 else flat[:117].rstrip() + "..."
