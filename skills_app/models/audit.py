"""The audit rows: every attempt to load a skill, and the trail of what was done to the audit."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SkillInvocation(models.Model):
    """The audit row: one attempt to load a skill, successful or not."""

    class Caller(models.TextChoices):
        USER = "user", "user"
        MODEL = "model", "model"

    USER = Caller.USER
    MODEL = Caller.MODEL

    # PROTECT: audit rows outlive anything that would cascade into them (skills_app.audit.guard).
    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="invocations"
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
    # A version an invocation loaded is never deleted under it (versions.delete_package disables).
    version = models.ForeignKey(
        "skills_app.SkillVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="invocations",
    )
    digest = models.CharField(max_length=64, blank=True)
    caller = models.CharField(max_length=10, choices=Caller.choices)
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
    # The skill's `model:` when the user's policy does not offer it: the turn kept its model.
    model_refused = models.CharField(max_length=100, blank=True)
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


class AuditEvent(models.Model):
    """Something done to the audit or to who may read it: a deletion, a purge, a role change, an export.

    Append-only like the rest of the audit; a purge never removes these rows.
    """

    class Action(models.TextChoices):
        CONVERSATION_DELETED = "conversation.deleted", "conversation deleted by its owner"
        PURGE = "audit.purge", "audit purged"
        EXPORT = "audit.export", "audit exported"
        ROLE_GRANTED = "role.granted", "role granted"
        ROLE_REVOKED = "role.revoked", "role revoked"
        ATTACHMENT_ADDED = "attachment.added", "file attached to a conversation"
        LOGIN_LOCKED_OUT = "login.locked_out", "sign-in locked after failed attempts"
        LOGIN_UNLOCKED = "login.unlocked", "sign-in lockout lifted"
        SIGN_IN_REFUSED = "signin.refused", "sign-in through the identity provider refused"
        DIRECTORY_SYNCED = "directory.synced", "groups set from the identity provider"
        LIMIT_CHANGED = "limit.changed", "spending or storage limit changed"
        MCP_REGISTERED = "mcp.registered", "MCP server registered"
        MCP_REMOVED = "mcp.removed", "MCP server removed"
        MCP_CHANGED = "mcp.changed", "MCP server's audience or state changed"
        MCP_TOOL_NEW = "mcp.tool_new", "MCP tool listed for the first time"
        MCP_TOOL_CHANGED = "mcp.tool_changed", "MCP tool definition changed (drift)"
        MCP_REVIEWED = "mcp.reviewed", "MCP tool definition approved or rejected"
        MCP_CALLED = "mcp.called", "MCP tool called"
        MCP_SIGNED_OUT = "mcp.signed_out", "signed out of an OAuth MCP server (grant deleted)"
        MCP_PROMPT_NEW = "mcp.prompt_new", "MCP prompt listed for the first time"
        MCP_PROMPT_CHANGED = "mcp.prompt_changed", "MCP prompt definition changed (drift)"
        FEEDBACK_GIVEN = "feedback.given", "feedback given on an answer"
        SHARE_CREATED = "share.created", "read-only link to a conversation made"
        SHARE_VIEWED = "share.viewed", "read-only link to a conversation opened"
        SHARE_REVOKED = "share.revoked", "read-only link to a conversation revoked"
        RULE_ADDED = "rule.added", "permission rule added"
        RULE_CHANGED = "rule.changed", "permission rule changed"
        RULE_DELETED = "rule.deleted", "permission rule deleted"

    CONVERSATION_DELETED = Action.CONVERSATION_DELETED
    PURGE = Action.PURGE
    EXPORT = Action.EXPORT
    ROLE_GRANTED = Action.ROLE_GRANTED
    ROLE_REVOKED = Action.ROLE_REVOKED
    ATTACHMENT_ADDED = Action.ATTACHMENT_ADDED
    LOGIN_LOCKED_OUT = Action.LOGIN_LOCKED_OUT
    LOGIN_UNLOCKED = Action.LOGIN_UNLOCKED
    SIGN_IN_REFUSED = Action.SIGN_IN_REFUSED
    DIRECTORY_SYNCED = Action.DIRECTORY_SYNCED
    LIMIT_CHANGED = Action.LIMIT_CHANGED
    MCP_REGISTERED = Action.MCP_REGISTERED
    MCP_REMOVED = Action.MCP_REMOVED
    MCP_CHANGED = Action.MCP_CHANGED
    MCP_TOOL_NEW = Action.MCP_TOOL_NEW
    MCP_TOOL_CHANGED = Action.MCP_TOOL_CHANGED
    MCP_REVIEWED = Action.MCP_REVIEWED
    MCP_CALLED = Action.MCP_CALLED
    MCP_SIGNED_OUT = Action.MCP_SIGNED_OUT
    MCP_PROMPT_NEW = Action.MCP_PROMPT_NEW
    MCP_PROMPT_CHANGED = Action.MCP_PROMPT_CHANGED
    FEEDBACK_GIVEN = Action.FEEDBACK_GIVEN
    SHARE_CREATED = Action.SHARE_CREATED
    SHARE_VIEWED = Action.SHARE_VIEWED
    SHARE_REVOKED = Action.SHARE_REVOKED
    RULE_ADDED = Action.RULE_ADDED
    RULE_CHANGED = Action.RULE_CHANGED
    RULE_DELETED = Action.RULE_DELETED

    action = models.CharField(max_length=40, choices=Action.choices)
    # Who did it; the name is kept as text too, so the row reads the same if the account changes.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    actor_name = models.CharField(max_length=200, blank=True)
    # What it was done to, in words ("conversation #12", "user alice"), and the facts as JSON.
    target = models.CharField(max_length=300, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        return f"{self.get_action_display()}: {self.target} by {who}"
