"""The audit trail's writer: AuditEvent rows for deletions, purges, exports, role changes and
lockouts. It sits with the rows, below every feature, so each feature records into it and only
the audit's pages read it back.

Role changes are recorded from the `m2m_changed` signal of `User.groups`, so a role granted in the
admin's user page, by `manage.py role` or by code is recorded the same way. Who acted comes from
`acting(...)`, which the admin and the command set around their changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
from collections.abc import Iterator
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed

from skills_app.models import AuditEvent
from skills_app.models.statements import Insert

# (user or None, name): who is acting right now, for the rows recorded meanwhile.
_actor: contextvars.ContextVar[tuple[Any, str] | None] = contextvars.ContextVar(
    "audit_actor", default=None
)


@contextlib.contextmanager
def acting(user: Any = None, *, name: str = "") -> Iterator[None]:
    """Record `user` (or `name`, e.g. a command's operating-system user) as the actor meanwhile."""
    if user is not None and not name:
        name = user.get_username()
    token = _actor.set((user, name))
    try:
        yield
    finally:
        _actor.reset(token)


def command_actor() -> str:
    """How a management command names its actor: the operating-system account that ran it."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):
        who = "unknown"
    return f"manage.py ({who})"


def record(
    action: str, *, target: str, actor: Any = None, actor_name: str = "", **detail: Any
) -> AuditEvent:
    """Append one AuditEvent; the actor defaults to whoever `acting()` names."""
    user, actor_name = _who(actor, actor_name)
    return AuditEvent.objects.create(
        action=action, actor=user, actor_name=actor_name, target=target, detail=detail
    )


def append(action: str, *, target: str, actor: Any, actor_name: str = "", **detail: Any) -> None:
    """`record` for a row written at every call of something (an MCP call's `mcp.called`), where
    the ORM's compiling of the insert cost as much as the rest: the same row, nothing returned."""
    user, actor_name = _who(actor, actor_name)
    _EVENT.row(action=action, actor=user, actor_name=actor_name, target=target, detail=detail)


def _who(actor: Any, actor_name: str) -> tuple[Any, str]:
    """(the user row to link, the name to keep) of a row's actor: whoever `acting()` names when
    none is given; a name without a saved user (manage.py, a deleted person) links nobody."""
    if actor is None and not actor_name:
        current = _actor.get()
        if current is not None:
            actor, actor_name = current
    if actor is not None and not actor_name:
        actor_name = actor.get_username()
    user = actor if isinstance(actor, get_user_model()) and actor.pk else None
    return user, actor_name


_EVENT = Insert(AuditEvent)


_pending_clear: contextvars.ContextVar[dict[int, list[str]] | None] = contextvars.ContextVar(
    "audit_pending_clear", default=None
)


def _role_changed(
    sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **kwargs: Any
) -> None:
    user_model = get_user_model()
    if action == "pre_clear":
        # clear() reports no pk_set afterwards; remember what is about to go.
        if reverse:  # group.user_set.clear(): that one role, from each of its members
            going = {u.pk: [instance.name] for u in instance.user_set.all()}
        else:  # user.groups.clear(): every role of that user
            going = {instance.pk: list(instance.groups.values_list("name", flat=True))}
        _pending_clear.set(going)
        return
    if action == "post_clear":
        pending = _pending_clear.get() or {}
        _pending_clear.set(None)
        for user_id, names in pending.items():
            user = user_model.objects.filter(pk=user_id).first()
            for name in names:
                _record_role(AuditEvent.ROLE_REVOKED, user, name)
        return
    if action not in ("post_add", "post_remove") or not pk_set:
        return
    what = AuditEvent.ROLE_GRANTED if action == "post_add" else AuditEvent.ROLE_REVOKED
    if reverse:  # group.user_set.add(user, ...)
        for user in user_model.objects.filter(pk__in=pk_set):
            _record_role(what, user, instance.name)
    else:  # user.groups.add(group, ...)
        for name in Group.objects.filter(pk__in=pk_set).values_list("name", flat=True):
            _record_role(what, instance, name)


def _record_role(action: str, user: Any, role: str) -> None:
    username = user.get_username() if user is not None else "(deleted user)"
    record(action, target=f"user {username}", role=role, user_id=getattr(user, "pk", None))


def install() -> None:
    """Record role changes (called once from the app's ready())."""
    through = get_user_model().groups.through
    m2m_changed.connect(_role_changed, sender=through, dispatch_uid="audit-trail-roles")
