"""Sessions follow the account: when what a person may do changes, their open sockets close.

Every chat socket joins its user's group (`user_group`). A change to an account (deactivated,
deleted, password changed, staff or superuser status changed, a role or group given or taken,
a direct permission given or taken, a permission given to or taken from a group they are in)
and a logout send `account.changed` to the groups of the people it touches, once the change is
committed; each socket then closes with ACCOUNT_CHANGED and the browser's reconnect is
authorised afresh (a deactivated user is refused, a revoked auditor gets the chatter's view).

Signals miss changes made around the ORM's per-object methods (a queryset `update`, a session
row deleted by `clearsessions`), so the consumer also re-checks the account and the session on
every action a socket sends (`allowed_user`). Both together: the push closes sockets at once;
the re-check makes sure no action runs on a stale account.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

USER_GROUP_PREFIX = "user-"
ACCOUNT_CHANGED_EVENT = "account.changed"
# Fields of the user whose change changes what they may do (a login only sets last_login).
_WATCHED = ("is_active", "is_staff", "is_superuser", "password")


def user_group(user_id: int) -> str:
    """The channel-layer group every socket of one user joins."""
    return f"{USER_GROUP_PREFIX}{user_id}"


def notify(user_ids: Iterable[int | None], reason: str) -> None:
    """Close the sockets of these users once the current transaction commits."""
    ids = sorted({i for i in user_ids if i is not None})
    if not ids:
        return

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        for user_id in ids:
            try:
                async_to_sync(layer.group_send)(
                    user_group(user_id), {"type": ACCOUNT_CHANGED_EVENT, "reason": reason}
                )
            except Exception:  # the change is made; a socket left open is re-checked per action
                logger.exception("could not tell user %s's sockets that %s", user_id, reason)

    transaction.on_commit(send)


def allowed_user(user_id: int, session_key: str | None) -> Any:
    """The user, read now, while they are active and this session is still theirs (not logged
    out, not flushed, and signed with their current password); None otherwise. Checked on every frame a tab sends: one read of the user
    and one of the session (a session that is gone or expired loads as empty)."""
    from django.contrib.sessions.backends.base import SessionBase

    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None or not session_key:
        return None
    engine = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    session: SessionBase = engine(session_key)
    data = session.load()
    if str(data.get(SESSION_KEY)) != str(user_id):
        return None
    backend_path = data.get(BACKEND_SESSION_KEY)
    if not isinstance(backend_path, str) or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    backend = import_string(backend_path)()
    if hasattr(backend, "user_can_authenticate") and not backend.user_can_authenticate(user):
        return None
    stored_hash = data.get(HASH_SESSION_KEY)
    if not stored_hash or not constant_time_compare(str(stored_hash), user.get_session_auth_hash()):
        return None
    return user


# -- what changes an account ------------------------------------------------------------------


def _user_before_save(sender: Any, instance: Any, update_fields: Any = None, **_: Any) -> None:
    if instance.pk is None or (update_fields is not None and set(update_fields) <= {"last_login"}):
        instance._skillscope_before = None
        return
    before = sender.objects.filter(pk=instance.pk).values(*_WATCHED).first()
    instance._skillscope_before = before


def _user_saved(sender: Any, instance: Any, created: bool, **_: Any) -> None:
    before = getattr(instance, "_skillscope_before", None)
    if created or before is None:
        return
    if any(before[name] != getattr(instance, name) for name in _WATCHED):
        notify([instance.pk], "the account changed")


def _user_deleted(sender: Any, instance: Any, **_: Any) -> None:
    notify([instance.pk], "the account was deleted")


def _user_groups_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **_: Any
) -> None:
    """A user's groups (roles), from either side: user.groups or group.user_set."""
    if action == "pre_clear" and reverse:
        instance._skillscope_members = list(instance.user_set.values_list("pk", flat=True))
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if not reverse:
        notify([instance.pk], "a role changed")
    elif action == "post_clear":
        notify(getattr(instance, "_skillscope_members", []), "a role changed")
    else:
        notify(pk_set or [], "a role changed")


def _user_permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **_: Any
) -> None:
    """A user's own permissions, from either side."""
    if action == "pre_clear" and reverse:
        instance._skillscope_members = list(instance.user_set.values_list("pk", flat=True))
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if not reverse:
        notify([instance.pk], "a permission changed")
    elif action == "post_clear":
        notify(getattr(instance, "_skillscope_members", []), "a permission changed")
    else:
        notify(pk_set or [], "a permission changed")


def _members(group_ids: Iterable[int]) -> list[int]:
    users = get_user_model().objects.filter(groups__in=list(group_ids))
    return list(users.values_list("pk", flat=True).distinct())


def _group_permissions_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any, **_: Any
) -> None:
    """A group's permissions: everyone in the group (or in the groups a permission left)."""
    if action == "pre_clear":
        instance._skillscope_groups = (
            list(instance.group_set.values_list("pk", flat=True)) if reverse else [instance.pk]
        )
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if action == "post_clear":
        groups = getattr(instance, "_skillscope_groups", [])
    else:
        groups = list(pk_set or []) if reverse else [instance.pk]
    notify(_members(groups), "a role's permissions changed")


def _group_deleting(sender: Any, instance: Any, **_: Any) -> None:
    notify(_members([instance.pk]), "a role was removed")


def _logged_out(sender: Any, request: Any, user: Any, **_: Any) -> None:
    if user is not None and user.pk is not None:
        notify([user.pk], "signed out")


def install() -> None:
    """Connect the signals (called once from the app's ready())."""
    user_model = get_user_model()
    pre_save.connect(_user_before_save, sender=user_model, dispatch_uid="sessions-user-pre")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="sessions-user-post")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="sessions-user-del")
    m2m_changed.connect(
        _user_groups_changed, sender=user_model.groups.through, dispatch_uid="sessions-groups"
    )
    m2m_changed.connect(
        _user_permissions_changed,
        sender=user_model.user_permissions.through,
        dispatch_uid="sessions-user-perms",
    )
    m2m_changed.connect(
        _group_permissions_changed,
        sender=Group.permissions.through,
        dispatch_uid="sessions-group-perms",
    )
    pre_delete.connect(_group_deleting, sender=Group, dispatch_uid="sessions-group-del")
    user_logged_out.connect(_logged_out, dispatch_uid="sessions-logout")


__all__ = [
    "ACCOUNT_CHANGED_EVENT",
    "allowed_user",
    "install",
    "notify",
    "user_group",
]
