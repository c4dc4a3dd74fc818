"""The storage gate of one conversation's tool calls: the owner's quota (`policy.storage`)."""

from __future__ import annotations

from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings

from skills_app.core.tools.storage import Allowance, human, workspace_bytes
from skills_app.core.tools.workspace import Workspace
from skills_app.policy import storage


@dataclass(frozen=True, slots=True)
class QuotaGate:
    """`StorageGate` over the database: reservations under the owner's account row."""

    user_id: int
    conversation_id: int

    async def reserve(self, ws: Workspace, wanted: int | None = None) -> Allowance:
        before = await sync_to_async(workspace_bytes)(ws)
        limit = settings.STORAGE_RUN_WRITE_LIMIT
        ask = limit if wanted is None else min(wanted, limit)
        if wanted is not None and wanted > limit:
            raise storage.StorageFull(
                f"That is {human(wanted)}, more than one tool call may write "
                f"({human(limit)}). Write it in smaller parts."
            )
        granted, now = await sync_to_async(storage.reserve)(
            self.user_id, ask, at_least=0 if wanted is None else wanted
        )
        notice = ""
        if granted < ask and now.quota is not None:
            notice = (
                f"Storage: only {human(granted)} could be written by this command: your "
                f"conversations' files take {human(now.used)} of your {human(now.quota)}. "
                f"{storage.FREE_SPACE}"
            )
        return Allowance(bytes=granted, before=before, notice=notice)

    async def settle(self, ws: Workspace, allowance: Allowance) -> int:
        held = await sync_to_async(workspace_bytes)(ws)
        await sync_to_async(storage.settle)(
            self.user_id, self.conversation_id, allowance.bytes, held
        )
        return held
