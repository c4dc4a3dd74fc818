"""The operator page's route (kept out of `ops.urls`, whose probes skip login and host checks)."""

from __future__ import annotations

from django.urls import path

from . import pages

urlpatterns = [
    path("", pages.operator_status, name="ops-status"),
]
