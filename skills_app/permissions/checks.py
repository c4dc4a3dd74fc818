"""Rules you can't get wrong: the skills and tools a rule may name, and warnings for the others.

A rule naming a skill or tool that does not exist is not an error (a skill may be uploaded later,
and a rule may outlive one), but it matches nothing today: the admin saves it and says so.
"""

from __future__ import annotations

from skills_app.core.permissions import RuleSyntaxError, parse_rule
from skills_app.core.permissions.rules import mcp_parts, mcp_rule_problem, never_matches
from skills_app.core.profiles import PROFILES
from skills_app.core.tools import default_tools
from skills_app.mcp.definitions import listed_tools
from skills_app.models import SkillPackage
from skills_app.registry.skills import get_registry

# Tools whose specifier is a skill name.
_SKILL_TOOLS = ("Skill", "load_skill", "skill_load")


def available_tools() -> list[str]:
    """The tools a model can call in Skillscope: the ordinary ones and every profile's."""
    names = set(default_tools().names())
    for profile in PROFILES.values():
        names.update(profile.tool_names)
    return sorted(names)


def known_skills() -> list[str]:
    """Every skill a rule may name: the registry's (bundled, folders, uploads) and every package."""
    names = {spec.name for spec in get_registry().skills()}
    names.update(SkillPackage.objects.values_list("name", flat=True))
    return sorted(names)


def _skill_named(specifier: str, skills: set[str]) -> str | None:
    """The skill name a Skill(...) specifier needs, when no known skill satisfies it."""
    text = specifier.strip()
    prefix = text.endswith("*")
    name = text.rstrip("*").strip()
    if not name or "*" in name:
        return None  # a pattern: nothing to check against one name
    if prefix and " " not in text:
        # Skill(pdf*): any skill whose name starts with it.
        return None if any(s.startswith(name) for s in skills) else name
    name = name.split(" ", 1)[0]  # Skill(pdf *): the skill pdf, with any arguments
    return None if name in skills else name


def rule_warnings(rule_text: str, skill: str, behavior: str = "allow") -> list[str]:
    """Why a (syntactically valid) rule would match nothing today; [] when it can match.

    A rule the engine never consults is refused by the form; one saved before that check (or
    written to the database directly) is flagged here with the same words."""
    warnings: list[str] = []
    skills = set(known_skills())
    if skill and skill not in skills:
        warnings.append(
            f"No skill named {skill!r} is installed, so this rule's scope never becomes active "
            "until one is. Pick a skill from the list, or leave the field empty for a global rule."
        )
    try:
        rule = parse_rule(rule_text, behavior, source="admin")
    except RuleSyntaxError:
        return warnings  # the form reports syntax errors itself
    never = never_matches(rule)
    tools = available_tools()
    if never:
        warnings.append(never)
    elif mcp_parts(rule.tool) is not None:
        problem = mcp_rule_problem(rule, listed_tools())
        if problem:
            warnings.append(problem)
    elif rule.tool not in tools:
        warnings.append(
            f"No tool named {rule.tool!r} runs in Skillscope, so this rule matches nothing. "
            f"Tools here: {', '.join(tools)}."
        )
    elif rule.tool in _SKILL_TOOLS and rule.specifier:
        missing = _skill_named(rule.specifier, skills)
        if missing:
            warnings.append(
                f"No skill named {missing!r} is installed, so {rule_text} matches nothing "
                "until one is. Check the spelling against the list of skills."
            )
    return warnings
