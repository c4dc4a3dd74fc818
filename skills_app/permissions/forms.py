"""Forms of the rules admin: permission rules (validated by the core parser) and the rule tester."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from skills_app.core.permissions import RuleSyntaxError, ToolCall, parse_call, parse_rule
from skills_app.core.permissions.rules import never_matches
from skills_app.models import PermissionRule
from skills_app.permissions import checks


class DatalistInput(forms.TextInput):
    """A text input that offers a list of known values and still takes any other."""

    def __init__(self, options: list[str], attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.options = options

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        list_id = f"{(attrs or {}).get('id') or name}-options"
        html = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join("", '<option value="{}">', ((o,) for o in self.options))
        return html + format_html('<datalist id="{}">{}</datalist>', list_id, options)


PROTECTED_WRITES_HELP = (
    "As rule text: Skill(pdf), Bash(git diff *), Edit(./out/**). Files that steer programs "
    "(.git/, dotfiles and dot-folders at the workspace root, node_modules/, *.pth, "
    "sitecustomize.py, a .py named like a standard-library module) are written only under an "
    "allow rule that names them, e.g. Edit(.git/**) or Edit(**/*.pth): Edit(**) does not cover "
    "them, so the person is asked."
)


class PermissionRuleForm(forms.ModelForm[PermissionRule]):
    """The admin form of a rule: `rule_text` must parse and be able to match some call, so a typo
    or a rule the engine never consults is refused with what to write instead; the skill field
    offers the known skills (a name that is not one is saved with a warning)."""

    class Meta:
        model = PermissionRule
        fields = [
            "behavior",
            "rule_text",
            "skill",
            "applies_to_groups",
            "applies_to_users",
            "enabled",
            "position",
            "note",
        ]
        widgets = {
            "rule_text": forms.TextInput(attrs={"size": 60, "spellcheck": "false"}),
            "note": forms.Textarea(attrs={"rows": 3, "cols": 60}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "rule_text" in self.fields:
            self.fields["rule_text"].help_text = PROTECTED_WRITES_HELP
        # A viewer without the change permission gets the form without fields (the admin shows
        # them read-only), so each field is touched only when it is there.
        if "skill" in self.fields:
            self.fields["skill"].widget = DatalistInput(
                checks.known_skills(),
                attrs={"size": 30, "spellcheck": "false", "autocomplete": "off"},
            )

    def clean_rule_text(self) -> str:
        text: str = self.cleaned_data["rule_text"].strip()
        try:
            # The behaviour does not change what parses; "allow" keeps this independent of field order.
            parse_rule(text, "allow", source="admin")
        except RuleSyntaxError as exc:
            raise forms.ValidationError(str(exc), code="rule_syntax") from None
        return text

    def clean_skill(self) -> str:
        skill: str = self.cleaned_data["skill"]
        return skill.strip().lstrip("/")

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        text, behavior = cleaned.get("rule_text"), cleaned.get("behavior")
        if text and behavior:
            # Whether a rule can match depends on its behaviour too (a Bash allow is matched
            # command by command, a deny against the whole line as well).
            problem = never_matches(parse_rule(text, behavior, source="admin"))
            if problem:
                self.add_error("rule_text", forms.ValidationError(problem, code="never_matches"))
        return cleaned


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

    person = forms.CharField(
        label="As the person",
        max_length=150,
        required=False,
        strip=True,
        widget=forms.TextInput(attrs={"size": 16, "spellcheck": "false"}),
        help_text="Optional: a username; rules that apply only to some groups or people are read "
        "for them. Empty: only the rules for everyone.",
    )

    def clean_skill(self) -> str:
        skill: str = self.cleaned_data["skill"]
        return skill.lstrip("/")

    def clean_person(self) -> Any:
        name = self.cleaned_data["person"]
        if not name:
            return None
        found = get_user_model().objects.filter(username=name).first()
        if found is None:
            raise forms.ValidationError(
                f"There is no user {name!r}: type a username, or leave it empty.", code="no_user"
            )
        return found
