"""Hidden content (is_meta rows, injected skill bodies) never reaches a browser that may not see it.

A unique marker is stored in every hidden place (see `build_world`): the skill_prompt row, the
permissions record, the invocation's injected text, hidden run events. Then every response an
ordinary user can reach is searched for it: every discovered page (full and htmx), exports, JSON,
websocket frames (replayed and live) and error pages with DEBUG off. Positive controls show the
marker does reach those allowed to see it, so an absence is not an accident of the fixture.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404
from django.test import Client
from django.urls import include, path, reverse

from skills_app.models import Conversation, PermissionRule, Run
from skills_app.runs import supervisor as runs
from tests.security.test_security_urls import (
    APP_ROUTES,
    HIDDEN_MARKER,
    build_world,
    client_for,
    url_for,
)
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model, write_skills
from tests.support.ws_helpers import until

ORIGIN = (b"origin", b"http://127.0.0.1")
ORDINARY = ("anonymous", "owner", "other")


def _boom_404(request):
    raise Http404(f"missing {HIDDEN_MARKER}")


def _boom_403(request):
    raise PermissionDenied(f"denied {HIDDEN_MARKER}")


def _boom_400(request):
    raise SuspiciousOperation(f"suspicious {HIDDEN_MARKER}")


def _boom_500(request):
    raise RuntimeError(f"crashed {HIDDEN_MARKER}")


# Used by @pytest.mark.urls(__name__): the real site plus views that fail with the marker.
urlpatterns = [
    path("boom/404/", _boom_404),
    path("boom/403/", _boom_403),
    path("boom/400/", _boom_400),
    path("boom/500/", _boom_500),
    path("", include("webapp.urls")),
]


def _bodies(client: Client, url: str) -> list[tuple[str, int, bytes]]:
    """The page, plus its htmx variants (a partial may be rendered by another template)."""
    found = []
    for label, headers in (
        ("full", {}),
        ("htmx", {"HTTP_HX_REQUEST": "true"}),
        ("htmx-list", {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "conversation-list"}),
    ):
        response = client.get(url, **headers)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        found.append((label, response.status_code, body))
    return found


@pytest.mark.django_db
@pytest.mark.parametrize("route", APP_ROUTES, ids=lambda r: r.name)
def test_no_page_shows_hidden_content_to_an_ordinary_user(route, world, settings):
    """Each route as each ordinary persona (one world per route: GETs change nothing)."""
    settings.DEBUG = False
    url = url_for(route, world)
    leaks = []
    for persona in ORDINARY:
        client = client_for(persona, world, raise_request_exception=False)
        for label, status, body in _bodies(client, url):
            if HIDDEN_MARKER.encode() in body or b"Base directory for this skill" in body:
                leaks.append(f"{label} GET {url} as {persona} ({status})")
    assert leaks == []


@pytest.mark.django_db
def test_the_owners_own_pages_and_export_are_reachable_and_clean(world):
    """The pages the test above searched really rendered alice's transcript (not an error)."""
    client = client_for("owner", world)
    chat = client.get(reverse("conversation", args=[world.ids["conversation"]]))
    assert chat.status_code == 200 and b"Here is the summary." in chat.content
    # The status chip of the loaded skill (the user's own text also says "notes": not enough).
    assert b'data-skill="notes"' in chat.content
    assert b'The "notes" skill loaded' in chat.content
    export = client.get(reverse("conversation-export", args=[world.ids["conversation"]]))
    assert export.status_code == 200
    body = b"".join(export.streaming_content) if export.streaming else export.content
    assert b"Here is the summary." in body and HIDDEN_MARKER.encode() not in body


@pytest.mark.django_db
def test_search_does_not_match_hidden_text(world):
    client = client_for("owner", world)
    hidden_only = client.get(reverse("skills-home"), {"q": "follow these steps"})
    assert b"Alice&#x27;s plans" not in hidden_only.content
    assert b"Alice's plans" not in hidden_only.content
    visible = client.get(reverse("skills-home"), {"q": "summarise my notes"})
    assert b"Alice&#x27;s plans" in visible.content  # the title, escaped as Django escapes it


@pytest.mark.django_db
def test_an_inspector_does_see_the_marker(world):
    """Positive control: the marker is in the pages an inspector may open."""
    client = client_for("staff", world)
    audit = client.get(reverse("audit-conversation", args=[world.ids["conversation"]]))
    assert audit.status_code == 200 and HIDDEN_MARKER.encode() in audit.content
    detail = client.get(reverse("audit-invocation", args=[world.ids["invocation"]]))
    assert HIDDEN_MARKER.encode() in detail.content


@pytest.mark.django_db
def test_an_owner_with_the_inspect_permission_sees_it_in_the_chat(world, auditor):
    Conversation.objects.filter(pk=world.ids["conversation"]).update(owner=auditor)
    client = client_for("staff", world)
    chat = client.get(reverse("conversation", args=[world.ids["conversation"]]))
    assert HIDDEN_MARKER.encode() in chat.content


# -- error pages, DEBUG off ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.urls(__name__)
@pytest.mark.parametrize(
    ("url", "status"),
    [("/boom/404/", 404), ("/boom/403/", 403), ("/boom/400/", 400), ("/boom/500/", 500)],
)
def test_error_pages_never_echo_the_exception(url, status, settings, alice):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == status
    assert HIDDEN_MARKER.encode() not in response.content
    assert b"Traceback" not in response.content


@pytest.mark.django_db
def test_another_users_404_says_nothing_about_the_conversation(world, settings):
    settings.DEBUG = False
    client = client_for("other", world)
    for name in ("conversation", "conversation-export", "conversation-delete"):
        response = client.get(reverse(name, args=[world.ids["conversation"]]))
        assert response.status_code == 404
        assert b"Alice" not in response.content and b"summary" not in response.content


# -- websocket frames ---------------------------------------------------------------------------


def _cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


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
    assert any("Here is the summary." in f.get("html", "") for f in frames)
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
    assert any("secret-notes" in f.get("html", "") for f in frames)
    assert HIDDEN_MARKER not in repr(frames)
    # Positive control: the model did receive the hidden body.
    assert HIDDEN_MARKER in str(fake_anthropic.requests[-1]["messages"])
