"""The audit row of every attempt to load a skill."""

from __future__ import annotations

from django.db import models


class SkillInvocation(models.Model):
    """The audit row: one attempt to load a skill, successful or not."""

    USER = "user"
    MODEL = "model"
    CALLER_CHOICES = [(USER, "user"), (MODEL, "model")]

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.CASCADE, related_name="invocations"
    )
    run = models.ForeignKey(
        "skills_app.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invocations",
    )
    skill = models.CharField(max_length=200)
    source = models.CharField(max_length=40, blank=True)
    version = models.ForeignKey(
        "skills_app.SkillVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invocations",
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
        "skills_app.Approval", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
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
