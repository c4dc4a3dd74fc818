# django-allauth ships no types: the adapter skills_app/accounts/sso.py subclasses.
from typing import Any

from allauth.socialaccount.models import SocialLogin
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest

class DefaultSocialAccountAdapter:
    def __init__(self, request: HttpRequest | None = None) -> None: ...
    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool: ...
    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None: ...
    def populate_user(
        self, request: HttpRequest, sociallogin: SocialLogin, data: dict[str, Any]
    ) -> AbstractBaseUser: ...
    def on_authentication_error(
        self,
        request: HttpRequest,
        provider: Any,
        error: str | None = None,
        exception: BaseException | None = None,
        extra_context: dict[str, Any] | None = None,
    ) -> None: ...
