"""An upload's skills staged: written to a temporary folder and linted there, before anything
is stored. Lint errors refuse the upload; problems name files as they sit in the upload.

`uploads.py` stages every skill of an upload first, then stores them all in one transaction.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skills_app.core.lint_runtime import lint_runtime_dir, merge
from skills_app.core.skillfile import SkillFileError, SkillSpec, parse_skill_dir
from skills_app.core.skilltypes import Problem
from skills_app.core.upload_checks import Candidate, UploadError


def write_candidate(candidate: Candidate, folder: Path) -> None:
    """Write the skill's files into a new `folder` (scripts executable, as in the upload)."""
    folder.mkdir(parents=True)
    for member in candidate.files:
        target = folder / member.path
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as fh:
            fh.write(member.data)
        os.chmod(target, 0o755 if member.executable else 0o644)


def relocate(problems: list[Problem], folder: Path, candidate: Candidate) -> list[Problem]:
    """Problems name files as they sit in the upload, not in the temporary folder."""
    out: list[Problem] = []
    prefix = str(folder)
    for p in problems:
        file = p.file
        if file.startswith(prefix):
            rel = file[len(prefix) :].lstrip(os.sep)
            file = f"{candidate.origin}{rel}" or candidate.name
        out.append(replace(p, file=file))
    return out


def parse_candidate(candidate: Candidate, folder: Path) -> SkillSpec:
    """The written skill's SKILL.md parsed; UploadError naming the file as uploaded."""
    try:
        return parse_skill_dir(folder, name=candidate.name, source="uploaded")
    except SkillFileError as exc:
        problems = relocate([exc.problem], folder, candidate)
        raise UploadError(f"{candidate.name}: {problems[0].message}", problems) from None
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        # PyYAML builds some values (dates) with Python constructors that raise their own errors.
        problem = Problem(
            "error",
            "yaml",
            f"the frontmatter could not be read ({exc}); quote the value",
            f"{candidate.origin}SKILL.md",
        )
        raise UploadError(f"{candidate.name}: {problem.message}", [problem]) from None


def json_safe(value: Any) -> Any:
    """The value as JSON gives it back (dates as text), for a JSONField."""
    return json.loads(json.dumps(value, default=str))


def problem_json(p: Problem) -> dict[str, Any]:
    """A lint problem as stored on its version."""
    return {
        "severity": p.severity,
        "rule": p.rule,
        "message": p.message,
        "file": p.file,
        "line": p.line,
    }


@dataclass(slots=True)
class Staged:
    """One skill of an upload, written and linted in the staging folder."""

    candidate: Candidate
    folder: Path
    spec: SkillSpec
    warnings: list[Problem]
    skill_md: str


def stage(candidate: Candidate, folder: Path) -> Staged:
    """Write the skill to `folder` and lint it; UploadError with every problem on a lint error."""
    write_candidate(candidate, folder)
    spec = parse_candidate(candidate, folder)
    problems = relocate(merge(spec.problems, lint_runtime_dir(folder, spec)), folder, candidate)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise UploadError(
            f"{candidate.name} has {len(errors)} lint error(s); fix them and upload again",
            errors + [p for p in problems if p.severity != "error"],
        )
    skill_md = spec.skill_file.read_bytes().decode("utf-8")
    return Staged(candidate, folder, spec, [p for p in problems if p.severity != "error"], skill_md)
