"""The admin's user page with roles first and raw permissions last, and the roles as groups."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db.models import QuerySet
from django.http import HttpRequest

from skills_app import trail
from skills_app.accounts import roles
from skills_app.accounts.org_admin import (
    GroupPolicyInline,
    lift_lockout,
    locked_column,
    record_limit_change,
)


class RoleFilter(admin.SimpleListFilter):
    title = "role"
    parameter_name = "role"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(r.slug, r.name) for r in roles.ROLES] + [("none", "no role")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "none":
            return queryset.filter(groups__isnull=True)
        if value:
            role = next((r for r in roles.ROLES if r.slug == value), None)
            if role is not None:
                return queryset.filter(groups__name=role.name)
        return queryset


class RoleChoiceField(forms.ModelMultipleChoiceField[Group]):
    def label_from_instance(self, obj: Group) -> str:
        role = roles.role_of_group(obj.name)
        return f"{obj.name}: {role.summary}" if role else obj.name


class SkillscopeUserAdmin(UserAdmin[User]):
    """Roles are what an administrator hands out; the ~100 raw permissions come last, folded."""

    list_display = ("username", "role_names", "sign_in", "is_active", "is_staff", "last_login")
    actions = [lift_lockout]
    list_filter = (RoleFilter, "is_active", "is_staff", "is_superuser")
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        (
            "Roles",
            {
                "fields": ("groups", "is_active", "is_staff"),
                "description": (
                    "What this person may do: tick the roles they hold. No role ticked means "
                    "chat only: they chat with the agent and use the skills offered to them, "
                    "as a Chatter does."
                ),
            },
        ),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Important dates", {"fields": ("last_login", "date_joined")}),
        (
            "Raw permissions (rarely needed: prefer a role)",
            {"fields": ("is_superuser", "user_permissions"), "classes": ("collapse",)},
        ),
    )

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "groups":
            # One checkbox per role, with what it grants, instead of a two-list group picker.
            return RoleChoiceField(
                queryset=Group.objects.order_by("name"),
                required=False,
                widget=forms.CheckboxSelectMultiple,
                label="Roles",
                help_text=(
                    "Skill manager, Auditor and Administrator need the admin site: saving gives "
                    "staff status. Deactivate people who leave (untick Active); a user with "
                    "conversations or audit history cannot be deleted."
                ),
            )
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    @admin.display(description="roles")
    def role_names(self, user: User) -> str:
        return ", ".join(r.name for r in roles.roles_of(user)) or "—"

    @admin.display(description="sign-in")
    def sign_in(self, user: User) -> str:
        return locked_column(user)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Role changes are recorded with the administrator who made them.
        with trail.acting(request.user):
            super().save_related(request, form, formsets, change)
        roles.sync_staff(form.instance)


class RoleGroupAdmin(GroupAdmin):
    list_display = ("name", "summary", "directory_name", "members")
    inlines = [GroupPolicyInline]

    @admin.display(description="directory group")
    def directory_name(self, group: Group) -> str:
        policy = getattr(group, "policy", None)
        return policy.directory_name if policy is not None and policy.directory_name else "—"

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        changed = [f for f in formset.forms if f.has_changed()]
        super().save_formset(request, form, formset, change)
        for inline_form in changed:
            record_limit_change(
                request,
                f"group {form.instance.name}",
                fields={k: str(inline_form.cleaned_data.get(k)) for k in inline_form.changed_data},
            )

    @admin.display(description="what it grants")
    def summary(self, group: Group) -> str:
        role = roles.role_of_group(group.name)
        return role.summary if role else "(not one of Skillscope's roles)"

    @admin.display(description="members")
    def members(self, group: Group) -> int:
        return group.user_set.count()


def register(site: admin.AdminSite) -> None:
    """Replace Django's user and group admins with these."""
    for model, model_admin in ((User, SkillscopeUserAdmin), (Group, RoleGroupAdmin)):
        if site.is_registered(model):
            site.unregister(model)
        site.register(model, model_admin)
