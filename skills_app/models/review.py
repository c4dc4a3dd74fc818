"""The review trail of organisation skill versions: every step, who took it and what they saw."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SkillReview(models.Model):
    """One step of a version's review (append-only, like the rest of the audit).

    `digest` is the version digest the person saw when they took the step; an approval also
    keeps the command manifest it approved and that manifest's digest, so what was consented to
    never changes after the fact.
    """

    class Action(models.TextChoices):
        UPLOADED = "uploaded", "uploaded as a draft"
        SUBMITTED = "submitted", "submitted for review"
        APPROVED = "approved", "approved"
        CHANGES_REQUESTED = "changes_requested", "changes requested"
        ACTIVATED = "activated", "made active"
        ROLLED_BACK = "rolled_back", "rolled back to"
        APPROVED_BY_MIGRATION = (
            "approved_by_migration",
            "approved by migration (it was live before reviews existed)",
        )

    UPLOADED = Action.UPLOADED
    SUBMITTED = Action.SUBMITTED
    APPROVED = Action.APPROVED
    CHANGES_REQUESTED = Action.CHANGES_REQUESTED
    ACTIVATED = Action.ACTIVATED
    ROLLED_BACK = Action.ROLLED_BACK
    APPROVED_BY_MIGRATION = Action.APPROVED_BY_MIGRATION

    version = models.ForeignKey(
        "skills_app.SkillVersion", on_delete=models.PROTECT, related_name="reviews"
    )
    # Kept as text too, so the trail reads the same whatever happens to the rows it names.
    package_name = models.CharField(max_length=200)
    version_number = models.PositiveIntegerField()
    action = models.CharField(max_length=30, choices=Action.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_name = models.CharField(max_length=200, blank=True)
    digest = models.CharField(max_length=64, help_text="The version digest the person saw.")
    manifest = models.JSONField(default=list, blank=True)
    manifest_digest = models.CharField(max_length=64, blank=True)
    comment = models.TextField(blank=True)
    origin = models.CharField(
        max_length=40,
        blank=True,
        help_text="Where an uploaded version came from (upload, cli, git).",
    )  # on other steps: "cli" when taken with `manage.py skills`, else empty (the pages)
    # Empty on approvals made when the review page showed only the first 500 files and texts up
    # to 512 KB: their consent covers no command that names a file beyond those.
    shown_whole = models.BooleanField(
        null=True,
        blank=True,
        help_text="For an approval: its reviewer was shown every file of the version whole.",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        return f"{self.package_name} v{self.version_number}: {self.get_action_display()} by {who}"
