"""Agent runs (one user turn until the model stops) and the worker processes that execute them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "waiting for a worker"
        RUNNING = "running", "running"
        WAITING = "waiting", "waiting for approval"
        DONE = "done", "done"
        STOPPED = "stopped", "stopped"
        FAILED = "failed", "failed"
        INTERRUPTED = "interrupted", "interrupted"

    # The short names every call site uses (Run.QUEUED); they are the Status members.
    QUEUED = Status.QUEUED
    RUNNING = Status.RUNNING
    WAITING = Status.WAITING
    DONE = Status.DONE
    STOPPED = Status.STOPPED
    FAILED = Status.FAILED
    INTERRUPTED = Status.INTERRUPTED
    # Not finished: a conversation has at most one such run (a queued one counts: it will run).
    ACTIVE = (QUEUED, RUNNING, WAITING)
    # Taken by a process that executes it (and keeps its heartbeat fresh).
    EXECUTING = (RUNNING, WAITING)

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="runs"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
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
    # Who sent it, and how approvals are answered without a browser (the CLI's --yes/--no): what
    # a worker needs to execute a queued run, kept on the row so the queue holds nothing else.
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    auto_answer = models.CharField(max_length=20, blank=True)
    # Requests actually sent, as (model, system hash) facts the audit can show; messages are rebuilt from rows.
    requests = models.JSONField(default=list, blank=True)
    # Who executes the run ("host pid N"); for a Channels worker, `channel` takes its stop message.
    worker = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=200, blank=True)
    # Touched every few seconds by the executing process; a stale one means it died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Set by a stop from another process; the executing process polls it with the heartbeat.
    stop_requested = models.BooleanField(default=False)
    # Set when one of the run's answers quoted hidden text verbatim (streamed prose is never
    # rewritten, so the audit marks it instead; see docs/security.md).
    quoted_hidden = models.BooleanField("quoted hidden text", default=False)
    # Created (and, for a queued run, enqueued) at started_at; taken by a worker at claimed_at.
    started_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at"]
        indexes = [
            # The queue, the sweeps and the operator page look for the few unfinished runs.
            models.Index(fields=["status"], name="run_status"),
        ]

    def __str__(self) -> str:
        return f"Run #{self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class Worker(models.Model):
    """One run worker process (`manage.py runworker skillscope-runs`) from its start to its end.

    A worker touches `heartbeat_at` every WORKER_HEARTBEAT_SECONDS; one silent for longer than
    WORKER_STALE_SECONDS is dead, and the runs it executed are marked interrupted. Rows of
    workers that ended are kept for a day, for the operator page.
    """

    # "host pid N #abc123": unique per process start, so a restarted container (same host name,
    # same pid) is a new worker and never inherits the runs of the one that died.
    name = models.CharField(max_length=200, unique=True)
    # Its own channel: a stop for one of its runs is sent there.
    channel = models.CharField(max_length=200, blank=True)
    # How many runs it executes at once at most (WORKER_MAX_RUNS; 0: no limit).
    capacity = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # "shut down" (it said goodbye) or "no heartbeat" (another process found it silent).
    stop_reason = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["started_at"]

    def __str__(self) -> str:
        return self.name


class StreamPiece(models.Model):
    """A piece of a run's streamed text, written before it is sent to any tab (`runs.streams`).

    The live text of an answer in progress: what a tab that connects mid-answer starts from, what
    fills a tab's hole when the channel layer dropped a frame, and what is kept as the partial
    answer of a run whose process died. Because a piece is committed before its frame leaves the
    process, no tab ever saw text that these rows lack. A piece is `offset` characters into block
    `index` of model call `call`; the rows of a run go once its answer is stored in a Message
    (or kept as a partial one), so the table only holds answers in progress.
    """

    run = models.ForeignKey("skills_app.Run", on_delete=models.CASCADE, related_name="+")
    call = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=10)  # text | thinking
    offset = models.PositiveIntegerField()
    text = models.TextField()

    def __str__(self) -> str:
        return f"{self.kind} piece of run {self.run_id} at {self.offset}"
