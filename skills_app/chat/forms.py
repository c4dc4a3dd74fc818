"""Forms of the conversation pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.conf import settings

from skills_app.core.model_catalog import EFFORT_LEVELS, UnknownModelError, choose_model


class RenameForm(forms.Form):
    title = forms.CharField(max_length=200, strip=True)


class SearchForm(forms.Form):
    q = forms.CharField(max_length=200, required=False, strip=True)


class ModelSettingsForm(forms.Form):
    """A conversation's model, thinking and effort; the model must be one offered here."""

    model = forms.CharField(max_length=100, strip=True)
    thinking = forms.ChoiceField(choices=[("on", "on"), ("off", "off")])
    effort = forms.ChoiceField(
        choices=[("", "the model's default"), *[(e, e) for e in EFFORT_LEVELS]], required=False
    )

    def __init__(self, *args: Any, offered: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The person's policy (their groups' models); None: every model of ANTHROPIC_MODELS.
        self.offered = list(offered) if offered is not None else list(settings.ANTHROPIC_MODELS)

    def clean_model(self) -> str:
        # Never trust the id a form sends: only the models the person's policy offers.
        try:
            return choose_model(self.cleaned_data["model"], self.offered)
        except UnknownModelError as exc:
            raise forms.ValidationError(str(exc)) from None
