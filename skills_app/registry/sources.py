"""Syncing skill sources: fetch a Git branch, read its skills, make new versions of changed ones.

A sync (`sync_source`) claims the source (so the timer and the admin's button never run one
twice at once), fetches the branch into a temporary bare repository, reads the tree at the
source's path with the checks of `core.gitsource`, finds the skills (one skill, a folder of them,
a plugin, a marketplace), and hands each to `create_draft_from_files`: the same staging, lint and
storage as an upload. A skill whose files did not change since its last version is left alone
(versions are keyed by content digest), so each commit that changes a skill makes exactly one
new version of it, recorded with the source and the commit id.

An organisation skill's new version is a *draft* that goes through the same lint and review as
an upload (`uploads.create_draft_version`); its review trail says it came from `git <commit>`.
A personal source's skills belong to their owner and are live for them as their uploads are.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from dulwich.repo import Repo

from skills_app.core import frontmatter
from skills_app.core.gitsource import (
    GitFile,
    GitSourceError,
    TreeLimits,
    check_branch,
    check_location,
    check_subpath,
    fetch_commit,
    find_skill_folders,
    list_tree,
    read_blob,
    read_folder,
)
from skills_app.core.lint import name_format_problem
from skills_app.core.skilltypes import SkillFileError
from skills_app.core.upload_checks import Candidate, Layout, Member, UploadError, check_files
from skills_app.models import SkillSource, SkillSourceSync
from skills_app.registry import uploads

logger = logging.getLogger(__name__)
Status = SkillSource.Status


@dataclass(slots=True)
class SyncOutcome:
    status: str
    commit: str = ""
    created: list[uploads.InstallResult] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def message(self) -> str:
        parts = []
        if self.created:
            parts.append(
                "new versions: "
                + ", ".join(f"{r.package.name} v{r.version.number}" for r in self.created)
            )
        if self.unchanged:
            parts.append(f"unchanged: {', '.join(self.unchanged)}")
        parts += [f"refused: {r}" for r in self.refused]
        parts += self.notes
        return "; ".join(parts) or "nothing to do"


def check_source_fields(url: str, branch: str, path: str) -> None:
    """GitSourceError when a source's URL, branch or path may not be used (for forms)."""
    _location(url)
    check_branch(branch)
    check_subpath(path)


def _location(url: str) -> Any:
    return check_location(
        url,
        local_roots=list(settings.GIT_SOURCE_LOCAL_ROOTS),
        allow_http=settings.GIT_SOURCE_ALLOW_HTTP,
        allow_private_hosts=settings.GIT_SOURCE_ALLOW_PRIVATE_HOSTS,
    )


def _limits() -> TreeLimits:
    return TreeLimits(
        max_files=settings.UPLOAD_MAX_FILES,
        max_file_bytes=settings.UPLOAD_MAX_FILE_BYTES,
        max_total_bytes=settings.UPLOAD_MAX_TOTAL_BYTES,
    )


def _claim(source: SkillSource) -> bool:
    """Mark the source as syncing unless another sync holds it (stale claims expire)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.GIT_SOURCE_SYNC_STALE_SECONDS)
    return bool(
        SkillSource.objects.filter(pk=source.pk)
        .filter(Q(sync_started_at__isnull=True) | Q(sync_started_at__lt=stale))
        .update(sync_started_at=now)
    )


def sync_source(
    source: SkillSource, *, trigger: str = "admin", user: Any = None, force: bool = False
) -> SkillSourceSync:
    """Sync one source now; the sync's record says what happened (it never raises for a bad source).

    `force` reads the tree even when the branch has not moved since the last sync.
    """
    record = SkillSourceSync.objects.create(
        source=source,
        trigger=trigger,
        started_by=user if getattr(user, "is_authenticated", False) else None,
    )
    if not _claim(source):
        record.status = Status.FAILED
        record.message = "another sync of this source is under way; try again when it ends"
        record.finished_at = timezone.now()
        record.save()
        return record
    try:
        outcome = _sync(source, force=force)
    except GitSourceError as exc:
        outcome = SyncOutcome(Status.FAILED, notes=[exc.message])
    except Exception:
        logger.exception("sync of skill source %s failed", source.pk)
        outcome = SyncOutcome(Status.FAILED, notes=["the sync failed unexpectedly; see the log"])
    finally:
        SkillSource.objects.filter(pk=source.pk).update(sync_started_at=None)
    record.status = outcome.status
    record.commit = outcome.commit
    record.message = outcome.message()
    record.versions = [
        {"skill": r.package.name, "version": r.version.number, "id": r.version.pk}
        for r in outcome.created
    ]
    record.finished_at = timezone.now()
    record.save()
    fields = {
        "last_status": outcome.status,
        "last_message": record.message,
        "last_synced_at": record.finished_at,
    }
    if outcome.commit and outcome.status != Status.FAILED:
        fields["last_commit"] = outcome.commit
    SkillSource.objects.filter(pk=source.pk).update(**fields)
    source.refresh_from_db()
    return record


MAX_MANIFEST_BYTES = 512 * 1024


def _sync(source: SkillSource, *, force: bool) -> SyncOutcome:
    location = _location(source.url)
    branch = check_branch(source.branch)
    subpath = check_subpath(source.path)
    with tempfile.TemporaryDirectory(prefix="skill-source-") as tmp:
        fetched = fetch_commit(
            location,
            branch,
            Path(tmp) / "repo.git",
            timeout=settings.GIT_SOURCE_TIMEOUT_SECONDS,
            max_pack_bytes=settings.GIT_SOURCE_MAX_FETCH_BYTES,
        )
        if fetched.commit == source.last_commit and not force:
            return SyncOutcome(Status.UNCHANGED, fetched.commit, notes=["no new commit"])
        repo = Repo(str(fetched.repo_path))
        try:
            return _read_skills(source, repo, fetched.commit, subpath)
        finally:
            repo.close()


def _read_skills(source: SkillSource, repo: Repo, commit: str, subpath: str) -> SyncOutcome:
    entries = list_tree(repo, commit, subpath)
    found = find_skill_folders(entries, lambda e: read_blob(repo, e, MAX_MANIFEST_BYTES))
    outcome = SyncOutcome(Status.OK, commit, notes=list(found.notes))
    for folder in found.skills:
        label = folder.name or folder.origin or source.path or "the root"
        try:
            files = read_folder(repo, folder.files, _limits(), folder.origin)
            results = create_draft_from_files(
                SkillFiles(folder.name, tuple(files), folder.origin), source=source, commit=commit
            )
        except GitSourceError as exc:
            outcome.refused.append(f"{label}: {exc.message}")
            continue
        except UploadError as exc:
            problems = "; ".join(str(p) for p in exc.problems[:5])
            outcome.refused.append(
                f"{label}: {exc.message}" + (f" ({problems})" if problems else "")
            )
            continue
        for result in results:
            if result.created:
                outcome.created.append(result)
            else:
                outcome.unchanged.append(result.package.name)
    if outcome.refused:
        outcome.status = Status.PARTIAL if outcome.created or outcome.unchanged else Status.FAILED
    return outcome


@dataclass(frozen=True, slots=True)
class SkillFiles:
    """One skill read from Git: its name (None: from its frontmatter), files and where it sat."""

    name: str | None
    files: tuple[GitFile, ...]
    origin: str


def _skill_name(folder: SkillFiles, source: SkillSource) -> str:
    """A single skill's name: its frontmatter `name:`, else the last folder of the path."""
    if folder.name:
        return folder.name
    skill_md = next((f for f in folder.files if f.path.lower() == "skill.md"), None)
    if skill_md is not None:
        try:
            fm = frontmatter.read(skill_md.data.decode("utf-8"), Path("SKILL.md"))[0]
        except (UnicodeDecodeError, SkillFileError):
            fm = {}
        name = fm.get("name")
        if isinstance(name, str) and name_format_problem(name) is None:
            return name.strip()
    last = [p for p in source.path.split("/") if p]
    candidate = last[-1] if last else source.name
    why = name_format_problem(candidate)
    if why:
        raise UploadError(f"the skill at the source's path has no usable name: {why}")
    return candidate


def create_draft_from_files(
    folder: SkillFiles, *, source: SkillSource, commit: str
) -> list[uploads.InstallResult]:
    """Stage, lint and store one skill read from Git as a new version, with its commit.

    Organisation skills go through the review's one entrance for files
    (`uploads.create_draft_version`): a draft, with an "uploaded" step from `git <commit>` in
    its review trail. A personal source's skills are their owner's, live as uploads are.
    """
    name = _skill_name(folder, source)
    origin = f"git {commit[:12]}"
    if source.owner_id is not None:
        members = _members(folder.files)
        layout = Layout([Candidate(name, tuple(members), folder.origin)])
        results = uploads.install_layout(
            layout, user=source.owner, personal=True, activate=False, origin=origin
        )
    else:
        plugin, _, skill = name.rpartition(":")
        # A plugin's skill is laid out as the plugin layout names it (plugin:skill).
        root = f"{plugin}/skills/{skill}" if plugin else name
        files = [uploads.UploadFile(f"{root}/{f.path}", f.data) for f in folder.files]
        results = uploads.create_draft_version(files, user=source.created_by, origin=origin)
    for result in results:
        if result.created:
            result.version.source = source
            result.version.source_commit = commit
            result.version.save(update_fields=["source", "source_commit"])
    return results


def _members(files: tuple[GitFile, ...]) -> list[Member]:
    """The files under the upload limits and path rules, keeping Git's executable bit."""
    checked = check_files([(f.path, f.data) for f in files], uploads.limits())
    executable = {f.path for f in files if f.executable}
    return [Member(m.path, m.data, m.path in executable) for m in checked]


def due_sources(now: Any = None) -> list[SkillSource]:
    """Enabled sources with an interval whose last sync is that long ago (or never)."""
    now = now or timezone.now()
    due = []
    for source in SkillSource.objects.filter(enabled=True, sync_interval_minutes__gt=0):
        last = source.last_synced_at
        if last is None or now - last >= timedelta(minutes=source.sync_interval_minutes):
            due.append(source)
    return due
