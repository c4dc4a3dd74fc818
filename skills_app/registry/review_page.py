"""What the review page shows: the whole package, nothing summarised away, in pages.

Every file (text shown whole, binaries listed with size and sha256), a diff of every changed
file against the active version (or the previous one when nothing is active yet), the lint
report, (the page adds the trigger-test figures of this version beside the active one's), the
command manifest with each entry exactly as written and in words, the trail of review steps,
and the calls refused because they quoted the skill's instructions (the attempts a reviewer
should know about).

The files come in pages (`core.review.pages`): this version's files in path order, then the
files removed since the version it is compared with. Each page says which files it holds of
how many, links every other page with the first and last path on it, and the manifest links
each file an entry names to its page. A version that cannot be shown whole cannot be approved.
"""

from __future__ import annotations

from typing import Any

from skills_app.core.review import Manifest, PackageFile
from skills_app.core.review.manifest import entry_paths
from skills_app.core.review.pages import MAX_MANIFEST_ENTRIES, Page, PageItem, paginate, unshowable
from skills_app.models import PermissionDecision, SkillVersion
from skills_app.registry import review
from skills_app.registry.diffs import diff_chars, diff_file, reading_order, status_of

REFUSALS_SHOWN = 20


def _problems(lint: Any) -> list[dict[str, Any]]:
    return [p for p in lint or [] if isinstance(p, dict)]


def baseline(version: SkillVersion) -> SkillVersion | None:
    """What this version is compared with: the active version, else the one before it."""
    package = version.package
    active = package.active_version
    if active is not None and active.pk != version.pk:
        return active
    return package.versions.filter(number__lt=version.number).order_by("-number").first()


def _files(version: SkillVersion) -> list[PackageFile]:
    """A version's files; none when they are gone from storage (the page says so)."""
    try:
        return review.version_files(version)
    except OSError:
        return []


def _page_link(page: Page, rels: list[str], count: int) -> dict[str, Any]:
    """One entry of the page list: its number, and the files on it (first and last path)."""
    own = [p for p in page.pieces if p.index < count]
    return {
        "number": page.number,
        "first": own[0].index + 1 if own else 0,
        "last": own[-1].index + 1 if own else 0,
        "first_rel": rels[page.pieces[0].index] if page.pieces else "",
        "last_rel": rels[page.pieces[-1].index] if page.pieces else "",
        "removed_only": bool(page.pieces) and not own,
    }


def files_context(
    files: list[PackageFile], old: list[PackageFile] | None, page_number: int
) -> dict[str, Any]:
    """The files part of the review page: which page, what is on it, where every file is.

    `old`: the files of the version compared with (None: nothing to compare with)."""
    after = {f.rel: f for f in files}
    before = {f.rel: f for f in old or []}
    removed = sorted(set(before) - set(after))
    rels = [f.rel for f in files] + removed
    extras = {
        rel: diff_chars(before.get(rel), after.get(rel)) if old is not None else 0 for rel in rels
    }
    pages = paginate(
        [PageItem(rel, getattr(after.get(rel), "text", None), extras[rel]) for rel in rels]
    )
    number = min(max(page_number, 1), len(pages))
    page = pages[number - 1]
    where: dict[tuple[str, int], int] = {}
    for p in pages:
        for piece in p.pieces:
            where[(piece.rel, piece.part)] = p.number
    pieces: list[dict[str, Any]] = []
    diffs = []
    for piece in page.pieces:
        rel = piece.rel
        new = after.get(rel)
        if new is not None:
            text = (new.text or "")[piece.start : piece.end]
            first_line = (new.text or "").count("\n", 0, piece.start) + 1
            pieces.append(
                {
                    "piece": piece,
                    "file": new,
                    "text": text,
                    "first_line": first_line,
                    "last_line": first_line + text.count("\n", 0, max(len(text) - 1, 0)),
                    "next_page": where.get((rel, piece.part + 1)),
                }
            )
        if old is not None and piece.part == 1 and status_of(before.get(rel), new) != "same":
            # A text long enough to need parts is longer than DIFF_MAX_CHARS: not compared.
            diffs.append(diff_file(before.get(rel), new, rel))
    changed_pages = sorted(
        {
            p.number
            for p in pages
            for piece in p.pieces
            if old is not None and status_of(before.get(piece.rel), after.get(piece.rel)) != "same"
        }
    )
    file_pages = {
        f.rel: {"page": where[(f.rel, 1)], "index": index + 1} for index, f in enumerate(files)
    }
    return {
        "file_count": len(files),
        "removed_count": len(removed),
        "pages": [_page_link(p, rels, len(files)) for p in pages],
        "page": _page_link(page, rels, len(files)),
        "page_count": len(pages),
        "pieces": pieces,
        "diffs": sorted(diffs, key=reading_order),
        "changed_total": sum(status_of(before.get(rel), after.get(rel)) != "same" for rel in rels)
        if old is not None
        else 0,
        "changed_pages": changed_pages,
        "file_pages": file_pages,
    }


def manifest_rows(
    manifest: Manifest, file_pages: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """The manifest's entries as the page lists them (at most MAX_MANIFEST_ENTRIES), each with
    the files of the skill it names and where each is (None: not a file of this version)."""
    rows = []
    for entry in manifest.entries[:MAX_MANIFEST_ENTRIES]:
        named = [{"rel": rel, "at": file_pages.get(rel)} for rel in entry_paths(entry)]
        rows.append({"entry": entry, "files": named})
    return rows


def review_context(
    version: SkillVersion, user: Any, *, page: int = 1, others: bool = True
) -> dict[str, Any]:
    """Everything the review page of `version` shows to `user` (a reviewer or the uploader).

    `others`: compare with other versions (False for an uploader who is not a skill manager:
    the other versions are other people's work)."""
    package = version.package
    digest_problem = ""
    try:
        review.check_digest(version)
    except review.ReviewError as exc:
        digest_problem = exc.message
    files = _files(version)
    against = baseline(version) if others else None
    try:
        manifest = review.manifest_of(version)
    except (review.ReviewError, OSError) as exc:
        digest_problem = digest_problem or str(exc)
        manifest = Manifest(())
    shown = files_context(files, _files(against) if against is not None else None, page)
    problem = unshowable(files, len(manifest))
    unshown = f"{package.name} v{version.number}: {problem}." if problem else ""
    approval = review.approval_of(version)
    approved = Manifest.from_data(approval.manifest) if approval is not None else None
    refusals = PermissionDecision.objects.filter(
        skill=package.name, decision=PermissionDecision.REFUSED
    ).select_related("conversation__owner")[:REFUSALS_SHOWN]
    refusal = review.approve_refusal(version, user)
    return {
        "version": version,
        "package": package,
        "active": package.active_version,
        "against": against,
        "digest_problem": digest_problem,
        "unshown": unshown,
        **shown,
        "manifest": manifest,
        "manifest_rows": manifest_rows(manifest, shown["file_pages"]),
        "manifest_cut": max(len(manifest) - MAX_MANIFEST_ENTRIES, 0),
        "lint": _problems(version.lint),
        "approval": approval,
        "approved_manifest": approved,
        "approved_matches": approved is not None and approved.digest == manifest.digest,
        "trail": review.trail(package),
        # Raw rows: the page shows their calls through the outbound filter (review_views).
        "refusals": list(refusals),
        "can_submit": version.review_status in (SkillVersion.DRAFT, SkillVersion.CHANGES_REQUESTED)
        and user.has_perm(review.SUBMIT_PERMISSION),
        "can_approve": not refusal and not digest_problem and not unshown,
        "approve_refusal": refusal or unshown,
        "can_review": user.has_perm(review.REVIEW_PERMISSION)
        and version.review_status == SkillVersion.SUBMITTED,
        "can_activate": version.review_status == SkillVersion.APPROVED
        and not digest_problem
        and user.has_perm(review.ACTIVATE_PERMISSION)
        and package.active_version_id != version.pk,
        "versions": list(package.versions.select_related("uploaded_by").order_by("-number")),
    }


__all__ = ["baseline", "files_context", "manifest_rows", "review_context"]
