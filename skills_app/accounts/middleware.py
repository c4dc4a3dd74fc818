"""Which sign-in URLs answer: allauth only for the identity provider's flow, and no password form
anywhere when LOCAL_PASSWORDS=false (the password backend refuses them too; this says so plainly
instead of "wrong password")."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

# allauth views Skillscope uses: the providers' login and callback, the SAML endpoints, the
# cancelled/error pages, the follow-up form of a sign-up, inactive accounts, sign-out.
_ALLAUTH_ALLOWED = {
    "socialaccount_login_cancelled",
    "socialaccount_login_error",
    "socialaccount_signup",
    "account_inactive",
    "account_logout",
}
# Password pages of Django's auth and of the admin: closed when LOCAL_PASSWORDS=false.
_PASSWORD_VIEWS = {
    "login",
    "password_change",
    "password_change_done",
    "password_reset",
    "password_reset_done",
    "password_reset_confirm",
    "password_reset_complete",
}


def _is_provider_flow(name: str) -> bool:
    return name.endswith(("_login", "_callback")) or name.startswith("saml_")


class SignInGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return self.get_response(request)
        name = match.url_name or ""
        module = getattr(match.func, "__module__", "") or ""
        if module.startswith("allauth.") and not (
            name in _ALLAUTH_ALLOWED or _is_provider_flow(name)
        ):
            # allauth's local-account pages (sign-up, its own password forms, e-mail
            # management, connecting other accounts) are not part of Skillscope.
            raise Http404("No such page.")
        if not settings.LOCAL_PASSWORDS:
            admin_login = match.namespace == "admin" and name == "login"
            password_page = (name in _PASSWORD_VIEWS and not match.namespace) or admin_login
            # The login pages still show (the provider's button); their password posts do not.
            if password_page and (request.method == "POST" or name != "login"):
                return self._closed(request)
        return self.get_response(request)

    def _closed(self, request: HttpRequest) -> HttpResponse:
        from skills_app.accounts.lockout import sign_in_options

        context = {
            "refused": "Passwords kept by Skillscope are turned off here: sign in with "
            f"{settings.SSO_NAME} instead.",
            "form": None,
            **sign_in_options(),
        }
        return render(request, "registration/login.html", context, status=403)
