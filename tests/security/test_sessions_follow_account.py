"""Issue 23, Medium: an open websocket outlived the permission.

The attacks: a socket opened by an auditor kept sending hidden text after the auditor role was
revoked; a deactivated user's open socket still started runs that called the model. Now every
socket joins a group of its user; revoking a role or a permission, deactivating the user,
changing their password or logging out closes their sockets, and a reconnect is authorised
afresh (a revoked auditor gets the chatter's view). Every action a socket sends re-checks the
account and the session too, so a change no signal announced (a bulk update, a session removed
from the database) still stops the next action. Real Channels sockets (WebsocketCommunicator),
real sessions; positive controls: the auditor did get the hidden text before, and other users'
changes leave a socket alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.models import Session
from django.test import Client

from skills_app.accounts import roles
from skills_app.chat.consumers import ACCOUNT_CHANGED, REFUSED
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Run, SkillInvocation
from skills_app.runs import eventlog, store
from skills_app.runs.broadcast import broadcast_events
from tests.security.helpers import HOST, ORIGIN, frames_text, frames_until, leaked, open_tab, resume
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)

BODY = (
    "Open the cellar with the iron key, then count the barrels along the north wall twice "
    "before anyone else comes down.\n"
)


def _conversation(owner: Any) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title="cellar")
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="cellar",
        caller="model",
        decision="allowed",
        injected_text=BODY,
    )
    return conversation


def _store_error(conversation_id: int, text: str) -> Any:
    row = store.append_message(
        conversation_id,
        StoredMessage.text("assistant", text, kind="error", to_model=False),
    )
    return eventlog.append_event(conversation_id, "message", eventlog.message_event(row))


async def _announce(conversation_id: int, text: str) -> None:
    """Store an error row quoting `text` and announce it to the conversation's sockets."""
    event = await sync_to_async(_store_error)(conversation_id, text)
    await broadcast_events([event])


async def _closed(tab: WebsocketCommunicator, timeout: float = 10.0) -> int:
    """The close code of a socket the server closes (frames sent before it are skipped)."""
    while True:
        output = await tab.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return int(output.get("code", 1000))


def _auditor_by_role(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user("aud", password="aud-pass-123")
    roles.grant(user, roles.get_role("auditor"))  # the inspect permission comes with the role
    return user


async def test_a_revoked_auditors_socket_closes_and_the_reconnect_sees_the_chatters_view(
    django_user_model,
):
    auditor = await sync_to_async(_auditor_by_role)(django_user_model)
    conversation = await sync_to_async(_conversation)(auditor)
    tab, connected = await open_tab(auditor, conversation.pk)
    assert connected
    await resume(tab)
    await _announce(conversation.pk, f"The run failed while reading: {BODY}")
    before = frames_text(await frames_until(tab, lambda f: "seq" in f))
    assert "iron key" in before  # positive control: an inspector's socket gets the text

    await sync_to_async(roles.revoke)(auditor, roles.get_role("auditor"))
    assert await _closed(tab) == ACCOUNT_CHANGED
    await _announce(conversation.pk, f"Failed again: {BODY}")
    again, connected = await open_tab(auditor, conversation.pk)
    assert connected  # still the owner: a chatter now
    replay = frames_text(await resume(again))
    await again.disconnect()
    assert "Failed again" in replay and leaked(replay, [BODY]) == []
    assert "withheld" in replay


async def test_removing_the_permission_from_the_role_closes_its_members_sockets(
    django_user_model,
):
    auditor = await sync_to_async(_auditor_by_role)(django_user_model)
    conversation = await sync_to_async(_conversation)(auditor)
    tab, _ = await open_tab(auditor, conversation.pk)
    await resume(tab)

    def take_inspect_from_the_role() -> None:
        group = Group.objects.get(name=roles.get_role("auditor").name)
        group.permissions.remove(Permission.objects.get(codename="inspect_injected_content"))

    await sync_to_async(take_inspect_from_the_role)()
    assert await _closed(tab) == ACCOUNT_CHANGED


async def test_removing_a_direct_permission_closes_the_socket(auditor):
    conversation = await sync_to_async(_conversation)(auditor)
    tab, _ = await open_tab(auditor, conversation.pk)
    await resume(tab)

    def take() -> None:
        auditor.user_permissions.remove(Permission.objects.get(codename="inspect_injected_content"))

    await sync_to_async(take)()
    assert await _closed(tab) == ACCOUNT_CHANGED


async def test_a_deactivated_users_socket_closes_and_no_run_starts(alice, settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic, retries=0)
    fake_anthropic.enqueue(Reply.text("should never be asked"))
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    tab, _ = await open_tab(alice, conversation.pk)
    await resume(tab)
    alice.is_active = False
    await alice.asave()
    assert await _closed(tab) == ACCOUNT_CHANGED
    # The browser reconnects: refused now.
    refused, connected = await open_tab(alice, conversation.pk)
    assert not connected
    assert fake_anthropic.requests == []


async def test_an_action_re_checks_the_account_even_when_no_signal_came(
    alice, settings, fake_anthropic
):
    """A bulk update sends no signal: the socket stays open, but its next action is refused."""
    use_fake_model(settings, fake_anthropic, retries=0)
    fake_anthropic.enqueue(Reply.text("should never be asked"))
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    tab, _ = await open_tab(alice, conversation.pk)
    await resume(tab)
    await type(alice).objects.filter(pk=alice.pk).aupdate(is_active=False)
    await tab.send_json_to({"action": "send", "text": "run something for me"})
    frames = []
    while True:
        output = await tab.receive_output(timeout=10)
        if output["type"] == "websocket.close":
            break
        frames.append(output.get("text", ""))
    assert output["code"] == REFUSED
    assert any("sign in again" in f for f in frames)
    assert not await Run.objects.filter(conversation=conversation).aexists()
    assert fake_anthropic.requests == []


async def test_logging_out_closes_the_users_sockets():
    from django.contrib.auth import get_user_model

    user = await get_user_model().objects.acreate_user("lou", password="lou-pass-123")  # type: ignore[attr-defined]
    conversation = await Conversation.objects.acreate(owner=user, title="x")

    def login() -> tuple[Client, str]:
        client = Client()
        client.force_login(user)
        return client, client.cookies["sessionid"].value

    client, cookie = await sync_to_async(login)()
    from webapp.asgi import application

    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[ORIGIN, HOST, (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await tab.connect(timeout=10)
    assert connected
    await resume(tab)
    await sync_to_async(client.logout)()
    assert await _closed(tab) == ACCOUNT_CHANGED


async def test_a_session_removed_without_a_signal_stops_the_next_action(alice):
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    tab, _ = await open_tab(alice, conversation.pk)
    await resume(tab)
    await Session.objects.all().adelete()  # e.g. `clearsessions`, or an admin's cleanup
    await tab.send_json_to({"action": "resume", "after": 0})
    assert await _closed(tab) == REFUSED


async def test_another_users_change_leaves_a_socket_open(alice, bob):
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    tab, _ = await open_tab(alice, conversation.pk)
    await resume(tab)
    bob.is_active = False
    await bob.asave()
    frames = await resume(tab)  # still answered: nothing closed it
    assert frames[-1]["type"] == "resumed"
    await tab.disconnect()


async def test_a_login_elsewhere_does_not_close_a_socket(alice):
    """Signing in saves `last_login`; that is no change to what the person may do."""
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    tab, _ = await open_tab(alice, conversation.pk)
    await resume(tab)
    assert await sync_to_async(Client().login)(username="alice", password="alice-pass-123")
    frames = await resume(tab)
    assert frames[-1]["type"] == "resumed"
    await tab.disconnect()


async def test_a_message_queued_before_deactivation_is_never_sent(alice, settings, fake_anthropic):
    """A queued message is sent when the answer ends: not for an account deactivated meanwhile."""
    from skills_app.chat import actions
    from skills_app.models import QueuedMessage
    from skills_app.runs import pending

    use_fake_model(settings, fake_anthropic, retries=0)
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    await QueuedMessage.objects.acreate(
        conversation=conversation, author=alice, text="send this later"
    )
    alice.is_active = False
    await alice.asave()
    await actions.send_queued(conversation.pk)
    queued = await QueuedMessage.objects.aget(conversation=conversation)
    assert queued.status == QueuedMessage.FAILED
    assert "deactivated" in queued.error
    assert not await Run.objects.filter(conversation=conversation).aexists()
    assert fake_anthropic.requests == []
    # Positive control: for an active account the same message is sent and answered.
    alice.is_active = True
    await alice.asave()
    fake_anthropic.enqueue(Reply.text("sent"))
    again = await QueuedMessage.objects.acreate(
        conversation=conversation, author=alice, text="send this later"
    )
    await actions.send_queued(conversation.pk)
    again = await QueuedMessage.objects.aget(pk=again.pk)
    assert again.status == QueuedMessage.SENT
    assert await sync_to_async(pending.pending)(conversation.pk) == []


async def test_no_entrance_starts_a_run_for_a_deactivated_account(alice, settings, fake_anthropic):
    """start_run itself refuses (the command line and any caller that skips the send checks)."""
    from skills_app.runs import supervisor
    from skills_app.runs.errors import RunError

    use_fake_model(settings, fake_anthropic, retries=0)
    conversation = await Conversation.objects.acreate(owner=alice, title="x")
    alice.is_active = False
    await alice.asave()
    with pytest.raises(RunError, match="deactivated"):
        await supervisor.start_run(conversation.pk, "hello", user_id=alice.pk)
    assert not await Run.objects.filter(conversation=conversation).aexists()
    assert fake_anthropic.requests == []
