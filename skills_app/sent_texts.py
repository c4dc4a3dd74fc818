"""Another person's data, as an MCP call may not carry it: the fingerprints of what each person
sent.

What a person typed (their messages, slash commands included) and the text files they attached
are theirs. Each is fingerprinted when it is stored (`core.fingerprints`: hashes only, no text),
and an `mcp__` call's arguments are fingerprinted the same way before the call leaves
(`skills_app.mcp.filter`). A string in them that shares a span of `fingerprints.SPAN`
characters or more (always found from `GUARANTEED`) with something another person sent, and that
the caller did not send too, holds another person's words: the call is refused. Their own words
never count against them, whoever else wrote the same (a licence text both pasted), which also
keeps the refusal from telling anyone what others wrote: text a person typed is never refused.

Not fingerprinted: the model's answers and tool results (public text both people's tools fetched
would count as someone's), binary files (PDFs, images), past FILE_MAX_CHARS of a file, and what
was sent before this check existed except messages (the migration fingerprints those).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from skills_app.core.fingerprints import all_fingerprints, fingerprints
from skills_app.models import SentTextFingerprint

FILE_MAX_CHARS = 1_000_000
# Hashes per query (SQLite's bound on parameters is far above it).
BATCH = 500
WITHHELD = "[another person's words withheld: {count:,} characters]"


def remember(owner_id: int, texts: Iterable[str]) -> None:
    """Keep the fingerprints of what this person sent."""
    prints = all_fingerprints(text[:FILE_MAX_CHARS] for text in texts)
    SentTextFingerprint.objects.bulk_create(
        [SentTextFingerprint(owner_id=owner_id, hash=h) for h in prints],
        ignore_conflicts=True,
        batch_size=BATCH,
    )


def file_text(data: bytes) -> str | None:
    """An attached file's text as it is fingerprinted; None for a binary file."""
    if b"\0" in data[:8192]:
        return None
    return data[: FILE_MAX_CHARS * 4].decode("utf-8", "replace")


def others_words(user_id: int, value: Any) -> set[str]:
    """The strings in `value` that hold words another person sent and this person did not."""
    prints = {text: fingerprints(text) for text in _strings(value)}
    wanted = sorted(set().union(*prints.values())) if prints else []
    owners: dict[int, set[bool]] = {}
    for first in range(0, len(wanted), BATCH):
        rows = SentTextFingerprint.objects.filter(hash__in=wanted[first : first + BATCH])
        for h, owner_id in rows.values_list("hash", "owner_id"):
            owners.setdefault(h, set()).add(owner_id == user_id)
    foreign = {h for h, own in owners.items() if True not in own}
    return {text for text, found in prints.items() if found & foreign}


def withhold(value: Any, texts: set[str]) -> Any:
    """`value` with each of `texts` replaced by a note of its length (what a record keeps)."""
    if isinstance(value, str):
        return WITHHELD.format(count=len(value)) if value in texts else value
    if isinstance(value, dict):
        return {k: withhold(v, texts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [withhold(v, texts) for v in value]
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
