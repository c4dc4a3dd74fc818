"""The app's URLs: the includes of each feature package, under their prefixes."""

from __future__ import annotations

from django.urls import include, path

from skills_app.accounts import usage

urlpatterns = [
    path("usage/", usage.my_usage, name="my-usage"),
    path("", include("skills_app.chat.urls")),
    path("skills/triggers/", include("skills_app.triggers.urls")),
    path("skills/", include("skills_app.skills.urls")),
    path("rules/", include("skills_app.permissions.urls")),
    path("audit/", include("skills_app.audit.urls")),
    path("audit/", include("skills_app.triggers.audit_urls")),
    path("compare/", include("skills_app.compare.urls")),
    path("ops/", include("skills_app.ops.page_urls")),
    path("mcp/", include("skills_app.mcp.urls")),
]
