"""The skill upload form (admin and the Skills page)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that takes every file of a multiple (or folder) input."""

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class SkillUploadForm(forms.Form):
    """Either an archive (.zip or .skill) or a folder picked in the browser."""

    archive = forms.FileField(
        label="Archive",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,.skill"}),
        help_text="A .zip or .skill file: one skill folder, SKILL.md at the root, "
        "or several skills under skills/<name>/ (a plugin).",
    )
    folder = MultipleFileField(
        label="Folder",
        required=False,
        # An empty file is a file: Python packages carry an empty __init__.py.
        allow_empty_file=True,
        widget=MultipleFileInput(attrs={"webkitdirectory": True, "directory": True}),
        help_text="A skill folder (the one holding SKILL.md) chosen in the browser.",
    )
    # The browser strips folders from uploaded file names; the page's script sends each file's
    # relative path here, one per line, in the same order as the files.
    folder_paths = forms.CharField(required=False, widget=forms.HiddenInput)
    candidate = forms.BooleanField(
        label="Upload as a candidate",
        required=False,
        help_text="A new version of an existing skill waits beside the active one until you "
        "activate it, so its trigger tests can be compared first.",
    )
    personal = forms.BooleanField(
        label="Personal skill",
        required=False,
        help_text="Only you will see and be able to invoke it.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["candidate"].label_suffix = ""  # a checkbox label follows the box
        if not settings.ALLOW_PERSONAL_SKILLS:
            del self.fields["personal"]
        else:
            self.fields["personal"].label_suffix = ""

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        archive, folder = cleaned.get("archive"), cleaned.get("folder") or []
        if archive and folder:
            raise forms.ValidationError(
                "Choose either an archive or a folder, not both.", code="both"
            )
        if not archive and not folder and not self.errors:
            raise forms.ValidationError(
                "Choose a .zip or .skill archive, or a skill folder, to upload.", code="empty"
            )
        limit = settings.UPLOAD_MAX_TOTAL_BYTES
        if archive and archive.size > limit:
            raise forms.ValidationError(
                f"The archive is {archive.size / 1_048_576:.1f} MB; uploads may hold at most "
                f"{limit / 1_048_576:.1f} MB (UPLOAD_MAX_TOTAL_BYTES). Remove large files from it.",
                code="too_big",
            )
        if folder:
            paths = [p for p in (cleaned.get("folder_paths") or "").splitlines() if p.strip()]
            if len(paths) != len(folder):
                raise forms.ValidationError(
                    "The browser did not send the folder's file paths (this needs JavaScript); "
                    "upload the folder as a .zip instead.",
                    code="folder_paths",
                )
            cleaned["folder_paths"] = paths
        return cleaned
