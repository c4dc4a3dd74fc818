"""The rule tester: a call decided as a run would decide it, with everything that went into it.

Shared by the rules admin and the Rules page (`views`), so both show the same answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from django.urls import reverse

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
from skills_app.mcp.definitions import listed_tools, mcp_hints
from skills_app.models import PermissionRule
from skills_app.permissions import approvals
from skills_app.registry.skills import skills_for_user

# The rule tester decides as if a conversation's workspace were here; rules like Edit(./out/**)
# are anchored to it, and paths outside it fall to the "outside the workspace" default.
TESTER_WORKSPACE = Path("/workspace")


class Outbound(Protocol):
    """The outbound filter of one viewer (`visibility.Outbound`), which the admin hands in."""

    def text(self, text: str) -> str: ...

    def call_input(self, tool: str, value: Any) -> Any: ...


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
        call = ToolCall(
            tool=self.call.tool, input=out.call_input(self.call.tool, dict(self.call.input))
        )
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
        mcp_hints=mcp_hints(),
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
