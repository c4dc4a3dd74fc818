"""Trigger-set pages per role, the editor and its JSON, sets shipped with a skill, the collisions
view, the admin's activation comparison, and hidden bodies kept out of every page."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from skills_app.models import SkillPackage, TriggerQuery, TriggerResult, TriggerRun
from skills_app.registry import review, uploads
from skills_app.registry import trigger_sets as sets
from tests.trigger_helpers import (
    BODY_MARKER,
    CASES,
    cases_json,
    give_cases,
    install_org_skills,
    isolate_skills,
    skill_folder,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _setup(settings, tmp_path):
    isolate_skills(settings, tmp_path)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def org(tmp_path, skill_manager):
    packages = install_org_skills(tmp_path, skill_manager)
    give_cases(packages["pdf-tables"])
    return packages


@pytest.fixture
def personal(tmp_path, alice):
    folder = skill_folder(tmp_path / "alice", "alice-secret", "Sorts alice's private ledgers.")
    package = uploads.install_directory(folder, user=alice, personal=True)[0].package
    TriggerQuery.objects.create(package=package, query="ALICE-PRIVATE-QUERY", should_trigger=True)
    return package


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finished_run(
    package, *, version=None, chosen=None, triggered=2, by=None, model="claude-opus-4-8"
):
    version = version or package.active_version
    run = TriggerRun.objects.create(
        package=package,
        version=version,
        skill=package.name,
        version_number=version.number,
        version_digest=version.digest,
        owner_id=package.owner_id,
        version_state="active" if package.active_version_id == version.pk else "candidate",
        started_by=by,
        model=model,
        profile="meta-message",
        repetitions=3,
        status=TriggerRun.DONE,
        attempts_total=3,
        attempts_done=3,
    )
    TriggerResult.objects.create(
        run=run,
        position=0,
        query="the table query",
        should_trigger=True,
        attempts=3,
        triggered=triggered,
        chosen=chosen or {},
    )
    return run


# --- who may see and change what -----------------------------------------------------------------


def test_a_skill_manager_edits_and_runs_organisation_sets(org, skill_manager):
    client = login(skill_manager)
    package = org["pdf-tables"]
    page = client.get(f"/skills/triggers/packages/{package.pk}/").content.decode()
    assert "Add a query" in page and "Estimate and run" in page
    response = client.post(
        f"/skills/triggers/packages/{package.pk}/queries/add/",
        {"query": "make a spreadsheet from this pdf table", "expectation": "yes"},
    )
    assert response.status_code == 302
    assert package.trigger_queries.count() == len(CASES) + 1


def test_an_auditor_reads_every_set_but_changes_none(org, personal, auditor):
    client = login(auditor)
    package = org["pdf-tables"]
    page = client.get(f"/skills/triggers/packages/{package.pk}/").content.decode()
    assert page.count('<tr id="query-') == len(CASES)
    assert "Add a query" not in page and "Estimate and run" not in page
    assert client.get(f"/skills/triggers/packages/{personal.pk}/").status_code == 200
    for url, data in [
        (
            f"/skills/triggers/packages/{package.pk}/queries/add/",
            {"query": "x", "expectation": "yes"},
        ),
        (f"/skills/triggers/packages/{package.pk}/import/", {"text": cases_json()}),
        (f"/skills/triggers/packages/{package.pk}/runs/", {}),
    ]:
        assert client.post(url, data).status_code == 403
    assert client.get(f"/skills/triggers/packages/{package.pk}/plan/").status_code == 403
    assert package.trigger_queries.count() == len(CASES)


def test_a_chatter_sees_only_their_own_personal_sets(org, personal, alice, bob):
    own = login(alice)
    assert own.get(f"/skills/triggers/packages/{personal.pk}/").status_code == 200
    assert own.get(f"/skills/triggers/packages/{org['pdf-tables'].pk}/").status_code == 404
    home = own.get("/skills/triggers/").content.decode()
    assert "alice-secret" in home and "pdf-tables" not in home

    stranger = login(bob)
    run = finished_run(personal, by=alice)
    for url in [
        f"/skills/triggers/packages/{personal.pk}/",
        f"/skills/triggers/packages/{personal.pk}/export.json",
        f"/skills/triggers/packages/{personal.pk}/plan/",
        f"/skills/triggers/runs/{run.pk}/",
    ]:
        response = stranger.get(url)
        assert response.status_code == 404, url
        assert "ALICE-PRIVATE-QUERY" not in response.content.decode()
    query = personal.trigger_queries.get()
    for url in [
        f"/skills/triggers/packages/{personal.pk}/queries/add/",
        f"/skills/triggers/packages/{personal.pk}/queries/{query.pk}/edit/",
        f"/skills/triggers/packages/{personal.pk}/queries/{query.pk}/remove/",
        f"/skills/triggers/runs/{run.pk}/stop/",
    ]:
        assert stranger.post(url, {"query": "pwned", "expectation": "no"}).status_code == 404, url
    assert personal.trigger_queries.get().query == "ALICE-PRIVATE-QUERY"
    for page in ["/skills/triggers/", "/skills/triggers/collisions/"]:
        assert "alice-secret" not in stranger.get(page).content.decode()


def test_a_skill_manager_does_not_see_someone_elses_personal_set(personal, skill_manager):
    client = login(skill_manager)
    assert client.get(f"/skills/triggers/packages/{personal.pk}/").status_code == 404
    assert "alice-secret" not in client.get("/skills/triggers/").content.decode()


def test_the_audit_list_of_trigger_runs_is_for_auditors(
    org, personal, alice, auditor, skill_manager
):
    run = finished_run(org["pdf-tables"], by=skill_manager)
    finished_run(personal, by=alice)
    assert login(alice).get("/audit/trigger-runs/").status_code == 403
    assert login(skill_manager).get("/audit/trigger-runs/").status_code == 403
    page = login(auditor).get("/audit/trigger-runs/").content.decode()
    assert f'id="audit-trigger-{run.pk}"' in page and "alice-secret" in page
    assert 'data-count="runs">2<' in page


# --- the editor ------------------------------------------------------------------------------------


def test_queries_are_edited_and_removed(org, skill_manager):
    client = login(skill_manager)
    package = org["pdf-tables"]
    row = package.trigger_queries.first()
    response = client.post(
        f"/skills/triggers/packages/{package.pk}/queries/{row.pk}/edit/",
        {"query": "  a better query  ", "expectation": "no", "held_out": "on"},
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.query, row.should_trigger, row.held_out) == ("a better query", False, True)
    client.post(f"/skills/triggers/packages/{package.pk}/queries/{row.pk}/remove/")
    assert not TriggerQuery.objects.filter(pk=row.pk).exists()


def test_a_duplicate_an_empty_or_a_slash_query_is_refused_with_what_to_do(org, skill_manager):
    client = login(skill_manager)
    package = org["pdf-tables"]
    url = f"/skills/triggers/packages/{package.pk}/queries/add/"
    for data, message in [
        ({"query": CASES[0].query.upper(), "expectation": "yes"}, "already in the set"),
        ({"query": "   ", "expectation": "yes"}, "Write the query"),
        ({"query": "/pdf-tables now", "expectation": "yes"}, "starts with /"),
        ({"query": "fine"}, "Say whether the skill should be chosen"),
    ]:
        response = client.post(url, data)
        assert response.status_code == 400 and message in response.content.decode(), data
    assert package.trigger_queries.count() == len(CASES)


def test_a_set_is_exported_and_imported_as_json(org, skill_manager):
    client = login(skill_manager)
    source, target = org["pdf-tables"], org["slide-deck"]
    exported = client.get(f"/skills/triggers/packages/{source.pk}/export.json")
    assert exported["Content-Type"] == "application/json"
    assert 'filename="pdf-tables-trigger.json"' in exported["Content-Disposition"]
    data = json.loads(exported.content)
    assert data == [c.as_json() for c in CASES]
    response = client.post(
        f"/skills/triggers/packages/{target.pk}/import/", {"text": exported.content.decode()}
    )
    assert (
        response.status_code == 200 and f"added {len(CASES)} queries" in response.content.decode()
    )
    again = client.post(
        f"/skills/triggers/packages/{target.pk}/import/", {"text": exported.content.decode()}
    )
    assert f"{len(CASES)} already in the set" in again.content.decode()
    replaced = client.post(
        f"/skills/triggers/packages/{target.pk}/import/",
        {"text": '[{"query": "only this", "should_trigger": true}]', "replace": "on"},
    )
    assert "replaced" in replaced.content.decode()
    assert list(target.trigger_queries.values_list("query", flat=True)) == ["only this"]


def test_bad_json_is_refused_with_a_clear_error_and_nothing_changes(org, skill_manager):
    client = login(skill_manager)
    package = org["slide-deck"]
    url = f"/skills/triggers/packages/{package.pk}/import/"
    for text, message in [
        ('[{"query": "x", "should_trigger": "yes"}', "not valid JSON (line 1"),
        ('[{"query": "x", "should_trigger": "yes"}]', "must be true or false (without quotes)"),
        ('{"skill": "x"}', "got an object"),
        (
            '{"skill_name": "x", "evals": [{"id": 1, "prompt": "p", "expected_output": "o"}]}',
            "output-quality eval file",
        ),
    ]:
        response = client.post(url, {"text": text})
        page = response.content.decode()
        assert response.status_code == 400 and 'id="import-error"' in page
        assert message.replace('"', "&quot;") in page or message in page, message
    from django.core.files.uploadedfile import SimpleUploadedFile

    binary = SimpleUploadedFile("set.json", b"\xff\xfe\x00bad", content_type="application/json")
    response = client.post(url, {"file": binary})
    assert response.status_code == 400 and "not UTF-8 text" in response.content.decode()
    assert package.trigger_queries.count() == 0


# --- sets shipped with a skill ---------------------------------------------------------------------


def test_an_upload_picks_up_evals_trigger_json_and_keeps_later_edits(tmp_path, skill_manager):
    shipped = {"evals/trigger.json": cases_json()}
    folder = skill_folder(tmp_path / "a", "pdf-tables", "Extract tables.", extra=shipped)
    result = uploads.install_directory(folder, user=skill_manager)[0]
    assert f"trigger set from evals/trigger.json: added {len(CASES)} queries" in result.message
    package = result.package
    assert [q.origin for q in package.trigger_queries.all()] == ["upload"] * len(CASES)
    edited = package.trigger_queries.first()
    sets.edit_query(edited, "an edited query", True, held_out=False)
    more = json.loads(cases_json()) + [{"query": "a new one", "should_trigger": False}]
    folder = skill_folder(
        tmp_path / "b",
        "pdf-tables",
        "Extract tables, v2.",
        extra={"evals/trigger.json": json.dumps(more)},
    )
    second = uploads.install_directory(folder, user=skill_manager)[0]
    assert "added 2 queries" in second.message  # the new one, and the edited one's original
    assert package.trigger_queries.filter(query="an edited query").exists()
    assert package.trigger_queries.count() == len(CASES) + 2


def test_a_broken_shipped_set_is_a_warning_not_a_refused_upload(tmp_path, skill_manager):
    folder = skill_folder(
        tmp_path, "pdf-tables", "Extract tables.", extra={"evals/trigger.json": "[{oops"}
    )
    result = uploads.install_directory(folder, user=skill_manager)[0]
    assert result.created and result.package.trigger_queries.count() == 0
    warning = next(w for w in result.warnings if w.rule == "trigger-set")
    assert "evals/trigger.json was not imported: This is not valid JSON" in warning.message


def test_an_upload_picks_up_the_files_authors_ship_under_their_names(tmp_path, skill_manager):
    """skill-creator's evals/trigger-eval.json and the Agent Skills guide's eval_queries.json."""
    items = [
        {"query": f"pull the tables out of report {i}", "should_trigger": True} for i in range(23)
    ]
    items.insert(5, {"query": "/pdf-tables report.pdf", "should_trigger": True})
    shipped = {
        "evals/trigger-eval.json": json.dumps(items),
        "evals/eval_queries.json": json.dumps([{"query": "write a poem", "should_trigger": False}]),
    }
    folder = skill_folder(tmp_path, "pdf-tables", "Extract tables.", extra=shipped)
    result = uploads.install_directory(folder, user=skill_manager)[0]
    assert (
        "trigger set from evals/trigger-eval.json: added 23 queries (1 slash-command query skipped)"
        in result.message
    )
    assert "trigger set from evals/eval_queries.json: added 1 query" in result.message
    assert result.package.trigger_queries.count() == 24
    assert not [w for w in result.warnings if w.rule == "trigger-set"]


def test_one_unreadable_shipped_file_does_not_lose_the_others(tmp_path, skill_manager):
    evals = {
        "skill_name": "pdf-tables",
        "evals": [{"id": 1, "prompt": "p", "expected_output": "o"}],
    }
    shipped = {
        "evals/trigger.json": json.dumps(evals),
        "evals/trigger-eval.json": cases_json(),
    }
    folder = skill_folder(tmp_path, "pdf-tables", "Extract tables.", extra=shipped)
    result = uploads.install_directory(folder, user=skill_manager)[0]
    assert result.package.trigger_queries.count() == len(CASES)
    warning = next(w for w in result.warnings if w.rule == "trigger-set")
    assert warning.message.startswith(
        "evals/trigger.json was not imported: This is skill-creator's output-quality eval file"
    )


def test_a_changed_description_offers_trigger_tests_after_upload(
    tmp_path, skill_manager, admin_user
):
    from tests.review_helpers import approve, reviewer_user
    from tests.upload_helpers import make_zip, skill_md

    client = login(admin_user)
    first = make_zip({"pdf-tables/SKILL.md": skill_md("pdf-tables", "Extract tables.")})
    client.post("/admin/skills_app/skillpackage/upload/", {"archive": _file(first)})
    v1 = SkillPackage.objects.get(name="pdf-tables").versions.get()
    approve(v1, reviewer_user())
    review.activate(v1, reviewer_user())
    second = make_zip({"pdf-tables/SKILL.md": skill_md("pdf-tables", "Pull invoices apart.")})
    page = client.post(
        "/admin/skills_app/skillpackage/upload/", {"archive": _file(second), "candidate": "on"}
    ).content.decode()
    package = SkillPackage.objects.get(name="pdf-tables")
    v1, v2 = package.versions.order_by("number")
    assert package.active_version_id == v1.pk  # a draft: v1 stays active
    assert "goes live for others after its review" in page and "Its description differs" in page
    assert f"/skills/triggers/packages/{package.pk}/?version={v2.pk}#run" in page
    # Compared with the active version (v1), not the candidate: same description, new body.
    same_text = make_zip(
        {"pdf-tables/SKILL.md": skill_md("pdf-tables", "Extract tables.", body="Other body.")}
    )
    third = client.post(
        "/admin/skills_app/skillpackage/upload/", {"archive": _file(same_text)}
    ).content.decode()
    assert "Run trigger tests on version 3" not in third  # the description did not change


def _file(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("pdf-tables.zip", data, content_type="application/zip")


# --- the admin's activation, the report's comparison, collisions ----------------------------------


def test_the_activation_page_shows_the_candidates_trigger_tests_beside_the_active_ones(
    org, tmp_path, skill_manager, admin_user
):
    package = org["pdf-tables"]
    folder = skill_folder(tmp_path / "v2", "pdf-tables", "Pull invoices apart.")
    candidate = uploads.install_directory(folder, user=skill_manager, activate=False)[0].version
    from tests.review_helpers import approve, reviewer_user

    approve(candidate, reviewer_user())  # the admin activates only approved versions
    finished_run(package, triggered=3)
    finished_run(package, version=candidate, triggered=1, chosen={"slide-deck": 2})
    client = login(admin_user)
    url = f"/admin/skills_app/skillpackage/{package.pk}/activate/{candidate.pk}/"
    page = client.get(url).content.decode()
    assert 'id="activation-comparison"' in page
    assert "v2 (to activate)" in page and "v1 (active)" in page
    assert "33 %" in page and "100 %" in page  # recall of each
    change = client.get(f"/admin/skills_app/skillpackage/{package.pk}/change/").content.decode()
    assert "Compare trigger tests and activate" in change and "recall 33 %" in change
    assert client.post(url).status_code == 302
    package.refresh_from_db()
    assert package.active_version_id == candidate.pk


def test_collisions_show_which_skill_takes_whose_queries(org, skill_manager):
    finished_run(org["pdf-tables"], triggered=1, chosen={"slide-deck": 2})
    finished_run(org["slide-deck"], triggered=3)
    page = login(skill_manager).get("/skills/triggers/collisions/").content.decode()
    assert 'data-victim="pdf-tables" data-thief="slide-deck"' in page
    assert "67 %" in page  # 2 of pdf-tables' 3 attempts
    assert 'data-chosen="slide-deck">2<' in page


def test_no_page_ever_shows_a_skill_body(org, personal, auditor, skill_manager, alice):
    run = finished_run(org["pdf-tables"], by=skill_manager)
    pages = {
        skill_manager: [
            "/skills/triggers/",
            f"/skills/triggers/packages/{org['pdf-tables'].pk}/",
            f"/skills/triggers/packages/{org['pdf-tables'].pk}/plan/?version={org['pdf-tables'].active_version_id}&model=claude-opus-4-8&profile=meta-message&repetitions=1",
            f"/skills/triggers/runs/{run.pk}/",
            "/skills/triggers/collisions/",
        ],
        auditor: [f"/skills/triggers/runs/{run.pk}/", "/audit/trigger-runs/"],
        alice: [f"/skills/triggers/packages/{personal.pk}/"],
    }
    for user, urls in pages.items():
        client = login(user)
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            assert BODY_MARKER not in response.content.decode(), url
