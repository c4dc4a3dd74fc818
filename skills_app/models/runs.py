"""Agent runs: one user turn until the model stops."""

from __future__ import annotations

from django.db import models


class Run(models.Model):
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"
    STOPPED = "stopped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    STATUS_CHOICES = [
        (RUNNING, "running"),
        (WAITING, "waiting for approval"),
        (DONE, "done"),
        (STOPPED, "stopped"),
        (FAILED, "failed"),
        (INTERRUPTED, "interrupted"),
    ]
    ACTIVE = (RUNNING, WAITING)

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="runs"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=RUNNING)
    model = models.CharField(max_length=100, blank=True)
    model_label = models.CharField(max_length=100, blank=True)
    is_demo = models.BooleanField(default=False)
    usage = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=40, blank=True)
    model_calls = models.PositiveIntegerField(default=0)
    # The user's text that started this turn (stored as a message too); empty for a continuation.
    prompt = models.TextField(blank=True)
    # Retry of a failed turn: the stored message is answered again, never re-entered.
    retry = models.BooleanField(default=False)
    # Requests actually sent, as (model, system hash) facts the audit can show; messages are rebuilt from rows.
    requests = models.JSONField(default=list, blank=True)
    # Who executes the run ("host pid N"); for a Channels worker, `channel` takes its stop message.
    worker = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=200, blank=True)
    # Touched every RUN_HEARTBEAT_SECONDS by the executing process; a stale one means it died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Set by a stop from another process; the executing process polls it with the heartbeat.
    stop_requested = models.BooleanField(default=False)
    # Set when one of the run's answers quoted hidden text verbatim (streamed prose is never
    # rewritten, so the audit marks it instead; see docs/security.md).
    quoted_hidden = models.BooleanField("quoted hidden text", default=False)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at"]

    def __str__(self) -> str:
        return f"Run #{self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE
