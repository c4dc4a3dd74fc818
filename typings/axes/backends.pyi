# django-axes ships no types: the backend skills_app/accounts/backends.py puts before Django's.
from typing import Any

from django.http import HttpRequest

class AxesStandaloneBackend:
    # Returns nothing; raises AxesBackendPermissionDenied while the credentials are locked out.
    def authenticate(
        self,
        request: HttpRequest,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None: ...
