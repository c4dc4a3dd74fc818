"""The login page: the identity provider's button, and the password form where it is allowed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import LoginView

from skills_app.accounts.lockout import sign_in_options


class SignInView(LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(sign_in_options())
        return context
