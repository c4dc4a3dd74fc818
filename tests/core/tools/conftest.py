"""Fixtures of the tool tests: a workspace in the test's own folder, and a context on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.tools import ToolContext, Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "conv")


@pytest.fixture
def ctx(ws: Workspace) -> ToolContext:
    return ToolContext(workspace=ws)
