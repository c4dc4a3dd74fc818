"""Issue 23 in a real browser: an auditor opens the rule change page (it answered 500), and an
administrator takes the auditor's role away while the auditor's chat tab is open: the server
closes the tab's socket (4401) and the page shows itself again as the account now allows."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.live_server import LiveServer
from tests.browser.pages import ChatPage, doc_screenshot, login
from tests.browser.server_data import ADMIN, create_admin, run_in_server

pytestmark = pytest.mark.browser

RUTH = ("ruth", "ruth-pass-123")
# An auditor by role alone (no direct permission), with a conversation of her own (not "rita",
# the live server's second skill manager).
SET_UP_RUTH = """
from django.contrib.auth.models import User
from skills_app.accounts import roles
from skills_app.models import Conversation, PermissionRule
user, _ = User.objects.get_or_create(username={name!r})
user.set_password({password!r})
user.is_active = True
user.save()
roles.grant(user, roles.get_role("auditor"))
conversation = Conversation.objects.create(owner=user, title="Ruth's notes")
rule = PermissionRule.objects.order_by("pk").first()
print(json.dumps({{"user": user.pk, "conversation": conversation.pk, "rule": rule.pk}}))
"""


@pytest.fixture
def ruth(chat_server: LiveServer) -> dict[str, int]:
    out = run_in_server(chat_server, SET_UP_RUTH.format(name=RUTH[0], password=RUTH[1]))
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize(("width", "height", "name"), [(1440, 900, "desktop"), (390, 844, "phone")])
def test_an_auditor_reads_a_rule_without_a_500(
    browser: Browser, chat_server, ruth, width, height, name
):
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        login(page, chat_server.url, *RUTH)
        response = page.goto(
            f"{chat_server.url}/admin/skills_app/permissionrule/{ruth['rule']}/change/"
        )
        assert response is not None and response.status == 200
        expect(page.locator(".readonly").first).to_be_visible()
        assert page.locator('input[name="rule_text"]').count() == 0  # shown, not editable
        doc_screenshot(page, f"rule-read-only-{name}")
    finally:
        context.close()


@pytest.mark.parametrize(("width", "height", "name"), [(1440, 900, "desktop"), (390, 844, "phone")])
def test_a_revoked_role_closes_the_open_tab_which_reconnects_as_a_chatter(
    browser: Browser, chat_server, ruth, width, height, name
):
    create_admin(chat_server)
    mine = browser.new_context(viewport={"width": width, "height": height})
    theirs = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page = mine.new_page()
        login(page, chat_server.url, *RUTH)
        chat = ChatPage(page, chat_server.url)
        chat.open(ruth["conversation"])
        expect(page.locator("nav.topnav")).to_contain_text("Audit")
        resumed = chat.resumed_count()

        admin = theirs.new_page()
        login(admin, chat_server.url, *ADMIN)
        admin.goto(f"{chat_server.url}/admin/auth/user/{ruth['user']}/change/")
        admin.get_by_role("checkbox", name=re.compile(r"^Auditor:")).uncheck()
        admin.get_by_role("button", name="Save", exact=True).click()
        expect(admin.locator(".messagelist")).to_contain_text("was changed successfully")

        # The server closed her socket; the page reloaded itself as a chatter's and resumed.
        chat.wait_until(lambda: chat.resumed_count() > resumed, "the tab to reconnect", 15)
        expect(page.locator("nav.topnav")).not_to_contain_text("Audit")
        doc_screenshot(page, f"account-changed-{name}")
        assert chat.errors == []
    finally:
        mine.close()
        theirs.close()
