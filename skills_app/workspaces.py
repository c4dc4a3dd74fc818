"""Where a conversation's files live: its workspace under WORKSPACE_ROOT.

Beside the models (the rows of a conversation are in the database, its files here), so that the
outbound filter (`hidden`: staged skill files are hidden text), runs and the chat's downloads
all find the same folder.
"""

from __future__ import annotations

from django.conf import settings

from skills_app.core.tools.workspace import Workspace


def workspace_for(conversation_id: int) -> Workspace:
    """The conversation's workspace (created on first use)."""
    return Workspace.for_conversation(settings.WORKSPACE_ROOT, conversation_id)
