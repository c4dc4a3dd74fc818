"""Storage quotas: the bytes one person keeps in their conversations' files (attachments, work/,
out/), and reservations that stop parallel writers walking past the quota together.

Every write (a command, a Write or Edit, an attachment) first reserves the bytes it may add
under the person's StorageAccount row, locked for the reservation (SELECT ... FOR UPDATE on
PostgreSQL; SQLite takes one writer at a time): what is left is the quota, minus what their
workspaces held when last measured, minus what other writes in flight have reserved. After the
write, the workspace is measured and the reservation given back. A deleted conversation's files
stop counting (they are kept for the audit until it is purged).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from skills_app.core.tools.errors import ToolError
from skills_app.core.tools.storage import human, tree_bytes
from skills_app.models import SkillVersion, StorageAccount, UserPolicy, WorkspaceUsage


class StorageFull(ToolError):
    """Nothing more fits; the message gives the figures and how to free space (a tool call
    gets it as its error result)."""


FREE_SPACE = (
    "Free space by removing files you no longer need (ask the assistant to delete them from "
    "work/ or out/, or remove attachments you have not sent) or by deleting old conversations; "
    "an administrator can raise your quota."
)


@dataclass(frozen=True, slots=True)
class Standing:
    quota: int | None  # None: no quota
    used: int
    reserved: int

    @property
    def left(self) -> int | None:
        if self.quota is None:
            return None
        return max(0, self.quota - self.used - self.reserved)

    @property
    def share(self) -> int:
        if not self.quota:
            return 0
        return min(100, int((self.used + self.reserved) * 100 / self.quota))

    def full_text(self, wanted: int | None = None) -> str:
        need = f" ({human(wanted)} more were needed)" if wanted else ""
        return (
            f"Your storage is full: your conversations' files and personal skills take "
            f"{human(self.used)} of your "
            f"{human(self.quota or 0)}{need}. Nothing was written. {FREE_SPACE}"
        )


def quota_for(user_id: int) -> int | None:
    """The person's quota in bytes (their own, else STORAGE_QUOTA_BYTES); None: no quota."""
    own = (
        UserPolicy.objects.filter(user_id=user_id)
        .values_list("storage_quota_bytes", flat=True)
        .first()
    )
    quota = own if own is not None else settings.STORAGE_QUOTA_BYTES
    return quota or None


def used_bytes(user_id: int) -> int:
    """What the person's (not deleted) conversations' workspaces held when last measured, and
    the files of their personal skills' versions."""
    total = WorkspaceUsage.objects.filter(
        owner_id=user_id, conversation__deleted_at__isnull=True
    ).aggregate(n=Sum("bytes"))["n"]
    return int(total or 0) + personal_skill_bytes(user_id)


def skill_storage_root() -> Path:
    """Where installed skill versions live: SKILL_STORAGE_ROOT, or MEDIA_ROOT/skills."""
    root = getattr(settings, "SKILL_STORAGE_ROOT", None)
    return Path(root) if root else Path(settings.MEDIA_ROOT) / "skills"


# A version's files never change: their size is measured once per process.
_VERSION_BYTES: dict[tuple[int, str], int] = {}


def personal_skill_bytes(user_id: int) -> int:
    """The files of every version of the person's personal skills (each upload of new content
    is a new version, kept: a person could otherwise store without limit as skills)."""
    root = skill_storage_root()
    total = 0
    rows = SkillVersion.objects.filter(package__owner_id=user_id).values_list("pk", "storage_path")
    for pk, path in rows:
        key = (pk, str(root / path))
        size = _VERSION_BYTES.get(key)
        if size is None:
            size = _VERSION_BYTES[key] = tree_bytes(root / path)
        total += size
    return total


def release(user_id: int, granted: int) -> None:
    """Give back a reservation whose bytes are now counted where they were written (a personal
    skill's new version), or were not written at all."""
    if not granted:
        return
    with transaction.atomic():
        account = StorageAccount.objects.select_for_update().filter(user_id=user_id).first()
        if account is not None:
            StorageAccount.objects.filter(pk=account.pk).update(
                reserved_bytes=max(0, account.reserved_bytes - granted)
            )


def standing(user_id: int) -> Standing:
    reserved = (
        StorageAccount.objects.filter(user_id=user_id)
        .values_list("reserved_bytes", flat=True)
        .first()
    )
    return Standing(quota_for(user_id), used_bytes(user_id), int(reserved or 0))


def reserve(user_id: int, wanted: int, *, at_least: int = 0) -> tuple[int, Standing]:
    """Set up to `wanted` bytes aside; (granted, standing before). StorageFull when fewer than
    `at_least` bytes are left (an attachment needs all of its size; a command takes what is left)."""
    with transaction.atomic():
        StorageAccount.objects.get_or_create(user_id=user_id)
        account = StorageAccount.objects.select_for_update().get(user_id=user_id)
        now = Standing(quota_for(user_id), used_bytes(user_id), account.reserved_bytes)
        left = now.left
        granted = wanted if left is None else min(wanted, left)
        if granted < at_least:
            raise StorageFull(now.full_text(at_least))
        if granted:
            StorageAccount.objects.filter(pk=account.pk).update(
                reserved_bytes=account.reserved_bytes + granted
            )
    return granted, now


def settle(user_id: int, conversation_id: int, granted: int, measured: int) -> None:
    """Record what the conversation's workspace holds now, and give the reservation back."""
    with transaction.atomic():
        account = StorageAccount.objects.select_for_update().filter(user_id=user_id).first()
        if account is not None and granted:
            StorageAccount.objects.filter(pk=account.pk).update(
                reserved_bytes=max(0, account.reserved_bytes - granted)
            )
        WorkspaceUsage.objects.update_or_create(
            conversation_id=conversation_id, defaults={"owner_id": user_id, "bytes": measured}
        )
