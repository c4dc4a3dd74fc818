"""Skill sources: Git repositories (URL + branch + path) that skills are synced from."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SkillSource(models.Model):
    """Where skills come from in Git; each sync turns a changed skill into a new version."""

    class Status(models.TextChoices):
        NEVER = "never", "never synced"
        OK = "ok", "synced"
        UNCHANGED = "unchanged", "no new commit"
        PARTIAL = "partial", "synced, some skills refused"
        FAILED = "failed", "failed"

    name = models.CharField(max_length=200, help_text="A label for the admin, e.g. team-skills.")
    url = models.CharField(
        "repository URL",
        max_length=2000,
        help_text="https://host/owner/repo.git (a public repository; no credentials in the URL).",
    )
    branch = models.CharField(max_length=250, default="main")
    path = models.CharField(
        max_length=500,
        blank=True,
        help_text="The folder inside the repository: a skill, a folder of skills, a plugin or a "
        "plugin marketplace. Empty: the repository's root.",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="skill_sources",
        help_text="Empty: the skills are organisation-wide. Set: personal skills of this user.",
    )
    enabled = models.BooleanField(default=True)
    sync_interval_minutes = models.PositiveIntegerField(
        default=60,
        help_text="How often the scheduled sync (manage.py sync_skill_sources --due) fetches it; "
        "0: only when someone presses Sync now.",
    )
    last_commit = models.CharField(max_length=64, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=12, choices=Status.choices, default=Status.NEVER)
    last_message = models.TextField(blank=True)
    # Set while a sync runs, so the timer and the button never sync one source twice at once.
    sync_started_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.url} {self.branch}:{self.path or '/'})"


class SkillSourceSync(models.Model):
    """One sync of a source: the commit it found and what became of each skill."""

    source = models.ForeignKey(SkillSource, on_delete=models.CASCADE, related_name="syncs")
    trigger = models.CharField(max_length=20)  # "schedule", "admin", "command"
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    commit = models.CharField(max_length=64, blank=True)
    status = models.CharField(
        max_length=12, choices=SkillSource.Status.choices, default=SkillSource.Status.NEVER
    )
    message = models.TextField(blank=True)
    versions = models.JSONField(default=list, blank=True)  # [{"skill", "version", "id"}]

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"sync of {self.source.name} at {self.commit[:12] or '-'}: {self.status}"
