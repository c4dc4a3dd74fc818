"""Forms of the conversation pages."""

from __future__ import annotations

from django import forms


class RenameForm(forms.Form):
    title = forms.CharField(max_length=200, strip=True)


class SearchForm(forms.Form):
    q = forms.CharField(max_length=200, required=False, strip=True)
