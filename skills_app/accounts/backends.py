"""The one password backend: the lockout is checked first, and LOCAL_PASSWORDS=false refuses every
password, whichever form or URL sent it (the login page, the admin's, allauth's)."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest


class PasswordBackend(AxesStandaloneBackend, ModelBackend):
    """Django's ModelBackend behind django-axes' lockout check and the LOCAL_PASSWORDS switch."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if not settings.LOCAL_PASSWORDS:
            return None
        if request is not None:
            # Raises AxesBackendPermissionDenied while locked; authenticate() stops there and
            # axes counts the attempt.
            AxesStandaloneBackend.authenticate(
                self, request, username=username, password=password, **kwargs
            )
        return ModelBackend.authenticate(
            self, request, username=username, password=password, **kwargs
        )
