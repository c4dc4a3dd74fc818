"""Files a person attaches to a message: names, kinds, limits, and what the model is given.

An attachment is saved under the conversation workspace's `in/` folder (`Workspace.save_input`)
and the model is told its path there, so the ordinary tools (and skill scripts) can read it.
Images and PDFs are also sent as content blocks of the Messages API, within the API's own
limits, so a model that reads them directly does not need a tool.

Everything here is pure: the Django side stores rows and files, this module decides.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, BinaryIO

MAX_NAME_CHARS = 120

# The Messages API: an image's base64 data may be at most 5 MB; a PDF rides in a request of at
# most 32 MB. A larger file is still attached (the tools read it); it is only not sent inline.
IMAGE_BLOCK_MAX_BASE64 = 5 * 1024 * 1024
DOCUMENT_BLOCK_MAX_BASE64 = 24 * 1024 * 1024

IMAGE_TYPES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),  # and "WEBP" at offset 8, checked in `sniff`
}
PDF_TYPE = "application/pdf"

_EXTENSION_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": PDF_TYPE,
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".csv": "text/csv",
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".json": "application/json",
}
# Letters, digits, "_", "." and "-" only: a path the model pastes into a shell needs no quoting.
_UNSAFE = re.compile(r"[^\w.-]")
_SPACES = re.compile(r"\s+")


class AttachmentError(Exception):
    """A file that cannot be attached; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How much may be attached: per file, per message, and pending in one conversation."""

    max_file_bytes: int
    max_files: int


@dataclass(frozen=True, slots=True)
class AttachedFile:
    """One saved attachment as the model and the chat see it."""

    name: str  # the sanitised file name (what the chip shows)
    path: str  # workspace-relative, e.g. "in/report.pdf"
    media_type: str
    size: int


def safe_name(given: str) -> str:
    """A file name safe to create in `in/`: no folders, no dots first, no control characters.

    The browser sends whatever name it likes ("../../etc/passwd", "skills/pdf/SKILL.md",
    "\u202eexe.pdf"): only its last component survives, reduced to letters, digits, "_", "."
    and "-", so the file always lands directly in in/ and its path is safe in a shell.
    """
    if not isinstance(given, str):
        given = ""
    # Both separators: a Windows browser may send "C:\\Users\\me\\a.pdf".
    last = re.split(r"[\\/]", given)[-1]
    last = unicodedata.normalize("NFKC", last)
    # Control and format characters (e.g. right-to-left overrides) would disguise the extension.
    last = "".join(ch for ch in last if unicodedata.category(ch)[0] != "C")
    last = _UNSAFE.sub("_", _SPACES.sub(" ", last).strip()).strip("._")
    stem, dot, ext = last.rpartition(".")
    if not dot:
        stem, ext = last, ""
    ext = ext[:16]
    stem = stem[: MAX_NAME_CHARS - len(ext) - 1].strip("._")
    if not stem:
        stem = "attachment"
    return f"{stem}.{ext}" if ext else stem


def media_type(name: str, head: bytes) -> str:
    """The media type of a file from its name, checked against its first bytes for images/PDFs.

    AttachmentError when a name promises an image or a PDF that the bytes are not: the model
    would be sent a block the API refuses, and the person learns early what is wrong.
    """
    suffix = PurePosixPath(name).suffix.lower()
    declared = _EXTENSION_TYPES.get(suffix, "application/octet-stream")
    found = sniff(head)
    if declared in IMAGE_TYPES or declared == PDF_TYPE:
        if found != declared:
            kind = "a PDF" if declared == PDF_TYPE else f"a {suffix[1:].upper()} image"
            raise AttachmentError(
                f"{name} is named like {kind} but its content is not one. Attach the real "
                "file, or rename it to what it is."
            )
        return declared
    # A PNG named "notes.txt" is still an image: the content decides what the model is sent.
    return found or declared


def sniff(head: bytes) -> str | None:
    """The image or PDF type the first bytes show, or None."""
    if head.startswith(b"%PDF-"):
        return PDF_TYPE
    for kind, magics in IMAGE_TYPES.items():
        if any(head.startswith(magic) for magic in magics):
            if kind == "image/webp" and head[8:12] != b"WEBP":
                continue
            return kind
    return None


def check_limits(sizes: list[int], limits: Limits, *, pending: int = 0) -> None:
    """AttachmentError when these files (plus `pending` already waiting) break a limit."""
    if pending + len(sizes) > limits.max_files:
        raise AttachmentError(
            f"At most {limits.max_files} files can be attached to one message "
            f"({pending} already attached). Send this message first, or remove a file."
        )
    for size in sizes:
        if size > limits.max_file_bytes:
            raise AttachmentError(
                f"That file is {human_size(size)}; the limit is "
                f"{human_size(limits.max_file_bytes)} per file. Attach a smaller file "
                "(compress it, or split it)."
            )
        if size == 0:
            raise AttachmentError("That file is empty; there is nothing to attach.")


def attached_bytes(handle: BinaryIO, size: int, sha256: str) -> bytes | None:
    """The file's bytes when it is still the file attached (`size` bytes, that digest); or None.

    The size comes first, from the descriptor: a command can grow an attachment to terabytes
    (a sparse file costs it nothing), and a check that read it whole would keep a request
    reading for as long as that takes. At most `size` bytes are read (the upload's limit), and
    they are what the caller serves: the file may change again right after.
    """
    if os.fstat(handle.fileno()).st_size != size:
        return None
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = handle.read(min(left, _CHUNK))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    return data if hashlib.sha256(data).hexdigest() == sha256 else None


_CHUNK = 1024 * 1024


def human_size(size: int) -> str:
    """12 KB, 3.4 MB: sizes as people read them."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def model_note(files: list[AttachedFile]) -> str:
    """The text block that tells the model where the attached files are."""
    lines = [ATTACHED_HEADER]
    for f in files:
        lines.append(f"- {f.path} ({f.media_type}, {human_size(f.size)})")
    lines.append(
        "These paths are relative to the workspace root (the folder the tools start in). "
        "Use them as the input files; do not assume other file names."
    )
    return "\n".join(lines)


ATTACHED_HEADER = "The user attached these files, saved in the workspace:"
_NOTE_LINE = re.compile(r"^- (?P<path>in/\S+) \(")


def paths_in_note(text: str) -> list[str]:
    """The attachment paths a `model_note` lists (what the demo model uses as its inputs)."""
    if not text.startswith(ATTACHED_HEADER):
        return []
    return [m["path"] for line in text.splitlines() if (m := _NOTE_LINE.match(line))]


def content_block(file: AttachedFile, data: bytes) -> dict[str, Any] | None:
    """An image or document block for the Messages API, or None when it is not sent inline."""
    encoded_len = 4 * ((len(data) + 2) // 3)
    if file.media_type in IMAGE_TYPES and encoded_len <= IMAGE_BLOCK_MAX_BASE64:
        kind = "image"
    elif file.media_type == PDF_TYPE and encoded_len <= DOCUMENT_BLOCK_MAX_BASE64:
        kind = "document"
    else:
        return None
    block: dict[str, Any] = {
        "type": kind,
        "source": {
            "type": "base64",
            "media_type": file.media_type,
            "data": base64.b64encode(data).decode("ascii"),
        },
    }
    if kind == "document":
        block["title"] = file.name
    return block
