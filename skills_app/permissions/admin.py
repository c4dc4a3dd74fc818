"""The admin of permission rules, with the rule tester."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
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
from skills_app.core.invocation import skill_rules
from skills_app.core.permissions import (
    Decision,
    Rule,
    RuleSyntaxError,
    ToolCall,
    call_as_rule_text,
    parse_rule,
)
from skills_app.core.permissions.tester import read_call
from skills_app.mcp.definitions import listed_tools
from skills_app.models import (
    PermissionRule,
)
from skills_app.permissions import approvals, checks
from skills_app.permissions.forms import PermissionRuleForm, RuleTesterForm
from skills_app.registry.skills import skills_for_user
from skills_app.visibility import Outbound, can_inspect, outbound

# The rule tester decides as if a conversation's workspace were here; rules like Edit(./out/**)
# are anchored to it, and paths outside it fall to the "outside the workspace" default.
TESTER_WORKSPACE = Path("/workspace")


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


@dataclass(frozen=True, slots=True)
class TesterResult:
    """What the rule tester shows: the decision and everything that went into it."""

    call: ToolCall
    call_text: str
    decision: Decision
    rule_url: str
    active_skill: str
    rules_considered: int
    scoped_elsewhere: int
    skill_rules: tuple[Rule, ...]
    # The person the rules were read for ("" : everyone), the deciding rule's audience, and how
    # many enabled rules apply only to other people.
    person: str = ""
    applies_to: str = ""
    for_others: int = 0
    also_trusts: str = ""
    # Rules read that can never match any call (with why), and why the call's own tool is never
    # decided under its name ("" when it is).
    never_matching: tuple[tuple[Rule, str], ...] = ()
    call_note: str = ""

    @property
    def never_links(self) -> list[tuple[Rule, str, str]]:
        """(rule, why, its admin page or "") for the template."""
        return [
            (
                rule,
                why,
                reverse("admin:skills_app_permissionrule_change", args=[rule.rule_id])
                if rule.source == "admin" and rule.rule_id is not None
                else "",
            )
            for rule, why in self.never_matching
        ]

    @property
    def input_json(self) -> str:
        return json.dumps(dict(self.call.input), ensure_ascii=False)

    def shown(self, out: Outbound) -> TesterResult:
        """The result as `out`'s viewer may see it: the call and the reason filtered, the
        decision (made on the real input) kept."""
        decision = replace(self.decision, reason=out.text(self.decision.reason))
        call = ToolCall(tool=self.call.tool, input=out.value(dict(self.call.input)))
        # The call note names the call's own argument: filtered like the call.
        return replace(
            self,
            call=call,
            call_text=out.text(self.call_text),
            decision=decision,
            call_note=out.text(self.call_note),
        )


def tester_skill_rules(user_id: int | None, skill: str) -> tuple[Rule, ...]:
    """The active skill's allowed-tools and disallowed-tools, as a run applies them."""
    spec = skills_for_user(user_id).get(skill) if skill else None
    if spec is None:
        return ()
    skill_dir = f"{TESTER_WORKSPACE}/skills/{spec.name}"
    return (*skill_rules(spec, "allow", skill_dir), *skill_rules(spec, "deny", skill_dir))


def unreadable_skill_rules(user_id: int | None, skill: str) -> tuple[tuple[Rule, str], ...]:
    """The active skill's allowed-tools and disallowed-tools entries that do not parse (a run
    ignores them), each as a rule of its own text with why: they can never match."""
    spec = skills_for_user(user_id).get(skill) if skill else None
    if spec is None:
        return ()
    found: list[tuple[Rule, str]] = []
    for behavior, texts in (("allow", spec.allowed_tools), ("deny", spec.disallowed_tools)):
        for text in texts:
            try:
                parse_rule(text, behavior, source="skill")
            except RuleSyntaxError as exc:
                rule = Rule(behavior, text, None, text, "skill", scope_skill=spec.name)
                found.append((rule, f"it cannot be read as a rule, so a run ignores it: {exc}"))
    return tuple(found)


def applies_to_text(rule_id: int) -> str:
    """ "everyone", or the groups and people a rule is limited to, in words."""
    rule = PermissionRule.objects.filter(pk=rule_id).first()
    if rule is None:
        return ""
    groups = [g.name for g in rule.applies_to_groups.order_by("name")]
    users = [u.get_username() for u in rule.applies_to_users.order_by("username")]
    if not groups and not users:
        return "everyone"
    parts = [f"group {g}" for g in groups] + [f"user {u}" for u in users]
    return "only " + ", ".join(parts)


def try_call(
    call: ToolCall, skill: str, *, user_id: int | None = None, person: Any = None
) -> TesterResult:
    """Decide a call as a run would: the enabled admin rules of this moment (those that apply to
    `person`, or to everyone without one), the active skill."""
    owner = person.pk if person is not None else user_id
    active_rules = tester_skill_rules(owner, skill)
    rules = approvals.admin_rules(person.pk if person is not None else None)
    everyone_and_more = PermissionRule.objects.filter(enabled=True).count()
    reading = read_call(
        call,
        admin_rules=rules,
        skill=skill,
        skill_rules=active_rules,
        workspace=TESTER_WORKSPACE,
        mcp_servers=listed_tools(),
    )
    rule = reading.decision.rule
    rule_url = applies_to = ""
    if rule is not None and rule.source == "admin" and rule.rule_id is not None:
        rule_url = reverse("admin:skills_app_permissionrule_change", args=[rule.rule_id])
        applies_to = applies_to_text(rule.rule_id)
    return TesterResult(
        call=call,
        call_text=call_as_rule_text(call),
        decision=reading.decision,
        rule_url=rule_url,
        active_skill=skill,
        rules_considered=reading.rules_considered,
        scoped_elsewhere=reading.scoped_elsewhere,
        skill_rules=active_rules,
        person=person.get_username() if person is not None else "",
        applies_to=applies_to,
        # Rules that failed to parse are left out of both counts alike.
        for_others=max(0, everyone_and_more - len(rules)),
        also_trusts=reading.also_trusts,
        never_matching=(*reading.never_matching, *unreadable_skill_rules(owner, skill)),
        call_note=reading.call_note,
    )


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
        super().save_model(request, obj, form, change)
        # Saved, but a rule naming what does not exist matches nothing: say so where it was made.
        for warning in checks.rule_warnings(obj.rule_text, obj.skill, obj.behavior):
            self.message_user(request, f"Saved with a warning: {warning}", messages.WARNING)

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
