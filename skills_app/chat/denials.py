"""Refusals in plain words: what an admin rule stopped, and the admin's note, for the chat.

The core names the rule that decided in rule syntax (`deny rule "Skill(x)" (admin #1)`): exact,
and what the audit keeps and the model is told. A person reading the chat gets words instead:
which action an administrator's rule does not allow, and the note the administrator left on the
rule, if any. The rule's note is the administrator's own text for the people it stops.
"""

from __future__ import annotations

import re

from skills_app.models import PermissionRule

# What `core.permissions.model.describe` writes for an admin rule.
_ADMIN_RULE = re.compile(
    r'(?P<behavior>deny|ask|allow) rule "(?P<text>[^"\n]*)" '
    r'\(admin #(?P<id>\d+)(?:, skill "(?P<skill>[^"\n]*)" only)?\)'
)
_SKILL = re.compile(r"^Skill\((?P<name>[^)\s]+)(?: .*)?\)$")


def _subject(rule_text: str) -> str:
    """The action a rule names, in words: `Skill(pdf)` -> the "pdf" skill; else the rule as is."""
    skill = _SKILL.match(rule_text)
    if skill:
        return f'the "{skill.group("name")}" skill'
    return rule_text


def plain(text: str) -> str:
    """`text` with every admin deny rule it names put in words, with the rule's note."""
    found = [m for m in _ADMIN_RULE.finditer(text) if m.group("behavior") == "deny"]
    if not found:
        return text
    notes = dict(
        PermissionRule.objects.filter(pk__in=[int(m.group("id")) for m in found]).values_list(
            "pk", "note"
        )
    )

    def words(match: re.Match[str]) -> str:
        said = f"an administrator's rule does not allow {_subject(match.group('text'))}"
        if match.group("skill"):
            said += f' while the "{match.group("skill")}" skill is in use'
        note = (notes.get(int(match.group("id"))) or "").strip()
        return said + (f'. The administrator\'s note: "{note}"' if note else "")

    return _ADMIN_RULE.sub(
        lambda m: words(m) if m.group("behavior") == "deny" else m.group(0), text
    )
