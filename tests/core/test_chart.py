"""The chart geometry the audit pages and the trigger reports draw as SVG."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from skills_app.core.chart import (
    OTHER,
    PREVIOUS_COLOUR,
    SHOULD_COLOUR,
    SHOULD_NOT_COLOUR,
    ChartQuery,
    build_rate_chart,
    build_stacked_chart,
)

# -- counts per skill over time ------------------------------------------------------------------


def test_a_stacked_chart_stacks_skills_per_day_in_proportion():
    start = date(2026, 8, 1)
    chart = build_stacked_chart(
        {(start, "pdf"): 2, (start, "xlsx"): 1, (start + timedelta(days=1), "pdf"): 4},
        start,
        start + timedelta(days=1),
    )
    assert chart.unit == "day" and chart.total == 7
    assert [t.text for t in chart.y_ticks] == ["0", "1", "2", "3", "4"]
    tall = build_stacked_chart({(start, "pdf"): 23}, start, start)
    assert [t.text for t in tall.y_ticks] == ["0", "15", "30"]
    first = [s for s in chart.segments if s.bucket == "2026-08-01"]
    assert [(s.skill, s.count) for s in first] == [("pdf", 2), ("xlsx", 1)]
    plot = chart.plot_bottom - 10
    assert first[0].height == pytest.approx(plot * 2 / 4, abs=0.01)
    assert first[1].y + first[1].height == pytest.approx(first[0].y, abs=0.01)  # stacked
    assert [(e.skill, e.total) for e in chart.legend] == [("pdf", 6), ("xlsx", 1)]


def test_a_stacked_chart_folds_the_least_used_skills_into_other():
    day = date(2026, 8, 1)
    counts = {(day, f"skill-{i}"): 10 - i for i in range(9)}
    chart = build_stacked_chart(counts, day, day, max_skills=7)
    assert [e.skill for e in chart.legend][-1] == OTHER
    assert chart.legend[-1].total == 3 + 2  # skill-7 and skill-8


def test_a_long_range_is_drawn_per_week_and_ignores_counts_outside_it():
    start, end = date(2026, 1, 5), date(2026, 6, 28)
    chart = build_stacked_chart(
        {(date(2026, 1, 7), "a"): 3, (date(2025, 12, 1), "a"): 9}, start, end
    )
    assert chart.unit == "week" and chart.total == 3
    assert chart.rows[0][0] == "week of 2026-01-05"


def test_an_empty_period_has_no_bars():
    chart = build_stacked_chart({}, date(2026, 1, 1), date(2026, 1, 30))
    assert chart.total == 0 and chart.segments == ()


# -- a rate per trigger-test query ---------------------------------------------------------------


def test_a_rate_chart_draws_one_bar_per_query_and_the_compared_run_beside_it():
    rows = [
        ChartQuery(1, "a", True, 1.0, 0.0),
        ChartQuery(2, "b", False, 0.0, None),
        ChartQuery(3, "c", True, None, 0.5),
    ]
    chart = build_rate_chart(rows, previous_label="v1")
    this = [b for b in chart.bars if b.series == "this"]
    before = [b for b in chart.bars if b.series == "previous"]
    assert [b.colour for b in this] == [SHOULD_COLOUR, SHOULD_NOT_COLOUR]
    assert all(b.colour == PREVIOUS_COLOUR for b in before) and len(before) == 2
    full = this[0]
    assert full.y == chart.height - 30 - full.height and full.y == pytest.approx(10)
    assert this[1].height == 1.5  # asked, never chosen: a sliver, not nothing
    assert chart.pass_line == pytest.approx(10 + (220 - 10 - 30) / 2)
    assert [t.text for t in chart.x_ticks] == ["1", "2", "3"]
    alone = build_rate_chart(rows)
    assert not alone.compared and all(b.series == "this" for b in alone.bars)
    # A few queries: a narrow drawing with bars of at most 40; many: the full width.
    assert chart.width == 360 and max(b.width for b in chart.bars) <= 40
    many = build_rate_chart([ChartQuery(i, "q", True, 0.5) for i in range(1, 41)])
    assert many.width == 720 and len(many.x_ticks) == 20  # every other label
