"""Where the tests find the repository and their data, whatever folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
SKILL_FIXTURES = FIXTURES / "skills"
GOLDEN = TESTS / "golden"
