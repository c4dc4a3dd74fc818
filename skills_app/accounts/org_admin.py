"""The organisation in the admin: a group's policy (directory name, models, budget) on its page,
a person's limits and directory groups on theirs, which groups see which skills, lockouts."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.http import HttpRequest

from skills_app import trail
from skills_app.accounts import lockout
from skills_app.models import AuditEvent, GroupPolicy, SkillAccess, UserPolicy
from skills_app.policy import barred


class GroupPolicyForm(forms.ModelForm[GroupPolicy]):
    allowed_models = forms.MultipleChoiceField(
        choices=[],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Models",
        help_text="Models the group's members may use besides those everyone may "
        "(SKILLSCOPE_DEFAULT_MODELS).",
    )

    class Meta:
        model = GroupPolicy
        fields = [
            "directory_name",
            "allowed_models",
            "daily_limit_usd",
            "monthly_limit_usd",
            "note",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["allowed_models"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [(m, m) for m in settings.ANTHROPIC_MODELS]

    def clean_directory_name(self) -> str:
        return str(self.cleaned_data["directory_name"]).strip()


class GroupPolicyInline(admin.StackedInline[GroupPolicy, Group]):
    model = GroupPolicy
    form = GroupPolicyForm
    can_delete = False
    verbose_name = "policy"
    verbose_name_plural = "policy: directory mapping, models, budget"


@admin.register(UserPolicy)
class UserPolicyAdmin(admin.ModelAdmin[UserPolicy]):
    """One person's limits (raise or lower them here) and the groups the directory last sent."""

    list_display = ("user", "daily_limit_usd", "monthly_limit_usd", "storage_quota_bytes", "synced")
    search_fields = ("user__username",)
    autocomplete_fields = ("user",)
    fields = (
        "user",
        "daily_limit_usd",
        "monthly_limit_usd",
        "storage_quota_bytes",
        "directory_groups",
        "directory_synced_at",
    )
    readonly_fields = ("directory_groups", "directory_synced_at")

    @admin.display(description="directory groups synced")
    def synced(self, policy: UserPolicy) -> str:
        return f"{policy.directory_synced_at:%Y-%m-%d %H:%M}" if policy.directory_synced_at else "—"

    def save_model(self, request: HttpRequest, obj: UserPolicy, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if form.changed_data:
            record_limit_change(
                request,
                f"user {obj.user.get_username()}",
                fields={k: str(form.cleaned_data.get(k)) for k in form.changed_data},
            )


@admin.register(SkillAccess)
class SkillAccessAdmin(admin.ModelAdmin[SkillAccess]):
    list_display = ("skill", "group_names", "note")
    search_fields = ("skill",)
    filter_horizontal = ("groups",)

    @admin.display(description="offered to")
    def group_names(self, access: SkillAccess) -> str:
        names = [g.name for g in access.groups.all()]
        return ", ".join(names) if names else "everyone (no group chosen)"


def record_limit_change(request: HttpRequest, what: str, **detail: Any) -> None:
    trail.record(AuditEvent.LIMIT_CHANGED, actor=request.user, target=what, **detail)


@admin.action(description="Lift the sign-in lockout")
def lift_lockout(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
    for user in queryset:
        removed = lockout.unlock(user.get_username(), actor=request.user)
        modeladmin.message_user(
            request,
            f"{user.get_username()}: lockout lifted ({removed} failed attempt record(s) cleared).",
            messages.SUCCESS,
        )


def locked_column(user: Any) -> str:
    return "locked" if barred.username_locked(user.get_username()) else ""
