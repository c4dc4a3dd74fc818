"""`manage.py role grant|revoke|list`: hand out the roles of skills_app/accounts/roles.py."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from skills_app import trail
from skills_app.accounts import roles


class Command(BaseCommand):
    help = "Grant, revoke and list roles (Chatter, Skill manager, Auditor, Administrator)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="{grant,revoke,list}")
        names = ", ".join(r.slug for r in roles.ROLES)
        for name, verb in (("grant", "give"), ("revoke", "take away")):
            p = sub.add_parser(name, help=f"{verb} a role ({names})")
            p.add_argument("username")
            p.add_argument("role", help=names)
        p = sub.add_parser("list", help="every role with its members, or one user's roles")
        p.add_argument("username", nargs="?", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['subcommand']}")(options)

    def _user(self, username: str) -> Any:
        model = get_user_model()
        try:
            return model.objects.get_by_natural_key(username)
        except model.DoesNotExist:
            raise CommandError(
                f"There is no user {username!r}; create one with `manage.py createsuperuser` "
                "or in the admin."
            ) from None

    def _role(self, text: str) -> roles.Role:
        try:
            return roles.get_role(text)
        except roles.RoleError as exc:
            raise CommandError(str(exc)) from None

    def _grant(self, options: dict[str, Any]) -> None:
        user, role = self._user(options["username"]), self._role(options["role"])
        with trail.acting(name=trail.command_actor()):
            changed = roles.grant(user, role)
        name = user.get_username()
        if not changed:
            self.stdout.write(f"{name} already has the role {role.name}.")
            return
        staff = " (with staff status, for the admin site)" if role.staff else ""
        self.stdout.write(f"{name} is now {role.name}{staff}.")

    def _revoke(self, options: dict[str, Any]) -> None:
        user, role = self._user(options["username"]), self._role(options["role"])
        with trail.acting(name=trail.command_actor()):
            changed = roles.revoke(user, role)
        name = user.get_username()
        if not changed:
            self.stdout.write(f"{name} does not have the role {role.name}; nothing changed.")
            return
        left = ", ".join(r.name for r in roles.roles_of(user)) or "no role"
        self.stdout.write(f"{name} is no longer {role.name}; roles now: {left}.")

    def _list(self, options: dict[str, Any]) -> None:
        if options["username"]:
            user = self._user(options["username"])
            held = roles.roles_of(user)
            flags = [
                f for f, on in (("staff", user.is_staff), ("superuser", user.is_superuser)) if on
            ]
            if not user.is_active:
                flags.append("deactivated")
            suffix = f" [{', '.join(flags)}]" if flags else ""
            self.stdout.write(
                f"{user.get_username()}: {', '.join(r.name for r in held) or 'no role'}{suffix}"
            )
            return
        for role in roles.ROLES:
            group = roles.group_for(role)
            members = sorted(u.get_username() for u in group.user_set.all())
            self.stdout.write(f"{role.name} ({role.slug}): {', '.join(members) or 'nobody'}")
            self.stdout.write(f"    {role.summary}")
