from __future__ import annotations

from django.urls import path

from skills_app.mcp import oauth_sign_in

urlpatterns = [
    path("oauth/callback/", oauth_sign_in.callback, name="mcp-oauth-callback"),
    path("<slug:name>/sign-in/", oauth_sign_in.sign_in, name="mcp-oauth-sign-in"),
    path("<slug:name>/sign-out/", oauth_sign_in.sign_out, name="mcp-oauth-sign-out"),
]
