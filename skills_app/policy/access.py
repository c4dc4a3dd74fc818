"""One person's policy: their groups, the models they may use, the skills hidden from them, their
spending limits. Read once per run (or page) and passed along; `policy_for` costs four queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model

from skills_app.models import GroupPolicy, SkillAccess, UserPolicy
from skills_app.models.organisation import SpendCounter


@dataclass(frozen=True, slots=True)
class Limit:
    """The spending limits of one user or group (None: no limit for that period)."""

    scope: str  # SpendCounter.USER | SpendCounter.GROUP
    scope_id: int
    name: str
    daily: Decimal | None
    monthly: Decimal | None


@dataclass(frozen=True, slots=True)
class Policy:
    """What one person may use. `models` keeps the order of ANTHROPIC_MODELS."""

    user_id: int
    group_ids: frozenset[int]
    models: tuple[str, ...]
    hidden_skills: frozenset[str]
    limits: tuple[Limit, ...]

    def offers(self, model: str) -> bool:
        """True when the person may use `model`."""
        return model in self.models

    def default_model(self) -> str:
        """The model of a new conversation: ANTHROPIC_MODEL when offered, else the first offered."""
        if settings.ANTHROPIC_MODEL in self.models or not self.models:
            return str(settings.ANTHROPIC_MODEL)
        return self.models[0]


def configured_models() -> list[str]:
    """ANTHROPIC_MODELS, with ANTHROPIC_MODEL first when it is missing (as settings.py does)."""
    models = list(settings.ANTHROPIC_MODELS)
    if settings.ANTHROPIC_MODEL not in models:
        models.insert(0, settings.ANTHROPIC_MODEL)
    return models


def default_models() -> tuple[str, ...]:
    """The models everyone may use: SKILLSCOPE_DEFAULT_MODELS (empty: every configured model)."""
    configured = configured_models()
    chosen = settings.SKILLSCOPE_DEFAULT_MODELS or configured
    return tuple(m for m in configured if m in chosen)


def _user_limit(user_id: int, own: UserPolicy | None) -> Limit:
    daily = own.daily_limit_usd if own and own.daily_limit_usd is not None else None
    monthly = own.monthly_limit_usd if own and own.monthly_limit_usd is not None else None
    if daily is None:
        daily = settings.BUDGET_USER_DAILY_USD
    if monthly is None:
        monthly = settings.BUDGET_USER_MONTHLY_USD
    return Limit(SpendCounter.USER, user_id, "you", daily, monthly)


def user_groups(user_id: int) -> frozenset[int]:
    """The ids of the groups (roles included) one person is in."""
    through = get_user_model().groups.through
    return frozenset(through.objects.filter(user_id=user_id).values_list("group_id", flat=True))


def policy_for(user_id: int | None) -> Policy:
    """The policy of one person as the database says now."""
    if user_id is None:
        raise ValueError("policy_for needs a signed-in person")
    group_ids = user_groups(user_id)
    rows = list(
        GroupPolicy.objects.filter(group_id__in=group_ids).values_list(
            "group_id", "group__name", "allowed_models", "daily_limit_usd", "monthly_limit_usd"
        )
    )
    extra = {m for _id, _name, models, _d, _m in rows for m in (models or [])}
    offered = set(default_models()) | extra
    models = tuple(m for m in configured_models() if m in offered)
    own = UserPolicy.objects.filter(user_id=user_id).first()
    limits = [_user_limit(user_id, own)]
    # Every group with a policy: its members' spending is counted (the admin's chart) even
    # where it has no limit.
    limits += [
        Limit(SpendCounter.GROUP, gid, name, daily, monthly)
        for gid, name, _models, daily, monthly in sorted(rows)
    ]
    return Policy(
        user_id=user_id,
        group_ids=group_ids,
        models=models,
        hidden_skills=hidden_skills(group_ids),
        limits=tuple(limits),
    )


def hidden_skills(group_ids: frozenset[int]) -> frozenset[str]:
    """Names of organisation skills restricted to groups none of which is among `group_ids`."""
    allowed: dict[str, bool] = {}
    through = SkillAccess.groups.through
    for name, group_id in through.objects.values_list("skillaccess__skill", "group_id"):
        allowed[name] = allowed.get(name, False) or group_id in group_ids
    return frozenset(name for name, ok in allowed.items() if not ok)
