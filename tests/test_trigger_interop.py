"""Trigger runs out to skill-creator's scripts (run_eval's results shape), and the review gate."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from skills_app.core.triggers.cases import read_set
from skills_app.models import TriggerRun
from skills_app.registry import trigger_sets as sets
from skills_app.registry.trigger_gate import trigger_gate
from tests.fake_anthropic import TEST_MODEL
from tests.fake_anthropic_choice import skill_chooser
from tests.loop_helpers import use_fake_model
from tests.trigger_helpers import (
    CASES,
    give_cases,
    install_org_skills,
    isolate_skills,
    wait_for_trigger_run,
)

pytestmark = pytest.mark.django_db(transaction=True)

# Every one of these passes with the fake API's chooser (see CASES for why each is chosen or not).
PASSING = [CASES[0], CASES[1], CASES[3]]


@pytest.fixture
def org(settings, tmp_path, skill_manager, fake_anthropic):
    isolate_skills(settings, tmp_path)
    use_fake_model(settings, fake_anthropic)
    settings.RUN_EXECUTOR = "inline"
    settings.TRIGGER_CONCURRENCY = 2
    fake_anthropic.set_responder(skill_chooser())
    return install_org_skills(tmp_path, skill_manager)


async def client_for(user):
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


async def run_on_active(client, package, repetitions=2):
    response = await client.post(
        f"/skills/triggers/packages/{package.pk}/runs/",
        {
            "version": package.active_version_id,
            "model": TEST_MODEL,
            "profile": "meta-message",
            "repetitions": repetitions,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = await TriggerRun.objects.order_by("-pk").afirst()
    return await wait_for_trigger_run(run.pk)


# -- results in skill-creator's run_eval shape ---------------------------------------------------


async def test_a_finished_run_exports_in_run_evals_shape_and_reimports_as_its_set(
    org, skill_manager, bob
):
    package = org["pdf-tables"]
    await sync_to_async(give_cases)(package)
    client = await client_for(skill_manager)
    run = await run_on_active(client, package)
    assert run.status == TriggerRun.DONE, run.error

    response = await client.get(f"/skills/triggers/runs/{run.pk}/results.json")
    assert response.status_code == 200
    data = response.json()
    assert set(data) == {"skill_name", "description", "results", "summary"}
    assert data["skill_name"] == "pdf-tables"
    assert data["description"] == "Extract tables from PDF files into spreadsheets."
    assert [set(r) for r in data["results"]] == [
        {"query", "should_trigger", "trigger_rate", "triggers", "runs", "pass"}
    ] * len(CASES)
    by_query = {r["query"]: r for r in data["results"]}
    first = by_query[CASES[0].query]
    assert (first["triggers"], first["runs"], first["trigger_rate"], first["pass"]) == (
        2,
        2,
        1.0,
        True,
    )
    missed = by_query[CASES[2].query]  # slide-deck takes it
    assert (missed["trigger_rate"], missed["pass"]) == (0.0, False)
    assert data["summary"] == {"total": 5, "passed": 3, "failed": 2}
    # The file skill-creator writes reads back as the set it measured.
    assert read_set(response.content.decode()).cases == CASES

    outsider = await client_for(bob)
    assert (await outsider.get(f"/skills/triggers/runs/{run.pk}/results.json")).status_code == 404


async def test_a_run_not_done_has_no_results_to_export(org, skill_manager):
    package = org["pdf-tables"]
    await sync_to_async(give_cases)(package)
    client = await client_for(skill_manager)
    run = await run_on_active(client, package)
    await TriggerRun.objects.filter(pk=run.pk).aupdate(status=TriggerRun.Status.RUNNING)
    response = await client.get(f"/skills/triggers/runs/{run.pk}/results.json")
    assert response.status_code == 409
    assert "results are exported when it is done" in response.json()["error"]


# -- the gate -------------------------------------------------------------------------------------


async def verdict(package):
    await package.arefresh_from_db()
    version = await sync_to_async(lambda: package.active_version)()
    return await sync_to_async(trigger_gate)(version)


async def test_the_gate_is_off_by_default_and_lets_everything_through(org):
    ok, reason = await verdict(org["pdf-tables"])
    assert ok and reason == "The trigger gate is off for this skill."


async def test_with_the_gate_on_a_version_needs_a_passing_run_on_itself(org, skill_manager):
    package = org["pdf-tables"]
    client = await client_for(skill_manager)
    response = await client.post(
        f"/skills/triggers/packages/{package.pk}/gate/", {"trigger_gate": "on"}
    )
    assert response.status_code == 302
    ok, reason = await verdict(package)
    assert not ok and "has no trigger set" in reason

    await sync_to_async(give_cases)(package, PASSING)
    ok, reason = await verdict(package)
    assert not ok and "run the trigger tests on version 1 before submitting" in reason

    run = await run_on_active(client, package)
    ok, reason = await verdict(package)
    assert ok, reason
    assert reason == f"Trigger run #{run.pk} on version 1 passed all 3 queries."

    # A query added after the run: the run no longer speaks for the set.
    await sync_to_async(sets.import_cases)(package, [CASES[2]])
    ok, reason = await verdict(package)
    assert not ok and "predates 1 query of the current set" in reason

    # Run again: that query fails (another skill takes it), and the gate says which.
    run = await run_on_active(client, package)
    ok, reason = await verdict(package)
    assert not ok
    assert reason.startswith(f"Trigger run #{run.pk} on version 1: 1 of 4 queries failed")
    assert "turn my outline into a slide presentation" in reason and "should trigger" in reason

    page = (await client.get(f"/skills/triggers/packages/{package.pk}/")).content.decode()
    assert 'id="gate-verdict"' in page and "1 of 4 queries failed" in page

    await client.post(f"/skills/triggers/packages/{package.pk}/gate/", {})
    ok, _reason = await verdict(package)
    assert ok


async def test_only_the_skills_managers_may_turn_the_gate(org, alice):
    package = org["pdf-tables"]
    client = await client_for(alice)
    response = await client.post(
        f"/skills/triggers/packages/{package.pk}/gate/", {"trigger_gate": "on"}
    )
    assert response.status_code in (403, 404)
    await package.arefresh_from_db()
    assert package.trigger_gate is False


async def test_the_review_refuses_a_submission_the_gate_holds_back(org, skill_manager, tmp_path):
    from skills_app.registry import review, uploads
    from skills_app.registry.review import ReviewError
    from tests.trigger_helpers import skill_folder

    package = org["pdf-tables"]
    await sync_to_async(give_cases)(package, PASSING)
    folder = skill_folder(tmp_path / "v2", "pdf-tables", "Extract tables from PDF files, v2.")
    [result] = await sync_to_async(uploads.install_directory)(folder, user=skill_manager)
    draft = result.version
    assert draft.review_status == "draft"

    package.trigger_gate = True
    await package.asave(update_fields=["trigger_gate"])
    with pytest.raises(ReviewError) as refused:
        await sync_to_async(review.submit)(draft, skill_manager)
    assert f"run the trigger tests on version {draft.number} before submitting" in str(
        refused.value
    )
    await draft.arefresh_from_db()
    assert draft.review_status == "draft"

    package.trigger_gate = False
    await package.asave(update_fields=["trigger_gate"])
    await sync_to_async(review.submit)(draft, skill_manager)
    await draft.arefresh_from_db()
    assert draft.review_status == "submitted"
