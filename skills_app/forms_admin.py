"""Forms of the Django admin: permission rules (validated by the core parser), the rule tester and
the skill upload."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from .core.permissions import RuleSyntaxError, ToolCall, parse_call, parse_rule
from .models import PermissionRule


class PermissionRuleForm(forms.ModelForm):
    """The admin form of a rule: `rule_text` must parse, so a typo never silently matches nothing."""

    class Meta:
        model = PermissionRule
        fields = ["behavior", "rule_text", "skill", "enabled", "position", "note"]
        widgets = {
            "rule_text": forms.TextInput(attrs={"size": 60, "spellcheck": "false"}),
            "note": forms.Textarea(attrs={"rows": 3, "cols": 60}),
        }

    def clean_rule_text(self) -> str:
        text = self.cleaned_data["rule_text"].strip()
        try:
            # The behaviour does not change what parses; "allow" keeps this independent of field order.
            parse_rule(text, "allow", source="admin")
        except RuleSyntaxError as exc:
            raise forms.ValidationError(str(exc), code="rule_syntax") from None
        return text

    def clean_skill(self) -> str:
        return self.cleaned_data["skill"].strip().lstrip("/")


class RuleTesterForm(forms.Form):
    """A tool call as rule text plus an optional active skill, for the rule tester."""

    call = forms.CharField(
        label="Tool call",
        max_length=2000,
        strip=True,
        widget=forms.TextInput(
            attrs={"size": 50, "spellcheck": "false", "placeholder": "Bash(git push origin main)"}
        ),
        help_text="As rule text: Skill(pdf), Bash(git push origin main), Edit(./out/report.md).",
    )
    skill = forms.CharField(
        label="Active skill",
        max_length=200,
        required=False,
        strip=True,
        widget=forms.TextInput(attrs={"size": 20, "list": "tester-skills", "spellcheck": "false"}),
        help_text="Optional: the skill whose turn is running (its scoped rules then apply).",
    )

    def clean_call(self) -> ToolCall:
        text = self.cleaned_data["call"]
        try:
            return parse_call(text)
        except RuleSyntaxError as exc:
            raise forms.ValidationError(
                f"{exc} Write the call as Tool(argument), e.g. Bash(git status).", code="bad_call"
            ) from None

    def clean_skill(self) -> str:
        return self.cleaned_data["skill"].lstrip("/")


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
        widget=MultipleFileInput(attrs={"webkitdirectory": True, "directory": True}),
        help_text="A skill folder (the one holding SKILL.md) chosen in the browser.",
    )
    # The browser strips folders from uploaded file names; the page's script sends each file's
    # relative path here, one per line, in the same order as the files.
    folder_paths = forms.CharField(required=False, widget=forms.HiddenInput)
    personal = forms.BooleanField(
        label="Personal skill",
        required=False,
        help_text="Only you will see and be able to invoke it.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not settings.ALLOW_PERSONAL_SKILLS:
            del self.fields["personal"]
        else:
            self.fields["personal"].label_suffix = ""  # a checkbox label follows the box

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
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
