"""`manage.py sync_skill_sources [--due] [--source ID ...] [--force]`: sync Git skill sources.

Run it from a systemd timer or cron (docs/interop.md) with `--due`: each enabled source whose
interval has passed since its last sync is fetched, and each changed skill becomes a new
version. Exits 1 when a sync failed, so the timer shows it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from skills_app.models import SkillSource
from skills_app.registry import sources


class Command(BaseCommand):
    help = "Sync skill sources (Git): each changed skill becomes a new version."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--due", action="store_true", help="only enabled sources whose interval has passed"
        )
        parser.add_argument(
            "--source", action="append", type=int, default=[], metavar="ID", help="this source"
        )
        parser.add_argument(
            "--force", action="store_true", help="read the tree even if the branch did not move"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["source"]:
            chosen = list(SkillSource.objects.filter(pk__in=options["source"]))
            missing = set(options["source"]) - {s.pk for s in chosen}
            if missing:
                raise CommandError(f"no source with id {', '.join(map(str, sorted(missing)))}")
        elif options["due"]:
            chosen = sources.due_sources()
        else:
            chosen = list(SkillSource.objects.filter(enabled=True))
        failed = 0
        for source in chosen:
            record = sources.sync_source(source, trigger="command", force=options["force"])
            commit = f" at {record.commit[:12]}" if record.commit else ""
            line = f"{source.name}{commit}: {record.get_status_display()}. {record.message}"
            if record.status == SkillSource.Status.FAILED:
                failed += 1
                self.stderr.write(line)
            else:
                self.stdout.write(line)
        if failed:
            raise CommandError(f"{failed} of {len(chosen)} source(s) failed to sync")
        self.stdout.write(f"{len(chosen)} source(s) synced")
