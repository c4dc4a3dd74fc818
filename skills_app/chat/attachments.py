"""Attaching files to a message: upload (pending), remove, send with a message, download.

A file is uploaded on its own, before the message: it is saved in the workspace's in/ at once
(a pending Attachment the composer shows as a chip) and recorded in the audit. Sending the
message claims the pending files in the transaction that stores it (`runs.attached`), so a
message refused because a run is busy leaves them waiting, never lost and never half-sent.
Only the conversation's owner can upload, remove or download; a download serves the bytes the
person attached (checked by digest) and passes the hidden-text filter like any workspace file.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from skills_app import trail
from skills_app.chat.downloads import checked_response, filtered_bytes
from skills_app.core import attachments as core
from skills_app.core.attachments import AttachmentError, Limits
from skills_app.core.tools.storage import workspace_bytes
from skills_app.core.tools.workspace import (
    Workspace,
    WorkspaceError,
    WorkspaceFileError,
    open_workspace_file,
)
from skills_app.http import AuthedHttpRequest
from skills_app.models import Attachment, AuditEvent, Conversation
from skills_app.policy import storage
from skills_app.visibility import INSPECT_PERMISSION
from skills_app.workspaces import workspace_for

logger = logging.getLogger(__name__)

# Multipart framing around the files: a request larger than the files allow plus this is refused
# before its files are read.
_FORM_OVERHEAD = 64 * 1024


def limits() -> Limits:
    return Limits(
        max_file_bytes=settings.ATTACHMENT_MAX_FILE_BYTES, max_files=settings.ATTACHMENT_MAX_FILES
    )


def _owned(request: HttpRequest, pk: int) -> Conversation:
    try:
        return Conversation.objects.owned_by(request.user).get(pk=pk)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None


def _refuse(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def chip(attachment: Attachment) -> dict[str, Any]:
    """What the composer and the message show for one file."""
    return {
        **attachment.info(),
        "size_text": core.human_size(attachment.size),
        "url": reverse("conversation-attachment", args=[attachment.conversation_id, attachment.pk]),
    }


@login_required
@require_POST
def upload(request: AuthedHttpRequest, pk: int) -> JsonResponse:
    """Save the posted files (field `file`) in in/ as pending attachments; JSON chips or error."""
    conversation = _owned(request, pk)
    lim = limits()
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > lim.max_files * lim.max_file_bytes + _FORM_OVERHEAD:
        return _refuse(
            f"That upload is {core.human_size(declared)}; at most {lim.max_files} files of "
            f"{core.human_size(lim.max_file_bytes)} each can be attached.",
            status=413,
        )
    files = request.FILES.getlist("file")
    if not files:
        return _refuse("Choose a file to attach (the form field is called 'file').")
    pending = Attachment.objects.filter(conversation=conversation, message__isnull=True).count()
    try:
        core.check_limits([f.size or 0 for f in files], lim, pending=pending)
        prepared = [(f, *_prepare(f)) for f in files]
    except AttachmentError as exc:
        return _refuse(str(exc))
    saved: list[Attachment] = []
    workspace = workspace_for(conversation.pk)
    total = sum(f.size or 0 for f in files)
    try:
        # All of it must fit in the person's quota, against every other write in flight.
        granted, _standing = storage.reserve(request.user.pk, total, at_least=total)
    except storage.StorageFull as exc:
        return _refuse(str(exc), status=413)
    try:
        return _save_all(request, conversation, workspace, prepared, saved)
    finally:
        storage.settle(request.user.pk, conversation.pk, granted, workspace_bytes(workspace))


def _save_all(
    request: AuthedHttpRequest,
    conversation: Conversation,
    workspace: Workspace,
    prepared: list[tuple[UploadedFile, str, str]],
    saved: list[Attachment],
) -> JsonResponse:
    pk = conversation.pk
    for upload_file, name, kind in prepared:
        # The parsed upload (a temporary file past Django's memory limit) is hashed and copied
        # in chunks: ten 10 MB files never sit in the server's memory at once.
        digest = hashlib.sha256()
        for chunk in upload_file.chunks():
            digest.update(chunk)
        upload_file.seek(0)
        try:
            path = workspace.save_input(name, upload_file)
        except (WorkspaceError, OSError):
            logger.exception("could not save attachment %r in conversation %s", name, pk)
            return _refuse("The file could not be saved in the workspace. Try again.", status=500)
        attachment = Attachment.objects.create(
            conversation=conversation,
            owner=request.user,
            name=path.removeprefix("in/"),
            path=path,
            media_type=kind,
            size=upload_file.size or 0,
            sha256=digest.hexdigest(),
        )
        trail.record(
            AuditEvent.ATTACHMENT_ADDED,
            target=f"conversation #{conversation.pk}",
            actor=request.user,
            attachment=attachment.pk,
            path=path,
            media_type=kind,
            size=attachment.size,
            sha256=attachment.sha256,
            given_name=(upload_file.name or "")[:300],
        )
        saved.append(attachment)
    return JsonResponse({"attachments": [chip(a) for a in saved]})


def _prepare(upload_file: UploadedFile) -> tuple[str, str]:
    """The file's safe name and media type (from its name and its first bytes)."""
    name = core.safe_name(upload_file.name or "")
    upload_file.seek(0)
    head = upload_file.read(16)
    upload_file.seek(0)
    return name, core.media_type(name, head)


@login_required
@require_POST
def remove(request: HttpRequest, pk: int, attachment_id: int) -> JsonResponse:
    """Take a pending file off the composer (a sent one stays: it is part of the transcript)."""
    conversation = _owned(request, pk)
    attachment = Attachment.objects.filter(
        pk=attachment_id, conversation=conversation, message__isnull=True
    ).first()
    if attachment is None:
        raise Http404("No such pending attachment.")
    # Only the file as attached is removed (a command may have changed or linked it since).
    workspace_for(pk).remove_input(
        attachment.path,
        size=attachment.size,
        check=lambda handle: (
            core.attached_bytes(handle, attachment.size, attachment.sha256) is not None
        ),
    )
    attachment.delete()
    # The space it took is free again at once (the quota counts what the workspace holds).
    storage.settle(conversation.owner_id, pk, 0, workspace_bytes(workspace_for(pk)))
    return JsonResponse({"removed": attachment_id})


@login_required
@require_GET
def download(request: HttpRequest, pk: int, attachment_id: int) -> HttpResponseBase:
    """The attached file as the owner attached it (a file changed since is not served)."""
    _owned(request, pk)
    attachment = Attachment.objects.filter(pk=attachment_id, conversation_id=pk).first()
    if attachment is None:
        raise Http404("No such attachment.")
    try:
        with open_workspace_file(workspace_for(pk), attachment.path) as handle:
            data = core.attached_bytes(handle, attachment.size, attachment.sha256)
    except WorkspaceFileError as exc:
        # Said in the log: the 404 page names no reason, and a file gone is worth knowing.
        logger.warning(
            "attachment %s of conversation %s cannot be served: %s", attachment.pk, pk, exc
        )
        raise Http404("That file is no longer in the workspace.") from exc
    if data is None:
        return HttpResponse(
            f"{attachment.path} was changed in the workspace after you attached it, so it is "
            "not served as your attachment. Ask the model to write a copy to out/ instead.",
            status=409,
            content_type="text/plain; charset=utf-8",
        )
    # The bytes checked are the bytes served: the file may change again after the check.
    if not request.user.has_perm(INSPECT_PERMISSION):
        # A command can copy a staged skill file over an attachment; the digest check above
        # refuses that, and the filter stays as a second line like every workspace download.
        filtered = filtered_bytes(pk, data, attachment.name)
        if filtered is not None:
            return filtered
    return checked_response(data, attachment.name)
