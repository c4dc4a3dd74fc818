"""The value types shared by SKILL.md parsing and lint: Problem and SkillFileError."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    severity: str  # "error" | "warning"
    rule: str
    message: str
    file: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.severity} [{self.rule}] {self.message}"


class SkillFileError(Exception):
    """A skill that cannot be read at all; `.problem` says which file, where and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem
