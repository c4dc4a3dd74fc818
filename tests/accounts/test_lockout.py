"""Lockout after failed sign-ins (django-axes) and the LOCAL_PASSWORDS switch, through every way in:
the login page, the admin's login, allauth's pages, an open chat tab; behind the proxy setting.
Attack tests first: the report had 60 wrong passwords in 48 s all answered and the right one
working at once."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import authenticate
from django.test import Client, RequestFactory

from skills_app.accounts import lockout
from skills_app.models import AuditEvent, Conversation, Run
from tests.support.ws_helpers import receive
from webapp.asgi import application
from webapp.signin import oidc_app

# The open-tab tests read the database from the consumer's threads: they commit (transaction=True).
# The others run in a transaction rolled back after each, which costs no flush of every table.
pytestmark = pytest.mark.django_db


def fail(client: Client, username: str, times: int, *, url: str = "/accounts/login/", **extra):
    codes = []
    for _ in range(times):
        response = client.post(url, {"username": username, "password": "wrong-guess"}, **extra)
        codes.append(response.status_code)
    return codes


def test_sixty_wrong_passwords_lock_the_account_and_the_right_one_stops_working(alice, settings):
    client = Client()
    codes = fail(client, "alice", 60)
    limit = settings.AXES_FAILURE_LIMIT
    assert codes[: limit - 1] == [200] * (limit - 1)  # the form again, "wrong password"
    assert set(codes[limit:]) == {429}
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed sign-ins (5)" in page and "for 15 minutes" in page
    assert "Lift the sign-in lockout" in page
    assert "_auth_user_id" not in client.session
    # Another address does not help: the lock is on the account.
    other = Client(REMOTE_ADDR="203.0.113.9")
    assert (
        other.post(
            "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}
        ).status_code
        == 429
    )
    event = AuditEvent.objects.get(action=AuditEvent.LOGIN_LOCKED_OUT)
    assert event.target == "user alice" and event.detail["locked_by"] == "username"


def test_the_admin_login_counts_and_is_locked_too(alice, settings):
    client = Client()
    fail(client, "alice", settings.AXES_FAILURE_LIMIT, url="/admin/login/")
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 429
    assert (
        client.post(
            "/admin/login/", {"username": "alice", "password": "alice-pass-123"}
        ).status_code
        == 429
    )


def test_a_success_before_the_limit_forgets_the_failures(alice, settings):
    client = Client()
    fail(client, "alice", settings.AXES_FAILURE_LIMIT - 1)
    assert (
        client.post(
            "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}
        ).status_code
        == 302
    )
    other = Client()
    assert fail(other, "alice", settings.AXES_FAILURE_LIMIT - 1) == [200] * (
        settings.AXES_FAILURE_LIMIT - 1
    )


def test_an_unlock_by_an_administrator_is_recorded_and_works(alice, admin_user, settings):
    fail(Client(), "alice", settings.AXES_FAILURE_LIMIT)
    admin = Client()
    admin.force_login(admin_user)
    page = admin.get("/admin/auth/user/").content.decode()
    assert "locked" in page
    admin.post("/admin/auth/user/", {"action": "lift_lockout", "_selected_action": [alice.pk]})
    assert (
        Client()
        .post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
        .status_code
        == 302
    )
    unlocked = AuditEvent.objects.get(action=AuditEvent.LOGIN_UNLOCKED)
    assert unlocked.actor == admin_user and unlocked.target == "user alice"


def test_an_address_lock_reads_remote_addr_not_a_header_the_client_sends(alice, settings):
    """Behind the proxy, daphne --proxy-headers sets REMOTE_ADDR from the trusted proxy's
    X-Forwarded-For. A client's own X-Forwarded-For must not dodge an address lock."""
    settings.AXES_LOCKOUT_PARAMETERS = ["ip_address"]
    client = Client(REMOTE_ADDR="198.51.100.7")
    for n in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            "/accounts/login/",
            {"username": "alice", "password": "nope"},
            HTTP_X_FORWARDED_FOR=f"10.0.0.{n}",
        )
    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "alice-pass-123"},
        HTTP_X_FORWARDED_FOR="10.9.9.9",
    )
    assert response.status_code == 429
    # Positive control: another real address is not locked.
    elsewhere = Client(REMOTE_ADDR="198.51.100.8")
    assert (
        elsewhere.post(
            "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}
        ).status_code
        == 302
    )


def test_the_client_address_is_remote_addr_only():
    request = RequestFactory().get("/", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR="10.1.1.1")
    assert lockout.client_ip(request) == "192.0.2.1"


@pytest.mark.django_db(transaction=True)
async def test_an_open_chat_tab_of_a_locked_out_person_starts_nothing(alice, settings):
    conversation = await Conversation.objects.acreate(owner=alice)
    client = Client()
    await sync_to_async(client.force_login)(alice)
    cookie = client.cookies["sessionid"].value
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _code = await tab.connect(timeout=10)
    assert connected
    await sync_to_async(fail)(Client(), "alice", settings.AXES_FAILURE_LIMIT)
    await tab.send_json_to({"action": "send", "text": "spend the budget"})
    frame = await receive(tab)
    assert frame["type"] == "error" and "Too many failed sign-ins" in frame["message"]
    closed = await tab.receive_output(timeout=5)
    assert closed["type"] == "websocket.close"
    assert await Run.objects.acount() == 0
    await tab.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_an_open_chat_tab_of_a_deactivated_person_starts_nothing(alice):
    conversation = await Conversation.objects.acreate(owner=alice)
    client = Client()
    await sync_to_async(client.force_login)(alice)
    cookie = client.cookies["sessionid"].value
    tab = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    assert (await tab.connect(timeout=10))[0]
    await type(alice).objects.filter(pk=alice.pk).aupdate(is_active=False)
    await tab.send_json_to({"action": "send", "text": "hello"})
    frame = await receive(tab)
    assert frame["type"] == "error"  # the session check (skills_app.accounts.sessions) says why
    assert await Run.objects.acount() == 0
    await tab.disconnect()


# -- LOCAL_PASSWORDS=false: no password works, whatever URL it is sent to ---------------------


@pytest.fixture
def no_passwords(settings):
    settings.LOCAL_PASSWORDS = False
    # A provider configured (never contacted here: no test presses its button).
    settings.SSO_OIDC_ISSUER = "http://127.0.0.1:9"
    settings.SOCIALACCOUNT_PROVIDERS = {
        "openid_connect": {
            "APPS": [
                oidc_app(
                    issuer="http://127.0.0.1:9",
                    client_id="x",
                    secret="y",
                    name="Example directory",
                    scopes=["openid"],
                )
            ]
        }
    }


@pytest.mark.parametrize(
    "url",
    ["/accounts/login/", "/admin/login/"],
)
def test_a_switched_off_password_fails_at_every_login_url(no_passwords, alice, url):
    client = Client()
    response = client.post(url, {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 403
    assert "Passwords kept by Skillscope are turned off" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_switched_off_password_fails_even_below_the_views(no_passwords, alice):
    """Any code path that authenticates (a future form, a third-party view) gets nobody."""
    assert authenticate(None, username="alice", password="alice-pass-123") is None


@pytest.mark.parametrize(
    "url",
    [
        "/accounts/password_reset/",
        "/accounts/password_change/",
        "/accounts/reset/MQ/set-password/",
    ],
)
def test_password_pages_are_closed_when_passwords_are_off(no_passwords, alice, url):
    client = Client()
    client.force_login(alice)
    assert client.get(url).status_code in (403, 404)


@pytest.mark.parametrize(
    "url",
    [
        "/accounts/signup/",
        "/accounts/password/reset/",
        "/accounts/password/change/",
        "/accounts/email/",
        "/accounts/3rdparty/",
        "/accounts/login/code/",
    ],
)
def test_allauths_own_account_pages_do_not_exist_here(url, alice):
    """Only the identity provider's flow of allauth is served: its sign-up and password pages
    would be another door to local accounts."""
    client = Client()
    assert client.get(url).status_code == 404
    client.force_login(alice)
    assert client.get(url).status_code == 404
    assert (
        client.post(url, {"username": "x", "password1": "p", "password2": "p"}).status_code == 404
    )


def test_the_login_page_without_passwords_offers_only_the_provider(no_passwords):
    page = Client().get("/accounts/login/").content.decode()
    assert 'id="sso-sign-in"' in page and 'name="password"' not in page


def test_a_locked_out_sessions_http_entrances_start_nothing(alice, settings):
    """A session opened before the lock: the sending limits refuse it at every entrance."""
    from skills_app.policy.limits import LimitReached, check_send

    fail(Client(), "alice", settings.AXES_FAILURE_LIMIT)
    with pytest.raises(LimitReached, match="Too many failed sign-ins"):
        check_send(alice.pk)
