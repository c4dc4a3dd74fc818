"""Signing in through the organisation's identity provider in Chromium: a member of two directory
groups lands in Skillscope and sees exactly their groups' skills and models.

Its own live server: daphne configured for a real OpenID Connect provider (panva's
oidc-provider on loopback, tests/support/oidc_server.py) with groups, policies and skill access made
before it starts.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.live_server import (
    REPO,
    LiveServer,
    LiveServerConfig,
    free_port,
    migrated_template,
    worker_suffix,
)
from tests.browser.pages import screenshot
from tests.support.oidc_server import OidcProvider, start_provider, stop_provider

pytestmark = pytest.mark.browser

ORG_SKILLS = ("payroll", "design-review", "research-notes", "handbook")

SETUP = """
from skills_app.accounts import roles
from skills_app.models import GroupPolicy, SkillAccess
from django.contrib.auth.models import Group
def group(name, directory, models):
    made = Group.objects.create(name=name)
    GroupPolicy.objects.create(group=made, directory_name=directory, allowed_models=models)
    return made
finance = group("Finance", "finance", ["claude-sonnet-5"])
design = group("Design", "design", ["claude-opus-4-8"])
research = group("Research", "research", ["claude-fable-5"])
GroupPolicy.objects.create(group=roles.group_for(roles.get_role("chatter")),
                           directory_name="skillscope-users")
for skill, owners in (("payroll", [finance]), ("design-review", [design]),
                      ("research-notes", [research])):
    access = SkillAccess.objects.create(skill=skill)
    access.groups.set(owners)
"""


@pytest.fixture(scope="module")
def org_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LiveServer, OidcProvider]]:
    skills = tmp_path_factory.mktemp("org-skills")
    for name in ORG_SKILLS:
        (skills / name).mkdir()
        (skills / name / "SKILL.md").write_text(
            textwrap.dedent(
                f"""\
                ---
                name: {name}
                description: The {name} skill of the example organisation.
                ---
                Instructions of {name}.
                """
            )
        )
    port = free_port()
    provider = start_provider(
        tmp_path_factory.mktemp("oidc"),
        [f"http://127.0.0.1:{port}/accounts/oidc/sso/login/callback/"],
    )
    provider.set_person("ada", "ada-directory-pass", ["finance", "design", "skillscope-users"])
    server = LiveServer(
        LiveServerConfig(
            var_dir=tmp_path_factory.mktemp("org-var"),
            skills_dir=skills,
            model_url="http://127.0.0.1:9",
            log_path=REPO / "test-artifacts" / f"browser-org-server{worker_suffix()}.log",
            extra_env=(
                *provider.env().items(),
                (
                    "ANTHROPIC_MODELS",
                    "claude-opus-4-8,claude-sonnet-5,claude-haiku-4-5,claude-fable-5",
                ),
                ("ANTHROPIC_MODEL", "claude-haiku-4-5"),
                ("SKILLSCOPE_DEFAULT_MODELS", "claude-haiku-4-5"),
            ),
            extra_setup=SETUP,
            port=port,
            migrated_template=migrated_template(tmp_path_factory),
        )
    )
    try:
        server.prepare()
        server.start()
        yield server, provider
    finally:
        server.stop()
        stop_provider(provider)


@pytest.mark.parametrize(("width", "height", "shot"), [(1440, 900, "wide"), (390, 844, "phone")])
def test_a_member_of_two_groups_signs_in_and_sees_exactly_their_skills_and_models(
    browser: Browser, org_server, width, height, shot
):
    server, _provider = org_server
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/accounts/login/")
        screenshot(page, f"org-01-login-{shot}")
        page.get_by_role("button", name="Sign in with Example directory").click()
        # The identity provider's own page.
        page.locator("#idp-login").fill("ada")
        page.locator("#idp-password").fill("ada-directory-pass")
        page.locator("#idp-submit").click()
        # Signed in through the directory, the person lands on a conversation ready to type in.
        expect(page.get_by_role("textbox", name="Message")).to_be_visible()

        page.goto(f"{server.url}/skills/")
        rows = page.locator("main")
        for name in ("payroll", "design-review", "handbook"):
            expect(rows).to_contain_text(name)
        expect(rows).not_to_contain_text("research-notes")
        screenshot(page, f"org-02-skills-{shot}")

        page.goto(f"{server.url}/")
        page.get_by_role("button", name="New conversation").first.click()
        picker = page.locator("#model-picker")
        picker.locator("summary").click()
        options = page.locator("#picker-model option")
        values = sorted(options.evaluate_all("(nodes) => nodes.map((n) => n.value)"))
        assert values == ["claude-haiku-4-5", "claude-opus-4-8", "claude-sonnet-5"]
        screenshot(page, f"org-03-models-{shot}")

        page.goto(f"{server.url}/usage/")
        expect(page.locator("#usage-models")).to_contain_text("claude-sonnet-5")
        expect(page.locator("#usage-models")).not_to_contain_text("claude-fable-5")
        screenshot(page, f"org-04-usage-{shot}")
    finally:
        context.close()
