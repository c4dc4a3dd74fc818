"""Hidden content (is_meta rows, injected skill bodies) never reaches a browser that may not see it.

A unique marker is stored in every hidden place (see `build_world`): the skill_prompt row, the
permissions record, the invocation's injected text, hidden run events. Then every response an
ordinary user can reach is searched for it: every discovered page (full and htmx), exports, JSON,
websocket frames (replayed and live, in test_security_websockets.py) and error pages with DEBUG
off. Positive controls show the marker does reach those allowed to see it, so an absence is not an
accident of the fixture.

The tests share one world per module (tests/security/conftest.py); what a test writes is rolled
back after it.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404
from django.test import Client
from django.urls import include, path, reverse

from skills_app.models import Conversation
from tests.security.test_security_urls import (
    APP_ROUTES,
    HIDDEN_MARKER,
    client_for,
    url_for,
)

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
    """Each route as each ordinary persona."""
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
def test_an_owner_with_the_inspect_permission_sees_it_in_the_chat(world):
    Conversation.objects.filter(pk=world.ids["conversation"]).update(owner=world.users["staff"])
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
def test_error_pages_never_echo_the_exception(url, status, settings, world):
    settings.DEBUG = False
    client = client_for("owner", world, raise_request_exception=False)
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
