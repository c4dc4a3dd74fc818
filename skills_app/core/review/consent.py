"""Which calls a review consents to (docs/review.md, "What a review covers").

A `Consent` is the approved manifest of one skill version, bound to the version's digest. While
that version's skill is active in the turn (invoked since the user's last message, and loaded
with that very digest), a call is covered when:

- it is allowed by one of the manifest's consented `allowed-tools` rules, read as permission
  rules with the skill folder resolved (`consent_rules`; the rules engine applies them, so deny
  rules and an admin's ask rules still come first, and a pattern covers each part of a command
  line separately: `python3 x.py *` never covers `python3 -c ...` nor `x.py; rm -rf ~`);
- or it is a Bash call whose command is exactly a consented command of the manifest (the skill
  folder variable standing for the staged folder; surrounding whitespace aside), or that
  command with its argument slots filled by plain words (`template.matches`).

Nothing else is covered: not a similar command, not a prefix, not another skill's command.
And no entry that names a path in the skill's folder its reviewer was not shown as text
(`Consent.shown`; `package.unseen`): such entries are not consented when a manifest is built,
and an approval kept from before the review page showed every file covers none of them either.

A skill nobody reviewed but its install (bundled with Skillscope, or put in SKILLS_DIRS by the
server's operator: `reviewed=False`) consents less: only the commands its body asks the model
to run, exactly as above. Its `allowed-tools` stay the skill's own rules (and are audited as
such), and its `!` commands and hooks still need an admin's allow rule, as they always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..permissions import Rule, RuleSyntaxError, ToolCall, parse_rule
from .manifest import ManifestEntry, entry_paths
from .package import unseen
from .template import compile_template, matches, resolve_skill_dir

COMMAND_KINDS = ("command", "context-command", "hook")


@dataclass(frozen=True, slots=True)
class Consent:
    """An approved manifest, whose it is, and what to call it in the audit."""

    skill: str
    digest: str
    label: str  # "the review of org-greet v3 by mona"
    entries: tuple[ManifestEntry, ...]
    arguments: tuple[str, ...] = ()  # the skill's declared `arguments:` names
    review_id: int | None = None
    reviewer_id: int | None = None
    # A person reviewed and approved the manifest (not just the install of a folder skill).
    reviewed: bool = True
    # Each file of the version, and whether its reviewer was shown it as text; None: no check
    # beyond the manifest's own (an install, or a manifest that names no file of the skill).
    shown: Mapping[str, bool] | None = field(default=None, compare=False)

    @property
    def command_kinds(self) -> tuple[str, ...]:
        """The kinds of command entry this consent covers."""
        return COMMAND_KINDS if self.reviewed else ("command",)

    def covers(self, entry: ManifestEntry) -> bool:
        """Whether this consent may cover calls by the entry: consented, and reading nothing
        its reviewer was not shown."""
        return entry.consent and (self.shown is None or not unseen(entry_paths(entry), self.shown))


def consent_rules(consent: Consent, skill_dir: str) -> list[Rule]:
    """The consented `allowed-tools` entries as allow rules of source "review" (reviewed only)."""
    rules: list[Rule] = []
    if not consent.reviewed:
        return rules
    for entry in consent.entries:
        if entry.kind != "allowed-tool" or not consent.covers(entry):
            continue
        try:
            rules.append(
                parse_rule(
                    resolve_skill_dir(entry.text, skill_dir),
                    "allow",
                    source="review",
                    scope_skill=consent.skill,
                    note=consent.label,
                )
            )
        except RuleSyntaxError:
            continue  # a stored entry that no longer parses grants nothing
    return rules


def covering_entry(consent: Consent, call: ToolCall, skill_dir: str) -> ManifestEntry | None:
    """The consented command this Bash call is, exactly or with its arguments filled; else None."""
    if call.tool != "Bash":
        return None
    raw = call.input.get("command")
    command = raw.strip() if isinstance(raw, str) else ""
    if not command:
        return None
    for entry in consent.entries:
        if entry.kind not in consent.command_kinds or not consent.covers(entry):
            continue
        if not entry.arguments:
            if resolve_skill_dir(entry.text, skill_dir).strip() == command:
                return entry
            continue
        template = compile_template(entry.text, skill_dir=skill_dir, names=consent.arguments)
        if not isinstance(template, str) and matches(template, command):
            return entry
    return None


def covered_rule(consent: Consent, entry: ManifestEntry) -> Rule:
    """The rule an audit row names for a call a reviewed command covered."""
    return Rule(
        "allow",
        "Bash",
        entry.text,
        f"Bash({entry.text})",
        source="review",
        scope_skill=consent.skill,
        note=consent.label,
    )


__all__ = ["COMMAND_KINDS", "Consent", "consent_rules", "covered_rule", "covering_entry"]
