"""Trigger tests, the plain-Python half: trigger sets (`cases`), one probe request and what the
model chose (`probe`) and precision/recall/accuracy (`metrics`); the per-query chart is drawn by
`core.chart`."""

from __future__ import annotations
