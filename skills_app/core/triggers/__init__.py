"""Trigger tests, the plain-Python half: trigger sets (`cases`), one probe request and what the
model chose (`probe`), precision/recall/accuracy (`metrics`) and the per-query chart (`chart`)."""

from __future__ import annotations
