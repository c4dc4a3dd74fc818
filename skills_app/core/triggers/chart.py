"""Trigger rate per query as grouped bars: the geometry of a server-rendered SVG.

One slot per query, numbered as in the report's table; in each slot the bar of this run and,
when there is one, the bar of the run it is compared with (the previous version). Should-trigger
queries are blue, should-not ones orange (Okabe-Ito, told apart with the common colour-vision
deficiencies); the compared run's bars are grey. A dashed line marks the 50 % pass line. The
template draws what this returns and does the escaping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SHOULD_COLOUR = "#0072B2"
SHOULD_NOT_COLOUR = "#E69F00"
PREVIOUS_COLOUR = "#8a8a8a"

# The drawing is as wide as its queries need (a slot of SLOT per bar), between MIN_WIDTH and
# WIDTH, and is never scaled up: a few queries stay legible on a phone without giant bars.
WIDTH = 720
MIN_WIDTH = 360
SLOT = 44
MAX_BAR = 40
HEIGHT = 220
LEFT = 40
RIGHT = 8
TOP = 10
BOTTOM = 30
MAX_LABELS = 25


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
class Tick:
    position: float
    text: str


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


def _y(rate: float) -> float:
    return round(HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * rate, 2)


def _pct(rate: float | None) -> str:
    return "no answer" if rate is None else f"{round(rate * 100)} %"


def build_rate_chart(queries: Sequence[ChartQuery], *, previous_label: str = "") -> RateChart:
    """Bars for each query's trigger rate (and the compared run's, when `previous_label` is set)."""
    compared = bool(previous_label) and any(q.previous is not None for q in queries)
    series = 2 if compared else 1
    total = max(MIN_WIDTH, min(WIDTH, LEFT + RIGHT + len(queries) * SLOT * series))
    slot = (total - LEFT - RIGHT) / max(len(queries), 1)
    width = max(min(slot * 0.72 / series, MAX_BAR), 1.0)
    bars: list[Bar] = []
    for i, q in enumerate(queries):
        left = LEFT + i * slot + (slot - width * series) / 2
        expect = "should trigger" if q.should_trigger else "should not trigger"
        if q.rate is not None:
            colour = SHOULD_COLOUR if q.should_trigger else SHOULD_NOT_COLOUR
            title = f"#{q.number} ({expect}): {_pct(q.rate)}"
            bars.append(_bar(left, q.rate, width, colour, "this", title))
        if compared and q.previous is not None:
            title = f"#{q.number} ({expect}), {previous_label}: {_pct(q.previous)}"
            bars.append(_bar(left + width, q.previous, width, PREVIOUS_COLOUR, "previous", title))
    every = max(1, -(-len(queries) // MAX_LABELS))
    x_ticks = tuple(
        Tick(round(LEFT + i * slot + slot / 2, 2), str(q.number))
        for i, q in enumerate(queries)
        if i % every == 0
    )
    y_ticks = tuple(Tick(_y(v / 100), f"{v} %") for v in (0, 50, 100))
    return RateChart(
        total,
        HEIGHT,
        LEFT,
        total - RIGHT,
        HEIGHT - BOTTOM,
        _y(0.5),
        tuple(bars),
        y_ticks,
        x_ticks,
        compared,
    )


def _bar(x: float, rate: float, width: float, colour: str, series: str, title: str) -> Bar:
    top = _y(rate)
    # A rate of 0 still gets a sliver, so "asked, never chosen" differs from "not asked".
    height = max(round(HEIGHT - BOTTOM - top, 2), 1.5)
    return Bar(
        round(x, 2),
        round(HEIGHT - BOTTOM - height, 2),
        round(width, 2),
        height,
        colour,
        series,
        title,
    )
