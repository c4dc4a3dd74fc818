"""What a person chose for themselves: their time zone, their colour theme and whether they have
read the intro."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Theme(models.TextChoices):
    """The colours pages are drawn in: the system's choice (the default), or always one of them."""

    SYSTEM = "system", "System"
    LIGHT = "light", "Light"
    DARK = "dark", "Dark"


class UserPreference(models.Model):
    """One row per person who chose something; no row means the defaults."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_preference"
    )
    # An IANA name (Europe/Berlin), detected by the browser and checked against zoneinfo; empty:
    # the server's TIME_ZONE.
    time_zone = models.CharField(max_length=64, blank=True, default="")
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    # When the person closed the first screen's introduction to skills (null: still shown).
    intro_dismissed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"preferences of {self.user}"
