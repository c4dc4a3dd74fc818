"""The organisation: groups mapped from the directory, what each group may use, budgets, storage.

Everything here narrows what is global otherwise: a skill without a `SkillAccess` row is offered
to everyone, a group without a `GroupPolicy` grants nothing beyond the defaults, a user without
a `UserPolicy` gets the configured default limits (docs/organisation.md).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q


class GroupPolicy(models.Model):
    """What membership of one group means: its directory name, extra models, a pooled budget."""

    group = models.OneToOneField(
        Group, primary_key=True, on_delete=models.CASCADE, related_name="policy"
    )
    # The value of the identity provider's group claim that means membership of this group. Set:
    # membership follows the directory on every sign-in (added and removed); empty: local only.
    directory_name = models.CharField(
        max_length=300,
        blank=True,
        help_text="The group as the identity provider names it in the groups claim (exact). "
        "Empty: membership is managed here only.",
    )
    # Model ids members may use besides SKILLSCOPE_DEFAULT_MODELS (always within ANTHROPIC_MODELS).
    allowed_models = models.JSONField(default=list, blank=True)
    # What the group's members may spend together; null: no limit for the group.
    daily_limit_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    monthly_limit_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "group policies"
        constraints = [
            models.UniqueConstraint(
                fields=["directory_name"],
                condition=~Q(directory_name=""),
                name="grouppolicy_directory_name_unique",
            )
        ]

    def __str__(self) -> str:
        return f"policy of {self.group.name}"


class SkillAccess(models.Model):
    """An organisation skill offered only to the members of some groups (by the skill's name)."""

    skill = models.CharField(max_length=200, unique=True)
    groups = models.ManyToManyField(Group, blank=True, related_name="skill_access")
    note = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["skill"]
        verbose_name_plural = "skill access"

    def __str__(self) -> str:
        return f"access to {self.skill}"


class UserPolicy(models.Model):
    """One person's own limits (raised or lowered by an administrator) and directory facts."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="policy"
    )
    # Null: the configured default (BUDGET_USER_DAILY_USD / BUDGET_USER_MONTHLY_USD).
    daily_limit_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    monthly_limit_usd = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    # Null: STORAGE_QUOTA_BYTES.
    storage_quota_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    # The groups claim as the identity provider last sent it (shown to administrators).
    directory_groups = models.JSONField(default=list, blank=True)
    directory_synced_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "user policies"

    def __str__(self) -> str:
        return f"policy of user {self.user_id}"


class SpendCounter(models.Model):
    """Dollars spent and reserved by one user or group in one day or month.

    Reservations and spending change these rows with conditional UPDATEs in one transaction, so
    two requests at once can never both pass a limit that only one of them fits under.
    """

    class Scope(models.TextChoices):
        USER = "user", "user"
        GROUP = "group", "group"

    class Period(models.TextChoices):
        DAY = "day", "day"
        MONTH = "month", "month"

    USER = Scope.USER
    GROUP = Scope.GROUP
    DAY = Period.DAY
    MONTH = Period.MONTH

    scope = models.CharField(max_length=5, choices=Scope.choices)
    scope_id = models.BigIntegerField()
    period = models.CharField(max_length=5, choices=Period.choices)
    start = models.DateField()  # the day, or the first day of the month
    spent_usd = models.DecimalField(max_digits=16, decimal_places=9, default=0)
    reserved_usd = models.DecimalField(max_digits=16, decimal_places=9, default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "scope_id", "period", "start"], name="spendcounter_unique"
            )
        ]
        indexes = [models.Index(fields=["period", "start"], name="spendcounter_period")]

    def __str__(self) -> str:
        return f"{self.scope} {self.scope_id} {self.period} {self.start}: ${self.spent_usd}"


class SpendReservation(models.Model):
    """Dollars set aside for one model call before it starts; settled with what it cost."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # What called the model: turn, title, summary, trigger, fork...
    purpose = models.CharField(max_length=20)
    model = models.CharField(max_length=100)
    amount_usd = models.DecimalField(max_digits=16, decimal_places=9)
    # The SpendCounter ids it was reserved on (the same ones are settled, whatever changed since).
    counters = models.JSONField(default=list)
    actual_usd = models.DecimalField(max_digits=16, decimal_places=9, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["settled_at", "created_at"], name="spendreservation_open")]

    def __str__(self) -> str:
        return f"${self.amount_usd} for {self.purpose} of user {self.user_id}"


class StorageAccount(models.Model):
    """Bytes one user has set aside for writes in progress (a command, an upload)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    reserved_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)


class WorkspaceUsage(models.Model):
    """The bytes a conversation's workspace holds (in/, work/, out/), as last measured."""

    conversation = models.OneToOneField(
        "skills_app.Conversation",
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="storage",
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    bytes = models.BigIntegerField(default=0)
    measured_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner"], name="workspaceusage_owner")]
