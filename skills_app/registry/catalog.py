"""What a person is told about a skill: who published and reviewed it, what it may run (in
words), and whether the rules let them use it. Never its body.

The manifest's words come from a small vocabulary (`core.review.words`), and they still pass
through a filter built from the skill's own files before they leave for someone who may not
read them: no verbatim span of the package reaches them this way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skills_app.core.permissions import PermissionContext, Rule, ToolCall, decide
from skills_app.core.redact import HiddenIndex
from skills_app.core.review import Manifest, ManifestEntry, build_manifest, read_package, unseen
from skills_app.core.review.manifest import entry_paths
from skills_app.core.skillfile import SkillSpec
from skills_app.models import SkillReview, SkillVersion
from skills_app.registry import review
from skills_app.registry.consents import INSTALL_WORDS, shown_for_review

_NO_WORKSPACE = Path("/nonexistent-workspace")


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who stands behind a skill, in words, and the rows that say so."""

    published: str  # "mona (organisation)", "bundled with Skillscope", "you (personal)"
    reviewed: str  # "mona on 2026-12-01", "reviewed by its install", "not reviewed ..."
    version: SkillVersion | None = None
    approval: SkillReview | None = None
    consents: bool = False  # a review (or the install) consented to its manifest


@dataclass(frozen=True, slots=True)
class Access:
    """Whether the rules let this person use the skill, in words."""

    behavior: str  # allow | ask | deny
    words: str
    rule: str = ""


@dataclass(frozen=True, slots=True)
class Outlook:
    """What happens to a skill's commands for this person (`permissions.outlook` decides)."""

    behavior: str  # allow | ask | deny | mixed | none
    words: str  # "runs its reviewed commands without asking"
    reasons: tuple[str, ...] = ()  # each deciding rule, consent or allowed-tools, in words


def version_of(spec: SkillSpec, user_id: int | None) -> SkillVersion | None:
    """The uploaded version a spec was loaded from (by its digest), or None for a folder skill."""
    if spec.source not in ("uploaded", "personal"):
        return None
    owner = None if spec.source == "uploaded" else user_id
    return (
        SkillVersion.objects.filter(
            package__name=spec.name, package__owner_id=owner, digest=spec.digest
        )
        .select_related("package", "uploaded_by")
        .first()
    )


def provenance(spec: SkillSpec, user_id: int | None) -> Provenance:
    """Who published and who reviewed the skill a person gets under this name."""
    if spec.source in INSTALL_WORDS:
        published = "Skillscope (bundled)" if spec.source == "bundled" else "the server's operator"
        return Provenance(
            published, f"reviewed by its install ({INSTALL_WORDS[spec.source]})", consents=True
        )
    version = version_of(spec, user_id)
    if spec.source == "personal":
        return Provenance(
            "you (a personal skill)", "not reviewed: personal skills are yours alone", version
        )
    if version is None:
        return Provenance("the organisation", "unknown")
    uploader = version.uploaded_by.get_username() if version.uploaded_by else "the server (CLI)"
    approval = review.approval_of(version)
    if approval is None:
        reviewed = "not reviewed"
    elif approval.action == SkillReview.APPROVED_BY_MIGRATION:
        reviewed = "approved by migration: it was live before reviews existed, nobody reviewed it"
    else:
        reviewed = f"{approval.actor_name or 'a reviewer'} on {approval.created_at:%Y-%m-%d}"
    consents = approval is not None and approval.action == SkillReview.APPROVED
    return Provenance(f"{uploader} (for the organisation)", reviewed, version, approval, consents)


def access(name: str, context: PermissionContext, *, model_invocable: bool = True) -> Access:
    """What the admin rules (`context`, from `rules_context`) say about loading the skill."""
    decision = decide(ToolCall("Skill", {"skill": name}), context)
    rule = decision.rule.text if decision.rule is not None else ""
    if decision.behavior == "deny":
        return Access("deny", f"You cannot use it: the rule {rule} blocks it.", rule)
    if decision.behavior == "allow":
        return Access("allow", "You may use it: the model may load it without asking you.", rule)
    if rule:
        return Access("ask", f"You may use it; the rule {rule} asks you before it loads.", rule)
    if not model_invocable:
        return Access("ask", f"You may use it: type /{name} to start it.")
    return Access(
        "ask",
        f"You may use it: type /{name}, or the model asks you before it loads it.",
    )


def rules_context(admin_rules: list[Rule]) -> PermissionContext:
    """The admin rules as a decision about loading a skill sees them (read once per page)."""
    return PermissionContext(workspace=_NO_WORKSPACE, admin_rules=tuple(admin_rules))


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """One skill as the catalog lists it for the people who use it."""

    spec: SkillSpec
    prov: Provenance
    access: Access
    outlook: Outlook | None = None

    @property
    def source_words(self) -> str:
        return {
            "uploaded": "organisation",
            "personal": "personal",
            "bundled": "bundled",
            "dirs": "server folder",
        }.get(self.spec.source, self.spec.source)


def catalog_rows(
    specs: list[SkillSpec], user_id: int | None, context: PermissionContext
) -> list[CatalogRow]:
    """The skills a person gets, each with its provenance and what the rules say."""
    return [
        CatalogRow(
            spec,
            provenance(spec, user_id),
            access(spec.name, context, model_invocable=spec.model_invocable),
        )
        for spec in sorted(specs, key=lambda s: s.name)
    ]


def manifest_for(spec: SkillSpec, prov: Provenance) -> Manifest:
    """The manifest a person is told about: the approved one, else the skill's own."""
    if prov.approval is not None and prov.approval.action == SkillReview.APPROVED:
        return Manifest.from_data(prov.approval.manifest)
    return build_manifest(spec, read_package(Path(spec.path)))


def consented_words(entry: ManifestEntry, prov: Provenance) -> str:
    """Whether this entry runs without asking, said to the person who uses the skill."""
    if entry.consent and prov.consents and not _unseen_by_reviewer(entry, prov):
        return "runs without asking you (reviewed)"
    return "asks you first, or follows the rules"


def _unseen_by_reviewer(entry: ManifestEntry, prov: Provenance) -> bool:
    """The entry names a file its approval's reviewer was not shown (so it is never covered)."""
    if prov.approval is None or not entry_paths(entry):
        return False
    shown = shown_for_review(prov.approval, Manifest.from_data(prov.approval.manifest))
    return shown is not None and bool(unseen(entry_paths(entry), shown))


def words_for_user(spec: SkillSpec, manifest: Manifest, *, can_read: bool) -> list[dict[str, Any]]:
    """The manifest's entries in words, filtered against the package unless the viewer may read it."""
    index = None if can_read else HiddenIndex(t for _rel, t in _texts(spec))
    out = []
    for entry in manifest.entries:
        words = entry.words if index is None else index.redact(entry.words)
        out.append({"entry": entry, "words": words})
    return out


def _texts(spec: SkillSpec) -> list[tuple[str, str]]:
    try:
        return [(f.rel, f.text) for f in read_package(Path(spec.path)) if f.text]
    except OSError:
        return []


__all__ = [
    "Access",
    "Outlook",
    "CatalogRow",
    "catalog_rows",
    "rules_context",
    "Provenance",
    "access",
    "consented_words",
    "manifest_for",
    "provenance",
    "version_of",
    "words_for_user",
]
