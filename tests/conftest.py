from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest

from tests.support import personas
from tests.support.migrated_sqlite import migrated_template

pytest_plugins = ["tests.support.fake_anthropic", "tests.support.oidc_server"]

# No per-example deadline: it is a timing assertion, and on a loaded machine (three workers on two
# cores) one example in thousands waits 0.4 s for a core and fails a property that holds. Speed
# targets live in bench/.
hypothesis.settings.register_profile("skillscope", deadline=None)
hypothesis.settings.load_profile("skillscope")

# Under pytest-xdist (scripts/test.sh runs three workers with --dist loadgroup), the tests that
# start their own servers stay together on one worker, in their usual order: the multi-process
# suite shares one PostgreSQL and one Redis, the browser tests one live server and one Chromium
# (and some browser tests see what earlier ones left on it, as in a serial run). Both suites are
# handed out first: the multi-process tests wait much of their six minutes (Redis stopped, a run
# queued with no worker, processes restarted), and the other workers fill the cores meanwhile.
# Measured, 2026-12-02: two lanes per suite on five workers (each lane its own servers) took
# longer (702 s against 617 s): the run is bound by the two cores, not by the lanes, and the
# extra servers only add to the load.
_ONE_WORKER = ("multiprocess", "browser")


# tryfirst: pytest-xdist's worker reads the xdist_group marks in its own hook of the same name,
# registered after this conftest (so called before it unless this one goes first).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def first(item: pytest.Item) -> int:
        for rank, name in enumerate(_ONE_WORKER):
            if item.get_closest_marker(name) is not None:
                return rank
        return len(_ONE_WORKER)

    items.sort(key=first)  # stable: the order within each suite stays
    for item in items:
        for name in _ONE_WORKER:
            if item.get_closest_marker(name) is not None:
                item.add_marker(pytest.mark.xdist_group(name))
                break


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Each test's start (seconds since the epoch), its worker, its time, its id and how it ended,
    one line per test in test-artifacts/timeline.tsv: which worker ran what, what came last, and
    which test failed even when a run is cut short before pytest's summary."""
    started = time.time()
    yield
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    outcome = _OUTCOMES.pop(item.nodeid, "passed")
    _TIMELINE.parent.mkdir(exist_ok=True)
    with _TIMELINE.open("a") as out:
        out.write(
            f"{started:.2f}\t{worker}\t{time.time() - started:.2f}\t{item.nodeid}\t{outcome}\n"
        )


# How each test of this process ended so far: "failed" (its call), "error" (its setup or
# teardown) or "skipped"; a test not named here passed.
_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _OUTCOMES[report.nodeid] = "failed" if report.when == "call" else "error"
    elif report.skipped:
        _OUTCOMES.setdefault(report.nodeid, "skipped")


_TIMELINE = Path(__file__).resolve().parents[1] / "test-artifacts" / "timeline.tsv"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Each run starts its own timeline (the workers only append to it)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        _TIMELINE.unlink(missing_ok=True)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under --dist loadgroup, each grouped test's id carries its group (pytest-xdist's way of
    telling its scheduler); if a pytest or pytest-xdist upgrade loses it, the suites would be
    spread over the workers in any order, so say so instead of running."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {len(lost)} tests (first: {lost[0]}): this pytest and "
            "pytest-xdist do not work together for --dist loadgroup (see pytest-xdist#1386); "
            "install the versions pyproject.toml names with scripts/setup.sh test."
        )


@pytest.fixture(autouse=True)
def _isolated_dirs(settings, tmp_path):
    """Every test gets its own workspaces and media folders."""
    settings.WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.APPROVAL_TIMEOUT = 5
    # Starting an MCP server is bounded, not paused for: on a busy machine (three workers on two
    # cores beside other work) a stdio server importing the SDK took over the default 10 s.
    # The tests of the bound set their own.
    settings.MCP_CONNECT_TIMEOUT = 60.0
    # Commands run sandboxed, as they do by default (SANDBOX=auto; without a sandbox they need
    # the "run unsandboxed commands" permission).
    settings.SANDBOX = "auto"
    # No title model: a title request would take the next scripted reply of the fake model.
    # Titles by the model have their own tests (tests/chat/test_chat_titles.py), which switch it on.
    settings.CHAT_TITLE_MODEL = ""
    # Every test client loads the middleware afresh, and WhiteNoise (with finders) lists every
    # static file when it loads: 15-30 ms per client, a minute of the test command. Looked up
    # per request instead, as WhiteNoise does in development; the static files served are the same.
    settings.WHITENOISE_AUTOREFRESH = True
    # Tests approve the versions they upload as whoever suits them, with several skill managers
    # around; the default rule (the approver differs once a second reviewer exists) has its
    # own tests (tests/registry/test_reviewer_must_differ.py), which unset this.
    settings.SKILL_REVIEWER_MUST_DIFFER = False


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Personas' passwords hashed in microseconds, not a quarter second each (PBKDF2's cost
    protects stored passwords, which tests have none of). The browser and multi-process tests
    make their users in their own servers, with the real hashers."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database to copy (tests/support/migrated_sqlite.py), one per run: the
    xdist workers of a run share their base temporary folder's parent."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    return migrated_template(shared / "migrated-sqlite")


@pytest.fixture
def alice(django_user_model):
    """The owner persona."""
    return personas.make_alice()


@pytest.fixture
def bob(django_user_model):
    """Another ordinary user: must never see alice's things."""
    return personas.make_bob()


@pytest.fixture
def auditor(django_user_model):
    """The Auditor role: staff, audit pages, the inspect-injected-content permission."""
    return personas.make_auditor()


@pytest.fixture
def skill_manager(django_user_model):
    """The Skill manager role: uploads, versions and rules in the admin; no audit."""
    from skills_app.accounts import roles

    user = django_user_model.objects.create_user("mona", password="mona-pass-123")
    roles.grant(user, roles.get_role("skill-manager"))
    return user


@pytest.fixture
def admin_user(django_user_model):
    return personas.make_admin()


@pytest.fixture
def conversation(alice):
    """An untitled conversation of alice's (modules that need a title or profile override it)."""
    from skills_app.models import Conversation

    return Conversation.objects.create(owner=alice)


# -- the model -------------------------------------------------------------------------------------


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    """The fake Anthropic server without retries, a folder of test skills and no agent hooks
    (modules with skills of their own define their own `fake`)."""
    from tests.support.loop_helpers import use_fake_model, write_skills

    use_fake_model(settings, fake_anthropic, retries=0)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.AGENT_HOOKS = {"UserPromptSubmit": [], "PreToolUse": [], "PostToolUse": [], "Stop": []}
    return fake_anthropic


@pytest.fixture
def demo_model(settings):
    """The offline demo model, answering at once, with only the bundled skills."""
    settings.ANTHROPIC_API_KEY = ""
    settings.SKILLS_DIRS = []
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"


# -- run workers (RUN_EXECUTOR=worker) in the test's own event loop --------------------------------


@pytest.fixture
def worker_fake(settings, fake_anthropic):
    """The fake Anthropic server, for runs that workers execute (with fast heartbeats)."""
    from tests.support.loop_helpers import use_fake_model
    from tests.support.worker_helpers import use_fast_heartbeats

    use_fake_model(settings, fake_anthropic)
    use_fast_heartbeats(settings)
    settings.RUN_EXECUTOR = "worker"
    return fake_anthropic


@pytest.fixture
async def layer():
    """The channel layer, empty before and after the test."""
    from channels.layers import get_channel_layer

    channel_layer = get_channel_layer()
    await channel_layer.flush()
    yield channel_layer
    await channel_layer.flush()


@pytest.fixture
async def worker(worker_fake, layer):
    """A `runworker skillscope-runs` beside the test (tests/support/worker_helpers.py)."""
    from tests.support.worker_helpers import running_worker

    async with running_worker() as instance:
        yield instance
