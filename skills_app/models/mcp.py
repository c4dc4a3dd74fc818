"""MCP servers an admin registered and the tool definitions they listed, each reviewed."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from skills_app.models.sealed import SealedValuesField


class McpServer(models.Model):
    """A server whose tools may be offered: identified by its argv (stdio) or URL (http).

    `env` holds the declared variables' values and `headers` the static headers' values; they go
    to the server's process or requests and nowhere else (lists and the admin show the keys
    only), and the database holds each value encrypted (`sealed.SealedValuesField`).
    """

    class Kind(models.TextChoices):
        STDIO = "stdio", "stdio (a command run in the sandbox)"
        HTTP = "http", "Streamable HTTP (a URL)"

    name = models.SlugField(
        max_length=40,
        unique=True,
        help_text="The server's part of its tools' names: mcp__NAME__tool.",
    )
    display_name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # The identity: "stdio:" + the argv as JSON, or "http:" + the URL. Never the name.
    identity = models.TextField(unique=True)
    argv = models.JSONField(default=list, blank=True)
    env = SealedValuesField(default=dict, blank=True)
    read_only_paths = models.JSONField(default=list, blank=True)
    url = models.URLField(max_length=2000, blank=True)
    headers = SealedValuesField(default=dict, blank=True)
    # "oauth": each person signs in to the server (OAuth 2.1) and calls it with their own token.
    auth = models.CharField(
        max_length=10,
        choices=[("", "none"), ("oauth", "OAuth (each person signs in)")],
        default="",
        blank=True,
    )
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    registered_by_name = models.CharField(max_length=200)
    # Who sees the server's tools: members of these groups, or everyone when `everyone`.
    groups = models.ManyToManyField(Group, blank=True, related_name="+")
    everyone = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    # What one call counts against the caller's and their groups' spending limits.
    call_cost_usd = models.DecimalField(
        "cost of a call (USD)",
        max_digits=10,
        decimal_places=4,
        default=0,
        # In the database too: rows written by code that predates the column get 0.
        db_default=0,
        help_text="What each call of its tools counts against the spending limits of the person "
        "and their groups (an estimate of what a call costs the organisation). 0: calls count "
        "against the calls-per-minute quota only.",
    )
    # When a process last heard the server say its tool list changed: every process's listing
    # from before it is stale (`offer`), not only the one of the process holding the session.
    tools_changed_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class McpToolDefinition(models.Model):
    """One definition of one tool or prompt as the server listed it; a change is a new row to
    review. A prompt's row keeps its name in `tool` and its arguments in `input_schema` (a list
    of {name, description, required}); its annotations and `_meta` stay empty."""

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for review"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"

    class Kind(models.TextChoices):
        TOOL = "tool", "tool"
        PROMPT = "prompt", "prompt"

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="definitions")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TOOL)
    tool = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # Listed by the server the last time it was asked (a tool it no longer lists is not offered).
    current = models.BooleanField(default=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_by_name = models.CharField(max_length=200, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    # The approving reviewer vouched for this definition's readOnlyHint and destructiveHint as
    # shown: only then do they set the default of a call no rule names. Held by this row, so by
    # this content hash: a changed definition is a new row, without it.
    hints_attested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    hints_attested_by_name = models.CharField(max_length=200, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["server", "tool", "-first_seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["server", "kind", "tool", "content_hash"], name="mcp_definition_once"
            )
        ]

    def __str__(self) -> str:
        what = "prompt " if self.kind == self.Kind.PROMPT else ""
        return f"{what}{self.server.name}/{self.tool} {self.content_hash[:12]} ({self.status})"


class McpOAuthGrant(models.Model):
    """What one person holds for one OAuth server, from one issuer: the tokens and the client
    registration, both encrypted (`skills_app.mcp.oauth_grants`); nothing of them is readable in the
    database."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="grants")
    issuer = models.CharField(max_length=2000, blank=True)
    tokens = models.BinaryField(blank=True, default=b"")
    client_info = models.BinaryField(blank=True, default=b"")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "server", "issuer"], name="mcp_oauth_grant_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.server.name} for user {self.user_id} ({self.issuer or 'no issuer yet'})"


class McpOAuthPendingSignIn(models.Model):
    """A sign-in one person started and the authorization server has not sent back yet: what
    the callback needs to finish it in any web process (the PKCE verifier, the redirect URI,
    the client registration, the token endpoint and the issuer's metadata), encrypted like the
    grants (`skills_app.mcp.oauth_sign_in`). Found by the digest of its `state`; used once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="+")
    state_digest = models.CharField(max_length=64, unique=True)
    sealed = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"sign-in of user {self.user_id} to {self.server_id} ({self.created_at:%H:%M:%S})"


class McpElicitation(models.Model):
    """A question an MCP server asked the person mid-call (`elicitation/create`), and the answer.

    The card in the chat is made from the run's events; this row is where the answer is given
    (by any tab, any process) and what the audit keeps: which server asked, what, the form's
    fields, the answer and its values (filtered as an mcp__ call's arguments are), who answered.
    A question that was not put to the person (a secret asked for) is stored declined, with why.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for an answer"
        ACCEPT = "accept", "accepted"
        DECLINE = "decline", "declined"
        CANCEL = "cancel", "cancelled"

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="+"
    )
    run = models.ForeignKey("skills_app.Run", on_delete=models.PROTECT, related_name="+")
    server = models.CharField(max_length=200)
    message = models.TextField(blank=True)
    fields = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    values = models.JSONField(default=dict, blank=True)
    why = models.TextField(blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.server} asked: {self.status}"
