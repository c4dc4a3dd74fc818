"""`manage.py audit purge`: the only way rows leave the audit, and itself recorded in it."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from skills_app import trail
from skills_app.audit import retention


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--before {text!r} is not a date; write it as YYYY-MM-DD.") from None


class Command(BaseCommand):
    help = "Purge old audit rows (whole conversations); without --yes only says what would go."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="{purge}")
        p = sub.add_parser(
            "purge",
            help="remove conversations (with every audit row) whose last activity is before a date",
        )
        p.add_argument(
            "--before",
            type=_date,
            default=None,
            metavar="YYYY-MM-DD",
            help="cutoff date (default: today minus AUDIT_RETENTION_DAYS)",
        )
        p.add_argument(
            "--yes", action="store_true", help="really delete (otherwise a dry run that counts)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cutoff = retention.cutoff_for(options["before"])
        except retention.PurgeError as exc:
            raise CommandError(str(exc)) from None
        dry_run = not options["yes"]
        report = retention.purge(cutoff, actor_name=trail.command_actor(), dry_run=dry_run)
        counts = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in report.counts.items())
        keep = (
            f"{settings.AUDIT_RETENTION_DAYS} days" if settings.AUDIT_RETENTION_DAYS else "forever"
        )
        if dry_run:
            self.stdout.write(
                f"Dry run: before {cutoff:%Y-%m-%d %H:%M %Z} the purge would remove {counts}. "
                f"Retention: {keep}. Add --yes to delete them; the purge is recorded in the "
                "audit trail."
            )
            return
        self.stdout.write(
            f"Purged everything before {cutoff:%Y-%m-%d %H:%M %Z}: {counts}. "
            "Recorded in the audit trail."
        )
