"""Files a person without the inspect permission downloads: checked for hidden skill text first.

A command can copy a staged skill file (or `!` output) into out/, so every workspace download
passes the same filter as the chat. The bytes checked are the bytes served: a command may change
the file right after the check, so a large file is copied to a private spool while it is read,
and the spool is what the response streams.
"""

from __future__ import annotations

import codecs
import io
import tempfile
from collections.abc import Iterable
from typing import BinaryIO

from django.http import FileResponse, HttpResponse
from django.utils.http import content_disposition_header

from skills_app.core.redact import HiddenIndex
from skills_app.visibility import hidden_index

# A file holding hidden text is served redacted up to this size; a larger one is refused.
REDACT_MAX_BYTES = 4 * 1024 * 1024
# Files up to this size are scanned for hidden text; larger ones are refused in a conversation
# that has hidden text (scanning costs about 0.1 s per MB; docs/security.md).
SCAN_MAX_BYTES = 256 * 1024 * 1024
_BLOCK = 1024 * 1024
# The end of one block checked again with the next, so a span across the cut is still found.
_CARRY_CHARS = 64 * 1024


def _refused(reason: str) -> HttpResponse:
    return HttpResponse(reason, status=403, content_type="text/plain; charset=utf-8")


def _holds_hidden(index: HiddenIndex, blocks: Iterable[bytes]) -> bool:
    """Whether the bytes of `blocks`, read as one text, hold a span of hidden text."""
    # surrogateescape: any bytes round-trip, and text inside a binary file is still checked.
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    carry = ""
    for block in _with_end(blocks):
        text = carry + decoder.decode(block, final=not block)
        if index.contains_hidden(text):
            return True
        carry = text[-_CARRY_CHARS:]
    return False


def _with_end(blocks: Iterable[bytes]) -> Iterable[bytes]:
    yield from blocks
    yield b""


def filtered_bytes(conversation_id: int, data: bytes, filename: str) -> HttpResponse | None:
    """A refused or redacted download of `data`; None when it holds no hidden text."""
    index = hidden_index(conversation_id)
    if not index:
        return None
    if len(data) > REDACT_MAX_BYTES:
        blocks = [data[i : i + _BLOCK] for i in range(0, len(data), _BLOCK)]
        return _too_large_with_hidden() if _holds_hidden(index, blocks) else None
    text = data.decode("utf-8", "surrogateescape")
    if not index.contains_hidden(text):
        return None
    body = index.redact(text).encode("utf-8", "surrogateescape")
    response = HttpResponse(body, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, filename) or "attachment"
    return response


def _too_large_with_hidden() -> HttpResponse:
    return _refused(
        f"This file holds hidden skill text and is larger than {REDACT_MAX_BYTES // (1024 * 1024)}"
        " MB, too large to serve with that text withheld. Ask someone with the inspect "
        "permission for it, or have the model write a smaller file."
    )


def checked_response(data: bytes | BinaryIO, filename: str) -> FileResponse:
    """Bytes already read and checked (or a spool of them), served as a download of `filename`."""
    source = io.BytesIO(data) if isinstance(data, bytes) else data
    response = FileResponse(source, as_attachment=True, filename=filename)
    response["X-Content-Type-Options"] = "nosniff"
    return response


def filtered_download(
    conversation_id: int, handle: BinaryIO, filename: str
) -> FileResponse | HttpResponse | None:
    """The download for a person without the inspect permission; None when nothing is hidden.

    Takes ownership of `handle` when it returns a response.
    """
    if not hidden_index(conversation_id):
        return None
    with handle:
        data = handle.read(REDACT_MAX_BYTES + 1)
        if len(data) <= REDACT_MAX_BYTES:
            return filtered_bytes(conversation_id, data, filename) or checked_response(
                data, filename
            )
        # The spool outlives this function: the response streams it and closes it.
        spool = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            refusal = _spooled_scan(conversation_id, data, handle, spool)
        except BaseException:
            spool.close()
            raise
    if refusal is not None:
        spool.close()
        return refusal
    spool.seek(0)
    return checked_response(spool, filename)


def _spooled_scan(
    conversation_id: int, first: bytes, handle: BinaryIO, spool: BinaryIO
) -> HttpResponse | None:
    """Copy the file to `spool` while scanning it; a refusal, or None when it may be served."""
    size = 0

    def blocks() -> Iterable[bytes]:
        nonlocal size
        block = first
        while block:
            size += len(block)
            if size > SCAN_MAX_BYTES:
                raise _TooLarge
            spool.write(block)
            yield block
            block = handle.read(_BLOCK)

    try:
        holds = _holds_hidden(hidden_index(conversation_id), blocks())
    except _TooLarge:
        return _refused(
            f"This file is larger than {SCAN_MAX_BYTES // (1024 * 1024)} MB, too large to check "
            "for hidden skill text. Ask someone with the inspect permission for it, or have the "
            "model write a smaller file."
        )
    return _too_large_with_hidden() if holds else None


class _TooLarge(Exception):
    pass
