"""Invocations per skill per day as a stacked bar chart: the geometry, for a server-rendered SVG.

Plain Python (no Django): counts in, rectangles and labels out; the template draws them and does
the escaping. Long ranges are bucketed by week or month so a bar stays wide enough to see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta

# Okabe-Ito colours (told apart with the common colour-vision deficiencies), then grey for "other".
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
OTHER_COLOUR = "#8a8a8a"
OTHER = "other skills"
MAX_DAYS = 62
MAX_WEEKS = 104

WIDTH = 900
HEIGHT = 240
LEFT = 44
RIGHT = 8
TOP = 10
BOTTOM = 28


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
class Tick:
    position: float
    text: str


@dataclass(frozen=True, slots=True)
class LegendEntry:
    skill: str
    colour: str
    total: int


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    plot_left: int
    plot_bottom: int
    plot_right: int
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


def build_chart(
    counts: Mapping[tuple[date, str], int], start: date, end: date, *, max_skills: int = 7
) -> Chart:
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
    colours[OTHER] = OTHER_COLOUR

    def value(bucket: date, skill: str) -> int:
        if skill == OTHER:
            return sum(grid.get((bucket, s), 0) for s in folded)
        return grid.get((bucket, skill), 0)

    totals = [sum(value(b, s) for s in series) for b in buckets]
    top = _nice_max(max(totals, default=0))
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(buckets), 1)
    bar = max(slot * 0.8, 1.0)
    segments: list[Segment] = []
    rows: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for i, bucket in enumerate(buckets):
        label = _label(bucket, unit)
        base = float(HEIGHT - BOTTOM)
        cells = []
        for skill in series:
            n = value(bucket, skill)
            if not n:
                continue
            h = plot_height * n / top
            base -= h
            segments.append(
                Segment(
                    round(LEFT + i * slot + (slot - bar) / 2, 2),
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
    y_ticks = tuple(Tick(round(HEIGHT - BOTTOM - plot_height * v / top, 2), str(v)) for v in values)
    every = max(1, len(buckets) // 8)
    x_ticks = tuple(
        Tick(round(LEFT + i * slot + slot / 2, 2), _short(b, unit))
        for i, b in enumerate(buckets)
        if i % every == 0
    )
    legend = tuple(
        LegendEntry(
            s, colours[s], per_skill[s] if s != OTHER else sum(per_skill[f] for f in folded)
        )
        for s in series
    )
    return Chart(
        WIDTH,
        HEIGHT,
        LEFT,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT,
        unit,
        tuple(segments),
        legend,
        y_ticks,
        x_ticks,
        sum(per_skill.values()),
        tuple(rows),
    )


def _short(day: date, unit: str) -> str:
    return day.strftime("%Y-%m") if unit == "month" else day.strftime("%m-%d")
