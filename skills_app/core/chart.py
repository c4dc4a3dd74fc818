"""Bar charts for a server-rendered SVG: the geometry, not the drawing.

Plain Python (no Django): numbers in, rectangles, ticks and a legend out; the templates draw
them and do the escaping. Two shapes share one frame (a plot area inside margins that hold the
axis labels) and one palette:

- `build_stacked_chart`: a count per skill per day (invocations, spend) as stacked bars. Long
  ranges are bucketed by week or month so a bar stays wide enough to see.
- `build_rate_chart`: a trigger test's rate per query as bars, beside the bars of the run it is
  compared with. A dashed line marks the 50 % pass line.

Colours are Okabe-Ito, told apart with the common colour-vision deficiencies; grey stands for
"other skills" and for the compared run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
GREY = "#8a8a8a"


@dataclass(frozen=True, slots=True)
class Frame:
    """A drawing's size and the margins around its plot area."""

    width: float
    height: int
    left: int
    right: int
    top: int
    bottom: int

    @property
    def plot_right(self) -> float:
        return self.width - self.right

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom

    @property
    def plot_width(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_height(self) -> int:
        return self.height - self.top - self.bottom

    def y(self, share: float) -> float:
        """The y of a value at `share` of the axis (0 on the baseline, 1 at the top)."""
        return round(self.plot_bottom - self.plot_height * share, 2)

    def x_ticks(self, labels: Sequence[str], slot: float, every: int) -> tuple[Tick, ...]:
        """One label under the middle of every `every`-th slot."""
        return tuple(
            Tick(round(self.left + i * slot + slot / 2, 2), label)
            for i, label in enumerate(labels)
            if i % every == 0
        )


@dataclass(frozen=True, slots=True)
class Tick:
    position: float
    text: str


# -- counts per skill over time ------------------------------------------------------------------

OTHER = "other skills"
MAX_DAYS = 62
MAX_WEEKS = 104
STACKED = Frame(width=900, height=240, left=44, right=8, top=10, bottom=28)


@dataclass(frozen=True, slots=True)
class Segment:
    x: float
    y: float
    width: float
    height: float
    colour: str
    skill: str
    count: int
    bucket: str  # the bucket's label, e.g. "2026-08-01" or "week of 2026-08-03"


@dataclass(frozen=True, slots=True)
class LegendEntry:
    skill: str
    colour: str
    total: int


@dataclass(frozen=True, slots=True)
class StackedChart:
    width: float
    height: int
    plot_left: int
    plot_bottom: int
    plot_right: float
    unit: str  # "day" | "week" | "month"
    segments: tuple[Segment, ...]
    legend: tuple[LegendEntry, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    total: int
    rows: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # per bucket: (label, per skill)


def _unit(start: date, end: date) -> str:
    days = (end - start).days + 1
    if days <= MAX_DAYS:
        return "day"
    return "week" if days <= MAX_WEEKS * 7 else "month"


def bucket_start(day: date, unit: str) -> date:
    """The first day of the bucket `day` falls in (weeks start on Monday)."""
    if unit == "week":
        return day - timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day


def _next(day: date, unit: str) -> date:
    if unit == "week":
        return day + timedelta(days=7)
    if unit == "month":
        return (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return day + timedelta(days=1)


def _label(day: date, unit: str) -> str:
    if unit == "week":
        return f"week of {day.isoformat()}"
    if unit == "month":
        return day.strftime("%Y-%m")
    return day.isoformat()


def _short(day: date, unit: str) -> str:
    return day.strftime("%Y-%m") if unit == "month" else day.strftime("%m-%d")


def _nice_max(value: int) -> int:
    """The smallest 1/2/3/4/5/6/8 x 10^n at or above `value` (at least 1), for the y axis."""
    if value <= 1:
        return 1
    scale = 1
    while True:
        for step in (1, 2, 3, 4, 5, 6, 8):
            if step * scale >= value:
                return step * scale
        scale *= 10


def build_stacked_chart(
    counts: Mapping[tuple[date, str], int], start: date, end: date, *, max_skills: int = 7
) -> StackedChart:
    """Stack the `(day, skill) -> count` map into bars from `start` to `end` (inclusive)."""
    if end < start:
        start, end = end, start
    unit = _unit(start, end)
    buckets: list[date] = []
    cursor = bucket_start(start, unit)
    while cursor <= end:
        buckets.append(cursor)
        cursor = _next(cursor, unit)
    per_skill: dict[str, int] = {}
    grid: dict[tuple[date, str], int] = {}
    for (day, skill), n in counts.items():
        if not start <= day <= end or n <= 0:
            continue
        key = (bucket_start(day, unit), skill)
        grid[key] = grid.get(key, 0) + n
        per_skill[skill] = per_skill.get(skill, 0) + n
    ranked = sorted(per_skill, key=lambda s: (-per_skill[s], s))
    shown = ranked[:max_skills]
    folded = ranked[max_skills:]
    colours = {skill: PALETTE[i % len(PALETTE)] for i, skill in enumerate(shown)}
    series = [*shown, *([OTHER] if folded else [])]
    colours[OTHER] = GREY

    def value(bucket: date, skill: str) -> int:
        if skill == OTHER:
            return sum(grid.get((bucket, s), 0) for s in folded)
        return grid.get((bucket, skill), 0)

    frame = STACKED
    totals = [sum(value(b, s) for s in series) for b in buckets]
    top = _nice_max(max(totals, default=0))
    slot = frame.plot_width / max(len(buckets), 1)
    bar = max(slot * 0.8, 1.0)
    segments: list[Segment] = []
    rows: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for i, bucket in enumerate(buckets):
        label = _label(bucket, unit)
        base = float(frame.plot_bottom)
        cells = []
        for skill in series:
            n = value(bucket, skill)
            if not n:
                continue
            h = frame.plot_height * n / top
            base -= h
            segments.append(
                Segment(
                    round(frame.left + i * slot + (slot - bar) / 2, 2),
                    round(base, 2),
                    round(bar, 2),
                    round(h, 2),
                    colours[skill],
                    skill,
                    n,
                    label,
                )
            )
            cells.append((skill, n))
        rows.append((label, tuple(cells)))
    # Every whole number up to 5; above, the half (whole: top is an even multiple) and the top.
    values = range(top + 1) if top <= 5 else (0, top // 2, top)
    legend = tuple(
        LegendEntry(
            s, colours[s], per_skill[s] if s != OTHER else sum(per_skill[f] for f in folded)
        )
        for s in series
    )
    return StackedChart(
        frame.width,
        frame.height,
        frame.left,
        frame.plot_bottom,
        frame.plot_right,
        unit,
        tuple(segments),
        legend,
        tuple(Tick(frame.y(v / top), str(v)) for v in values),
        frame.x_ticks([_short(b, unit) for b in buckets], slot, max(1, len(buckets) // 8)),
        sum(per_skill.values()),
        tuple(rows),
    )


# -- a rate per trigger-test query ---------------------------------------------------------------

SHOULD_COLOUR = PALETTE[0]
SHOULD_NOT_COLOUR = PALETTE[1]
PREVIOUS_COLOUR = GREY

# The drawing is as wide as its queries need (a slot of SLOT per bar), between MIN_WIDTH and
# MAX_WIDTH, and is never scaled up: a few queries stay legible on a phone without giant bars.
MAX_WIDTH = 720
MIN_WIDTH = 360
SLOT = 44
MAX_BAR = 40
MAX_LABELS = 25
RATES = Frame(width=MAX_WIDTH, height=220, left=40, right=8, top=10, bottom=30)


@dataclass(frozen=True, slots=True)
class ChartQuery:
    number: int
    query: str
    should_trigger: bool
    rate: float | None  # None: no answered attempt
    previous: float | None = None  # the compared run's rate for the same query, if it had it


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    series: str  # "this" | "previous"
    title: str


@dataclass(frozen=True, slots=True)
class RateChart:
    width: float
    height: int
    plot_left: int
    plot_right: float
    plot_bottom: int
    pass_line: float
    bars: tuple[Bar, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    compared: bool


def _pct(rate: float | None) -> str:
    return "no answer" if rate is None else f"{round(rate * 100)} %"


def build_rate_chart(queries: Sequence[ChartQuery], *, previous_label: str = "") -> RateChart:
    """Bars for each query's trigger rate (and the compared run's, when `previous_label` is set)."""
    compared = bool(previous_label) and any(q.previous is not None for q in queries)
    series = 2 if compared else 1
    needed = RATES.left + RATES.right + len(queries) * SLOT * series
    frame = Frame(
        max(MIN_WIDTH, min(MAX_WIDTH, needed)),
        RATES.height,
        RATES.left,
        RATES.right,
        RATES.top,
        RATES.bottom,
    )
    slot = frame.plot_width / max(len(queries), 1)
    width = max(min(slot * 0.72 / series, MAX_BAR), 1.0)

    def bar(x: float, rate: float, colour: str, series: str, title: str) -> Bar:
        # A rate of 0 still gets a sliver, so "asked, never chosen" differs from "not asked".
        height = max(round(frame.plot_bottom - frame.y(rate), 2), 1.5)
        return Bar(
            round(x, 2),
            round(frame.plot_bottom - height, 2),
            round(width, 2),
            height,
            colour,
            series,
            title,
        )

    bars: list[Bar] = []
    for i, q in enumerate(queries):
        left = frame.left + i * slot + (slot - width * series) / 2
        expect = "should trigger" if q.should_trigger else "should not trigger"
        if q.rate is not None:
            colour = SHOULD_COLOUR if q.should_trigger else SHOULD_NOT_COLOUR
            bars.append(
                bar(left, q.rate, colour, "this", f"#{q.number} ({expect}): {_pct(q.rate)}")
            )
        if compared and q.previous is not None:
            title = f"#{q.number} ({expect}), {previous_label}: {_pct(q.previous)}"
            bars.append(bar(left + width, q.previous, PREVIOUS_COLOUR, "previous", title))
    every = max(1, -(-len(queries) // MAX_LABELS))
    return RateChart(
        frame.width,
        frame.height,
        frame.left,
        frame.plot_right,
        frame.plot_bottom,
        frame.y(0.5),
        tuple(bars),
        tuple(Tick(frame.y(v / 100), f"{v} %") for v in (0, 50, 100)),
        frame.x_ticks([str(q.number) for q in queries], slot, every),
        compared,
    )
