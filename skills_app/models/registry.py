"""Uploaded skills and their immutable versions."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SkillPackage(models.Model):
    """An uploaded skill; its content lives in immutable SkillVersions."""

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_skills",
        help_text="Empty: organisation-wide. Set: a personal skill visible only to this user.",
    )
    active_version = models.ForeignKey(
        "skills_app.SkillVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    enabled = models.BooleanField(default=True)
    # Off: SKILL.md and the files beside it are hidden content (see DESIGN "Visibility").
    source_visible = models.BooleanField(
        "source visible to users",
        default=False,
        help_text="On: people without the inspect permission may read this skill's files "
        "(SKILL.md and the files beside it) in tool results. Its injected text stays hidden "
        "from the transcript, and `!` command output stays hidden.",
    )
    # On: a version goes to review only after a finished trigger run on it passed every query
    # of the set (`skills_app.registry.trigger_gate.trigger_gate`).
    trigger_gate = models.BooleanField(
        "trigger tests gate review",
        default=False,
        help_text="On: a version may be submitted for review only once a trigger run on it "
        "has passed every query of the skill's trigger set.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["name", "owner"], name="unique_package_per_owner"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(owner__isnull=True),
                name="unique_org_package_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class SkillVersion(models.Model):
    """One immutable content of a package, keyed by its digest, with its place in the review.

    Organisation versions go draft -> submitted -> approved (or changes requested) before one
    can be made active for everyone (`registry.review`); personal versions need no review.
    """

    class ReviewStatus(models.TextChoices):
        DRAFT = "draft", "draft"
        SUBMITTED = "submitted", "submitted for review"
        CHANGES_REQUESTED = "changes_requested", "changes requested"
        APPROVED = "approved", "approved"
        PERSONAL = "personal", "personal (no review)"

    DRAFT = ReviewStatus.DRAFT
    SUBMITTED = ReviewStatus.SUBMITTED
    CHANGES_REQUESTED = ReviewStatus.CHANGES_REQUESTED
    APPROVED = ReviewStatus.APPROVED
    PERSONAL = ReviewStatus.PERSONAL

    package = models.ForeignKey(
        "skills_app.SkillPackage", on_delete=models.CASCADE, related_name="versions"
    )
    digest = models.CharField(max_length=64)
    number = models.PositiveIntegerField()
    storage_path = models.CharField(max_length=500)
    skill_md = models.TextField()
    frontmatter = models.JSONField(default=dict)
    lint = models.JSONField(default=list)
    # RESTRICT: who uploaded a version is part of its record, so an uploader is deactivated, not
    # deleted; deleting a user does still take their own unused personal skills with them.
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    review_status = models.CharField(
        max_length=20, choices=ReviewStatus.choices, default=ReviewStatus.DRAFT
    )
    # A version synced from Git: the source and the commit its files were read at.
    source = models.ForeignKey(
        "skills_app.SkillSource",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="versions",
    )
    source_commit = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["package", "-number"]
        permissions = [
            ("review_skillversion", "Can review and approve organisation skill versions"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["package", "digest"], name="unique_version_digest"),
            models.UniqueConstraint(fields=["package", "number"], name="unique_version_number"),
        ]

    def __str__(self) -> str:
        return f"{self.package.name} v{self.number} ({self.digest[:12]})"


class VisibleSkillSource(models.Model):
    """A bundled or SKILLS_DIRS skill whose source (SKILL.md and the files beside it) users may read.

    Uploaded skills carry the same choice as `SkillPackage.source_visible`.
    """

    name = models.CharField(
        max_length=200,
        unique=True,
        help_text="The skill's name, e.g. pdf (a bundled skill or one from SKILLS_DIRS).",
    )
    note = models.TextField(blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "skill with visible source"
        verbose_name_plural = "skills with visible source (bundled and folder skills)"

    def __str__(self) -> str:
        return self.name
