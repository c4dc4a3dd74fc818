"""What will happen when a person uses a skill, in words, decided by the runs' own gate.

The Skills page and a skill's page say whether the skill's commands run without asking, ask
first, or are denied for this person, and why (the rule, its group, the review's or install's
consent, the skill's `allowed-tools`). Nothing here decides: each reviewed command, and a sample
call of each `allowed-tools` pattern, goes through `PermissionGate.rules` as the turn that
invoked the skill would have it (the skill active, its `allowed-tools` applied, its consent
read), so the page cannot say what a run would not do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from django.contrib.auth.models import Group

from skills_app.core.agent import TurnState
from skills_app.core.invocation import skill_rules
from skills_app.core.permissions import Decision, RuleSyntaxError, ToolCall, parse_rule
from skills_app.core.review import Consent, ManifestEntry, build_manifest, read_package
from skills_app.core.review.consent import COMMAND_KINDS
from skills_app.core.review.template import placeholder_pattern, resolve_skill_dir
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools.workspace import Workspace, skill_folder_name
from skills_app.permissions.approvals import PermissionGate
from skills_app.policy.rules import audience
from skills_app.registry.catalog import Access, Outlook
from skills_app.registry.consents import consents_for, still_live

# The words a sample call puts where a skill's command takes the person's arguments or a glob.
_EXAMPLE = "example.txt"
_PATH_TOOLS = ("Read", "Edit", "Write")
_BEHAVIOR_WORDS = {"allow": "runs", "ask": "asks first", "deny": "denied"}


class _Unopened(Workspace):
    """A workspace no conversation has: its paths only, nothing created on disk."""

    def __init__(self, root: Path) -> None:  # noqa: D107 - no mkdir, unlike Workspace
        self.root = root
        self.work_dir = root / "work"
        self.out_dir = root / "out"
        self.skills_dir = root / "skills"


_PLACE = _Unopened(Path("/skillscope-outlook"))


async def _never_record(*_args: object, **_kw: object) -> int:
    return 0  # the gate's `rules` never records; the page asks no one


def _sample(entry: ManifestEntry, consent_args: tuple[str, ...], skill_dir: str) -> ToolCall | None:
    """The call a run would make for this manifest entry (None: not a call we can show)."""
    if entry.kind in COMMAND_KINDS and entry.tool == "Bash":
        if not entry.consent:
            return None  # not among the reviewed commands (a blank to fill, or "do not run")
        text = resolve_skill_dir(entry.text, skill_dir)
        if entry.arguments:
            text = placeholder_pattern(consent_args).sub(_EXAMPLE, text)
        return ToolCall("Bash", {"command": text.strip()})
    if entry.kind != "allowed-tool":
        return None
    try:
        rule = parse_rule(resolve_skill_dir(entry.text, skill_dir), "allow")
    except RuleSyntaxError:
        return None
    if rule.specifier is None:
        return None
    filled = re.sub(r"\*+", lambda m: "example" if m.start() else _EXAMPLE, rule.specifier)
    if rule.tool == "Bash":
        return ToolCall("Bash", {"command": filled.removesuffix(":example").strip()})
    if rule.tool in _PATH_TOOLS:
        key = "file_path"
        path = filled.removeprefix("./")
        return ToolCall(rule.tool, {key: str(_PLACE.root / path)} | _edit_fields(rule.tool))
    return None


def _edit_fields(tool: str) -> dict[str, str]:
    if tool == "Edit":
        return {"old_string": "a", "new_string": "b"}
    if tool == "Write":
        return {"content": "b"}
    return {}


def _reason(decision: Decision, groups: Mapping[int, str]) -> str:
    """Why, in words that never quote the skill's own text (its commands may be hidden)."""
    rule = decision.rule
    if rule is None:
        if decision.reason.startswith("default for "):
            return (
                f"no rule covers it, so the default applies ({_BEHAVIOR_WORDS[decision.behavior]})"
            )
        return "the rules cannot vouch for all of it, so it asks"
    if rule.source == "admin":
        words = f"the rule {rule.text} (#{rule.rule_id})"
        if rule.rule_id is not None and rule.rule_id in groups:
            words += f", set for your group {groups[rule.rule_id]}"
        return words
    if rule.source == "skill":
        return f"its own {'allowed-tools' if rule.behavior == 'allow' else 'disallowed-tools'}"
    if rule.source == "review":
        return f"the consent of {rule.note or 'a review'}"
    return f"a {rule.source} rule"


def _group_words(user_id: int | None, rule_ids: Iterable[int]) -> dict[int, str]:
    """Rule id -> the names of this person's groups the rule is limited to."""
    if user_id is None:
        return {}
    limited = audience(rule_ids)
    if not limited:
        return {}
    mine = {g.pk: g.name for g in Group.objects.filter(user__pk=user_id).only("pk", "name")}
    out: dict[int, str] = {}
    for rule_id, (group_ids, _users) in limited.items():
        names = sorted(mine[g] for g in group_ids if g in mine)
        if names:
            out[rule_id] = ", ".join(names)
    return out


def _words(decisions: list[Decision], groups: Mapping[int, str]) -> Outlook:
    behaviors = {d.behavior for d in decisions}
    reasons = tuple(dict.fromkeys(_reason(d, groups) for d in decisions))
    if not decisions:
        return Outlook("none", "runs no commands of its own", ())
    if behaviors == {"allow"}:
        return Outlook("allow", "runs its reviewed commands without asking", reasons)
    if behaviors == {"deny"}:
        return Outlook("deny", "its commands are denied for you", reasons)
    if behaviors == {"ask"}:
        return Outlook("ask", "asks before each command", reasons)
    if "deny" in behaviors:
        return Outlook("mixed", "some of its commands are denied for you", reasons)
    return Outlook("mixed", "asks before some of its commands", reasons)


def outlooks(
    specs: Iterable[SkillSpec], user_id: int | None, loads: Mapping[str, Access]
) -> dict[str, Outlook]:
    """Each skill's outlook for this person; `loads` is what the rules say about loading it."""
    specs = list(specs)
    consents = consents_for(specs)
    gate = PermissionGate(
        conversation_id=0,  # no conversation: no "allow for this conversation" grants
        run_id=0,
        user_id=user_id or 0,
        workspace=_PLACE,
        record=_never_record,
        consents=consents,
        live=lambda consent: still_live(consent, user_id),
    )
    decided: dict[str, list[Decision]] = {}
    for spec in specs:
        load = loads.get(spec.name)
        if load is not None and load.behavior == "deny":
            continue
        consent = consents.get(spec.name)
        decided[spec.name] = _decide(gate, spec, consent)
    rule_ids = {
        d.rule.rule_id
        for ds in decided.values()
        for d in ds
        if d.rule is not None and d.rule.rule_id is not None and d.rule.source == "admin"
    }
    groups = _group_words(user_id, rule_ids)
    out: dict[str, Outlook] = {}
    for spec in specs:
        load = loads.get(spec.name)
        if spec.name not in decided and load is not None:
            out[spec.name] = Outlook("deny", "denied for you", (load.words,))
        else:
            out[spec.name] = _words(decided[spec.name], groups)
    return out


def _decide(gate: PermissionGate, spec: SkillSpec, consent: Consent | None) -> list[Decision]:
    """The gate's decision on each reviewed command and allowed-tools sample of the skill.

    A skill no review or install consents to (a personal one) is read for the commands its
    text asks the model to run: the gate decides those as it would in a run.
    """
    if consent is not None:
        entries, arguments = consent.entries, consent.arguments
    else:
        try:
            entries = build_manifest(spec, read_package(Path(spec.path))).entries
        except OSError:
            return []
        arguments = tuple(spec.arguments)
    skill_dir = str(_PLACE.skills_dir / skill_folder_name(spec.name))
    state = TurnState(
        active_skills=[spec.name],
        skill_rules=[*skill_rules(spec, "allow", skill_dir), *skill_rules(spec, "deny", skill_dir)],
    )
    calls: dict[str, ToolCall] = {}
    for entry in entries:
        call = _sample(entry, arguments, skill_dir)
        if call is not None:
            calls.setdefault(f"{call.tool} {sorted(call.input.items())}", call)
    return [gate.rules(call, state) for call in calls.values()]


__all__ = ["outlooks"]
