"""The files an upload request carries: a .zip/.skill file, or a folder's files with their paths,
read within the upload limit (the personal upload and the upload for everyone)."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from skills_app.registry import uploads


def read_upload(upload: UploadedFile) -> bytes:
    """The bytes of one uploaded file, refused when it is over the upload limit."""
    limit = settings.UPLOAD_MAX_TOTAL_BYTES
    if upload.size is not None and upload.size > limit:
        raise uploads.UploadError(
            f"{upload.name} is {upload.size / 1048576:.1f} MB; an upload may be at most "
            f"{limit / 1048576:.1f} MB"
        )
    data: bytes = upload.read(limit + 1)  # Django's File.read is untyped
    return data


def folder_files(files: list[UploadedFile], paths_json: str) -> list[uploads.UploadFile]:
    """Pair each file with its relative path (sent by the page's script: Django drops folders)."""
    try:
        paths = json.loads(paths_json) if paths_json else None
    except ValueError:
        paths = None
    if not isinstance(paths, list) or len(paths) != len(files):
        raise uploads.UploadError(
            "the folder's file paths did not arrive (the page needs JavaScript for folder "
            "uploads); zip the folder and upload the zip instead"
        )
    total = 0
    out: list[uploads.UploadFile] = []
    for path, upload in zip(paths, files, strict=True):
        data = read_upload(upload)
        total += len(data)
        if total > settings.UPLOAD_MAX_TOTAL_BYTES:
            raise uploads.UploadError(
                f"the folder is larger than {settings.UPLOAD_MAX_TOTAL_BYTES / 1048576:.1f} MB; "
                "make the skill smaller"
            )
        out.append(uploads.UploadFile(str(path), data))
    return out
