from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SkillsAppConfig(AppConfig):
    name = "skills_app"
    verbose_name = "Skillscope"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (registers the system checks)
            trail,
        )
        from .accounts import lockout, sessions, sso
        from .accounts.roles import ensure_roles
        from .audit import guard
        from .wiring import wire

        guard.install()  # the audit is append-only
        trail.install()  # role changes are recorded
        sessions.install()  # account changes close that person's open sockets
        lockout.install()  # sign-in lockouts are recorded
        sso.install()  # directory groups follow every sign-in through the identity provider
        # After auth's own post_migrate (which makes the permissions): roles survive a flush too.
        post_migrate.connect(ensure_roles, sender=self, dispatch_uid="skillscope-roles")
        wire()  # runs are handed the chat's renderer and run-end subscribers, the trigger tests
