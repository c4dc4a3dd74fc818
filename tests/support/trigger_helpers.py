"""Shared set-up of the trigger-test tests: three organisation skills whose descriptions the
skill-choice rule tells apart, a trigger set with a known outcome, and waiting for a run."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

from skills_app.core.triggers.cases import TriggerCase
from skills_app.models import SkillPackage, TriggerRun
from skills_app.registry import trigger_sets as sets
from skills_app.registry import uploads
from tests.support.review_helpers import go_live

# Unique text in each body: it reaches the model only when the skill loads, never a report.
BODY_MARKER = "TRIGGER-BODY-MARKER-4c2e"

SKILLS = {
    "pdf-tables": "Extract tables from PDF files into spreadsheets.",
    "slide-deck": "Build a slide deck presentation from an outline.",
    "release-notes": "Draft release notes from the git log of a repository.",
}

# For pdf-tables, by the rule (core/skill_choice.py), per attempt:
CASES = [
    # shares table, pdf, spreadsheet with pdf-tables: chosen (true positive)
    TriggerCase("get the tables out of this pdf into a spreadsheet", True),
    # extract, table, pdf: chosen (true positive)
    TriggerCase("extract every table from the quarterly pdf", True),
    # outline, slide, presentation: slide-deck takes it (missed trigger, chosen instead)
    TriggerCase("turn my outline into a slide presentation", True),
    # nothing in common with any skill: no skill (true negative)
    TriggerCase("what is the capital of France", False),
    # pdf, file, spreadsheet: pdf-tables (false trigger)
    TriggerCase("convert these pdf files to spreadsheets please", False),
]
# With R repetitions: tp = 2R, fn = R, fp = R, tn = R.


def skill_folder(
    root: Path, name: str, description: str, *, extra: dict[str, str] | None = None
) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        textwrap.dedent(
            f"""\
            ---
            name: {name}
            description: {description}
            ---
            {BODY_MARKER} for {name}: follow these steps.
            """
        )
    )
    for path, text in (extra or {}).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def isolate_skills(settings: Any, tmp_path: Path) -> None:
    """Only the uploaded skills compete: no bundled or folder skills."""
    empty = tmp_path / "no-bundled"
    empty.mkdir(exist_ok=True)
    settings.BUNDLED_SKILLS_DIR = empty
    settings.SKILLS_DIRS = []


def install_org_skills(
    tmp_path: Path, manager: Any, skills: dict[str, str] | None = None
) -> dict[str, SkillPackage]:
    """Install each skill for the organisation; its package by name."""
    out = {}
    for name, description in (skills or SKILLS).items():
        folder = skill_folder(tmp_path / "src", name, description)
        result = go_live(uploads.install_directory(folder, user=manager)[0])
        out[name] = result.package
    return out


def give_cases(package: SkillPackage, cases: list[TriggerCase] | None = None) -> None:
    sets.import_cases(package, cases or CASES)


def cases_json(cases: list[TriggerCase] | None = None) -> str:
    return json.dumps([c.as_json() for c in cases or CASES])


async def wait_for_trigger_run(run_id: int, *, timeout: float = 30.0) -> TriggerRun:
    """Wait until the run has ended; the run as stored."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        run = await TriggerRun.objects.aget(pk=run_id)
        if not run.is_active:
            return run
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"trigger run {run_id} is still {run.status} after {timeout} s")
        await asyncio.sleep(0.02)


async def wait_for(condition: Any, *, timeout: float = 10.0, what: str = "the condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.02)
