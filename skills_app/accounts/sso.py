"""django-allauth adapters: no local sign-up; the identity provider's people signed in (or
refused) with their directory groups synced on every sign-in.

A sign-in is refused, with the reason on the login page and in the audit, when the person is in
none of SSO_ALLOWED_GROUPS, when their account is locked out (a password lockout holds for the
identity provider too), when it is deactivated here, or when they are new and SSO_CREATE_USERS
is off.
"""

from __future__ import annotations

import logging
from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.signals import user_logged_in
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AbstractUser
from django.http import HttpRequest
from django.shortcuts import render

from skills_app import trail
from skills_app.accounts import directory, lockout
from skills_app.models import AuditEvent
from skills_app.policy import barred

logger = logging.getLogger(__name__)

_GROUPS_KEY = "skillscope_directory_groups"


def groups_claim(sociallogin: SocialLogin) -> list[str]:
    """The groups the identity provider sent: OIDC userinfo (or the ID token), SAML attributes."""
    data = sociallogin.account.extra_data or {}
    name = settings.SSO_GROUPS_CLAIM
    for part in ("userinfo", "id_token"):
        claims = data.get(part)
        if isinstance(claims, dict) and name in claims:
            return directory.claim_values(claims[name])
    if name in data:  # SAML: attributes by name, each a list of values
        return directory.claim_values(data[name])
    return []


def _username(sociallogin: SocialLogin) -> str:
    user = sociallogin.user
    return user.get_username() if user is not None else ""


def refuse(request: HttpRequest, sociallogin: SocialLogin, reason: str, *, code: str) -> None:
    """Stop the sign-in: the login page with the reason (403), and an audit row."""
    username = _username(sociallogin)
    trail.record(
        AuditEvent.SIGN_IN_REFUSED,
        actor_name=f"identity provider ({sociallogin.account.provider})",
        target=f"user {username or sociallogin.account.uid}",
        reason=code,
        uid=sociallogin.account.uid,
        claim=groups_claim(sociallogin),
    )
    context = {"refused": reason, "form": None, **lockout.sign_in_options()}
    raise ImmediateHttpResponse(render(request, "registration/login.html", context, status=403))


class LocalAccounts(DefaultAccountAdapter):
    """Nobody signs up here: accounts come from the directory or an administrator."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False


class DirectoryAccounts(DefaultSocialAccountAdapter):
    """People from the identity provider: created on first sign-in, refused when they may not."""

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return bool(settings.SSO_CREATE_USERS)

    def populate_user(
        self, request: HttpRequest, sociallogin: SocialLogin, data: dict[str, Any]
    ) -> AbstractBaseUser:
        user = super().populate_user(request, sociallogin, data)
        claims = (sociallogin.account.extra_data or {}).get("userinfo") or {}
        preferred = claims.get("preferred_username") if isinstance(claims, dict) else None
        # AbstractUser: the project's user model has a username (AUTH_USER_MODEL is not swapped).
        if isinstance(preferred, str) and preferred.strip() and isinstance(user, AbstractUser):
            user.username = preferred.strip()[:150]
        return user

    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        """Every sign-in through the provider passes here first, new person or not."""
        groups = groups_claim(sociallogin)
        allowed = settings.SSO_ALLOWED_GROUPS
        if allowed and not set(groups) & set(allowed):
            refuse(
                request,
                sociallogin,
                "Your directory account is not in a group allowed to use Skillscope "
                f"({', '.join(allowed)}). Ask your administrator to add you to one.",
                code="not_in_allowed_groups",
            )
        username = _username(sociallogin)
        if username and (barred.username_locked(username) or lockout.is_locked(request, username)):
            refuse(request, sociallogin, barred.lockout_text(), code="locked_out")
        if sociallogin.is_existing and not sociallogin.user.is_active:
            refuse(
                request,
                sociallogin,
                "This Skillscope account is deactivated. Ask an administrator to reactivate it.",
                code="inactive",
            )
        if not sociallogin.is_existing and not settings.SSO_CREATE_USERS:
            refuse(
                request,
                sociallogin,
                "You have no Skillscope account yet, and accounts are not made at sign-in here. "
                "Ask an administrator to create yours.",
                code="no_account",
            )
        # Synced once the person is signed in (a new account exists only then).
        request.session[_GROUPS_KEY] = groups

    def on_authentication_error(
        self,
        request: HttpRequest,
        provider: Any,
        error: Any = None,
        exception: Any = None,
        extra_context: Any = None,
    ) -> None:
        logger.info("sign-in through %s failed: %s %s", provider, error, exception)
        trail.record(
            AuditEvent.SIGN_IN_REFUSED,
            actor_name=f"identity provider ({getattr(provider, 'id', provider)})",
            target="(unknown person)",
            reason=str(error or "error"),
            detail=str(exception or "")[:500],
        )
        return super().on_authentication_error(
            request, provider, error=error, exception=exception, extra_context=extra_context
        )


def _after_sign_in(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    sociallogin = kwargs.get("sociallogin")
    if sociallogin is None:
        return  # a local password: groups stay as administrators set them
    groups = request.session.pop(_GROUPS_KEY, None)
    if groups is None:
        groups = groups_claim(sociallogin)
    directory.sync_groups(user, groups, source=sociallogin.account.provider)


def install() -> None:
    """Sync directory groups after every sign-in through the provider (from ready())."""
    user_logged_in.connect(_after_sign_in, dispatch_uid="skillscope-directory-sync")
