"""Forms of the trigger-set editor: one query, and an import (file or pasted JSON)."""

from __future__ import annotations

from typing import Any

from django import forms

from skills_app.core.triggers.cases import (
    MAX_QUERY_CHARS,
    TriggerCase,
    TriggerSetError,
    read_set,
)
from skills_app.registry.trigger_sets import parse_upload

MAX_IMPORT_BYTES = 512 * 1024
EXPECTATIONS = [("yes", "should trigger"), ("no", "should not trigger")]


class QueryForm(forms.Form):
    query = forms.CharField(
        max_length=MAX_QUERY_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Write the query: a request as a user would type it."},
    )
    expectation = forms.ChoiceField(
        choices=EXPECTATIONS,
        widget=forms.RadioSelect,
        error_messages={"required": "Say whether the skill should be chosen for this query."},
    )
    held_out = forms.BooleanField(required=False, label="held out")

    @property
    def should_trigger(self) -> bool:
        return bool(self.cleaned_data.get("expectation") == "yes")


class ImportForm(forms.Form):
    file = forms.FileField(required=False, label="JSON file")
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), strip=False)
    replace = forms.BooleanField(required=False, label="replace the set")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        upload, text = cleaned.get("file"), cleaned.get("text") or ""
        if upload and text.strip():
            raise forms.ValidationError("Choose a file or paste JSON, not both.")
        try:
            if upload:
                if upload.size > MAX_IMPORT_BYTES:
                    raise TriggerSetError(
                        f"The file is {upload.size // 1024} KB; a trigger set file may be at most "
                        f"{MAX_IMPORT_BYTES // 1024} KB."
                    )
                found = parse_upload(upload.read(MAX_IMPORT_BYTES + 1))
            else:
                found = read_set(text)
        except TriggerSetError as exc:
            raise forms.ValidationError(exc.message) from None
        cleaned["cases"] = found.cases
        cleaned["skipped"] = found.skipped
        return cleaned

    @property
    def cases(self) -> list[TriggerCase]:
        return list(self.cleaned_data["cases"])

    @property
    def skipped(self) -> tuple[str, ...]:
        """Why queries of the file were left out (slash commands)."""
        return tuple(self.cleaned_data.get("skipped", ()))
