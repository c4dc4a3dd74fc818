"""Shared set-up of the organisation tests: groups with policies, skills with a `model:`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group

from skills_app.models import GroupPolicy, SkillAccess, UserPolicy

MODEL_SKILLS = {
    "mythos-switch": """\
        ---
        name: mythos-switch
        description: Wants the dearest model.
        model: claude-mythos-5
        ---
        MYTHOS-SWITCH-BODY
        """,
    "fable-switch": """\
        ---
        name: fable-switch
        description: Wants Fable by its alias.
        model: fable
        ---
        FABLE-SWITCH-BODY
        """,
    "old-opus": """\
        ---
        name: old-opus
        description: Wants an older Opus.
        model: claude-opus-4-6
        ---
        OLD-OPUS-BODY
        """,
    "forked-mythos": """\
        ---
        name: forked-mythos
        description: A subagent on the dearest model.
        context: fork
        model: claude-mythos-5
        ---
        FORKED-MYTHOS-BODY
        """,
    "haiku-switch": """\
        ---
        name: haiku-switch
        description: Wants the small model.
        model: claude-haiku-4-5
        ---
        HAIKU-SWITCH-BODY
        """,
}


def group(
    name: str,
    *,
    directory: str = "",
    models: list[str] | None = None,
    daily: str | None = None,
    monthly: str | None = None,
) -> Group:
    made = Group.objects.create(name=name)
    GroupPolicy.objects.create(
        group=made,
        directory_name=directory,
        allowed_models=models or [],
        daily_limit_usd=Decimal(daily) if daily is not None else None,
        monthly_limit_usd=Decimal(monthly) if monthly is not None else None,
    )
    return made


def restrict(skill: str, *groups: Group) -> SkillAccess:
    access = SkillAccess.objects.create(skill=skill)
    access.groups.set(groups)
    return access


def user_limits(user: Any, *, daily: str | None = None, monthly: str | None = None) -> None:
    UserPolicy.objects.update_or_create(
        user=user,
        defaults={
            "daily_limit_usd": Decimal(daily) if daily is not None else None,
            "monthly_limit_usd": Decimal(monthly) if monthly is not None else None,
        },
    )
