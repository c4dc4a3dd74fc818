"""The Django admin: each feature registers its own models; this module only loads them."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin

from skills_app.accounts import admin as accounts_admin
from skills_app.audit import admin as audit_admin
from skills_app.mcp import admin as mcp_admin
from skills_app.permissions import admin as permissions_admin
from skills_app.registry import admin as registry_admin
from skills_app.registry import admin_git, admin_sources

admin.site.site_header = "Skillscope administration"
admin.site.site_title = "Skillscope admin"
# The admin home says whether commands run sandboxed (the same words as the start-up warning).
admin.site.index_template = "admin/skillscope_index.html"
accounts_admin.register(admin.site)
mcp_admin.register(admin.site)
# allauth's own models that Skillscope does not use: the provider is configured in settings,
# tokens are not stored, e-mail addresses are not managed here. Linked identities
# (SocialAccount) stay visible.
for _name in ("account.EmailAddress", "socialaccount.SocialApp", "socialaccount.SocialToken"):
    _model = apps.get_model(_name)
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)

__all__ = [
    "accounts_admin",
    "admin_git",
    "admin_sources",
    "audit_admin",
    "mcp_admin",
    "permissions_admin",
    "registry_admin",
]
