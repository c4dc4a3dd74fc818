"""Every websocket route admits only the owner, and no frame carries hidden content.

The websocket side of test_security_urls.py and test_security_hidden.py: these tests run the
consumer for real, in transactions of their own, so each builds its own world (the modules
beside them share one, inside a transaction these tests cannot run in).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from skills_app.models import Conversation, PermissionRule, Run
from skills_app.routing import websocket_urlpatterns
from skills_app.runs import supervisor as runs
from tests.security.test_security_urls import HIDDEN_MARKER, World, build_world, walk
from tests.support.fake_anthropic import Reply
from tests.support.frames import parse
from tests.support.loop_helpers import use_fake_model, write_skills
from tests.support.ws_helpers import until

# -- who may open a tab -------------------------------------------------------------------------

WS_ROUTES = [
    (text, tuple(params)) for _pattern, text, _ns, params in walk(list(websocket_urlpatterns))
]
ORIGIN = (b"origin", b"http://127.0.0.1")


def _ws_path(text: str, world: World) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(2)
        return str(world.ids["conversation"] if "id" in name or name == "pk" else "x")

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, text).lstrip("/")


def _cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("persona", "origin", "accepted"),
    [
        ("owner", ORIGIN, True),
        ("other", ORIGIN, False),
        ("staff", ORIGIN, False),
        ("anonymous", ORIGIN, False),
        ("owner", None, False),
        ("owner", (b"origin", b"https://evil.example"), False),
    ],
    ids=["owner", "other", "staff", "anonymous", "owner-no-origin", "owner-wrong-origin"],
)
@pytest.mark.parametrize("ws_route", WS_ROUTES, ids=lambda r: r[0])
async def test_each_websocket_route_admits_only_the_owner(
    ws_route, persona, origin, accepted, alice, bob, auditor, tmp_path
):
    from webapp.asgi import application

    world = await sync_to_async(build_world)(alice, bob, auditor, tmp_path)
    headers = [origin] if origin else []
    if persona != "anonymous":
        cookie = await sync_to_async(_cookie)(world.users[persona])
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, _ws_path(ws_route[0], world), headers=headers)
    connected, _code = await communicator.connect(timeout=10)
    try:
        assert connected is accepted
        if connected:
            await communicator.send_json_to({"action": "resume", "after": 0})
            frames = []
            while not frames or frames[-1].get("type") != "resumed":
                frames.append(parse(await communicator.receive_from(timeout=5)))
            assert any(f.get("type") == "message.stored" for f in frames)
    finally:
        await communicator.disconnect()


def test_websocket_discovery_finds_the_conversation_route():
    assert any("conversations" in text for text, _ in WS_ROUTES)


# -- hidden content in frames -------------------------------------------------------------------


async def _connect(user: Any, conversation_id: int) -> WebsocketCommunicator:
    cookie = await sync_to_async(_cookie)(user)
    communicator = WebsocketCommunicator(
        _application(),
        f"/ws/conversations/{conversation_id}/",
        headers=[ORIGIN, (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


def _application():
    from webapp.asgi import application

    return application


async def _until(tab, predicate, timeout: float = 15.0) -> list[dict[str, Any]]:
    return await until(tab, predicate, timeout=timeout)


@pytest.mark.django_db(transaction=True)
async def test_replayed_frames_carry_no_hidden_content(alice, bob, auditor, tmp_path):
    world = await sync_to_async(build_world)(alice, bob, auditor, tmp_path)
    tab = await _connect(alice, world.ids["conversation"])
    await tab.send_json_to({"action": "resume", "after": 0})
    frames = await _until(tab, lambda f: f["type"] == "resumed")
    await tab.disconnect()
    # The whole frames, as the browser got them: the visible answer, nothing hidden.
    assert "Here is the summary." in repr(frames)
    assert HIDDEN_MARKER not in repr(frames)


@pytest.mark.django_db(transaction=True)
async def test_live_frames_of_a_skill_run_carry_no_hidden_content(
    alice, settings, fake_anthropic, tmp_path
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    skill = (
        "---\nname: secret-notes\ndescription: Notes with a hidden body.\n"
        "allowed-tools: Read\n---\n"
        f"{HIDDEN_MARKER}: the hidden instructions for $ARGUMENTS.\n"
    )
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", {"secret-notes": skill})]
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    conversation = await Conversation.objects.acreate(owner=alice, title="live")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "secret-notes", "args": "q3"}, text="Loading."),
        Reply.text("Done with the notes."),
    )
    tab = await _connect(alice, conversation.pk)
    await tab.send_json_to({"action": "resume", "after": 0})
    await _until(tab, lambda f: f["type"] == "resumed")
    await tab.send_json_to({"action": "send", "text": "use the notes skill"})
    frames = await _until(tab, lambda f: f["type"] == "run.finished")
    for run in [r async for r in Run.objects.filter(conversation=conversation)]:
        await runs.wait_for_run(run.pk, timeout=15)
    await tab.disconnect()
    assert frames[-1]["data"]["status"] == "done"
    kinds = [f["data"]["kind"] for f in frames if f["type"] == "message.stored"]
    assert "skill_status" in kinds and "skill_prompt" not in kinds  # the chip, not the body
    assert HIDDEN_MARKER not in repr(frames)
    # Positive control: the model did receive the hidden body.
    assert HIDDEN_MARKER in str(fake_anthropic.requests[-1]["messages"])
