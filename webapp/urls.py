from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    # /healthz and /readyz (answered by skills_app.ops.middleware before host checks; listed here
    # too so that reverse() and the URL list know them).
    path("", include("skills_app.ops.urls")),
    path("", include("skills_app.urls")),
]
