"""What is hidden in one conversation, and from whom: the texts the outbound filter withholds.

DESIGN.md "Visibility" names them; here they are collected from where they are kept:

- every file of every skill the conversation's owner is offered (the shared library of
  `hidden_library.py`, plus the owner's personal skills), invoked or not: a `skill://` input, a
  script's output or a Read can reach any of them, so the filter cannot wait for an invocation;
- every skill version invoked in the conversation (its files as loaded, read from the version or
  folder the invocation recorded) and every copy staged in the conversation's workspace (what a
  Read, Grep or `cat` would show), whatever it is now;
- the injected skill text: every invocation's `injected_text`, and the text of every hidden
  (`is_meta`) message row (imported transcripts have hidden rows without an invocation);
- the `!` dynamic-context commands and their output (`SkillInvocation.shell_commands`) and
  skill hooks' commands and output (the `audit.hook` events).

Unless the viewer may read the skill's source: an admin marked it so (`SkillPackage.source_visible`
for uploads, a `VisibleSkillSource` row for bundled and folder skills), or it is a personal upload
of the conversation's owner and the viewer is that owner (they wrote it; staff looking at the
conversation in the admin or the audit are not). Then its files and its injected text are not
withheld; `!` output and hook output still are. Visibility is decided per content digest: a
version some visible source has is visible (whoever holds it knows the text already).

What is *not* hidden from the conversation's owner, even inside hidden text: their own words
(`conversation_own_texts`: their messages, the arguments of their `/name` commands, the names
of files they attached) where the injected text holds them. A skill body with the arguments
substituted does not make them someone else's secret: for the owner, the injected texts (and
hidden rows) are split at their own words (OWN_MIN characters or more) before they are indexed.
Only those: the skill's files, `!` output and hook output are indexed whole, so a person's words
that repeat a skill's files stay withheld there. Carving their words out of any withheld span
would answer "is this guess in the skill?": a right guess would be shown, a wrong one not.
Nor paths in the conversation's workspace: a skill's text names its staged folder (the
base-directory line, `${CLAUDE_SKILL_DIR}` resolved), and so does any command that runs its
scripts; the conversation's own hidden texts are split at every such path, so naming a file
there quotes no instruction.

Bounded: see `hidden_library.py` for files, and TOTAL_MAX_CHARS for a conversation's own texts
(past it, texts are left out and logged); docs/security.md states these limits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from skills_app.core.redact import MIN_SPAN, OWN_MIN, HiddenIndex, HiddenText, Shingles
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools.safepath import open_dir
from skills_app.core.tools.workspace import Workspace, WorkspaceError, skill_folder_name
from skills_app.core.transcript import result_text, text_of
from skills_app.hidden_library import Library, skill_file_texts, version_shingles
from skills_app.models import (
    Conversation,
    Message,
    RunEvent,
    SkillInvocation,
    SkillPackage,
    VisibleSkillSource,
)
from skills_app.workspaces import workspace_for

logger = logging.getLogger(__name__)

TOTAL_MAX_CHARS = 8 * 1024 * 1024
# Source kinds of SkillSpec/SkillInvocation.source that come from an upload.
UPLOADED_SOURCES = ("uploaded", "personal")


@dataclass(slots=True)
class _Budget:
    left: int = TOTAL_MAX_CHARS
    skipped: int = 0

    def take(self, text: str) -> bool:
        if len(text) > self.left:
            self.skipped += 1
            return False
        self.left -= len(text)
        return True


@dataclass(slots=True)
class _Sources:
    """Who may read which skill source, for one conversation seen by one audience."""

    owner_id: int
    owner_view: bool
    visible_names: set[str]
    packages: dict[tuple[str, int | None], SkillPackage]

    def spec_visible(self, spec: SkillSpec) -> bool:
        if spec.source in UPLOADED_SOURCES:
            owner = self.owner_id if spec.source == "personal" else None
            package = self.packages.get((spec.name, owner))
            if package is None:
                return False
            return package.source_visible or (spec.source == "personal" and self.owner_view)
        return spec.name in self.visible_names

    def invocation_visible(self, inv: SkillInvocation) -> bool:
        if inv.source in UPLOADED_SOURCES:
            version = inv.version
            package = version.package if version is not None else None
            if package is None:
                # The version it loaded is unknown: judge by the package of that name, if any.
                owner = self.owner_id if inv.source == "personal" else None
                package = self.packages.get((inv.skill, owner))
            if package is None:
                return False
            personal = inv.source == "personal" and package.owner_id == self.owner_id
            return package.source_visible or (personal and self.owner_view)
        return inv.skill in self.visible_names


def conversation_index(
    conversation_id: int, shared: Library, *, owner_view: bool = True
) -> tuple[HiddenIndex, int]:
    """Everything hidden in one conversation for its owner (or, `owner_view=False`, for staff
    who are not its owner), indexed over the `shared` library; and the characters of the
    conversation's own part (for cache accounting)."""
    from django.db.models import Q

    from skills_app.registry.skills import skills_for_user

    conversation = Conversation.objects.only("pk", "owner_id").get(pk=conversation_id)
    owner_id = conversation.owner_id
    packages = SkillPackage.objects.filter(Q(owner_id=owner_id) | Q(owner__isnull=True))
    sources = _Sources(
        owner_id=owner_id,
        owner_view=owner_view,
        visible_names=set(VisibleSkillSource.objects.values_list("name", flat=True)),
        packages={(p.name, p.owner_id): p for p in packages},
    )
    offered = skills_for_user(owner_id).candidates()
    visible = {s.digest for s in offered if s.digest and sources.spec_visible(s)}
    invocations = list(
        SkillInvocation.objects.filter(conversation_id=conversation_id)
        .select_related("version__package")
        .order_by("pk")
    )
    # A version an invocation the viewer may read loaded is visible too (by its digest).
    visible.update(i.digest for i in invocations if i.digest and sources.invocation_visible(i))
    parts: list[Shingles] = []
    known = set(shared.ranges) | visible
    # The owner's personal skills (and any offered version the library lacks).
    for spec in offered:
        if spec.digest and spec.digest not in known:
            known.add(spec.digest)
            parts.append(version_shingles(spec.digest, spec.name, Path(spec.path)))
    # The versions invoked here, as they were loaded.
    for inv in invocations:
        if inv.digest in known or sources.invocation_visible(inv):
            continue
        known.add(inv.digest)
        for folder in _source_folders(inv):
            parts.append(version_shingles(inv.digest or f"inv:{inv.pk}", inv.skill, folder))
    # The copies staged in the workspace, whatever they hold now.
    names = {skill_folder_name(s.name): s.name for s in offered if _stageable(s.name)}
    names.update({skill_folder_name(i.skill): i.skill for i in invocations if _stageable(i.skill)})
    for folder, digest in staged_copies(conversation_id):
        if digest is not None and digest in known:
            continue
        key = "staged:" + hashlib.sha256(f"{folder}\0{_fingerprint(folder)}".encode()).hexdigest()
        parts.append(version_shingles(key, names.get(folder.name, folder.name), folder))
    # The owner's own words are theirs where the injected text repeats them; staff reading the
    # conversation are not its owner, and are shown the owner's words anyway where they are.
    words = conversation_own_texts(conversation_id) if owner_view else []
    own = Shingles.build(_conversation_texts(conversation_id, invocations, sources, words))
    mask = _library_mask(shared, visible)
    index = HiddenIndex.of([(shared.shingles, mask), (Shingles.merge([own, *parts]), None)])
    return index, own.chars + sum(p.chars for p in parts)


def _library_mask(shared: Library, visible: set[str]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """True for the library's texts hidden from this viewer."""
    mask = np.ones(len(shared.shingles.texts), dtype=np.bool_)
    for digest in visible:
        where = shared.ranges.get(digest)
        if where is not None:
            mask[where[0] : where[1]] = False
    return mask


def _stageable(name: str) -> bool:
    try:
        skill_folder_name(name)
    except WorkspaceError:
        return False
    return True


def _conversation_texts(
    conversation_id: int,
    invocations: list[SkillInvocation],
    sources: _Sources,
    own_words: list[str] | None = None,
) -> list[HiddenText]:
    """The conversation's own hidden texts: injected text, hidden rows, `!` and hook output.

    `own_words`: the viewer's own words (for the owner), which the injected texts are split at.
    """
    budget = _Budget()
    texts: list[HiddenText] = []
    split = _path_splitter(conversation_id)
    split_own = _own_splitter(own_words or [])

    def add(text: Any, label: str, *, injected: bool = False) -> None:
        if not isinstance(text, str) or len(text) < MIN_SPAN:
            return
        # A path in the workspace names where the skill sits, not what it says.
        for piece in split(text):
            for part in split_own(piece) if injected else [piece]:
                if len(part) >= MIN_SPAN and budget.take(part):
                    texts.append(HiddenText(part, label))

    visible_invocations: set[int] = set()
    for inv in invocations:
        visible = sources.invocation_visible(inv)
        if visible:
            visible_invocations.add(inv.pk)
        else:
            add(inv.injected_text, "hidden skill text", injected=True)
        for command in inv.shell_commands or []:
            if isinstance(command, dict):
                add(command.get("command"), "hidden dynamic-context command")
                add(command.get("output"), "hidden dynamic-context output")
        for hook in inv.hooks or []:
            if isinstance(hook, dict) and not visible:
                add(hook.get("command"), "hidden skill hook")
    rows = Message.objects.filter(conversation_id=conversation_id, is_meta=True).only(
        "content", "invocation_id"
    )
    for row in rows:
        if row.invocation_id not in visible_invocations:
            add(_row_text(row.content), "hidden skill text", injected=True)
    hooks = RunEvent.objects.filter(conversation_id=conversation_id, type="audit.hook")
    for event in hooks.only("data"):
        data = event.data if isinstance(event.data, dict) else {}
        add(data.get("output"), "hidden hook output")
    if budget.skipped:
        logger.warning(
            "conversation %s: %d hidden texts were not indexed (over %d characters in all)",
            conversation_id,
            budget.skipped,
            TOTAL_MAX_CHARS,
        )
    return texts


def _own_splitter(words: list[str]) -> Callable[[str], list[str]]:
    """Splits an injected text at every one of the owner's own words it holds (the arguments a
    skill's body substituted): the rest of the text is the skill's.

    One pass over the text whatever the number of words (a long conversation has thousands of
    message lines): the words are looked up by their first OWN_MIN characters at each position,
    the longest that matches there is cut out, and the scan goes on after it.
    """
    by_prefix: dict[str, list[str]] = {}
    kept = {w.strip() for w in words if len(w.strip()) >= OWN_MIN}
    for word in sorted(kept, key=len, reverse=True):
        by_prefix.setdefault(word[:OWN_MIN], []).append(word)

    def split(text: str) -> list[str]:
        if not by_prefix:
            return [text]
        pieces: list[str] = []
        start = at = 0
        last = len(text) - OWN_MIN
        while at <= last:
            bucket = by_prefix.get(text[at : at + OWN_MIN])
            if bucket is not None:
                word = next((w for w in bucket if text.startswith(w, at)), None)
                if word is not None:
                    pieces.append(text[start:at])
                    at = start = at + len(word)
                    continue
            at += 1
        pieces.append(text[start:])
        return pieces

    return split


def _path_splitter(conversation_id: int) -> Callable[[str], list[str]]:
    """Splits a hidden text at every path under the conversation's workspace root."""
    ws = _workspace(conversation_id)
    if ws is None:
        return lambda text: [text]
    spellings = sorted({str(ws.root), str(ws.root.resolve())}, key=len, reverse=True)
    # The root and the rest of the path after it (up to whitespace, a quote or shell syntax).
    roots = "|".join(re.escape(s) for s in spellings)
    pattern = re.compile(rf"(?:{roots})[^\s'\"`<>|;&()]*")
    return lambda text: pattern.split(text)


OWN_KINDS = ("text", "command", "attachments")
OWN_MAX_TEXTS = 2_000


def conversation_own_texts(conversation_id: int) -> list[str]:
    """What the conversation's owner wrote themselves: messages (and their lines), `/name`
    arguments (whole and word by word), the names of the files they attached."""
    from skills_app.core.render import split_args

    texts: list[str] = []
    rows = Message.objects.filter(
        conversation_id=conversation_id, role=Message.USER, is_meta=False, kind__in=OWN_KINDS
    ).only("content", "kind", "meta")
    for row in rows.order_by("-seq")[:OWN_MAX_TEXTS]:
        if row.kind == "attachments":
            for info in row.meta.get("attachments", []) if isinstance(row.meta, dict) else []:
                if isinstance(info, dict):
                    texts += [str(info.get(k)) for k in ("name", "path") if info.get(k)]
            continue
        text = _row_text(row.content)
        texts.append(text)
        texts += text.splitlines()
    args = SkillInvocation.objects.filter(conversation_id=conversation_id, caller="user").exclude(
        args=""
    )
    for value in args.values_list("args", flat=True)[:OWN_MAX_TEXTS]:
        texts.append(value)
        texts += split_args(value)
    return [t for t in dict.fromkeys(texts) if t.strip()]


def _source_folders(inv: SkillInvocation) -> Iterator[Path]:
    """The folder the invocation loaded: the uploaded version, or the folder skill of that digest."""
    from skills_app.registry.skills import skills_for_user
    from skills_app.registry.versions import version_dir

    if inv.version is not None:
        yield version_dir(inv.version)
        return
    if inv.source in UPLOADED_SOURCES:
        return
    for spec in skills_for_user(None).candidates():
        if spec.name == inv.skill and (not inv.digest or spec.digest == inv.digest):
            yield Path(spec.path)
            return


def _workspace(conversation_id: int) -> Workspace | None:
    try:
        return workspace_for(conversation_id)
    except (WorkspaceError, OSError):
        return None


def staged_copies(conversation_id: int) -> list[tuple[Path, str | None]]:
    """(folder, the digest its marker names) of each skill copy staged in the workspace."""
    ws = _workspace(conversation_id)
    if ws is None:
        return []
    found: list[tuple[Path, str | None]] = []
    try:
        entries = sorted(os.scandir(ws.skills_dir), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        found.append((Path(entry.path), _marker_digest(ws, entry.name, Path(entry.path))))
    return found


def staged_state(conversation_id: int) -> tuple[tuple[str, int], ...]:
    """What changes when a copy is staged or replaced (for the cache key): names and times."""
    listed = _listed_skills(conversation_id)
    if listed is not None:
        return listed
    ws = _workspace(conversation_id)
    if ws is None:
        return ()
    try:
        entries = os.scandir(ws.skills_dir)
        return tuple(sorted((e.name, e.stat(follow_symlinks=False).st_mtime_ns) for e in entries))
    except OSError:
        return ()


def _listed_skills(conversation_id: int) -> tuple[tuple[str, int], ...] | None:
    """`staged_state` of a workspace whose folders are in place: its skills/ opened without
    following a link below WORKSPACE_ROOT (a link or anything missing: None, and the caller
    makes or repairs the workspace first, as it always did). Asked at every check of the hidden
    index (each MCP call's filter), so it skips what making the workspace costs."""
    try:
        fd = open_dir(Path(settings.WORKSPACE_ROOT), (str(conversation_id), "skills"))
    except (OSError, ValueError):
        return None
    try:
        with os.scandir(fd) as entries:
            return tuple(
                sorted((e.name, e.stat(follow_symlinks=False).st_mtime_ns) for e in entries)
            )
    except OSError:
        return None
    finally:
        os.close(fd)


def _marker_digest(ws: Workspace, folder: str, target: Path) -> str | None:
    """The digest a staged copy was made from, when its marker says so and the copy is unchanged."""
    from skills_app.core.tools.staging import tree_fingerprint

    marker = ws.skills_dir / f".{folder}.digest"
    try:
        with os.fdopen(ws.open_file(marker, os.O_RDONLY), encoding="utf-8") as handle:
            recorded = json.loads(handle.read(1024 * 1024))
    except (OSError, ValueError, WorkspaceError):
        return None
    if not isinstance(recorded, dict) or recorded.get("tree") != tree_fingerprint(target):
        return None  # changed since it was staged: read it as it is
    digest = recorded.get("digest")
    return digest if isinstance(digest, str) and digest else None


def _fingerprint(folder: Path) -> str:
    from skills_app.core.tools.staging import tree_fingerprint

    try:
        return json.dumps(tree_fingerprint(folder), sort_keys=True)
    except OSError:
        return "unreadable"


def _row_text(content: Any) -> str:
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    return "\n".join(
        result_text(b) if b.get("type") == "tool_result" else text_of([b])
        for b in blocks
        if b.get("type") in ("text", "tool_result")
    )


__all__ = [
    "TOTAL_MAX_CHARS",
    "UPLOADED_SOURCES",
    "conversation_index",
    "conversation_own_texts",
    "skill_file_texts",
    "staged_copies",
    "staged_state",
]
