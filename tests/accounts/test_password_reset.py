"""Forgot your password? (issue 42): while local passwords are on, the login page links Django's
password reset, which mails a link that sets a new password once; with them off, none of it."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LINK = re.compile(r"https?://[^/\s]+(/accounts/reset/[^\s]+/)")


def test_the_login_page_links_the_reset_while_local_passwords_are_on(settings):
    settings.LOCAL_PASSWORDS = True
    page = Client().get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}" id="forgot-password"' in page


def test_a_reset_mail_carries_a_link_that_sets_a_new_password_once(alice):
    alice.email = "alice@example.org"
    alice.save()
    client = Client()
    form = client.get(reverse("password_reset"))
    assert form.status_code == 200 and 'id="password-reset-form"' in form.content.decode()
    sent = client.post(reverse("password_reset"), {"email": "alice@example.org"})
    assert sent.status_code == 302 and sent["Location"] == reverse("password_reset_done")
    assert 'id="password-reset-sent"' in client.get(sent["Location"]).content.decode()

    (message,) = mail.outbox
    assert message.to == ["alice@example.org"]
    assert message.subject == "Choose a new Skillscope password"
    assert '"alice"' in message.body
    path = LINK.search(message.body).group(1)
    # The link leads to the form (Django swaps the token into the session first).
    opened = client.get(path, follow=True)
    assert 'id="password-set-form"' in opened.content.decode()
    done = client.post(
        opened.redirect_chain[-1][0],
        {"new_password1": "a-brand-new-pass-42", "new_password2": "a-brand-new-pass-42"},
    )
    assert done.status_code == 302 and done["Location"] == reverse("password_reset_complete")
    alice.refresh_from_db()
    assert alice.check_password("a-brand-new-pass-42")
    # Used once: the same link no longer works.
    again = Client().get(path, follow=True).content.decode()
    assert 'id="password-link-invalid"' in again


def test_an_unknown_address_sends_nothing_and_says_the_same(alice):
    response = Client().post(reverse("password_reset"), {"email": "nobody@example.org"})
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    assert mail.outbox == []


def test_with_local_passwords_off_there_is_no_reset(settings, alice):
    settings.LOCAL_PASSWORDS = False
    alice.email = "alice@example.org"
    alice.save()
    client = Client()
    assert 'id="forgot-password"' not in client.get(reverse("login")).content.decode()
    refused = client.post(reverse("password_reset"), {"email": "alice@example.org"})
    assert refused.status_code == 403
    assert mail.outbox == []
