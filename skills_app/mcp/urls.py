from __future__ import annotations

from django.urls import path

from skills_app.mcp import oauth

urlpatterns = [
    path("oauth/callback/", oauth.callback, name="mcp-oauth-callback"),
    path("<slug:name>/sign-in/", oauth.sign_in, name="mcp-oauth-sign-in"),
    path("<slug:name>/sign-out/", oauth.sign_out, name="mcp-oauth-sign-out"),
]
