"""The probe routes. `ProbeMiddleware` resolves against this module too, so they are declared once."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
]
