"""What Skillscope stores: conversations, their messages and runs, the audit of skill invocations,
approvals, permission rules and uploaded skills. See DESIGN.md "Data"."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Conversation(models.Model):
    PROFILE_CHOICES = [
        ("meta-message", "meta-message (Claude Code)"),
        ("tool-result", "tool-result (load_skill)"),
        ("system-prompt", "system-prompt (skill toolset)"),
    ]

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, default="New conversation")
    profile = models.CharField(max_length=20, choices=PROFILE_CHOICES, default="meta-message")
    model = models.CharField(max_length=100, blank=True, help_text="Empty: the configured default.")
    # Names of the only skills offered in this conversation (the comparison page); empty: all.
    skill_filter = models.JSONField(default=list, blank=True)
    session_id = models.UUIDField(default=uuid.uuid4, editable=False, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The last RunEvent.seq handed out; incremented under a row lock so seq is gap-free per conversation.
    last_event_seq = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-updated_at"]
        permissions = [("inspect_injected_content", "Can inspect injected content")]

    def __str__(self) -> str:
        return f"{self.title} (#{self.pk})"


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

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=RUNNING)
    model = models.CharField(max_length=100, blank=True)
    model_label = models.CharField(max_length=100, blank=True)
    is_demo = models.BooleanField(default=False)
    usage = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=40, blank=True)
    model_calls = models.PositiveIntegerField(default=0)
    # Requests actually sent, as (model, system hash) facts the audit can show; messages are rebuilt from rows.
    requests = models.JSONField(default=list, blank=True)
    # Who executes the run ("host pid N"); for a Channels worker, `channel` takes its stop message.
    worker = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=200, blank=True)
    # Touched every RUN_HEARTBEAT_SECONDS by the executing process; a stale one means it died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Set by a stop from another process; the executing process polls it with the heartbeat.
    stop_requested = models.BooleanField(default=False)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at"]

    def __str__(self) -> str:
        return f"Run #{self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


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
        "SkillVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    enabled = models.BooleanField(default=True)
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
    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="versions")
    digest = models.CharField(max_length=64)
    number = models.PositiveIntegerField()
    storage_path = models.CharField(max_length=500)
    skill_md = models.TextField()
    frontmatter = models.JSONField(default=dict)
    lint = models.JSONField(default=list)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["package", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["package", "digest"], name="unique_version_digest"),
            models.UniqueConstraint(fields=["package", "number"], name="unique_version_number"),
        ]

    def __str__(self) -> str:
        return f"{self.package.name} v{self.number} ({self.digest[:12]})"


class SkillInvocation(models.Model):
    """The audit row: one attempt to load a skill, successful or not."""

    USER = "user"
    MODEL = "model"
    CALLER_CHOICES = [(USER, "user"), (MODEL, "model")]

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="invocations"
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="invocations"
    )
    skill = models.CharField(max_length=200)
    source = models.CharField(max_length=40, blank=True)
    version = models.ForeignKey(
        SkillVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="invocations"
    )
    digest = models.CharField(max_length=64, blank=True)
    caller = models.CharField(max_length=10, choices=CALLER_CHOICES)
    args = models.TextField(blank=True)
    tool_use_id = models.CharField(max_length=100, blank=True)
    # allowed | denied | failed — and what decided: a rule, the user's approval, or an error code.
    decision = models.CharField(max_length=20)
    decided_by = models.CharField(max_length=300, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    approval = models.ForeignKey(
        "Approval", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status_text = models.TextField(blank=True)
    injected_text = models.TextField(blank=True)
    allowed_tools = models.JSONField(default=list, blank=True)
    disallowed_tools = models.JSONField(default=list, blank=True)
    model_override = models.CharField(max_length=100, blank=True)
    already_loaded = models.BooleanField(default=False)
    # `!` commands of the body: [{command, form, status, exit_code, output, reason}].
    shell_commands = models.JSONField(default=list, blank=True)
    # Skill hooks this invocation registered for the rest of the conversation (SkillHook.as_dict).
    hooks = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.skill} by {self.caller}: {self.decision}"


class Message(models.Model):
    USER = "user"
    ASSISTANT = "assistant"
    ROLE_CHOICES = [(USER, "user"), (ASSISTANT, "assistant")]

    KIND_CHOICES = [
        ("text", "text"),
        ("tool_use", "tool use"),
        ("tool_result", "tool result"),
        ("skill_status", "skill status"),
        ("skill_prompt", "skill prompt (hidden)"),
        ("permissions", "applied permissions"),
        ("error", "error"),
        ("notice", "notice"),
    ]

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=ROLE_CHOICES)
    content = models.JSONField(default=list)
    is_meta = models.BooleanField(default=False, help_text="Hidden from the transcript.")
    to_model = models.BooleanField(default=True, help_text="Sent to the model.")
    kind = models.CharField(max_length=20, choices=KIND_CHOICES, default="text")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    invocation = models.ForeignKey(
        SkillInvocation, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    # Free facts for rendering: partial=True for text cut by a failure, tool decisions, artifacts.
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_message_seq")
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}/{self.kind}{' (hidden)' if self.is_meta else ''}"


class RunEvent(models.Model):
    """Append-only log of what a run did; browsers resume from the last seq they saw."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    seq = models.BigIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    # True when data holds hidden content: such events are filtered for users without the inspect permission.
    hidden = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_event_seq")
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.seq}"


class Approval(models.Model):
    PENDING = "pending"
    ALLOW_ONCE = "allow_once"
    ALLOW_CONVERSATION = "allow_conversation"
    DENY = "deny"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    ANSWER_CHOICES = [
        (PENDING, "pending"),
        (ALLOW_ONCE, "allow once"),
        (ALLOW_CONVERSATION, "allow for this conversation"),
        (DENY, "deny"),
        (TIMEOUT, "timed out"),
        (CANCELLED, "cancelled"),
    ]

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="approvals"
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    tool_use_id = models.CharField(max_length=100, blank=True)
    tool = models.CharField(max_length=100)
    input = models.JSONField(default=dict)
    call_text = models.TextField()
    skill = models.CharField(max_length=200, blank=True, help_text="Active skill, if any.")
    rule_text = models.CharField(max_length=500, blank=True)
    reason = models.TextField(blank=True, help_text="Why the rules engine asked.")
    status = models.CharField(max_length=20, choices=ANSWER_CHOICES, default=PENDING)
    deny_reason = models.TextField(blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.call_text}: {self.status}"


class ConversationGrant(models.Model):
    """An "allow for this conversation" answer: a rule that holds only inside one conversation."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="grants")
    rule_text = models.CharField(max_length=500)
    approval = models.ForeignKey(Approval, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]


class PermissionRule(models.Model):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"
    BEHAVIOR_CHOICES = [(DENY, "deny"), (ASK, "ask"), (ALLOW, "allow")]

    behavior = models.CharField(max_length=5, choices=BEHAVIOR_CHOICES)
    rule_text = models.CharField(
        max_length=500, help_text="e.g. Skill(pdf), Bash(git diff *), Read(./docs/**)"
    )
    skill = models.CharField(
        max_length=200,
        blank=True,
        help_text="Empty: a global rule. A skill name: applies only while that skill's turn is active.",
    )
    enabled = models.BooleanField(default=True)
    note = models.TextField(blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    position = models.PositiveIntegerField(default=0, help_text="Order within the same behaviour.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        scope = f" [{self.skill}]" if self.skill else ""
        return f"{self.behavior} {self.rule_text}{scope}"


class Comparison(models.Model):
    """One prompt run under each delivery profile, side by side (staff tool)."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="comparisons"
    )
    prompt = models.TextField()
    skills = models.JSONField(default=list, blank=True)
    conversations = models.ManyToManyField(Conversation, related_name="comparisons")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Comparison #{self.pk}"
