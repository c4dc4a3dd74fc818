"""The Django admin: each feature registers its own models; this module only loads them."""

from __future__ import annotations

from django.contrib import admin

from skills_app.audit import admin as audit_admin
from skills_app.permissions import admin as permissions_admin
from skills_app.registry import admin as registry_admin

admin.site.site_header = "Skillscope administration"
admin.site.site_title = "Skillscope admin"
# The admin home says whether commands run sandboxed (the same words as the start-up warning).
admin.site.index_template = "admin/skillscope_index.html"

__all__ = ["audit_admin", "permissions_admin", "registry_admin"]
