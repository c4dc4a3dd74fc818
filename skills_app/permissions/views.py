"""The Rules page: the permission rules listed by who they apply to, added, edited and deleted
through the admin's own form (`PermissionRuleForm`), with the rule tester inline.

Who sees what follows the roles' permissions on `PermissionRule`: viewing (auditors, skill
managers, administrators) shows the page and the tester; adding, changing and deleting each need
their own permission. A person without the view permission (a chatter) is refused, as in the admin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, Value, When
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from skills_app.http import AuthedHttpRequest
from skills_app.models import PermissionRule
from skills_app.permissions import checks, rule_changes
from skills_app.permissions.forms import PermissionRuleForm, RuleTesterForm
from skills_app.permissions.tester_views import TESTER_WORKSPACE, TesterResult, try_call

PERMISSION = "skills_app.{}_permissionrule"

# Calls to try in the tester, each with what it shows about the input format.
TESTER_EXAMPLES = (
    ("Bash(git push origin main)", "a shell command, as typed"),
    ("Bash(git status && rm -rf build)", "each command of a line is decided on its own"),
    ("Skill(pdf)", "invoking a skill by name"),
    ("Read(./docs/guide.md)", "a path, relative to the workspace"),
    ("Edit(./out/report.md)", "writing a file"),
    ("mcp__github__create_issue", "a tool of an MCP server, without an argument"),
)


@dataclass(frozen=True, slots=True)
class RuleRow:
    rule: PermissionRule
    warnings: list[str]


@dataclass(slots=True)
class Audience:
    """One heading of the list: everyone, one group or one person, and the rules for them."""

    key: str
    label: str
    rules: list[RuleRow] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Rights:
    add: bool
    change: bool
    delete: bool


def _rights_for(request: AuthedHttpRequest) -> Rights:
    """What this person may do on the page; 403 without the permission to see rules at all."""
    user = request.user
    if not user.has_perm(PERMISSION.format("view")):
        raise PermissionDenied("Seeing the permission rules needs a role that includes them.")
    return Rights(
        add=user.has_perm(PERMISSION.format("add")),
        change=user.has_perm(PERMISSION.format("change")),
        delete=user.has_perm(PERMISSION.format("delete")),
    )


def _get_rule_for_user(request: AuthedHttpRequest, pk: int, action: str) -> PermissionRule:
    if not request.user.has_perm(PERMISSION.format(action)):
        raise PermissionDenied(f"Your role does not let you {action} permission rules.")
    rule = PermissionRule.objects.filter(pk=pk).first()
    if rule is None:
        raise Http404("No such rule.")
    return rule


def audiences() -> list[Audience]:
    """Every rule under each audience it applies to, in the order the engine reads them."""
    rank = Case(
        When(behavior=PermissionRule.DENY, then=Value(0)),
        When(behavior=PermissionRule.ASK, then=Value(1)),
        default=Value(2),
        output_field=IntegerField(),
    )
    rules = (
        PermissionRule.objects.annotate(rank=rank)
        .order_by("rank", "position", "id")
        .prefetch_related("applies_to_groups", "applies_to_users")
        .select_related("author")
    )
    everyone = Audience("everyone", "Everyone")
    groups: dict[str, Audience] = {}
    people: dict[str, Audience] = {}
    for rule in rules:
        row = RuleRow(rule, checks.rule_warnings(rule.rule_text, rule.skill, rule.behavior))
        names = [g.name for g in rule.applies_to_groups.all()]
        users = [u.get_username() for u in rule.applies_to_users.all()]
        if not names and not users:
            everyone.rules.append(row)
        for name in names:
            groups.setdefault(name, Audience(f"group-{name}", f"Group {name}")).rules.append(row)
        for name in users:
            people.setdefault(name, Audience(f"user-{name}", f"User {name}")).rules.append(row)
    return [
        everyone,
        *(groups[k] for k in sorted(groups)),
        *(people[k] for k in sorted(people)),
    ]


def _tester(request: AuthedHttpRequest) -> tuple[RuleTesterForm, TesterResult | None]:
    if "call" not in request.GET:
        return RuleTesterForm(), None
    form = RuleTesterForm(request.GET)
    if not form.is_valid():
        return form, None
    # Typed here, not replayed from a conversation: nothing hidden is in the call or its reason.
    result = try_call(
        form.cleaned_data["call"],
        form.cleaned_data["skill"],
        user_id=request.user.pk,
        person=form.cleaned_data["person"],
    )
    return form, result


def _page(
    request: AuthedHttpRequest, rights: Rights, add_form: PermissionRuleForm | None = None
) -> HttpResponse:
    tester_form, result = _tester(request)
    page = reverse("rules-page")
    context: dict[str, Any] = {
        "audiences": audiences(),
        "rights": rights,
        "add_form": add_form if add_form is not None else PermissionRuleForm(),
        "tester_form": tester_form,
        "result": result,
        "examples": [
            (call, why, f"{page}?{urlencode({'call': call})}#tester")
            for call, why in TESTER_EXAMPLES
        ],
        "tester_skills": checks.known_skills(),
        "workspace": TESTER_WORKSPACE,
    }
    status = 400 if add_form is not None and add_form.errors else 200
    return render(request, "skills_app/permissions/rules.html", context, status=status)


def _say_warnings(request: AuthedHttpRequest, rule: PermissionRule) -> None:
    for warning in checks.rule_warnings(rule.rule_text, rule.skill, rule.behavior):
        messages.warning(request, f"Saved with a warning: {warning}")


@login_required
@require_http_methods(["GET", "HEAD"])
def rules_page(request: AuthedHttpRequest) -> HttpResponse:
    """The rules by audience, the tester and (with the add permission) the form for a new rule."""
    return _page(request, _rights_for(request))


@login_required
@require_POST
def rule_add(request: AuthedHttpRequest) -> HttpResponse:
    rights = _rights_for(request)
    if not rights.add:
        raise PermissionDenied("Your role does not let you add permission rules.")
    form = PermissionRuleForm(request.POST)
    if not form.is_valid():
        return _page(request, rights, add_form=form)
    rule = rule_changes.save(form, request.user)
    messages.success(request, f"Added: {rule.behavior} {rule.rule_text}.")
    _say_warnings(request, rule)
    return redirect(f"{reverse('rules-page')}#rule-{rule.pk}")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def rule_edit(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    rule = _get_rule_for_user(request, pk, "change")
    if request.method == "POST":
        form = PermissionRuleForm(request.POST, instance=rule)
        if form.is_valid():
            rule = rule_changes.save(form, request.user)
            messages.success(request, f"Saved: {rule.behavior} {rule.rule_text}.")
            _say_warnings(request, rule)
            return redirect(f"{reverse('rules-page')}#rule-{rule.pk}")
        status = 400
    else:
        form = PermissionRuleForm(instance=rule)
        status = 200
    context = {
        "rule": rule,
        "form": form,
        "warnings": checks.rule_warnings(rule.rule_text, rule.skill, rule.behavior),
        "can_delete": request.user.has_perm(PERMISSION.format("delete")),
    }
    return render(request, "skills_app/permissions/rule_edit.html", context, status=status)


@login_required
@require_POST
def rule_delete(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    rule = _get_rule_for_user(request, pk, "delete")
    text = f"{rule.behavior} {rule.rule_text}"
    rule_changes.delete(rule, request.user)
    messages.success(request, f"Deleted: {text}.")
    return redirect("rules-page")
