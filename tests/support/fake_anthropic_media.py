"""The fake server's rules for image and document blocks, as strict as the Messages API.

An image is base64 (or a URL) with one of four media types, data that decodes, that really is
the declared type, at most 5 MB of base64 and at most 8000 pixels a side; a document is a
base64 PDF (that starts like one) or plain text. Anything else gets the API's kind of 400.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
IMAGE_MAX_BASE64 = 5 * 1024 * 1024
IMAGE_MAX_SIDE = 8000
_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


def validate_media(where: str, block: dict[str, Any]) -> str | None:
    """The API's reason to refuse this image or document block, or None."""
    kind = block.get("type")
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{where}.{kind}.source: Field required"
    if kind == "image":
        return _image(where, source)
    return _document(where, block, source)


def _decode(where: str, data: Any) -> bytes | str:
    if not isinstance(data, str) or not data:
        return f"{where}.data: Field required"
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"{where}.data: Input should be valid base64"


def _image(where: str, source: dict[str, Any]) -> str | None:
    if source.get("type") == "url":
        return (
            None
            if isinstance(source.get("url"), str)
            else f"{where}.image.source.url: Field required"
        )
    if source.get("type") != "base64":
        return f"{where}.image.source.type: Input tag {source.get('type')!r} found using 'type' does not match any of the expected tags: 'base64', 'file', 'url'"
    media = source.get("media_type")
    if media not in IMAGE_MEDIA_TYPES:
        return (
            f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', "
            "'image/png', 'image/gif' or 'image/webp'"
        )
    data = source.get("data")
    if isinstance(data, str) and len(data) > IMAGE_MAX_BASE64:
        return (
            f"{where}.image.source.base64: image exceeds 5 MB maximum: "
            f"{len(data)} bytes > {IMAGE_MAX_BASE64} bytes"
        )
    raw = _decode(f"{where}.image.source.base64", data)
    if isinstance(raw, str):
        return raw
    magic_ok = any(raw.startswith(m) for m in _MAGIC[media]) and (
        media != "image/webp" or raw[8:12] == b"WEBP"
    )
    if not magic_ok:
        return f"{where}.image.source.base64.data: Image does not match the provided media type {media}"
    if media == "image/png" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        if max(width, height) > IMAGE_MAX_SIDE:
            return f"{where}.image.source.base64.data: At least one of the image dimensions exceed max allowed size: {IMAGE_MAX_SIDE} pixels"
    return None


def _document(where: str, block: dict[str, Any], source: dict[str, Any]) -> str | None:
    if "title" in block and not isinstance(block["title"], str):
        return f"{where}.document.title: Input should be a valid string"
    kind = source.get("type")
    if kind == "text":
        if source.get("media_type") != "text/plain":
            return f"{where}.document.source.text.media_type: Input should be 'text/plain'"
        return (
            None
            if isinstance(source.get("data"), str)
            else f"{where}.document.source.text.data: Field required"
        )
    if kind != "base64":
        return f"{where}.document.source.type: Input tag {kind!r} found using 'type' does not match any of the expected tags: 'base64', 'content', 'file', 'text', 'url'"
    if source.get("media_type") != "application/pdf":
        return f"{where}.document.source.base64.media_type: Input should be 'application/pdf'"
    raw = _decode(f"{where}.document.source.base64", source.get("data"))
    if isinstance(raw, str):
        return raw
    if not raw.startswith(b"%PDF-"):
        return "The PDF specified was not valid."
    return None
