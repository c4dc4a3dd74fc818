"""The four ways a skill folder reaches Skillscope, driven as a person would: a zip in the admin,
a folder in the admin's picker, a folder on the Skills page, and `manage.py skills import`."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from skills_app.models import SkillPackage, SkillVersion

WAYS = ("admin-zip", "admin-folder", "skills-page-folder", "import-command")


def folder_files(folder: Path) -> list[tuple[str, bytes]]:
    """(relative path starting with the folder's name, bytes) for every file, as a browser sends."""
    return [
        (f"{folder.name}/{path.relative_to(folder).as_posix()}", path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


def zipped(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in folder_files(folder):
            archive.writestr(name, data)
    return buffer.getvalue()


def _text(response) -> str:
    """The page's words (for failure messages)."""
    html = response.content.decode(errors="replace")
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))[:3000]


def _uploads(files: list[tuple[str, bytes]]) -> list[SimpleUploadedFile]:
    # Browsers send only the base name; the relative path travels separately.
    return [SimpleUploadedFile(Path(name).name, data) for name, data in files]


def upload(way: str, folder: Path, *, admin: Client, user: Client) -> SkillVersion:
    """Upload `folder` one way; the installed version, or AssertionError with what the page said."""
    name = folder.name
    if way == "admin-zip":
        archive = SimpleUploadedFile(f"{name}.zip", zipped(folder), content_type="application/zip")
        response = admin.post(reverse("admin:skills_app_skillpackage_upload"), {"archive": archive})
        owner = None
    elif way == "admin-folder":
        files = folder_files(folder)
        response = admin.post(
            reverse("admin:skills_app_skillpackage_upload"),
            {"folder": _uploads(files), "folder_paths": "\n".join(n for n, _ in files)},
        )
        owner = None
    elif way == "skills-page-folder":
        files = folder_files(folder)
        response = user.post(
            reverse("skills-upload"),
            {"folder": _uploads(files), "paths": json.dumps([n for n, _ in files])},
        )
        owner = response.wsgi_request.user
    elif way == "import-command":
        out = io.StringIO()
        call_command("skills", "import", str(folder), stdout=out, stderr=out)
        package = SkillPackage.objects.get(name=name, owner=None)
        return package.versions.order_by("-number").first()
    else:
        raise ValueError(way)
    package = SkillPackage.objects.filter(name=name, owner=owner).first()
    # An organisation upload is a draft (it waits for its review); a personal one is active.
    version = package.versions.order_by("-number").first() if package is not None else None
    assert version is not None, (
        f"{way}: {name} was not installed ({response.status_code}): {_text(response)}"
    )
    return version
