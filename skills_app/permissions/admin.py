"""The admin of permission rules, with the rule tester."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.text import Truncator

from skills_app.adminkit import HiddenFieldsAdmin, signed_in_user
from skills_app.audit import replay as replay_calls
from skills_app.models import PermissionRule
from skills_app.permissions import checks, rule_changes
from skills_app.permissions.forms import PermissionRuleForm, RuleTesterForm
from skills_app.permissions.tester_views import (
    TESTER_WORKSPACE,
    TesterResult,
    applies_to_text,
    try_call,
)
from skills_app.registry.skills import skills_for_user
from skills_app.visibility import can_inspect, outbound


class RuleScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("global", "global"), ("skill", "one skill")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "global":
            return queryset.filter(skill="")
        if self.value() == "skill":
            return queryset.exclude(skill="")
        return queryset


@admin.register(PermissionRule)
class PermissionRuleAdmin(HiddenFieldsAdmin[PermissionRule]):
    form = PermissionRuleForm
    list_display = (
        "decides",
        "rule_text",
        "scope",
        "applies_to",
        "enabled",
        "short_note",
        "author",
        "position",
        "matches_something",
    )
    list_display_links = ("rule_text",)
    list_filter = ("behavior", "enabled", RuleScopeFilter)
    list_select_related = ("author",)
    search_fields = ("rule_text", "skill", "note")
    readonly_fields = ("author", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("behavior", "rule_text", "skill", "enabled", "position")}),
        (
            "Applies to",
            {
                "fields": ("applies_to_groups", "applies_to_users"),
                "description": "Leave both empty for a rule that applies to everyone.",
            },
        ),
        ("About", {"fields": ("note", "author", "created_at", "updated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[PermissionRule]:
        # Built here rather than by super(), which orders before the rank exists.
        rank = Case(
            When(behavior=PermissionRule.DENY, then=Value(0)),
            When(behavior=PermissionRule.ASK, then=Value(1)),
            default=Value(2),
            output_field=IntegerField(),
        )
        queryset = self.model._default_manager.get_queryset().annotate(evaluation_rank=rank)
        return queryset.order_by(*self.get_ordering(request))

    def get_ordering(self, request: HttpRequest) -> list[str]:
        # The order the engine reads them: deny, then ask, then allow; position within each.
        return ["evaluation_rank", "position", "id"]

    @admin.display(description="behaviour", ordering="evaluation_rank")
    def decides(self, rule: PermissionRule) -> str:
        return rule.behavior

    @admin.display(description="scope", ordering="skill")
    def scope(self, rule: PermissionRule) -> str:
        return f"skill: {rule.skill}" if rule.skill else "global"

    @admin.display(description="applies to")
    def applies_to(self, rule: PermissionRule) -> str:
        return applies_to_text(rule.pk).removeprefix("only ")

    filter_horizontal = ("applies_to_groups", "applies_to_users")

    @admin.display(description="note")
    def short_note(self, rule: PermissionRule) -> str:
        return Truncator(rule.note).chars(60)

    def save_model(
        self, request: HttpRequest, obj: PermissionRule, form: Any, change: bool
    ) -> None:
        obj.author = signed_in_user(request)
        # Read before the save; the change is recorded once the groups and people are saved too.
        form.rule_before = rule_changes.stored_state(obj.pk) if change else None
        super().save_model(request, obj, form, change)
        # Saved, but a rule naming what does not exist matches nothing: say so where it was made.
        for warning in checks.rule_warnings(obj.rule_text, obj.skill, obj.behavior):
            self.message_user(request, f"Saved with a warning: {warning}", messages.WARNING)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        rule_changes.record_saved(
            form.instance.pk, getattr(form, "rule_before", None), signed_in_user(request)
        )

    def delete_model(self, request: HttpRequest, obj: PermissionRule) -> None:
        rule_changes.delete(obj, signed_in_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PermissionRule]) -> None:
        for rule in queryset:
            rule_changes.delete(rule, signed_in_user(request))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        rule = self.get_object(request, object_id)
        if request.method == "GET" and rule is not None:
            for warning in checks.rule_warnings(rule.rule_text, rule.skill, rule.behavior):
                self.message_user(request, warning, messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="check")
    def matches_something(self, rule: PermissionRule) -> str:
        warnings = checks.rule_warnings(rule.rule_text, rule.skill, rule.behavior)
        return "⚠ " + " ".join(warnings) if warnings else "ok"

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_test"
        return [
            path("test/", self.admin_site.admin_view(self.tester_view), name=name),
            *super().get_urls(),
        ]

    def _tester_context(self, request: HttpRequest) -> dict[str, Any]:
        names = {spec.name for spec in skills_for_user(request.user.pk).skills()}
        names.update(
            PermissionRule.objects.exclude(skill="").values_list("skill", flat=True).distinct()
        )
        return {
            "tester_url": reverse(
                f"admin:{self.opts.app_label}_{self.opts.model_name}_test",
                current_app=self.admin_site.name,
            ),
            "tester_skills": sorted(names),
        }

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {
            **(extra_context or {}),
            **self._tester_context(request),
            "tester_form": RuleTesterForm(),
        }
        return super().changelist_view(request, extra_context=extra)

    def tester_view(self, request: HttpRequest) -> HttpResponse:
        """Type a call and an optional active skill; see the decision and the rule that made it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        result: TesterResult | None = None
        replay: replay_calls.StoredCall | None = None
        if "event" in request.GET or "approval" in request.GET:
            # A call from the audit, decided again with its stored input and active skill.
            replay = replay_calls.stored_call(
                request.user, event=request.GET.get("event"), approval=request.GET.get("approval")
            )
            result = try_call(
                replay.call, replay.skill, user_id=request.user.pk, person=replay.person
            )
            if not can_inspect(request.user):
                # Decided on the real input above; shown through the conversation's filter.
                out = outbound(replay.conversation_id, can_inspect=False, viewer_id=request.user.pk)
                replay, result = replay.shown(out), result.shown(out)
            form = RuleTesterForm(initial={"call": result.call_text, "skill": replay.skill})
        elif "call" in request.GET:
            form = RuleTesterForm(request.GET)
            if form.is_valid():
                result = try_call(
                    form.cleaned_data["call"],
                    form.cleaned_data["skill"],
                    user_id=request.user.pk,
                    person=form.cleaned_data["person"],
                )
        else:
            form = RuleTesterForm()
        context = {
            **self.admin_site.each_context(request),
            **self._tester_context(request),
            "opts": self.opts,
            "title": "Test a call against the permission rules",
            "tester_form": form,
            "result": result,
            "replay": replay,
            "workspace": TESTER_WORKSPACE,
        }
        return TemplateResponse(request, "admin/skills_app/permissionrule/tester.html", context)
