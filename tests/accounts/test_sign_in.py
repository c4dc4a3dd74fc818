"""Sign-in through the organisation's identity provider: a real OpenID Connect provider (panva's
oidc-provider on loopback), django-allauth, directory groups synced on every sign-in, lockouts
that hold for every way in. Attack tests: forged group claims, refused sign-ins, a user changing
their own groups, a switched-off password used through another URL, a locked-out person through
the provider.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from skills_app.accounts import roles
from skills_app.models import AuditEvent, GroupPolicy, UserPolicy
from tests.support.oidc_server import sign_in_at_provider
from tests.support.org import group

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()


@pytest.fixture
def sso(settings, oidc_provider):
    for name, value in oidc_provider.settings().items():
        setattr(settings, name, value)
    research = group("Research", directory="research", models=["claude-opus-4-8"])
    group("Design", directory="design")
    # The Chatter role follows the directory group "skillscope-users".
    GroupPolicy.objects.create(
        group=roles.group_for(roles.get_role("chatter")), directory_name="skillscope-users"
    )
    oidc_provider.research = research
    return oidc_provider


def start(client: Client) -> str:
    """Press "Sign in with ..." on the login page: where the browser is sent."""
    page = client.get("/accounts/login/").content.decode()
    assert 'id="sso-sign-in"' in page
    response = client.post("/accounts/oidc/sso/login/", {"process": "login"})
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def sign_in(client: Client, username: str, password: str):
    kind, where = sign_in_at_provider(start(client), username, password)
    assert kind == "callback", where[:800]
    parts = urlsplit(where)
    return client.get(f"{parts.path}?{parts.query}")


def group_names(username: str) -> set[str]:
    return set(User.objects.get(username=username).groups.values_list("name", flat=True))


def test_a_directory_member_is_created_with_their_groups_and_role(sso):
    sso.set_person("ada", "ada-directory-pass", ["research", "skillscope-users", "unmapped"])
    client = Client()
    response = sign_in(client, "ada", "ada-directory-pass")
    # Signed in, the person lands where every sign-in lands: a conversation ready to type in.
    assert response.status_code == 302 and response["Location"] == settings.LOGIN_REDIRECT_URL
    assert client.get("/").status_code == 200  # signed in
    assert group_names("ada") == {"Research", "Chatter"}
    policy = UserPolicy.objects.get(user__username="ada")
    assert policy.directory_groups == ["research", "skillscope-users", "unmapped"]
    synced = AuditEvent.objects.get(action=AuditEvent.DIRECTORY_SYNCED)
    assert sorted(synced.detail["added"]) == ["Chatter", "Research"]


def test_a_group_removed_in_the_directory_is_removed_here_at_the_next_sign_in(sso):
    sso.set_person("ada", "pw-1", ["research", "design"])
    sign_in(Client(), "ada", "pw-1")
    assert group_names("ada") == {"Research", "Design"}
    # A group an administrator manages here (no directory name) is left alone.
    local = Group.objects.create(name="Local pilots")
    User.objects.get(username="ada").groups.add(local)
    sso.set_person("ada", "pw-1", ["design"])
    sign_in(Client(), "ada", "pw-1")
    assert group_names("ada") == {"Design", "Local pilots"}
    last = AuditEvent.objects.filter(action=AuditEvent.DIRECTORY_SYNCED).order_by("-pk")[0]
    assert last.detail["removed"] == ["Research"]


def test_a_forged_or_near_miss_group_claim_grants_nothing(sso):
    """Claims naming a Skillscope group or role, or a directory name that differs in case or
    space, select nothing: only an exact, mapped directory name does."""
    sso.set_person(
        "mallory",
        "m-pass",
        ["Administrator", "Research", "research ", "RESEARCH", "Skill manager", "auditor"],
    )
    sign_in(Client(), "mallory", "m-pass")
    mallory = User.objects.get(username="mallory")
    assert group_names("mallory") == set()
    assert not mallory.is_staff and not mallory.is_superuser


def test_a_directory_role_gives_and_takes_staff_status(sso):
    GroupPolicy.objects.create(
        group=roles.group_for(roles.get_role("auditor")), directory_name="skillscope-auditors"
    )
    sso.set_person("ida", "i-pass", ["skillscope-auditors"])
    sign_in(Client(), "ida", "i-pass")
    assert User.objects.get(username="ida").is_staff
    sso.set_person("ida", "i-pass", [])
    sign_in(Client(), "ida", "i-pass")
    ida = User.objects.get(username="ida")
    assert not ida.is_staff and group_names("ida") == set()


def test_a_wrong_password_at_the_provider_never_reaches_skillscope(sso):
    sso.set_person("ada", "right", ["research"])
    kind, page = sign_in_at_provider(start(Client()), "ada", "wrong")
    assert kind == "page" and "Wrong username or password" in page
    assert not User.objects.filter(username="ada").exists()


def test_a_person_the_provider_refuses_gets_no_session(sso):
    sso.set_person("dave", "d-pass", ["research"], disabled=True)
    client = Client()
    kind, where = sign_in_at_provider(start(client), "dave", "d-pass")
    assert kind == "callback" and "error=access_denied" in where
    parts = urlsplit(where)
    response = client.get(f"{parts.path}?{parts.query}", follow=True)
    assert not User.objects.filter(username="dave").exists()
    assert "_auth_user_id" not in client.session
    assert response.status_code == 200


def test_only_members_of_the_allowed_groups_may_sign_in(sso, settings):
    settings.SSO_ALLOWED_GROUPS = ["skillscope-users"]
    sso.set_person("eve", "e-pass", ["design"])
    client = Client()
    response = sign_in(client, "eve", "e-pass")
    assert response.status_code == 403
    assert "not in a group allowed to use Skillscope" in response.content.decode()
    assert not User.objects.filter(username="eve").exists()
    assert "_auth_user_id" not in client.session
    refused = AuditEvent.objects.get(action=AuditEvent.SIGN_IN_REFUSED)
    assert refused.detail["reason"] == "not_in_allowed_groups"
    assert refused.detail["claim"] == ["design"]


def test_a_deactivated_account_cannot_come_back_through_the_provider(sso):
    sso.set_person("ada", "a-pass", ["research"])
    sign_in(Client(), "ada", "a-pass")
    User.objects.filter(username="ada").update(is_active=False)
    client = Client()
    response = sign_in(client, "ada", "a-pass")
    assert response.status_code == 403 and "deactivated" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_locked_out_person_cannot_sign_in_through_the_provider_until_unlocked(
    sso, settings, admin_user
):
    sso.set_person("ada", "a-pass", ["research"])
    sign_in(Client(), "ada", "a-pass")
    ada = User.objects.get(username="ada")
    ada.set_password("local-pass-123")
    ada.save()
    attacker = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attacker.post("/accounts/login/", {"username": "ada", "password": "guess"})
    locked = attacker.post("/accounts/login/", {"username": "ada", "password": "local-pass-123"})
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.content.decode()
    client = Client()
    response = sign_in(client, "ada", "a-pass")
    assert response.status_code == 403 and "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # An administrator lifts it (the user admin's action); both are in the audit.
    admin = Client()
    admin.force_login(admin_user)
    admin.post(
        "/admin/auth/user/",
        {"action": "lift_lockout", "_selected_action": [ada.pk]},
    )
    assert sign_in(Client(), "ada", "a-pass").status_code == 302
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    assert AuditEvent.LOGIN_LOCKED_OUT in actions and AuditEvent.LOGIN_UNLOCKED in actions


def test_the_login_page_offers_the_provider_and_passwords_by_default(sso):
    page = Client().get("/accounts/login/").content.decode()
    assert "Sign in with Example directory" in page and 'name="password"' in page


def test_nobody_changes_their_own_groups(alice, skill_manager):
    """A chatter or a skill manager posting their own user page with an administrator's groups:
    nothing changes (the admin needs staff status and the change-user permission)."""
    admins = roles.group_for(roles.get_role("administrator"))
    for person in (alice, skill_manager):
        before = set(person.groups.values_list("pk", flat=True))
        client = Client()
        client.force_login(person)
        response = client.post(
            f"/admin/auth/user/{person.pk}/change/",
            {"username": person.username, "groups": [admins.pk], "is_staff": "on"},
        )
        assert response.status_code in (302, 403)
        if response.status_code == 302:
            assert response["Location"].startswith("/admin/login/")
        person.refresh_from_db()
        assert set(person.groups.values_list("pk", flat=True)) == before
        assert admins.pk not in before and not person.is_superuser
    # Nor through a group's policy: the policy and skill-access admins are for administrators.
    client = Client()
    client.force_login(skill_manager)
    assert client.get("/admin/skills_app/userpolicy/").status_code == 403
    assert (
        client.post(
            "/admin/skills_app/userpolicy/add/",
            {"user": skill_manager.pk, "daily_limit_usd": "999"},
        ).status_code
        == 403
    )
    assert not UserPolicy.objects.exists()
