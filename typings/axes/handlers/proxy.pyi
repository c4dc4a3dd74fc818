# django-axes ships no types: the lock checks skills_app/accounts/lockout.py asks.
from typing import Any

from django.http import HttpRequest

class AxesProxyHandler:
    @staticmethod
    def update_request(request: HttpRequest | None) -> None: ...
    @classmethod
    def is_locked(cls, request: HttpRequest, credentials: dict[str, Any] | None = None) -> bool: ...
    @classmethod
    def is_allowed(
        cls, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> bool: ...
