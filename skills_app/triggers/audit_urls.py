"""The trigger runs' page in the audit (`/audit/trigger-runs/`): routed by the triggers package, so
the audit's own URLs never import a feature that reads the audit's access rule."""

from __future__ import annotations

from django.urls import path

from skills_app.triggers import audit

urlpatterns = [
    path("trigger-runs/", audit.trigger_run_list, name="audit-trigger-runs"),
]
