"""Roles: groups made by a data migration, `manage.py role`, the admin's user page, and a menu
that shows each person only the links they can use."""

from __future__ import annotations

import importlib
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from skills_app.accounts import roles
from skills_app.models import AuditEvent, Conversation, SkillInvocation

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- the groups -------------------------------------------------------------------------------


def test_the_data_migrations_make_exactly_the_roles_the_code_names():
    # 0009 made the roles; 0024 (reviews) and 0026 (the organisation) only add to them.
    made = importlib.import_module("skills_app.migrations.0009_roles").ROLES
    added = [
        importlib.import_module("skills_app.migrations.0024_review_roles").ADDED,
        importlib.import_module("skills_app.migrations.0026_organisation_roles").ADDED,
    ]
    expected = {name: set(held) for name, held in made.items()}
    for more in added:
        for name, held in more.items():
            expected[name] |= set(held)
    # The administrator also holds everything a skill manager does (0026 adds it that way).
    expected["Administrator"] |= set(added[1]["Skill manager"])
    assert {r.name: set(r.permissions) for r in roles.ROLES} == expected


@pytest.mark.parametrize("role", roles.ROLES, ids=lambda r: r.slug)
def test_each_role_group_holds_its_permissions(role):
    group = Group.objects.get(name=role.name)
    held = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
    assert held == set(role.permissions)


def test_the_auditor_may_read_and_inspect_but_edit_nothing(django_user_model):
    user = django_user_model.objects.create_user("ada")
    roles.grant(user, roles.get_role("auditor"))
    user = django_user_model.objects.get(pk=user.pk)  # fresh permission cache
    assert user.is_staff
    assert user.has_perm("skills_app.inspect_injected_content")
    assert user.has_perm("skills_app.view_skillinvocation")
    for edit in (
        "skills_app.add_skillpackage",
        "skills_app.change_permissionrule",
        "skills_app.delete_permissionrule",
        "auth.change_user",
    ):
        assert not user.has_perm(edit), edit


def test_the_skill_manager_uploads_and_writes_rules_but_reads_no_audit(skill_manager):
    assert skill_manager.is_staff
    assert skill_manager.has_perm("skills_app.add_skillpackage")
    assert skill_manager.has_perm("skills_app.add_permissionrule")
    assert not skill_manager.has_perm("skills_app.view_skillinvocation")
    assert not skill_manager.has_perm("skills_app.inspect_injected_content")


def test_a_missing_role_group_is_made_again(django_user_model):
    Group.objects.filter(name="Auditor").delete()
    user = django_user_model.objects.create_user("ada")
    roles.grant(user, roles.get_role("Auditor"))
    assert user.groups.filter(name="Auditor").exists()


# -- manage.py role ---------------------------------------------------------------------------


def test_role_grant_gives_the_role_and_staff_status_and_is_recorded(alice, capsys):
    call_command("role", "grant", "alice", "auditor")
    assert "alice is now Auditor" in capsys.readouterr().out
    alice.refresh_from_db()
    assert alice.is_staff and [r.slug for r in roles.roles_of(alice)] == ["auditor"]
    event = AuditEvent.objects.get(action=AuditEvent.ROLE_GRANTED)
    assert event.target == "user alice" and event.detail["role"] == "Auditor"
    assert event.actor_name.startswith("manage.py")
    call_command("role", "grant", "alice", "Auditor")
    assert "already has the role" in capsys.readouterr().out


def test_role_revoke_takes_the_role_and_staff_status_away(alice, capsys):
    call_command("role", "grant", "alice", "skill_manager")
    call_command("role", "revoke", "alice", "skill-manager")
    assert "no longer Skill manager; roles now: no role" in capsys.readouterr().out
    alice.refresh_from_db()
    assert not alice.is_staff
    assert AuditEvent.objects.filter(action=AuditEvent.ROLE_REVOKED).count() == 1


def test_revoking_one_role_keeps_staff_status_for_another(alice):
    call_command("role", "grant", "alice", "auditor")
    call_command("role", "grant", "alice", "skill-manager")
    call_command("role", "revoke", "alice", "auditor")
    alice.refresh_from_db()
    assert alice.is_staff


def test_role_list_shows_every_role_with_its_members(alice, auditor, capsys):
    call_command("role", "list")
    out = capsys.readouterr().out
    assert "Auditor (auditor): audrey" in out and "Chatter (chatter): nobody" in out
    call_command("role", "list", "audrey")
    assert capsys.readouterr().out.strip() == "audrey: Auditor [staff]"


def test_an_unknown_role_or_user_says_what_exists(alice):
    with pytest.raises(CommandError, match="Roles: chatter, skill-manager, auditor, administrator"):
        call_command("role", "grant", "alice", "inspector")
    with pytest.raises(CommandError, match="no user 'zed'"):
        call_command("role", "grant", "zed", "auditor")


# -- the admin's user page --------------------------------------------------------------------


def test_the_user_page_shows_roles_first_and_raw_permissions_last(admin_user, alice):
    page = _client(admin_user).get(reverse("admin:auth_user_change", args=[alice.pk]))
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", page.content.decode(), re.S)
    headings = [re.sub(r"<[^>]+>", "", h).strip() for h in headings]
    sections = [h for h in headings if h]
    assert sections.index("Roles") < sections.index("Personal info")
    assert sections[-1].startswith("Raw permissions")
    assert "Skill manager: Uploads skills" in page.content.decode()


def test_the_roles_box_of_a_new_user_says_that_no_role_means_chat_only(admin_user):
    client = _client(admin_user)
    added = client.post(
        reverse("admin:auth_user_add"),
        {"username": "newcomer", "password1": "a-long-pass-2026", "password2": "a-long-pass-2026"},
    )
    assert added.status_code == 302
    page = client.get(added["Location"]).content.decode()
    roles_box = page[page.index("<h2") : page.index("Personal info")]
    assert 'name="groups"' in roles_box
    assert not re.search(r'name="groups"[^>]*checked', roles_box)  # starts with no role
    assert "No role ticked means chat only" in roles_box


def test_handing_out_a_role_in_the_admin_gives_staff_status_and_is_recorded(admin_user, alice):
    client = _client(admin_user)
    url = reverse("admin:auth_user_change", args=[alice.pk])
    form = client.get(url).context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k != "password"}
    data.update(
        username="alice",
        groups=[Group.objects.get(name="Auditor").pk],
        is_active="on",
        date_joined_0=alice.date_joined.strftime("%Y-%m-%d"),
        date_joined_1=alice.date_joined.strftime("%H:%M:%S"),
    )
    data.pop("user_permissions", None)
    data.pop("date_joined", None)
    data.pop("last_login", None)
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    alice.refresh_from_db()
    assert alice.is_staff and roles.roles_of(alice)[0].slug == "auditor"
    event = AuditEvent.objects.get(action=AuditEvent.ROLE_GRANTED)
    assert event.actor == admin_user


def test_the_user_list_filters_by_role(admin_user, auditor, alice):
    page = _client(admin_user).get(reverse("admin:auth_user_changelist") + "?role=auditor")
    body = page.content.decode()
    assert "audrey" in body and ">alice<" not in body


# -- the menu ---------------------------------------------------------------------------------


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.nav: list[str] = []
        self._in_nav = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "nav" and attrs.get("class") == "topnav":
            self._in_nav += 1
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
            if self._in_nav:
                self.nav.append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "nav" and self._in_nav:
            self._in_nav -= 1


def _parse(html: str) -> _Links:
    parser = _Links()
    parser.feed(html)
    return parser


def _menu(client: Client) -> list[str]:
    return _parse(client.get("/").content.decode()).nav


@pytest.fixture
def administrator(django_user_model):
    user = django_user_model.objects.create_user("ada", password="ada-pass-123")
    roles.grant(user, roles.get_role("administrator"))
    return user


@pytest.fixture
def staff_only(django_user_model):
    return django_user_model.objects.create_user("stan", password="x", is_staff=True)


@pytest.fixture
def some_audit(alice):
    conversation = Conversation.objects.create(owner=alice, title="Walkable")
    SkillInvocation.objects.create(
        conversation=conversation, skill="notes", caller="model", decision="allowed"
    )


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("alice", ["Skills", "Usage"]),
        ("staff_only", ["Skills", "Usage", "Compare", "Operations"]),
        ("skill_manager", ["Skills", "Rules", "Usage", "Compare", "Operations", "Admin"]),
        ("auditor", ["Skills", "Rules", "Usage", "Audit", "Compare", "Operations", "Admin"]),
        ("administrator", ["Skills", "Rules", "Usage", "Audit", "Compare", "Operations", "Admin"]),
    ],
)
def test_the_menu_shows_each_role_only_what_it_can_use(request, persona, expected):
    client = _client(request.getfixturevalue(persona))
    page = client.get("/").content.decode()
    nav = re.search(r'<nav class="topnav".*?</nav>', page, re.S)[0]
    labels = re.findall(r"<a [^>]*>([^<]+)</a>", nav)
    assert labels == expected


def test_a_staff_only_account_gets_no_admin_link_to_an_empty_admin(staff_only):
    client = _client(staff_only)
    assert reverse("admin:index") not in _menu(client)
    # What the link used to lead to: the admin with nothing in it.
    assert "have permission to view or edit anything" in client.get("/admin/").content.decode()


SKIP = ("/accounts/logout/", "/static/", "/admin/logout/", "/admin/password_change/")


@pytest.mark.parametrize(
    "persona", ["alice", "staff_only", "skill_manager", "auditor", "administrator"]
)
def test_every_link_a_role_is_shown_opens_without_a_403(request, persona, some_audit):
    """From the menu, follow every same-site link two pages deep: none may answer 403."""
    client = _client(request.getfixturevalue(persona))
    seen: set[str] = set()
    frontier = [(url, 0) for url in ["/", *_menu(client)]]
    while frontier and len(seen) < 150:
        url, depth = frontier.pop(0)
        path = urlsplit(url).path
        if url in seen or not path.startswith("/") or path.startswith(SKIP):
            continue
        seen.add(url)
        response = client.get(url)
        assert response.status_code not in (403, 500), f"{persona}: {url} -> {response.status_code}"
        if response.streaming:  # a download (the audit's CSV export)
            continue
        # The admin answers 200 with an empty index to staff without permissions: a dead end too.
        assert b"have permission to view or edit anything" not in response.content, url
        if depth < 2 and response.get("Content-Type", "").startswith("text/html"):
            for href in _parse(response.content.decode()).links:
                if not href.startswith(("#", "mailto:", "javascript:")):
                    frontier.append((urljoin(url, href), depth + 1))
    assert len(seen) >= 3


def test_clearing_roles_either_way_is_recorded(alice, bob):
    call_command("role", "grant", "alice", "auditor")
    call_command("role", "grant", "bob", "auditor")
    alice.groups.clear()
    Group.objects.get(name="Auditor").user_set.clear()
    revoked = AuditEvent.objects.filter(action=AuditEvent.ROLE_REVOKED).order_by("pk")
    assert [(e.target, e.detail["role"]) for e in revoked] == [
        ("user alice", "Auditor"),
        ("user bob", "Auditor"),
    ]
