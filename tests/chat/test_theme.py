"""The theme each person chooses (issue 42, point 13): stored for them alone, rendered by the
server on <html> so the first paint has its colours, set by a plain form with CSRF that comes back
to the page, and anything but system, light or dark refused with a reason."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from skills_app.models import UserPreference

pytestmark = pytest.mark.django_db


def client_for(user, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def html_tag(page: str) -> str:
    return re.search(r"<html[^>]*>", page).group(0)


def test_a_new_person_gets_the_systems_colours(alice):
    page = client_for(alice).get("/skills/").content.decode()
    assert 'data-theme="system"' in html_tag(page)
    assert '<meta name="color-scheme" content="light dark">' in page
    assert 'id="code-dark" media="(prefers-color-scheme: dark)"' in page
    # The menu offers the three choices, the current one checked, and the shortcuts sheet.
    assert re.search(r'value="system" checked', page)
    assert "Keyboard shortcuts" in page and 'aria-labelledby="shortcuts-title"' in page


def test_the_form_stores_the_theme_and_comes_back_to_the_page(alice):
    client = client_for(alice)
    saved = client.post("/me/theme/", {"theme": "dark", "next": "/skills/?tab=mine"})
    assert saved.status_code == 302 and saved["Location"] == "/skills/?tab=mine"
    assert UserPreference.objects.get(user=alice).theme == "dark"
    page = client.get("/skills/").content.decode()
    assert 'data-theme="dark"' in html_tag(page)
    assert '<meta name="color-scheme" content="dark">' in page
    assert 'id="code-dark" media="all"' in page
    assert re.search(r'value="dark" checked', page)
    # Stored for the person: their other sign-ins (another device) draw the page dark too.
    assert 'data-theme="dark"' in html_tag(client_for(alice).get("/skills/").content.decode())
    # htmx sends it as the choice is made: nothing to swap.
    light = client.post("/me/theme/", {"theme": "light"}, headers={"HX-Request": "true"})
    assert light.status_code == 204
    assert 'data-theme="light"' in html_tag(client.get("/skills/").content.decode())


def test_a_persons_theme_is_their_own(alice, bob):
    client_for(alice).post("/me/theme/", {"theme": "dark"})
    page = client_for(bob).get("/skills/").content.decode()
    assert 'data-theme="system"' in html_tag(page)
    assert not UserPreference.objects.filter(user=bob).exists()
    # There is no field to name another person: bob's post changes bob's row only.
    client_for(bob).post("/me/theme/", {"theme": "light", "user": str(alice.pk)})
    assert UserPreference.objects.get(user=alice).theme == "dark"
    assert UserPreference.objects.get(user=bob).theme == "light"


@pytest.mark.parametrize("value", ["", "blue", "DARK", "dark<script>", "x" * 500])
def test_a_theme_that_is_not_offered_is_refused_with_a_reason(alice, value):
    client = client_for(alice)
    client.post("/me/theme/", {"theme": "dark"})
    refused = client.post("/me/theme/", {"theme": value})
    assert refused.status_code == 400
    assert refused["Content-Type"].startswith("text/plain")
    assert "is not a theme. Choose one of: system, light, dark." in refused.content.decode()
    assert UserPreference.objects.get(user=alice).theme == "dark"


def test_the_theme_needs_a_signed_in_person_a_post_and_the_csrf_token(alice):
    assert Client().post("/me/theme/", {"theme": "dark"}).status_code == 302
    assert client_for(alice).get("/me/theme/?theme=dark").status_code == 405
    assert (
        client_for(alice, enforce_csrf_checks=True)
        .post("/me/theme/", {"theme": "dark"})
        .status_code
        == 403
    )
    assert not UserPreference.objects.exists()
    # With the token the menu's form carries, it is taken.
    client = client_for(alice, enforce_csrf_checks=True)
    page = client.get("/skills/").content.decode()
    form = re.search(r'<form[^>]*class="theme-form".*?</form>', page, re.S).group(0)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    assert (
        client.post("/me/theme/", {"theme": "dark", "csrfmiddlewaretoken": token}).status_code
        == 302
    )
    assert UserPreference.objects.get(user=alice).theme == "dark"


def test_somewhere_else_to_go_back_to_is_not_followed(alice):
    back = client_for(alice).post("/me/theme/", {"theme": "light", "next": "https://evil.example/"})
    assert back["Location"] == "/"
