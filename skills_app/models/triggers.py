"""Trigger tests: the test queries of a skill package, and the runs that measure a version on them.

A trigger run is kept apart from conversations on purpose: it makes no Conversation, Message,
Run, ModelCall or SkillInvocation row, so the audit's usage figures never count it; its own rows
say who ran it, on which version and model, and what it cost.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TriggerQuery(models.Model):
    """One query of a package's trigger set: a first user message, and whether the skill should
    be chosen for it."""

    package = models.ForeignKey(
        "skills_app.SkillPackage", on_delete=models.CASCADE, related_name="trigger_queries"
    )
    query = models.TextField()
    should_trigger = models.BooleanField()
    # Kept apart from description tuning: the report shows these queries' figures separately.
    held_out = models.BooleanField(default=False)
    position = models.PositiveIntegerField(default=0)
    # "upload": came with the skill's evals/trigger.json; "editor": written or imported here.
    origin = models.CharField(max_length=10, default="editor")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["package", "position", "pk"]

    def __str__(self) -> str:
        return self.query[:60]


class TriggerRun(models.Model):
    """One measurement of a skill version's description on its package's trigger set."""

    class Status(models.TextChoices):
        QUEUED = "queued", "waiting for a worker"
        RUNNING = "running", "running"
        DONE = "done", "done"
        STOPPED = "stopped", "stopped"
        FAILED = "failed", "failed"
        INTERRUPTED = "interrupted", "interrupted"

    QUEUED = Status.QUEUED
    RUNNING = Status.RUNNING
    DONE = Status.DONE
    STOPPED = Status.STOPPED
    FAILED = Status.FAILED
    INTERRUPTED = Status.INTERRUPTED
    ACTIVE = (QUEUED, RUNNING)

    # SET_NULL with the facts copied below: the record outlives a deleted package or version.
    package = models.ForeignKey(
        "skills_app.SkillPackage",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="trigger_runs",
    )
    version = models.ForeignKey(
        "skills_app.SkillVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="trigger_runs",
    )
    skill = models.CharField(max_length=200)
    version_number = models.PositiveIntegerField()
    version_digest = models.CharField(max_length=64)
    # A personal skill's owner (who alone may see its runs, with auditors); null: organisation.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_trigger_runs",
    )
    # "active" or "candidate": what the version was when the run started.
    version_state = models.CharField(max_length=10)
    # The catalog text the model chose by (description and when_to_use), as measured.
    description = models.TextField(blank=True)
    listed = models.BooleanField(default=True)  # False: the version is not model-invocable
    competitors = models.JSONField(default=list, blank=True)  # the other skills in the catalog
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="trigger_runs",
    )
    started_by_name = models.CharField(max_length=150, blank=True)
    model = models.CharField(max_length=100)  # the model requested
    model_label = models.CharField(max_length=100, blank=True)
    is_demo = models.BooleanField(default=False)
    profile = models.CharField(max_length=20)
    repetitions = models.PositiveSmallIntegerField(default=3)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    attempts_total = models.PositiveIntegerField(default=0)
    attempts_done = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_input_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=9, null=True, blank=True)
    estimated_input_tokens = models.PositiveBigIntegerField(default=0)
    estimated_cost_usd = models.DecimalField(max_digits=16, decimal_places=9, null=True, blank=True)
    # Who executes it: "host pid N" (inline) or a worker's name; the heartbeat shows it is alive.
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stop_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "id"], name="triggerrun_status")]

    def __str__(self) -> str:
        return f"Trigger run #{self.pk} of {self.skill} v{self.version_number} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class TriggerResult(models.Model):
    """What the model did with one query of a run, over its repetitions."""

    run = models.ForeignKey(TriggerRun, on_delete=models.CASCADE, related_name="results")
    position = models.PositiveIntegerField()
    query = models.TextField()
    should_trigger = models.BooleanField()
    held_out = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)  # answered
    triggered = models.PositiveSmallIntegerField(default=0)
    # Other skills chosen instead: {"name": count}.
    chosen = models.JSONField(default=dict, blank=True)
    errors = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_input_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=9, null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="unique_trigger_result")
        ]

    def __str__(self) -> str:
        return f"{self.query[:40]}: {self.triggered}/{self.attempts}"
