"""What every model call used and cost, and what it was sent (the captured request)."""

from __future__ import annotations

from django.db import models


class RequestPart(models.Model):
    """A system prompt or a tool list exactly as sent, stored once per content hash.

    Most calls send the same system prompt and tools as the call before: storing them by digest
    keeps one copy however many calls share them.
    """

    class Kind(models.TextChoices):
        SYSTEM = "system", "system prompt"
        TOOLS = "tools", "tools"

    SYSTEM = Kind.SYSTEM
    TOOLS = Kind.TOOLS

    digest = models.CharField(max_length=64, unique=True)  # sha256 of kind + canonical JSON
    kind = models.CharField(max_length=10, choices=Kind.choices)
    content = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.digest[:12]}"


class ModelCall(models.Model):
    """One call of the model: its usage and cost as the API reported them, and what was sent."""

    class Purpose(models.TextChoices):
        TURN = "turn", "a run's turn"
        SUMMARY = "summary", "a summary for a new conversation"
        TITLE = "title", "a conversation's title"

    TURN = Purpose.TURN
    SUMMARY = Purpose.SUMMARY
    TITLE = Purpose.TITLE

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="model_calls"
    )
    # Null for calls outside a run (summaries).
    run = models.ForeignKey(
        "skills_app.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="calls"
    )
    call = models.PositiveIntegerField(default=1)  # numbered from 1 within its run
    purpose = models.CharField(max_length=10, choices=Purpose.choices, default=Purpose.TURN)
    requested_model = models.CharField(max_length=100)
    # The model that answered, as the API named it ("demo" for the offline demo model).
    model = models.CharField(max_length=100, blank=True)
    is_demo = models.BooleanField(default=False)
    # The skill invoked last in the turn when the call was made: its cost is counted for it.
    skill = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_input_tokens = models.PositiveBigIntegerField(default=0)
    usage = models.JSONField(default=dict, blank=True)  # as reported, breakdowns included
    # USD at the price of the day of the call; null: nothing owed (demo) or no known price.
    cost_usd = models.DecimalField(max_digits=16, decimal_places=9, null=True, blank=True)
    stop_reason = models.CharField(max_length=40, blank=True)
    error_kind = models.CharField(max_length=40, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # The captured request. system and tools as sent (cache markers included), by digest;
    # options: every other field but the messages, in the order sent.
    system = models.ForeignKey(
        RequestPart, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    tools = models.ForeignKey(
        RequestPart, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    options = models.JSONField(default=dict, blank=True)
    # The messages: the rows with seq first_seq..last_seq, minus skipped_seqs, sent as messages
    # (`transcript.to_api_messages`, then the cache breakpoints when cache_breakpoints is set).
    first_seq = models.PositiveIntegerField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(null=True, blank=True)
    skipped_seqs = models.JSONField(default=list, blank=True)
    cache_breakpoints = models.BooleanField(default=False)
    # The messages verbatim, only when they cannot be told as a range of rows (a subagent's).
    messages = models.JSONField(null=True, blank=True)
    # sha256 of the request body as sent (compact JSON): the rebuilt body is checked against it.
    body_digest = models.CharField(max_length=64, blank=True)
    # For estimating the next request's size: how many messages and prefix characters this had.
    message_count = models.PositiveIntegerField(default=0)
    prefix_chars = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["started_at", "pk"]
        indexes = [
            models.Index(fields=["started_at"], name="modelcall_started"),
            models.Index(fields=["skill", "started_at"], name="modelcall_skill_started"),
        ]

    def __str__(self) -> str:
        return f"call {self.call} of run {self.run_id} ({self.model or self.requested_model})"

    @property
    def captured(self) -> bool:
        return bool(self.body_digest)

    @property
    def input_total(self) -> int:
        """Every prompt token: uncached, written to the cache and read from it."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
