"""What is hidden in one conversation: the texts the outbound filter withholds from non-inspectors.

DESIGN.md "Visibility" names them; here they are collected from where they are kept:

- the injected skill text: every invocation's `injected_text`, and the text of every hidden
  (`is_meta`) message row (imported transcripts have hidden rows without an invocation);
- every staged skill file of every skill invoked in the conversation (SKILL.md and each file
  beside it), read from the version or folder the invocation recorded *and* from the staged copy
  in the conversation's workspace (what a Read or Grep would show), unless the skill's source is
  visible to users;
- the `!` dynamic-context commands and their output (`SkillInvocation.shell_commands`) and
  skill hooks' commands and output (the `audit.hook` events).

A skill's source is visible to users when an admin marked it so (`SkillPackage.source_visible`
for uploads, a `VisibleSkillSource` row for bundled and folder skills), or when it is a personal
upload of the conversation's owner (they wrote it). For such a skill its files and its injected
text are not withheld; `!` output and hook output still are.

Bounded: files over FILE_MAX_BYTES, files that are not text (a NUL byte) and anything past
TOTAL_MAX_CHARS per conversation are not indexed (logged); docs/security.md states this limit.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skills_app.core.redact import MIN_SPAN, HiddenText
from skills_app.core.tools.workspace import WorkspaceError, skill_folder_name
from skills_app.core.transcript import result_text, text_of
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

FILE_MAX_BYTES = 2 * 1024 * 1024
TOTAL_MAX_CHARS = 8 * 1024 * 1024
MAX_FILES_PER_SKILL = 2_000
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


def conversation_hidden_texts(conversation_id: int) -> list[HiddenText]:
    """Every hidden text of one conversation, labelled for its placeholder."""
    conversation = Conversation.objects.only("pk", "owner_id").get(pk=conversation_id)
    invocations = list(
        SkillInvocation.objects.filter(conversation_id=conversation_id)
        .select_related("version__package")
        .order_by("pk")
    )
    visible_names = set(VisibleSkillSource.objects.values_list("name", flat=True))
    budget = _Budget()
    texts: list[HiddenText] = []

    def add(text: Any, label: str) -> None:
        if isinstance(text, str) and len(text) >= MIN_SPAN and budget.take(text):
            texts.append(HiddenText(text, label))

    visible_invocations: set[int] = set()
    files_read: set[tuple[str, str]] = set()
    for inv in invocations:
        visible = source_visible(inv, conversation.owner_id, visible_names)
        if visible:
            visible_invocations.add(inv.pk)
        else:
            add(inv.injected_text, "hidden skill text")
            if (inv.skill, inv.digest) not in files_read:
                files_read.add((inv.skill, inv.digest))
                for folder in _source_folders(inv):
                    for relative, text in skill_file_texts(folder):
                        add(text, f"hidden skill file {inv.skill}/{relative}")
        for command in inv.shell_commands or []:
            if isinstance(command, dict):
                add(command.get("command"), "hidden dynamic-context command")
                add(command.get("output"), "hidden dynamic-context output")
        for hook in inv.hooks or []:
            if isinstance(hook, dict) and not visible:
                add(hook.get("command"), "hidden skill hook")
    # The staged copies a Read or Grep of this workspace would show (once per skill name).
    staged = {inv.skill for inv in invocations if inv.pk not in visible_invocations}
    for name in sorted(staged):
        for relative, text in skill_file_texts(_staged_folder(conversation_id, name)):
            add(text, f"hidden skill file {name}/{relative}")
    rows = Message.objects.filter(conversation_id=conversation_id, is_meta=True).only(
        "content", "invocation_id"
    )
    for row in rows:
        if row.invocation_id not in visible_invocations:
            add(_row_text(row.content), "hidden skill text")
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


def source_visible(inv: SkillInvocation, owner_id: int, visible_names: set[str]) -> bool:
    """True when people without the inspect permission may read this invoked skill's files."""
    if inv.source in UPLOADED_SOURCES:
        version = inv.version
        package = version.package if version is not None else None
        if package is None:
            # The version it loaded is unknown: judge by the package of that name, if any.
            package = _package_named(inv.skill, owner_id if inv.source == "personal" else None)
        if package is None:
            return False
        return package.source_visible or (inv.source == "personal" and package.owner_id == owner_id)
    return inv.skill in visible_names


def _package_named(name: str, owner_id: int | None) -> SkillPackage | None:
    return SkillPackage.objects.filter(name=name, owner_id=owner_id).first()


def _source_folders(inv: SkillInvocation) -> Iterator[Path]:
    """The folder the invocation loaded: the uploaded version, or the folder skill of that digest."""
    from skills_app.registry.skills import skills_for_user
    from skills_app.registry.uploads import version_dir

    if inv.version is not None:
        yield version_dir(inv.version)
        return
    if inv.source in UPLOADED_SOURCES:
        return
    for spec in skills_for_user(None).candidates():
        if spec.name == inv.skill and (not inv.digest or spec.digest == inv.digest):
            yield Path(spec.path)
            return


def _staged_folder(conversation_id: int, name: str) -> Path | None:
    try:
        return workspace_for(conversation_id).skills_dir / skill_folder_name(name)
    except WorkspaceError:
        return None


def skill_file_texts(folder: Path | None) -> Iterator[tuple[str, str]]:
    """(path relative to the folder, text) of each regular text file, never through a link."""
    if folder is None:
        return
    count = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for filename in sorted(filenames):
            count += 1
            if count > MAX_FILES_PER_SKILL:
                return
            path = Path(dirpath) / filename
            text = _read_text(path)
            if text is not None:
                yield path.relative_to(folder).as_posix(), text


def _read_text(path: Path) -> str | None:
    # O_NOFOLLOW and a check on the descriptor: a command may have planted a link or a FIFO in
    # a staged copy (root ignores its read-only modes without a sandbox).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_MAX_BYTES:
            return None
        data = handle.read(FILE_MAX_BYTES + 1)
    if b"\0" in data[:8192]:
        return None  # binary: the Read tool does not show it as text either
    # As the Read tool decodes it, so the index holds what a tool result would show.
    return data.decode("utf-8", "replace")


def _row_text(content: Any) -> str:
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    return "\n".join(
        result_text(b) if b.get("type") == "tool_result" else text_of([b])
        for b in blocks
        if b.get("type") in ("text", "tool_result")
    )
