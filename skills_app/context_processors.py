from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

from skills_app.audit.access import can_view_audit
from skills_app.chat.preferences import theme_of
from skills_app.core.tools.sandbox import describe_sandbox
from skills_app.models import Theme


def skillscope(request: HttpRequest) -> dict[str, Any]:
    """Facts pages show: whether answers come from the offline demo model, the menu, the theme, and
    (evaluated only where a template asks, e.g. the admin home) whether commands run sandboxed."""
    return {
        "demo_model": not settings.ANTHROPIC_API_KEY,
        "nav_links": nav_links(request),
        "sandbox_status": lambda: describe_sandbox(settings.SANDBOX),
        "theme": theme_of(request),
        "theme_choices": Theme.choices,
    }


def nav_links(request: HttpRequest) -> list[dict[str, str]]:
    """The top menu: only links this person can use (each page checks the same thing)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return []
    links = [("Skills", reverse("skills-page"))]
    if user.has_perm("skills_app.view_permissionrule"):
        links.append(("Rules", reverse("rules-page")))
    links.append(("Usage", reverse("my-usage")))
    if can_view_audit(user):
        links.append(("Audit", reverse("audit-home")))
    if user.is_staff:
        links.append(("Compare", reverse("compare")))
        links.append(("Operations", reverse("ops-status")))
    # The admin site lets in active staff, but shows them nothing without model permissions:
    # the link appears only when its index lists something this person may open.
    if admin.site.has_permission(request) and admin.site.get_app_list(request):
        links.append(("Admin", reverse("admin:index")))
    path = request.path
    return [
        {"label": label, "url": url, "current": "page" if path.startswith(url) else ""}
        for label, url in links
    ]
