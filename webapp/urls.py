from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from skills_app.accounts.views import SignInView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Skillscope's login page (the identity provider's button, passwords where allowed), also
    # under allauth's name for the flows that send people back to it.
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/login/", SignInView.as_view(), name="account_login"),
    path("accounts/", include("django.contrib.auth.urls")),
    # The identity provider's flow (OIDC, SAML); allauth's other pages answer 404
    # (skills_app.accounts.middleware).
    path("accounts/", include("allauth.urls")),
    # /healthz and /readyz (answered by skills_app.ops.middleware before host checks; listed here
    # too so that reverse() and the URL list know them).
    path("", include("skills_app.ops.urls")),
    path("", include("skills_app.urls")),
]
