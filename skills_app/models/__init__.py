"""What Skillscope stores, split by feature and re-exported here. See DESIGN.md "Data"."""

from __future__ import annotations

from skills_app.models.attachments import Attachment
from skills_app.models.audit import AuditEvent, SkillInvocation
from skills_app.models.compare import Comparison
from skills_app.models.conversations import Conversation, Message, RunEvent, rows_with_ids
from skills_app.models.decisions import PermissionDecision
from skills_app.models.feedback import AnswerFeedback
from skills_app.models.mcp import (
    McpElicitation,
    McpOAuthGrant,
    McpOAuthPendingSignIn,
    McpServer,
    McpToolDefinition,
)
from skills_app.models.organisation import (
    GroupPolicy,
    SkillAccess,
    SpendCounter,
    SpendReservation,
    StorageAccount,
    UserPolicy,
    WorkspaceUsage,
)
from skills_app.models.permissions import Approval, ConversationGrant, PermissionRule
from skills_app.models.preferences import Theme, UserPreference
from skills_app.models.queued import QueuedMessage
from skills_app.models.receipts import ActionReceipt
from skills_app.models.registry import SkillPackage, SkillVersion, VisibleSkillSource
from skills_app.models.review import SkillReview
from skills_app.models.runs import Run, StreamPiece, Worker
from skills_app.models.sent_texts import SentTextFingerprint
from skills_app.models.shares import ConversationShare
from skills_app.models.sources import SkillSource, SkillSourceSync
from skills_app.models.triggers import TriggerQuery, TriggerResult, TriggerRun
from skills_app.models.usage import ModelCall, RequestPart

__all__ = [
    "AnswerFeedback",
    "ActionReceipt",
    "GroupPolicy",
    "SkillAccess",
    "SpendCounter",
    "SpendReservation",
    "StorageAccount",
    "UserPolicy",
    "WorkspaceUsage",
    "Approval",
    "Attachment",
    "AuditEvent",
    "Comparison",
    "Conversation",
    "ConversationGrant",
    "ConversationShare",
    "McpOAuthGrant",
    "McpElicitation",
    "McpOAuthPendingSignIn",
    "McpServer",
    "McpToolDefinition",
    "Message",
    "ModelCall",
    "PermissionDecision",
    "PermissionRule",
    "QueuedMessage",
    "RequestPart",
    "Run",
    "RunEvent",
    "rows_with_ids",
    "SentTextFingerprint",
    "SkillInvocation",
    "SkillPackage",
    "SkillReview",
    "SkillSource",
    "SkillSourceSync",
    "SkillVersion",
    "StreamPiece",
    "TriggerQuery",
    "TriggerResult",
    "TriggerRun",
    "Theme",
    "UserPreference",
    "VisibleSkillSource",
    "Worker",
]
