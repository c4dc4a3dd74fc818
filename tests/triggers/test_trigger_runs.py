"""Trigger runs end to end: the pages, the real SDK and the fake API choosing by the documented
rule, inline and through the worker hook; what is sent, what is counted, stopping, failures."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from skills_app.core.agent import SYSTEM_PROMPT
from skills_app.core.pricing import cost_usd
from skills_app.models import (
    Conversation,
    Message,
    ModelCall,
    Run,
    SkillInvocation,
    TriggerResult,
    TriggerRun,
    Worker,
)
from skills_app.registry import uploads
from skills_app.runs import supervisor, tasks
from skills_app.triggers import executor, runs
from tests.support.fake_anthropic import TEST_MODEL, Reply, without_cache_control
from tests.support.fake_anthropic_choice import OUTPUT_TOKENS, skill_chooser
from tests.support.loop_helpers import accepted, run_turn, use_fake_model
from tests.support.trigger_helpers import (
    BODY_MARKER,
    CASES,
    give_cases,
    install_org_skills,
    isolate_skills,
    skill_folder,
    wait_for,
    wait_for_trigger_run,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def org(settings, tmp_path, skill_manager, fake_anthropic):
    """Three organisation skills, pdf-tables with the known trigger set, the fake API choosing."""
    isolate_skills(settings, tmp_path)
    use_fake_model(settings, fake_anthropic)
    settings.RUN_EXECUTOR = "inline"
    settings.TRIGGER_CONCURRENCY = 2
    fake_anthropic.set_responder(skill_chooser())
    packages = install_org_skills(tmp_path, skill_manager)
    give_cases(packages["pdf-tables"])
    return packages


async def client_for(user):
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    return client


async def start(
    client, package, *, version=None, profile="meta-message", repetitions=2, model=TEST_MODEL
):
    version_id = version or package.active_version_id
    response = await client.post(
        f"/skills/triggers/packages/{package.pk}/runs/",
        {"version": version_id, "model": model, "profile": profile, "repetitions": repetitions},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return await TriggerRun.objects.order_by("-pk").afirst()


def expected_counts(repetitions):
    return {"tp": 2 * repetitions, "fn": repetitions, "fp": repetitions, "tn": repetitions}


async def counts(run):
    rows = [r async for r in TriggerResult.objects.filter(run=run).order_by("position")]
    tp = sum(r.triggered for r in rows if r.should_trigger)
    fn = sum(r.attempts - r.triggered for r in rows if r.should_trigger)
    fp = sum(r.triggered for r in rows if not r.should_trigger)
    tn = sum(r.attempts - r.triggered for r in rows if not r.should_trigger)
    return {"tp": tp, "fn": fn, "fp": fp, "tn": tn}, rows


async def test_a_run_sends_each_query_as_a_new_conversations_first_message(
    org, skill_manager, fake_anthropic
):
    client = await client_for(skill_manager)
    package = org["pdf-tables"]
    plan = await client.get(
        f"/skills/triggers/packages/{package.pk}/plan/",
        {
            "version": package.active_version_id,
            "model": TEST_MODEL,
            "profile": "meta-message",
            "repetitions": 2,
        },
    )
    page = plan.content.decode()
    assert plan.status_code == 200
    assert (
        "5 queries × 2 = 10" in page and "about $" in page
    )  # the estimate, before anything is spent
    assert not accepted(fake_anthropic)

    run = await wait_for_trigger_run((await start(client, package)).pk)
    assert run.status == TriggerRun.DONE, run.error
    got, rows = await counts(run)
    assert got == expected_counts(2)
    assert rows[2].chosen == {"slide-deck": 2}  # the missed trigger, and who took it

    sent = accepted(fake_anthropic)
    assert len(sent) == 10  # 5 queries x 2, and no second call after a skill call
    for request in sent:
        assert len(request["messages"]) == 1 and request["messages"][0]["role"] == "user"
        assert request.system_text == SYSTEM_PROMPT
        catalog = next(t for t in request["tools"] if t["name"] == "Skill")["description"]
        assert all(f'"{name}"' in catalog for name in org)
        assert BODY_MARKER not in str(request)
    texts = sorted(r["messages"][0]["content"][0]["text"] for r in sent)
    assert texts == sorted([c.query for c in CASES] * 2)

    # Measured cost: exactly the usage the API reported for those calls, at the model's price.
    expected = sum(cost_usd(r["model"], {**r.usage, "output_tokens": OUTPUT_TOKENS}) for r in sent)
    assert run.cost_usd == expected and run.cost_usd > 0
    assert run.input_tokens == sum(r.usage["input_tokens"] for r in sent)
    assert run.output_tokens == OUTPUT_TOKENS * len(sent)
    assert run.estimated_cost_usd is not None and run.estimated_cost_usd > 0

    # Apart from conversations: nothing a conversation or the audit's usage figures count.
    assert await Conversation.objects.acount() == 0
    assert await Message.objects.acount() == 0
    assert await Run.objects.acount() == 0
    assert await ModelCall.objects.acount() == 0
    assert await SkillInvocation.objects.acount() == 0

    report = (await client.get(f"/skills/triggers/runs/{run.pk}/")).content.decode()
    assert "67 %" in report  # precision 4/6 and recall 4/6
    assert "6 of 10 attempts right" in report
    assert (
        "turn my outline into a slide presentation" in report
        and "<code>slide-deck</code>" in report
    )
    assert 'data-kind="false"' in report and "convert these pdf files" in report
    assert "<svg" in report and report.count('data-series="this"') == 5
    assert BODY_MARKER not in report


async def test_the_probe_request_is_what_a_real_conversation_sends_first(
    org, alice, fake_anthropic
):
    query = "what is the capital of France"
    conversation = await Conversation.objects.acreate(owner=alice, title="real")
    await run_turn(conversation, query, alice)
    real = accepted(fake_anthropic)[0]
    client = await client_for(
        await sync_to_async(lambda: org["pdf-tables"].versions.first().uploaded_by)()
    )
    package = org["pdf-tables"]
    await wait_for_trigger_run((await start(client, package, repetitions=1)).pk)
    probe = next(
        r for r in accepted(fake_anthropic)[1:] if r["messages"][0]["content"][0]["text"] == query
    )
    assert probe.system_text == real.system_text
    assert without_cache_control(probe["tools"]) == without_cache_control(real["tools"])
    assert without_cache_control(probe["messages"]) == without_cache_control(real["messages"])
    assert {k: v for k, v in probe.items() if k not in ("messages", "tools", "system")} == {
        k: v for k, v in real.items() if k not in ("messages", "tools", "system")
    }


@pytest.mark.parametrize("profile", ["tool-result", "system-prompt"])
async def test_every_delivery_profile_is_read_through_its_own_tools(
    org, skill_manager, fake_anthropic, profile
):
    client = await client_for(skill_manager)
    run = await wait_for_trigger_run(
        (await start(client, org["pdf-tables"], profile=profile, repetitions=1)).pk
    )
    assert run.status == TriggerRun.DONE, run.error
    got, _rows = await counts(run)
    assert got == expected_counts(1)
    names = {t["name"] for r in accepted(fake_anthropic) for t in r["tools"]}
    assert "Skill" not in names  # these profiles offer their own loaders


async def test_the_demo_model_gives_the_same_answers_and_says_so(org, skill_manager, settings):
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"
    client = await client_for(skill_manager)
    run = await wait_for_trigger_run((await start(client, org["pdf-tables"])).pk)
    assert run.status == TriggerRun.DONE and run.is_demo
    assert (await counts(run))[0] == expected_counts(2)
    assert run.cost_usd is None and run.estimated_cost_usd is None
    report = (await client.get(f"/skills/triggers/runs/{run.pk}/")).content.decode()
    assert "offline demo model" in report and "no cost (demo model)" in report


async def test_a_candidate_is_measured_with_its_own_description_and_compared(
    org, skill_manager, fake_anthropic, tmp_path
):
    client = await client_for(skill_manager)
    package = org["pdf-tables"]
    first = await wait_for_trigger_run((await start(client, package, repetitions=1)).pk)
    folder = skill_folder(tmp_path / "v2", "pdf-tables", "Pull totals out of scanned invoices.")
    result = (
        await sync_to_async(uploads.install_directory)(folder, user=skill_manager, activate=False)
    )[0]
    assert result.candidate and result.description_changed
    await package.arefresh_from_db()
    assert package.active_version_id == first.version_id  # the active version stays
    before = len(accepted(fake_anthropic))
    run = await wait_for_trigger_run(
        (await start(client, package, version=result.version.pk, repetitions=1)).pk
    )
    assert run.version_state == "candidate" and run.version_number == 2
    sent = accepted(fake_anthropic)[before:]
    catalog = next(t for t in sent[0]["tools"] if t["name"] == "Skill")["description"]
    assert "scanned invoices" in catalog and "Extract tables from PDF" not in catalog
    got, _rows = await counts(run)
    # The name still carries "pdf" and "tables"; without "files" and "spreadsheets" in the new
    # wording, the near miss no longer triggers.
    assert got == {"tp": 2, "fn": 1, "fp": 0, "tn": 2}
    report = (await client.get(f"/skills/triggers/runs/{run.pk}/")).content.decode()
    assert f'Compared: v1 <a href="/skills/triggers/runs/{first.pk}/">' in report


async def test_a_run_can_be_stopped_while_under_way_and_keeps_what_it_had(
    org, skill_manager, fake_anthropic, settings
):
    settings.TRIGGER_CONCURRENCY = 1
    hold, reached = threading.Event(), threading.Event()
    fake_anthropic.set_responder(skill_chooser(hold=hold, after=3, reached=reached))
    client = await client_for(skill_manager)
    try:
        run = await start(client, org["pdf-tables"])
        await wait_for(lambda: sync_to_async(reached.is_set)(), what="the fourth answer waiting")
        live = (
            await client.get(f"/skills/triggers/runs/{run.pk}/", HTTP_HX_REQUEST="true")
        ).content.decode()
        assert 'hx-trigger="every 1s"' in live and "3 of 10 model calls" in live
        response = await client.post(f"/skills/triggers/runs/{run.pk}/stop/")
        assert response.status_code == 302
        stopped = await wait_for_trigger_run(run.pk)
    finally:
        hold.set()
    assert stopped.status == TriggerRun.STOPPED and stopped.attempts_done == 3
    results = [r async for r in TriggerResult.objects.filter(run=stopped)]
    assert sum(r.attempts + r.errors for r in results) == 3
    page = (
        await client.get(f"/skills/triggers/runs/{run.pk}/", HTTP_HX_REQUEST="true")
    ).content.decode()
    assert 'hx-trigger="every' not in page and "Stopped" in page


async def test_with_the_worker_executor_a_run_waits_for_a_worker_to_claim_it(
    org, skill_manager, fake_anthropic, settings
):
    settings.RUN_EXECUTOR = "worker"
    client = await client_for(skill_manager)
    run = await start(client, org["pdf-tables"], repetitions=1)
    assert run.status == TriggerRun.QUEUED and not accepted(fake_anthropic)
    # The worker loop's hook: claims it (once), executes it as a task of the worker's loop.
    assert await executor.claim_and_start(worker="worker-a") == 1
    assert await executor.claim_and_start(worker="worker-b") == 0
    done = await wait_for_trigger_run(run.pk)
    assert done.status == TriggerRun.DONE and done.worker == "worker-a"
    assert (await counts(done))[0] == expected_counts(1)


async def test_a_queued_run_stopped_before_a_worker_comes_never_starts(
    org, skill_manager, fake_anthropic, settings
):
    settings.RUN_EXECUTOR = "worker"
    client = await client_for(skill_manager)
    run = await start(client, org["pdf-tables"], repetitions=1)
    await client.post(f"/skills/triggers/runs/{run.pk}/stop/")
    assert await executor.claim_and_start(worker="worker-a") == 0
    await run.arefresh_from_db()
    assert run.status == TriggerRun.STOPPED and not accepted(fake_anthropic)


async def test_a_run_whose_heartbeat_went_stale_is_interrupted_and_its_task_gives_up(
    org, skill_manager, fake_anthropic, settings
):
    settings.TRIGGER_CONCURRENCY = 1
    settings.RUN_HEARTBEAT_SECONDS = 600  # one beat at the start, then silence
    hold, reached = threading.Event(), threading.Event()
    fake_anthropic.set_responder(skill_chooser(hold=hold, after=1, reached=reached))
    client = await client_for(skill_manager)
    try:
        run = await start(client, org["pdf-tables"])
        await wait_for(lambda: sync_to_async(reached.is_set)(), what="the second answer waiting")
        # As if its process had died: the heartbeat is older than RUN_STALE_SECONDS.
        await TriggerRun.objects.filter(pk=run.pk).aupdate(heartbeat_at="2000-01-01T00:00:00Z")
        assert await sync_to_async(runs.interrupt_stale)() == 1
    finally:
        hold.set()

    # The held answer arrives after the sweep: it is dropped and the task stops asking.
    async def task_ended() -> bool:
        return not tasks.executing_here(runs.TRIGGER_RUNS, run.pk)

    await wait_for(task_ended, what="the task ending")
    await run.arefresh_from_db()
    assert run.status == TriggerRun.INTERRUPTED and "heartbeat went stale" in run.error
    assert run.attempts_done == 1 and len(accepted(fake_anthropic)) == 2


async def test_a_stopping_process_marks_its_trigger_runs_interrupted_not_stopped(
    org, skill_manager, fake_anthropic, settings
):
    """Trigger runs are jobs of the process's one table (`runs.tasks`): the process's give-up
    (daphne's shutdown) ends them with agent runs, and says why."""
    settings.TRIGGER_CONCURRENCY = 1
    hold, reached = threading.Event(), threading.Event()
    fake_anthropic.set_responder(skill_chooser(hold=hold, after=1, reached=reached))
    client = await client_for(skill_manager)
    try:
        run = await start(client, org["pdf-tables"])
        await wait_for(lambda: sync_to_async(reached.is_set)(), what="the second answer waiting")
        assert tasks.executing_ids(runs.TRIGGER_RUNS) == [run.pk]
        await supervisor.give_up()
    finally:
        hold.set()
    assert not tasks.executing_here(runs.TRIGGER_RUNS, run.pk)
    await run.arefresh_from_db()
    assert run.status == TriggerRun.INTERRUPTED and run.error == executor.GAVE_UP_TEXT
    assert run.attempts_done == 1


async def test_a_stale_run_is_swept_by_the_pages(org, skill_manager, settings):
    run = await TriggerRun.objects.acreate(
        package=org["pdf-tables"], skill="pdf-tables", version_number=1, version_digest="x",
        version_state="active", model=TEST_MODEL, profile="meta-message", status=TriggerRun.RUNNING,
        heartbeat_at="2000-01-01T00:00:00Z", started_by=skill_manager,
    )  # fmt: skip
    client = await client_for(skill_manager)
    page = (await client.get(f"/skills/triggers/runs/{run.pk}/")).content.decode()
    await run.arefresh_from_db()
    assert run.status == TriggerRun.INTERRUPTED and "heartbeat went stale" in page


async def test_a_run_of_a_worker_taken_for_dead_is_interrupted_before_its_heartbeat_ages(
    org, skill_manager, settings
):
    """The same test of a gone process as agent runs: a buried worker's runs, however fresh
    their last beat, and nobody else's."""
    now = timezone.now()
    await Worker.objects.acreate(
        name="dead", started_at=now, heartbeat_at=now, stopped_at=now, stop_reason="no heartbeat"
    )
    await Worker.objects.acreate(name="alive", started_at=now, heartbeat_at=now)
    orphan, live = [
        await TriggerRun.objects.acreate(
            package=org["pdf-tables"],
            skill="pdf-tables",
            version_number=1,
            version_digest="x",
            version_state="active",
            model=TEST_MODEL,
            profile="meta-message",
            status=TriggerRun.RUNNING,
            heartbeat_at=now,
            started_by=skill_manager,
            worker=worker,
        )  # fmt: skip
        for worker in ("dead", "alive")
    ]
    assert await sync_to_async(runs.interrupt_stale)() == 1
    await orphan.arefresh_from_db()
    await live.arefresh_from_db()
    assert orphan.status == TriggerRun.INTERRUPTED and live.status == TriggerRun.RUNNING


async def test_an_error_no_retry_can_fix_ends_the_run_at_once(
    org, skill_manager, fake_anthropic, settings
):
    settings.TRIGGER_CONCURRENCY = 1
    fake_anthropic.enqueue(Reply.error(401, "authentication_error", "invalid x-api-key"))
    client = await client_for(skill_manager)
    run = await wait_for_trigger_run((await start(client, org["pdf-tables"])).pk)
    assert run.status == TriggerRun.FAILED and "API key" in run.error
    assert len(fake_anthropic.requests) == 1 and run.attempts_done == 1


async def test_one_active_run_per_person(org, skill_manager, settings):
    settings.RUN_EXECUTOR = "worker"  # stays queued
    client = await client_for(skill_manager)
    first = await start(client, org["pdf-tables"])
    response = await client.post(
        f"/skills/triggers/packages/{org['pdf-tables'].pk}/runs/",
        {
            "version": org["pdf-tables"].active_version_id,
            "model": TEST_MODEL,
            "profile": "meta-message",
            "repetitions": 1,
        },
    )
    assert response.status_code == 400
    assert f"Your trigger run #{first.pk}" in response.content.decode()
    assert await TriggerRun.objects.acount() == 1


async def test_bad_run_choices_are_refused_with_what_to_pick(org, skill_manager):
    client = await client_for(skill_manager)
    package = org["pdf-tables"]
    url = f"/skills/triggers/packages/{package.pk}/plan/"
    base = {
        "version": package.active_version_id,
        "model": TEST_MODEL,
        "profile": "meta-message",
        "repetitions": 3,
    }
    for change, message in [
        ({"model": "gpt-4"}, "Choose one of the offered models"),
        ({"profile": "nope"}, "Choose a delivery profile"),
        ({"repetitions": "0"}, "Repetitions must be a whole number from 1 to 10"),
        (
            {"version": org["slide-deck"].active_version_id},
            "Choose one of the versions of pdf-tables",
        ),
    ]:
        response = await client.get(url, {**base, **change})
        assert response.status_code == 400 and message in response.content.decode()
    assert await TriggerRun.objects.acount() == 0


async def test_a_trigger_run_costs_what_its_rows_say_and_nothing_elsewhere(
    org, skill_manager, auditor
):
    client = await client_for(skill_manager)
    run = await wait_for_trigger_run((await start(client, org["pdf-tables"])).pk)
    audit = await client_for(auditor)
    home = (await audit.get("/audit/")).content.decode()
    assert 'data-count="total">0<' in home
    costs = (await audit.get("/audit/costs/")).content.decode()
    assert "pdf-tables" not in costs
    listing = (await audit.get("/audit/trigger-runs/")).content.decode()
    assert f'id="audit-trigger-{run.pk}"' in listing and "mona" in listing
    assert run.cost_usd is not None and run.cost_usd > Decimal(0)
    assert f"${run.cost_usd.quantize(Decimal('0.0001'))}" in listing
