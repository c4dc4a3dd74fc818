"""Make a fresh install usable: create the first administrator and say how to log in."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the administrator account on a fresh install and print how to log in."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        from skills_app.runs.recovery import interrupt_orphaned_runs

        # Single-process start-up: any run still marked active died with the previous process.
        fixed = interrupt_orphaned_runs()
        if fixed:
            self.stdout.write(
                f"Marked {fixed} run(s) left active by a stopped server as interrupted."
            )
        User = get_user_model()
        password_file = settings.VAR_DIR / "admin-password.txt"
        # SKILLSCOPE_PUBLIC_URL, or the runserver address: what people type, not where we listen.
        url = f"{settings.SKILLSCOPE_PUBLIC_URL}/accounts/login/"
        if not User.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email="", password=password)
            password_file.parent.mkdir(parents=True, exist_ok=True)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created the administrator account.\n"
                    f"  Log in at {url}\n  username: {username}\n  password: {password}\n"
                    f"  (kept in {password_file}; change it in the admin, then delete that file)"
                )
            )
            return
        admin = User.objects.filter(is_superuser=True).order_by("pk").first()
        assert admin is not None
        if password_file.exists():
            password = password_file.read_text().strip()
            if admin.check_password(password):
                self.stdout.write(
                    f"Log in at {url} as {admin.get_username()} with the password in {password_file}"
                )
                return
        self.stdout.write(
            f"Log in at {url} with your administrator account ({admin.get_username()})."
        )
