"""Precision, recall and accuracy of a trigger run, counted per attempt.

Every repetition of a query is one attempt, judged on its own: the skill was chosen or not, and
it should have been or not. So a query asked 3 times adds 3 to the counts:

- true positive (tp): should trigger, did;     false negative (fn): should trigger, did not;
- false positive (fp): should not, did;        true negative (tn): should not, did not.

precision = tp / (tp + fp): of the times the skill was chosen, how often rightly;
recall    = tp / (tp + fn): of the times it should have been chosen, how often it was;
accuracy  = (tp + tn) / all attempts.

A ratio whose denominator is 0 is None ("—" on the page: e.g. precision when the skill was
never chosen). A query *passes* when its trigger rate is on the right side of one half (at least
0.5 for a should-trigger query, below 0.5 for a should-not one), as the skill-creator method
judges a query. Attempts that failed (an API error) are left out of every count and shown apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PASS_RATE = 0.5


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What the model did with one query over its attempts."""

    query: str
    should_trigger: bool
    attempts: int  # answered attempts (errors excluded)
    triggered: int  # of those, how many chose the skill under test
    chosen: Mapping[str, int] = field(default_factory=dict)  # other skills chosen instead
    held_out: bool = False
    errors: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.triggered <= self.attempts:
            raise ValueError(
                f"triggered ({self.triggered}) must be between 0 and attempts ({self.attempts})"
            )

    @property
    def rate(self) -> float | None:
        """Share of answered attempts that chose the skill; None before any answer."""
        return self.triggered / self.attempts if self.attempts else None

    @property
    def passed(self) -> bool | None:
        rate = self.rate
        if rate is None:
            return None
        return rate >= PASS_RATE if self.should_trigger else rate < PASS_RATE

    @property
    def no_skill(self) -> int:
        """Attempts that chose no skill at all."""
        return self.attempts - self.triggered - sum(self.chosen.values())

    @property
    def instead(self) -> tuple[tuple[str, int], ...]:
        """What was chosen when not this skill, most often first; "" stands for no skill."""
        others = sorted(self.chosen.items(), key=lambda kv: (-kv[1], kv[0]))
        if self.no_skill:
            others.append(("", self.no_skill))
        return tuple(others)


@dataclass(frozen=True, slots=True)
class TriggerMetrics:
    tp: int
    fp: int
    fn: int
    tn: int
    queries: int  # queries with at least one answered attempt
    queries_passed: int
    errors: int

    @property
    def attempts(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def precision(self) -> float | None:
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def accuracy(self) -> float | None:
        return _ratio(self.tp + self.tn, self.attempts)


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def score(outcomes: Sequence[QueryOutcome]) -> TriggerMetrics:
    """The counts and ratios of a run (or of a subset of its queries)."""
    tp = fp = fn = tn = queries = passed = errors = 0
    for o in outcomes:
        errors += o.errors
        if not o.attempts:
            continue
        queries += 1
        passed += bool(o.passed)
        missed = o.attempts - o.triggered
        if o.should_trigger:
            tp, fn = tp + o.triggered, fn + missed
        else:
            fp, tn = fp + o.triggered, tn + missed
    return TriggerMetrics(tp, fp, fn, tn, queries, passed, errors)


@dataclass(frozen=True, slots=True)
class Miss:
    """A query the skill got wrong at least once: a false trigger or a missed one."""

    kind: str  # "false trigger" | "missed trigger"
    outcome: QueryOutcome
    wrong: int  # attempts that went wrong
    # For a missed trigger: what was chosen instead, most often first ("" = no skill).
    instead: tuple[tuple[str, int], ...] = ()


FALSE_TRIGGER = "false trigger"
MISSED_TRIGGER = "missed trigger"


def misses(outcomes: Sequence[QueryOutcome]) -> list[Miss]:
    """False triggers first, then missed triggers; each by how often it went wrong."""
    false: list[Miss] = []
    missed: list[Miss] = []
    for o in outcomes:
        if not o.should_trigger and o.triggered:
            false.append(Miss(FALSE_TRIGGER, o, o.triggered))
        elif o.should_trigger and o.attempts > o.triggered:
            missed.append(Miss(MISSED_TRIGGER, o, o.attempts - o.triggered, o.instead))
    order = lambda m: (-m.wrong / max(1, m.outcome.attempts), m.outcome.query)  # noqa: E731
    return sorted(false, key=order) + sorted(missed, key=order)


def percent(value: float | None) -> str:
    """A ratio as the page shows it: "83 %", or "—" when undefined."""
    return "—" if value is None else f"{round(value * 100)} %"
