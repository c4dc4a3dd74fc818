"""What Skillscope stores, split by feature and re-exported here. See DESIGN.md "Data"."""

from __future__ import annotations

from skills_app.models.audit import SkillInvocation
from skills_app.models.compare import Comparison
from skills_app.models.conversations import Conversation, Message, RunEvent
from skills_app.models.permissions import Approval, ConversationGrant, PermissionRule
from skills_app.models.registry import SkillPackage, SkillVersion
from skills_app.models.runs import Run, Worker

__all__ = [
    "Approval",
    "Comparison",
    "Conversation",
    "ConversationGrant",
    "Message",
    "PermissionRule",
    "Run",
    "RunEvent",
    "SkillInvocation",
    "SkillPackage",
    "SkillVersion",
    "Worker",
]
