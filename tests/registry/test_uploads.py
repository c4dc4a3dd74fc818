"""Uploading skills: every accepted form, versions, rollback, scope, the registry wiring, the CLI."""

from __future__ import annotations

from io import StringIO

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError

from skills_app.core.tree import skill_digest
from skills_app.models import (
    Conversation,
    PermissionRule,
    SkillInvocation,
    SkillPackage,
    SkillVersion,
)
from skills_app.registry import review, uploads
from skills_app.registry.skills import extra_skills, get_registry, skills_for_user
from skills_app.registry.uploads import UploadError, UploadFile
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import rows, run_turn, use_fake_model
from tests.support.review_helpers import go_live, reviewer_user
from tests.support.upload_helpers import make_zip, skill_md, snapshot, write_folder

pytestmark = pytest.mark.django_db


def install(files: dict[str, str | bytes], filename: str = "upload.zip", *, live=True, **kw):
    """Install an archive; an organisation skill's new version is then reviewed and made live
    (`live=False` leaves it a draft, as an upload alone does)."""
    kw.setdefault("user", None)
    results = uploads.install_archive(make_zip(files), filename, **kw)
    return [go_live(r) for r in results] if live else results


# --- accepted forms --------------------------------------------------------------------------


def test_a_zip_whose_root_is_the_skill_folder_installs_under_the_folder_name(admin_user):
    [result] = install(
        {"pdf-tools/SKILL.md": skill_md("pdf-tools"), "pdf-tools/scripts/run.py": "print(1)\n"},
        user=admin_user,
    )
    assert result.created
    assert result.package.name == "pdf-tools"
    assert result.package.owner is None
    assert result.version.number == 1
    folder = uploads.version_dir(result.version)
    assert (folder / "scripts" / "run.py").read_text() == "print(1)\n"
    assert folder.name == result.version.digest == skill_digest(folder)
    assert folder.parent.name == str(result.package.pk)
    assert result.package.active_version == result.version
    assert result.version.uploaded_by == admin_user
    assert "installed pdf-tools version 1" in result.message
    assert (
        "stored as a draft (nothing is live yet): it goes live for others after its review"
        in result.message
    )


def test_a_zip_with_skill_md_at_its_root_takes_the_frontmatter_name():
    [result] = install({"SKILL.md": skill_md("from-frontmatter")}, "whatever (1).zip")
    assert result.package.name == "from-frontmatter"


def test_a_zip_with_skill_md_at_its_root_and_no_name_takes_the_file_name():
    text = "---\ndescription: Counts words.\n---\nCount them.\n"
    [result] = install({"SKILL.md": text, "references/a.md": "x"}, "word-count.zip")
    assert result.package.name == "word-count"
    assert (uploads.version_dir(result.version) / "references" / "a.md").exists()


def test_a_dot_skill_file_is_a_zip():
    [result] = install({"notes/SKILL.md": skill_md("notes")}, "notes.skill")
    assert result.package.name == "notes"


def test_a_plugin_zip_installs_each_skill_as_plugin_colon_name():
    results = install(
        {
            "toolbox/skills/lint/SKILL.md": skill_md("lint"),
            "toolbox/skills/format/SKILL.md": skill_md("format"),
            "toolbox/plugin.json": "{}",
        },
        "anything.zip",
    )
    assert sorted(r.package.name for r in results) == ["toolbox:format", "toolbox:lint"]
    assert all("plugin.json" in str(r.warnings) for r in results)
    assert {s.name for s in get_registry().skills()} >= {"toolbox:format", "toolbox:lint"}


def test_a_plugin_zip_with_skills_at_its_root_is_named_after_the_file():
    results = install({"skills/a/SKILL.md": skill_md("a")}, "kit.zip")
    assert [r.package.name for r in results] == ["kit:a"]


def test_a_browser_folder_upload_installs_with_its_relative_paths(alice):
    files = [
        UploadFile("greet/SKILL.md", skill_md("greet").encode()),
        UploadFile("greet/assets/logo.txt", b"logo"),
    ]
    [result] = uploads.install_files(files, user=alice, personal=True)
    assert result.package.name == "greet"
    assert result.package.owner == alice
    assert (uploads.version_dir(result.version) / "assets" / "logo.txt").read_bytes() == b"logo"


def test_a_directory_installs_from_disk(tmp_path):
    folder = write_folder(tmp_path / "src" / "tidy", {"SKILL.md": skill_md("tidy")})
    [result] = uploads.install_directory(folder, user=None)
    assert result.package.name == "tidy"
    assert result.version.skill_md == skill_md("tidy")


def test_lint_warnings_are_returned_and_stored_but_do_not_block():
    text = (
        "---\nname: warn-me\ndescription: Fine.\ncolour: blue\n---\nSee `references/missing.md`.\n"
    )
    [result] = install({"warn-me/SKILL.md": text})
    rules = {p.rule for p in result.warnings}
    # The run-time lint names the missing file (it replaces the spec lint's unnamed warning).
    assert rules == {"unknown-key", "missing-file"}
    assert any("`references/missing.md`" in p.message for p in result.warnings)
    assert all(p.file == "warn-me/SKILL.md" for p in result.warnings)
    assert {p["rule"] for p in result.version.lint} == rules


def test_a_lint_error_blocks_the_install_with_the_report():
    text = "---\nname: bad\ndescription: Fine.\nuser-invocable: maybe\n---\nBody\n"
    before = snapshot()
    with pytest.raises(UploadError) as exc:
        install({"bad/SKILL.md": text})
    assert "1 lint error" in exc.value.message
    assert [(p.rule, p.file, p.line) for p in exc.value.problems] == [
        ("bool-value", "bad/SKILL.md", 4)
    ]
    assert snapshot() == before


def test_the_frontmatter_is_stored_as_json_even_with_dates():
    text = "---\nname: dated\ndescription: D.\nversion: 2024-05-01\n---\nB\n"
    [result] = install({"dated/SKILL.md": text})
    result.version.refresh_from_db()
    assert result.version.frontmatter["version"] == "2024-05-01"


# --- versions --------------------------------------------------------------------------------


def test_identical_content_is_a_no_op_that_says_so():
    [first] = install({"same/SKILL.md": skill_md("same")})
    before = snapshot()
    [again] = install({"same/SKILL.md": skill_md("same")}, "renamed.zip")
    assert not again.created
    assert again.version == first.version
    assert again.message == "same is already installed as version 1; nothing changed"
    assert snapshot() == before


def test_new_content_becomes_the_next_active_version_and_old_files_stay():
    [v1] = install({"evolve/SKILL.md": skill_md("evolve", body="One.")})
    [v2] = install({"evolve/SKILL.md": skill_md("evolve", body="Two.")})
    assert (v1.version.number, v2.version.number) == (1, 2)
    assert v2.package.pk == v1.package.pk
    v2.package.refresh_from_db()
    assert v2.package.active_version == v2.version
    assert uploads.version_dir(v1.version).is_dir()
    assert get_registry().get("evolve").body.strip() == "Two."


def test_rollback_activates_an_older_version_for_the_next_lookup():
    [v1] = install({"evolve/SKILL.md": skill_md("evolve", body="One.")})
    install({"evolve/SKILL.md": skill_md("evolve", body="Two.")})
    assert get_registry().get("evolve").body.strip() == "Two."
    review.activate(v1.version, reviewer_user())
    assert get_registry().get("evolve").body.strip() == "One."
    assert get_registry().get("evolve").digest == v1.version.digest


def test_reuploading_an_inactive_versions_content_says_it_is_not_active():
    [v1] = install({"evolve/SKILL.md": skill_md("evolve", body="One.")})
    install({"evolve/SKILL.md": skill_md("evolve", body="Two.")})
    [again] = install({"evolve/SKILL.md": skill_md("evolve", body="One.")})
    assert again.version == v1.version
    assert "(not the active version)" in again.message


def test_the_diff_shows_skill_md_changes_between_versions():
    [v1] = install({"evolve/SKILL.md": skill_md("evolve", body="One.")})
    [v2] = install({"evolve/SKILL.md": skill_md("evolve", body="Two.")})
    lines = [(line.kind, line.text) for line in uploads.skill_md_diff(v1.version, v2.version)]
    assert lines[:2] == [("file", "--- evolve v1/SKILL.md"), ("file", "+++ evolve v2/SKILL.md")]
    assert ("del", "-One.") in lines and ("add", "+Two.") in lines


def test_a_disabled_package_leaves_the_registry_and_comes_back_when_enabled():
    [result] = install({"toggle/SKILL.md": skill_md("toggle")})
    uploads.set_enabled(result.package, False)
    assert get_registry().get("toggle") is None
    uploads.set_enabled(result.package, True)
    assert get_registry().get("toggle") is not None


def test_an_invocation_keeps_pointing_at_the_version_it_loaded(alice):
    [v1] = install({"kept/SKILL.md": skill_md("kept", body="One.")})
    conversation = Conversation.objects.create(owner=alice)
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="kept",
        digest=v1.version.digest,
        version=uploads.version_for_digest("kept", v1.version.digest),
        caller="user",
        decision="allowed",
    )
    install({"kept/SKILL.md": skill_md("kept", body="Two.")})
    assert SkillInvocation.objects.get().version == v1.version


# --- scope -----------------------------------------------------------------------------------


def test_an_ordinary_user_cannot_install_for_the_organisation(alice):
    with pytest.raises(UploadError, match="only administrators"):
        install({"org/SKILL.md": skill_md("org")}, user=alice)
    assert SkillPackage.objects.count() == 0


def test_staff_with_the_add_permission_can_install_for_the_organisation(django_user_model):
    staff = django_user_model.objects.create_user("sam", password="pw-123456", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="add_skillpackage"))
    staff = django_user_model.objects.get(pk=staff.pk)
    [result] = install({"org/SKILL.md": skill_md("org")}, user=staff)
    assert result.package.owner is None


def test_personal_skills_can_be_turned_off(settings, alice):
    settings.ALLOW_PERSONAL_SKILLS = False
    with pytest.raises(UploadError, match="ALLOW_PERSONAL_SKILLS"):
        install({"mine/SKILL.md": skill_md("mine")}, user=alice, personal=True)


def test_a_personal_skill_is_visible_only_to_its_owner(alice, bob):
    install({"secret-sauce/SKILL.md": skill_md("secret-sauce")}, user=alice, personal=True)
    assert skills_for_user(alice.pk).get("secret-sauce").source == "personal"
    assert skills_for_user(bob.pk).get("secret-sauce") is None
    assert "secret-sauce" not in {s.name for s in skills_for_user(bob.pk).skills()}
    assert get_registry().get("secret-sauce") is None
    assert extra_skills() == []


def test_two_users_may_own_personal_skills_with_the_same_name(alice, bob):
    install({"same/SKILL.md": skill_md("same", body="Alice's.")}, user=alice, personal=True)
    install({"same/SKILL.md": skill_md("same", body="Bob's.")}, user=bob, personal=True)
    assert skills_for_user(alice.pk).get("same").body.strip() == "Alice's."
    assert skills_for_user(bob.pk).get("same").body.strip() == "Bob's."


def test_precedence_is_org_upload_then_personal_then_dirs_then_bundled(settings, tmp_path, alice):
    write_folder(tmp_path / "dirs", {"clash/SKILL.md": skill_md("clash", body="From dirs.")})
    settings.SKILLS_DIRS = [tmp_path / "dirs"]
    assert skills_for_user(alice.pk).get("clash").source == "dirs"
    install({"clash/SKILL.md": skill_md("clash", body="Personal.")}, user=alice, personal=True)
    provider = skills_for_user(alice.pk)
    assert provider.get("clash").source == "personal"
    assert [s.source for s in provider.candidates() if s.name == "clash"] == ["personal", "dirs"]
    install({"clash/SKILL.md": skill_md("clash", body="Org.")})
    provider = skills_for_user(alice.pk)
    assert provider.get("clash").source == "uploaded"
    assert [s.source for s in provider.skills() if s.name == "clash"] == ["uploaded"]
    assert [s.source for s in provider.candidates() if s.name == "clash"] == [
        "uploaded",
        "personal",
        "dirs",
    ]


def test_an_org_upload_outranks_a_bundled_skill_of_the_same_name():
    bundled = next(s for s in get_registry().skills() if s.source == "bundled")
    install({f"{bundled.name}/SKILL.md": skill_md(bundled.name, body="Mine.")})
    assert get_registry().get(bundled.name).source == "uploaded"


def test_deleting_an_unused_personal_package_removes_rows_and_files(alice):
    [result] = install({"gone/SKILL.md": skill_md("gone")}, user=alice, personal=True)
    folder = uploads.version_dir(result.version)
    message = uploads.delete_package(result.package)
    assert message == "gone was deleted"
    assert not folder.exists()
    assert not SkillVersion.objects.exists()


def test_deleting_a_used_package_disables_it_and_keeps_its_versions(alice):
    [result] = install({"used/SKILL.md": skill_md("used")}, user=alice, personal=True)
    conversation = Conversation.objects.create(owner=alice)
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="used",
        version=result.version,
        caller="user",
        decision="allowed",
    )
    message = uploads.delete_package(result.package)
    assert "disabled instead" in message
    result.package.refresh_from_db()
    assert not result.package.enabled
    assert SkillInvocation.objects.get().version == result.version
    assert skills_for_user(alice.pk).get("used") is None


# --- the registry cache ----------------------------------------------------------------------


def test_extra_skills_reparses_nothing_while_packages_are_unchanged(monkeypatch):
    install({"cached/SKILL.md": skill_md("cached")})
    assert [s.name for s in extra_skills()] == ["cached"]
    calls = []
    import skills_app.registry.skills as skills_module

    real = skills_module.parse_skill_dir
    monkeypatch.setattr(
        skills_module, "parse_skill_dir", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    for _ in range(3):
        assert [s.name for s in extra_skills()] == ["cached"]
    assert calls == []


def test_extra_skills_inside_an_event_loop_returns_the_last_list_without_the_database():
    install({"loopy/SKILL.md": skill_md("loopy")})
    assert [s.name for s in extra_skills()] == ["loopy"]

    async def inside() -> list[str]:
        return [s.name for s in extra_skills()]

    import asyncio

    assert asyncio.run(inside()) == ["loopy"]


# --- a run ------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_another_users_personal_skill_is_ordinary_text_in_their_run(
    settings, fake_anthropic, alice, bob
):
    use_fake_model(settings, fake_anthropic)
    await sync_to_async(install)(
        {"private-thing/SKILL.md": skill_md("private-thing", body="PRIVATE-BODY")},
        user=alice,
        personal=True,
    )
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    conversation = await Conversation.objects.acreate(owner=bob)
    fake_anthropic.enqueue(Reply.text("Just text."))
    await run_turn(conversation, "/private-thing now", bob)
    stored = await sync_to_async(rows)(conversation)
    assert stored[0].content == [{"type": "text", "text": "/private-thing now"}]
    assert not await SkillInvocation.objects.filter(conversation=conversation).aexists()
    assert "PRIVATE-BODY" not in str(fake_anthropic.requests[0])
    skill_tool = next(t for t in fake_anthropic.requests[0]["tools"] if t["name"] == "Skill")
    assert "private-thing" not in skill_tool["description"]


@pytest.mark.django_db(transaction=True)
async def test_the_owner_can_invoke_their_personal_skill_and_the_audit_points_at_its_version(
    settings, fake_anthropic, alice
):
    use_fake_model(settings, fake_anthropic)
    [result] = await sync_to_async(install)(
        {"private-thing/SKILL.md": skill_md("private-thing", body="PRIVATE-BODY")},
        user=alice,
        personal=True,
    )
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    conversation = await Conversation.objects.acreate(owner=alice)
    fake_anthropic.enqueue(Reply.text("Done."))
    await run_turn(conversation, "/private-thing now", alice)
    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    assert invocation.decision == "allowed"
    assert invocation.version_id == result.version.pk
    assert "PRIVATE-BODY" in str(fake_anthropic.requests[0])
    skill_tool = next(t for t in fake_anthropic.requests[0]["tools"] if t["name"] == "Skill")
    assert "private-thing" in skill_tool["description"]


# --- `manage.py skills import` -----------------------------------------------------------------


def run_import(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("skills", "import", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_import_command_stores_a_draft_for_the_organisation(tmp_path):
    folder = write_folder(tmp_path / "cli-skill", {"SKILL.md": skill_md("cli-skill")})
    out, _ = run_import(str(folder))
    assert "installed cli-skill version 1 (organisation-wide" in out
    assert "stored as a draft" in out
    assert get_registry().get("cli-skill") is None
    version = SkillVersion.objects.get(package__name="cli-skill")
    assert version.reviews.get().origin == "cli"


def test_the_import_command_installs_a_zip_as_a_personal_skill(tmp_path, alice):
    archive = tmp_path / "zipped.zip"
    archive.write_bytes(make_zip({"zipped/SKILL.md": skill_md("zipped")}))
    out, _ = run_import(str(archive), "--user", "alice", "--personal")
    assert "(personal," in out
    assert SkillPackage.objects.get(name="zipped").owner == alice


def test_the_import_command_installs_each_skill_of_a_folder_of_skills(tmp_path):
    write_folder(tmp_path / "many", {"a/SKILL.md": skill_md("a"), "b/SKILL.md": skill_md("b")})
    out, _ = run_import(str(tmp_path / "many"))
    assert "installed a version 1" in out and "installed b version 1" in out


def test_the_import_command_reports_a_refusal_and_fails(tmp_path):
    bad = "---\nname: nope\ndescription: D.\nuser-invocable: maybe\n---\nB\n"
    folder = write_folder(tmp_path / "nope", {"SKILL.md": bad})
    err = StringIO()
    with pytest.raises(CommandError, match="1 of 1 upload"):
        call_command("skills", "import", str(folder), stdout=StringIO(), stderr=err)
    assert "bool-value" in err.getvalue()
    assert SkillPackage.objects.count() == 0


def test_the_import_command_needs_a_user_for_a_personal_skill(tmp_path):
    folder = write_folder(tmp_path / "x", {"SKILL.md": skill_md("x")})
    with pytest.raises(CommandError, match="--personal needs --user"):
        run_import(str(folder), "--personal")


def test_the_import_command_says_which_path_does_not_exist(tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        run_import(str(tmp_path / "nowhere"))
