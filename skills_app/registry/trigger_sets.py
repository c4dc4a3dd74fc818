"""Trigger sets: a package's test queries, edited in the Skills area or shipped with the skill.

A skill folder may carry its set where authors keep it: `evals/trigger.json` (ours),
`evals/trigger-eval.json` (skill-creator's eval set, the name most published skills use) or
`evals/eval_queries.json` (the Agent Skills guide's), all the same JSON as the editor's import and
export. Installing a version adds the queries of each file it has to the package's set; queries
already there are kept as they are, so an edit made on the page is never overwritten by a later
upload. Slash-command queries are skipped and said so, never a reason to refuse the file.

A package's trigger set is part of the package (as its versions are), so it lives in the registry:
installing reads it without reaching up into the trigger tests that run it (`triggers/`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max

from skills_app.core.skilltypes import Problem
from skills_app.core.triggers.cases import (
    MAX_CASES,
    TriggerCase,
    TriggerSet,
    TriggerSetError,
    check_query,
    dump_cases,
    read_set,
    same_query,
)
from skills_app.models import SkillPackage, TriggerQuery

SHIPPED_PATH = "evals/trigger.json"
# Where skill authors keep trigger sets, in the order they are read.
SHIPPED_PATHS = (SHIPPED_PATH, "evals/trigger-eval.json", "evals/eval_queries.json")
MAX_SHIPPED_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class Imported:
    added: int
    skipped: int  # already in the set
    removed: int = 0  # replaced

    def sentence(self) -> str:
        parts = [f"added {self.added} quer{'y' if self.added == 1 else 'ies'}"]
        if self.skipped:
            parts.append(f"{self.skipped} already in the set")
        if self.removed:
            parts.append(f"replaced {self.removed}")
        return ", ".join(parts)


def queries_of(package: SkillPackage) -> list[TriggerQuery]:
    return list(package.trigger_queries.order_by("position", "pk"))


def cases_of(package: SkillPackage) -> list[TriggerCase]:
    """The package's trigger set, in order."""
    return [TriggerCase(q.query, q.should_trigger, q.held_out) for q in queries_of(package)]


def export_json(package: SkillPackage) -> str:
    return dump_cases(cases_of(package))


def _next_position(package: SkillPackage) -> int:
    top = package.trigger_queries.aggregate(n=Max("position"))["n"]
    return 0 if top is None else top + 1


def _check_unique(package: SkillPackage, query: str, *, except_pk: int | None = None) -> None:
    rows = package.trigger_queries.all()
    if except_pk is not None:
        rows = rows.exclude(pk=except_pk)
    for row in rows:
        if same_query(row.query, query):
            raise TriggerSetError(
                "This query is already in the set; edit that one instead of adding it twice."
            )


def add_query(
    package: SkillPackage, text: str, should_trigger: bool, *, held_out: bool = False, user: Any
) -> TriggerQuery:
    """Add one query; TriggerSetError when it is empty, too long, a duplicate or one too many."""
    query = check_query(text)
    with transaction.atomic():
        SkillPackage.objects.select_for_update().filter(pk=package.pk).first()
        if package.trigger_queries.count() >= MAX_CASES:
            raise TriggerSetError(
                f"The set already has {MAX_CASES} queries, the most a set holds; remove one first."
            )
        _check_unique(package, query)
        return TriggerQuery.objects.create(
            package=package,
            query=query,
            should_trigger=should_trigger,
            held_out=held_out,
            position=_next_position(package),
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )


def edit_query(row: TriggerQuery, text: str, should_trigger: bool, *, held_out: bool) -> None:
    query = check_query(text)
    _check_unique(row.package, query, except_pk=row.pk)
    row.query, row.should_trigger, row.held_out = query, should_trigger, held_out
    row.save(update_fields=["query", "should_trigger", "held_out", "updated_at"])


def import_cases(
    package: SkillPackage,
    cases: list[TriggerCase],
    *,
    replace: bool = False,
    user: Any = None,
    origin: str = "editor",
) -> Imported:
    """Add the cases not yet in the set (or replace the set with them)."""
    with transaction.atomic():
        SkillPackage.objects.select_for_update().filter(pk=package.pk).first()
        removed = 0
        if replace:
            removed, _ = package.trigger_queries.all().delete()
        existing = [q.query for q in package.trigger_queries.all()]
        new = [c for c in cases if not any(same_query(c.query, e) for e in existing)]
        if len(existing) + len(new) > MAX_CASES:
            raise TriggerSetError(
                f"The set would have {len(existing) + len(new)} queries; a set holds at most "
                f"{MAX_CASES}. Import fewer, or choose to replace the set."
            )
        position = _next_position(package)
        author = user if getattr(user, "is_authenticated", False) else None
        TriggerQuery.objects.bulk_create(
            TriggerQuery(
                package=package,
                query=c.query,
                should_trigger=c.should_trigger,
                held_out=c.held_out,
                position=position + i,
                origin=origin,
                created_by=author,
            )
            for i, c in enumerate(new)
        )
        return Imported(len(new), len(cases) - len(new), removed)


def _read_shipped(folder: Path, rel: str) -> TriggerSet | None:
    """The set in one shipped file; None when there is none; TriggerSetError saying what to fix."""
    path = folder / rel
    if not path.is_file() or path.is_symlink():
        return None
    if path.stat().st_size > MAX_SHIPPED_BYTES:
        raise TriggerSetError(
            f"{rel} is larger than {MAX_SHIPPED_BYTES // 1024} KB; it was not imported."
        )
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise TriggerSetError(f"{rel} is not UTF-8 text; it was not imported.") from None
    try:
        return read_set(text)
    except TriggerSetError as exc:
        raise TriggerSetError(f"{rel} was not imported: {exc.message}") from None


def pick_up_shipped(
    package: SkillPackage, folder: Path, *, user: Any
) -> tuple[str, list[tuple[str, TriggerSetError]]]:
    """Import the trigger set files of an installed version's folder (see SHIPPED_PATHS).

    Returns a sentence for the upload's result ("" when there is no file) and, for each file
    that cannot be read, its path and what to fix in it: such a file never refuses the upload,
    and the other files are imported all the same.
    """
    sentences: list[str] = []
    failures: list[tuple[str, TriggerSetError]] = []
    for rel in SHIPPED_PATHS:
        try:
            found = _read_shipped(folder, rel)
            if found is None:
                continue
            imported = import_cases(package, found.cases, user=user, origin="upload")
        except TriggerSetError as exc:
            failures.append((rel, exc))
            continue
        sentence = f"trigger set from {rel}: {imported.sentence()}"
        if found.skipped:
            count = len(found.skipped)
            sentence += f" ({count} slash-command quer{'y' if count == 1 else 'ies'} skipped)"
        sentences.append(sentence)
    return "; ".join(sentences), failures


def pick_up_for_install(
    package: SkillPackage, folder: Path, *, origin: str, user: Any
) -> tuple[str, Problem | None]:
    """For an upload: the sentence of what was imported, and a warning about unreadable files."""
    sentence, failures = pick_up_shipped(package, folder, user=user)
    if not failures:
        return sentence, None
    rel = failures[0][0]
    message = " ".join(exc.message for _rel, exc in failures)
    return sentence, Problem("warning", "trigger-set", message, f"{origin}{rel}")


def catalog_changed(before: Any, after: Any) -> bool:
    """Whether two versions' frontmatter differ in what the catalog shows of them."""

    def text(frontmatter: Any) -> tuple[str, str]:
        data = frontmatter if isinstance(frontmatter, dict) else {}
        return (
            " ".join(str(data.get("description") or "").split()),
            " ".join(str(data.get("when_to_use") or "").split()),
        )

    return text(before) != text(after)


def parse_upload(data: bytes) -> TriggerSet:
    """The set in an uploaded JSON file; TriggerSetError for anything else."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TriggerSetError(
            "The file is not UTF-8 text; save it as UTF-8 JSON and import it again."
        ) from None
    return read_set(text)
