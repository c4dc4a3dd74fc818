"""Issue 11: the admin hides what the audit hides.

A staff member with every view permission but not "inspect injected content" opens every list
and change page, searches, filters and orders, and types lookups into the URL. The issue's
attack read a skill's body one character at a time from `?injected_text__contains=` counts and
read `shell_commands` output on the change page. Positive controls: an inspector sees each text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from skills_app.models import (
    Approval,
    Conversation,
    Message,
    Run,
    SkillInvocation,
    SkillPackage,
    SkillVersion,
    VisibleSkillSource,
)
from tests.security.helpers import client_of, leaked

BODY = "Mix the blue powder with exactly three drops of the amber tonic, never four.\n"
SHELL_OUTPUT = "Stock check: the amber tonic is kept in the locked cupboard number seven.\n"
HOOK_COMMAND = "python3 ./hooks/record-every-dose-in-the-apothecary-log.py --quiet"
HIDDEN = [BODY, SHELL_OUTPUT, HOOK_COMMAND]
PREFIX = "Mix the blue powder"


@pytest.fixture
def staff(django_user_model):
    """Staff with every view permission of the app, without the inspect permission."""
    user = django_user_model.objects.create_user("stan", password="stan-pass-123", is_staff=True)
    views = Permission.objects.filter(
        content_type__app_label="skills_app", codename__startswith="view_"
    )
    user.user_permissions.add(*views)
    changes = Permission.objects.filter(
        codename__in=["change_skillpackage", "add_visibleskillsource"]
    )
    user.user_permissions.add(*changes)
    return user


@pytest.fixture
def world(alice, tmp_path: Path) -> dict[str, Any]:
    conversation = Conversation.objects.create(owner=alice, title="Potions")
    run = Run.objects.create(
        conversation=conversation, status=Run.FAILED, error=f"Tool failed: {BODY}"
    )
    invocation = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill="potions",
        source="uploaded",
        caller="model",
        args="tonic",
        decision="allowed",
        injected_text=f"Base directory for this skill: /s/potions\n\n{BODY}",
        shell_commands=[{"command": "cat stock.txt", "status": "ran", "output": SHELL_OUTPUT}],
        hooks=[{"event": "PostToolUse", "matcher": "Bash", "command": HOOK_COMMAND}],
    )
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        kind="skill_prompt",
        is_meta=True,
        content=[{"type": "text", "text": invocation.injected_text}],
        invocation=invocation,
    )
    first = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Write",
        input={"file_path": "out/x.md", "content": BODY},
        call_text=f"Write(out/x.md): zz {BODY}",
    )
    second = Approval.objects.create(
        conversation=conversation, run=run, tool="Bash", call_text="Bash(aa ls)"
    )
    package = SkillPackage.objects.create(name="potions")
    version = SkillVersion.objects.create(
        package=package,
        digest="a" * 64,
        number=1,
        storage_path=str(tmp_path / "v1"),
        skill_md=f"---\nname: potions\ndescription: Potions.\n---\n{BODY}",
    )
    SkillVersion.objects.create(
        package=package,
        digest="b" * 64,
        number=2,
        storage_path=str(tmp_path / "v2"),
        skill_md=f"---\nname: potions\ndescription: Potions.\n---\n{BODY}More.\n",
    )
    invocation.version = version
    invocation.save()
    return {
        "invocation": invocation,
        "approvals": (first, second),
        "run": run,
        "package": package,
        "version": version,
    }


def _admin(name: str, *args: Any) -> str:
    return reverse(f"admin:skills_app_{name}", args=args)


PAGES = [
    ("skillinvocation_changelist", None),
    ("skillinvocation_change", "invocation"),
    ("approval_changelist", None),
    ("approval_change", "approvals"),
    ("run_changelist", None),
    ("run_change", "run"),
    ("skillversion_changelist", None),
    ("skillversion_change", "version"),
    ("skillpackage_changelist", None),
    ("skillpackage_change", "package"),
]


def _url(world: dict[str, Any], name: str, obj: str | None) -> str:
    if obj is None:
        return _admin(name)
    target = world[obj][0] if obj == "approvals" else world[obj]
    return _admin(name, target.pk)


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "obj"), PAGES)
def test_no_admin_page_shows_hidden_text_to_staff_without_the_permission(staff, world, name, obj):
    response = client_of(staff).get(_url(world, name, obj))
    assert response.status_code == 200
    assert leaked(response.content, HIDDEN) == []


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "obj"), PAGES)
def test_an_inspector_sees_the_hidden_text_where_it_is_kept(admin_user, world, name, obj):
    """Positive control: the same pages do carry the text for someone who may inspect it."""
    response = client_of(admin_user).get(_url(world, name, obj))
    assert response.status_code == 200
    if name in {"skillinvocation_change", "skillversion_change", "approval_change", "run_change"}:
        assert leaked(response.content, HIDDEN) != []


@pytest.mark.django_db
def test_the_invocation_change_page_keeps_commands_output_and_hooks(staff, admin_user, world):
    url = _admin("skillinvocation_change", world["invocation"].pk)
    page = client_of(staff).get(url).content
    assert b"cupboard number seven" not in page and b"apothecary" not in page
    assert b"cat stock.txt" not in page
    assert b"potions" in page  # the page itself rendered
    full = client_of(admin_user).get(url).content
    assert b"cupboard number seven" in full and b"apothecary" in full


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("model", "lookup"),
    [
        ("skillinvocation", "injected_text__contains"),
        ("skillinvocation", "injected_text__startswith"),
        ("skillinvocation", "shell_commands__icontains"),
        ("skillinvocation", "shell_commands__0__output__contains"),
        ("skillinvocation", "hooks__icontains"),
        ("skillinvocation", "messages__content__icontains"),
        ("approval", "call_text__contains"),
        ("approval", "input__content__contains"),
        ("approval", "run__invocations__injected_text__contains"),
        ("run", "invocations__injected_text__contains"),
        ("run", "error__contains"),
        ("skillversion", "skill_md__contains"),
        ("skillpackage", "versions__skill_md__contains"),
    ],
)
def test_a_lookup_on_hidden_text_typed_into_the_url_is_refused(staff, world, model, lookup):
    response = client_of(staff).get(_admin(f"{model}_changelist"), {lookup: PREFIX})
    assert response.status_code == 400


@pytest.mark.django_db
def test_the_oracle_of_the_issue_answers_an_inspector_only(staff, admin_user, world):
    url = _admin("skillinvocation_changelist")
    assert client_of(staff).get(url, {"injected_text__contains": PREFIX}).status_code == 400
    hit = client_of(admin_user).get(url, {"injected_text__contains": PREFIX})
    miss = client_of(admin_user).get(url, {"injected_text__contains": "Nothing like this"})
    assert hit.status_code == miss.status_code == 200
    assert hit.context["cl"].result_count == 1 and miss.context["cl"].result_count == 0


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["skillinvocation", "approval", "skillversion", "run"])
def test_search_cannot_tell_hidden_text_from_nonsense(staff, admin_user, world, model):
    url = _admin(f"{model}_changelist")

    def count(user: Any, q: str) -> int:
        response = client_of(user).get(url, {"q": q})
        assert response.status_code == 200
        return response.context["cl"].result_count

    assert count(staff, PREFIX) == count(staff, "nonsense that is in no row at all")
    if model == "approval":  # positive control: an inspector's search does find the call
        assert count(admin_user, PREFIX) == 1


@pytest.mark.django_db
def test_calls_are_listed_filtered_and_never_ordered_by_their_text(staff, admin_user, world):
    first, second = world["approvals"]
    url = _admin("approval_changelist")
    column = str(list(client_of(admin_user).get(url).context["cl"].list_display).index("call_text"))

    def order(user: Any, o: str) -> list[int]:
        return [a.pk for a in client_of(user).get(url, {"o": o}).context["cl"].result_list]

    # Positive control: for an inspector the column orders, both ways.
    assert order(admin_user, column) == [second.pk, first.pk]
    assert order(admin_user, f"-{column}") == [first.pk, second.pk]
    # An order over the text is an oracle too: for staff the column shows, never orders.
    assert order(staff, column) == order(staff, f"-{column}")
    response = client_of(staff).get(url, {"o": column})
    assert leaked(response.content, HIDDEN) == [] and b"withheld" in response.content


@pytest.mark.django_db
def test_a_version_whose_package_source_is_visible_shows_its_skill_md(staff, world):
    url = _admin("skillversion_change", world["version"].pk)
    assert b"three drops of the amber tonic" not in client_of(staff).get(url).content
    SkillPackage.objects.filter(pk=world["package"].pk).update(source_visible=True)
    assert b"three drops of the amber tonic" in client_of(staff).get(url).content


@pytest.mark.django_db
def test_the_version_diff_needs_the_permission(staff, admin_user, world):
    url = _admin("skillpackage_diff", world["package"].pk)
    assert client_of(staff).get(url).status_code == 403
    assert b"amber tonic" in client_of(admin_user).get(url).content


@pytest.mark.django_db
def test_only_an_inspector_may_make_a_source_visible(staff, admin_user, world):
    package = world["package"]
    url = _admin("skillpackage_change", package.pk)
    client_of(staff).post(url, {"enabled": "on", "source_visible": "on"})
    package.refresh_from_db()
    assert not package.source_visible
    add = _admin("visibleskillsource_add")
    assert client_of(staff).post(add, {"name": "potions"}).status_code == 403
    assert not VisibleSkillSource.objects.exists()
    # Positive control: an inspector can.
    client_of(admin_user).post(url, {"enabled": "on", "source_visible": "on"})
    package.refresh_from_db()
    assert package.source_visible
    client_of(admin_user).post(add, {"name": "pdf", "note": "public skill"})
    assert VisibleSkillSource.objects.filter(name="pdf").exists()
