"""The Claude models Skillscope knows: limits, prices and which request settings each accepts.

Source of every figure: the `claude-api` skill in the public anthropics/skills repository, commit
9d2f1ae (2026-07-01): `skills/claude-api/SKILL.md` ("Current Models", cached 2026-06-24, input and
output $/MTok; "Thinking & Effort"), `shared/models.md` (context window, max output),
`shared/model-migration.md` (which settings each model rejects) and `shared/prompt-caching.md`
(cache write = 1.25x input for the 5-minute TTL, 2x for 1 hour; cache read = 0.1x input; minimum
cacheable prefix). Read on 2026-11-30. Prices change: check https://platform.claude.com/docs/en/pricing
and edit the table, never the code that uses it.

A model missing here is refused by `manage.py check` (skillscope.E001/E002): add it with its figures.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

DEFAULT_MODEL = "claude-opus-4-8"
# Offered in the model picker when ANTHROPIC_MODELS is unset. Claude Fable 5 is left out on purpose:
# it costs twice Opus, so an administrator opts in to it.
DEFAULT_OFFERED_MODELS = ("claude-opus-4-8", "claude-sonnet-5", "claude-haiku-4-5")
# The offline demo model's id (core/demo.py): it answers for free.
DEMO_MODEL_ID = "demo"

EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")

# Cache price multipliers of the input price (shared/prompt-caching.md, "Economics").
_WRITE_5M = Decimal("1.25")
_WRITE_1H = Decimal("2")
_READ = Decimal("0.1")


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """USD per million tokens."""

    input: Decimal
    output: Decimal
    cache_write: Decimal  # 5-minute TTL, the only one Skillscope uses
    cache_write_1h: Decimal
    cache_read: Decimal

    @classmethod
    def from_base(cls, input: str, output: str) -> ModelPrices:
        """Prices from the input/output list price, with the API's cache multipliers."""
        base = Decimal(input)
        return cls(
            input=base,
            output=Decimal(output),
            cache_write=base * _WRITE_5M,
            cache_write_1h=base * _WRITE_1H,
            cache_read=base * _READ,
        )


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model: limits, prices, and the request settings it accepts."""

    id: str
    label: str
    context_window: int
    max_output: int
    prices: ModelPrices
    # Thinking: `adaptive` accepts {"type": "adaptive"}; `budget` accepts the older
    # {"type": "enabled", "budget_tokens": N}; `thinks_by_default` thinks when `thinking` is omitted;
    # `can_disable_thinking` accepts {"type": "disabled"}.
    adaptive_thinking: bool
    budget_thinking: bool
    thinks_by_default: bool
    can_disable_thinking: bool
    # Accepted values of output_config.effort, lowest first; () = the parameter is rejected.
    efforts: tuple[str, ...]
    # temperature / top_p / top_k accepted.
    sampling: bool
    # Below this many prompt tokens a cache breakpoint silently writes nothing.
    cache_min_tokens: int
    # Thinking text comes back summarized unless `display` says otherwise; the newest models
    # default to "omitted" (empty thinking text), so Skillscope asks for "summarized".
    summarizes_by_default: bool = False
    # A temporary price until a date (inclusive), e.g. an introductory offer.
    intro_prices: ModelPrices | None = None
    intro_until: date | None = None
    # The dated id the API also accepts (and may name in its answers' `model`).
    full_id: str | None = None

    def prices_on(self, day: date | None) -> ModelPrices:
        """The prices that applied on `day` (today's list price when None)."""
        if (
            self.intro_prices is not None
            and self.intro_until is not None
            and day is not None
            and day <= self.intro_until
        ):
            return self.intro_prices
        return self.prices


_ALL_EFFORTS = EFFORT_LEVELS
_NO_XHIGH = ("low", "medium", "high", "max")


def _opus_4_7_family(model_id: str, label: str) -> ModelInfo:
    # Opus 4.7 and 4.8: adaptive thinking only (off when omitted), sampling and budget_tokens removed.
    return ModelInfo(
        id=model_id,
        label=label,
        context_window=1_000_000,
        max_output=128_000,
        prices=ModelPrices.from_base("5.00", "25.00"),
        adaptive_thinking=True,
        budget_thinking=False,
        thinks_by_default=False,
        can_disable_thinking=True,
        efforts=_ALL_EFFORTS,
        sampling=False,
        cache_min_tokens=4096,
    )


def _fable_family(model_id: str, label: str) -> ModelInfo:
    # Always thinks: an explicit {"type": "disabled"} and budget_tokens are both 400s.
    return ModelInfo(
        id=model_id,
        label=label,
        context_window=1_000_000,
        max_output=128_000,
        prices=ModelPrices.from_base("10.00", "50.00"),
        adaptive_thinking=True,
        budget_thinking=False,
        thinks_by_default=True,
        can_disable_thinking=False,
        efforts=_ALL_EFFORTS,
        sampling=False,
        cache_min_tokens=2048,
    )


KNOWN_MODELS: dict[str, ModelInfo] = {
    info.id: info
    for info in (
        _opus_4_7_family("claude-opus-4-8", "Claude Opus 4.8"),
        ModelInfo(
            id="claude-sonnet-5",
            label="Claude Sonnet 5",
            context_window=1_000_000,
            max_output=128_000,
            prices=ModelPrices.from_base("3.00", "15.00"),
            intro_prices=ModelPrices.from_base("2.00", "10.00"),
            intro_until=date(2026, 8, 31),
            # Adaptive thinking runs when `thinking` is omitted; "disabled" turns it off.
            adaptive_thinking=True,
            budget_thinking=False,
            thinks_by_default=True,
            can_disable_thinking=True,
            efforts=_ALL_EFFORTS,
            # Non-default sampling values are 400s; Skillscope never sends them.
            sampling=False,
            # Not listed in the skill's table; Sonnet 4.6's minimum is the closest known figure.
            cache_min_tokens=2048,
        ),
        ModelInfo(
            id="claude-haiku-4-5",
            label="Claude Haiku 4.5",
            full_id="claude-haiku-4-5-20251001",
            context_window=200_000,
            max_output=64_000,
            prices=ModelPrices.from_base("1.00", "5.00"),
            # No adaptive thinking and no effort ("will error on Haiku 4.5"); budget_tokens works.
            adaptive_thinking=False,
            budget_thinking=True,
            thinks_by_default=False,
            can_disable_thinking=True,
            efforts=(),
            sampling=True,
            cache_min_tokens=4096,
            summarizes_by_default=True,
        ),
        _fable_family("claude-fable-5", "Claude Fable 5"),
        # Same model as Fable 5, served only to Project Glasswing participants.
        _fable_family("claude-mythos-5", "Claude Mythos 5"),
        _opus_4_7_family("claude-opus-4-7", "Claude Opus 4.7"),
        ModelInfo(
            id="claude-opus-4-6",
            label="Claude Opus 4.6",
            context_window=1_000_000,
            max_output=128_000,
            prices=ModelPrices.from_base("5.00", "25.00"),
            adaptive_thinking=True,
            # Deprecated on 4.6 but still accepted (the "transitional escape hatch").
            budget_thinking=True,
            thinks_by_default=False,
            can_disable_thinking=True,
            efforts=_NO_XHIGH,
            sampling=True,
            cache_min_tokens=4096,
            summarizes_by_default=True,
        ),
        ModelInfo(
            id="claude-sonnet-4-6",
            label="Claude Sonnet 4.6",
            context_window=1_000_000,
            max_output=128_000,
            prices=ModelPrices.from_base("3.00", "15.00"),
            adaptive_thinking=True,
            budget_thinking=True,
            thinks_by_default=False,
            can_disable_thinking=True,
            efforts=_NO_XHIGH,
            sampling=True,
            cache_min_tokens=2048,
            summarizes_by_default=True,
        ),
    )
}

# Short names a skill's `model:` field may use (as in Claude Code), mapped to today's ids.
MODEL_ALIASES = {
    "opus": "claude-opus-4-8",
    "sonnet": "claude-sonnet-5",
    "haiku": "claude-haiku-4-5",
    "fable": "claude-fable-5",
}


class UnknownModelError(ValueError):
    """A model id that is not in KNOWN_MODELS; the message lists the valid ones."""

    def __init__(
        self, model_id: str, valid: Iterable[str] | None = None, *, message: str = ""
    ) -> None:
        self.model_id = model_id
        self.valid = list(valid if valid is not None else KNOWN_MODELS)
        super().__init__(message or unknown_model_message(model_id, self.valid))


_BY_FULL_ID = {info.full_id: info for info in KNOWN_MODELS.values() if info.full_id}
_DATE_SUFFIX = re.compile(r"-\d{8}$")


def get_model(model_id: str) -> ModelInfo | None:
    """The model's facts by id or dated full id; None for an unknown id (or the demo model)."""
    return KNOWN_MODELS.get(model_id) or _BY_FULL_ID.get(model_id)


def model_family(model_id: str) -> ModelInfo | None:
    """Like get_model, but a dated id the table does not list (`...-20260101`) counts as its family.

    For figures about a call already made (its price), where the API named a dated snapshot.
    """
    return get_model(model_id) or KNOWN_MODELS.get(_DATE_SUFFIX.sub("", model_id))


def resolve_model_id(name: str) -> str | None:
    """A model id from an id or alias (`opus`, `sonnet`, ...); None for `inherit` or empty."""
    cleaned = name.strip()
    if not cleaned or cleaned.lower() == "inherit":
        return None
    return MODEL_ALIASES.get(cleaned.lower(), cleaned)


def closest_model(model_id: str, candidates: Iterable[str] | None = None) -> str | None:
    """The candidate id most like `model_id` (a typo's fix), or None."""
    pool = list(candidates if candidates is not None else KNOWN_MODELS)
    close = difflib.get_close_matches(model_id, pool, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_model_message(model_id: str, valid: Iterable[str]) -> str:
    """Why `model_id` is refused, with the valid ids and the closest one."""
    valid = list(valid)
    close = closest_model(model_id, valid)
    hint = f' Did you mean "{close}"?' if close else ""
    return f'"{model_id}" is not a model Skillscope knows.{hint} Valid ids: {", ".join(valid)}.'


def choose_model(model_id: str, offered: Iterable[str]) -> str:
    """`model_id` if it is offered here (ANTHROPIC_MODELS); UnknownModelError saying why not.

    The one check for a model a person picks (the picker, `manage.py chat --model`): never trust
    the id a form or a command line sends.
    """
    offered = list(offered)
    if model_id in offered:
        return model_id
    if get_model(model_id) is not None:
        reason = f'"{model_id}" is a known model but not offered here; add it to ANTHROPIC_MODELS.'
    else:
        reason = unknown_model_message(model_id, KNOWN_MODELS)
    message = f"{reason} Offered models: {', '.join(offered)}."
    raise UnknownModelError(model_id, offered, message=message)


def clamp_effort(info: ModelInfo, effort: str) -> str | None:
    """The model's highest accepted effort level not above `effort`; None if it takes none."""
    if effort not in EFFORT_LEVELS:
        raise ValueError(f'Unknown effort "{effort}": use one of {", ".join(EFFORT_LEVELS)}.')
    wanted = EFFORT_LEVELS.index(effort)
    accepted = [level for level in info.efforts if EFFORT_LEVELS.index(level) <= wanted]
    if accepted:
        return accepted[-1]
    return info.efforts[0] if info.efforts else None
