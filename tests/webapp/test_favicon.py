"""Every page names Skillscope's own icon, so no browser asks for a /favicon.ico that is not there."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from django.test import Client
from django.urls import reverse

from tests.support.paths import REPO

pytestmark = pytest.mark.django_db

ICON = '<link rel="icon" href="/static/skillscope/favicon.svg" type="image/svg+xml">'


def test_the_apps_pages_and_the_admins_name_the_icon(admin_user):
    assert ICON in Client().get(reverse("login")).content.decode()
    assert ICON in Client().get(reverse("admin:login")).content.decode()
    staff = Client()
    staff.force_login(admin_user)
    assert ICON in staff.get(reverse("skills-page")).content.decode()
    assert ICON in staff.get(reverse("admin:auth_user_changelist")).content.decode()


def test_the_icon_is_served_and_is_an_svg():
    served = Client().get("/static/skillscope/favicon.svg")
    assert served.status_code == 200
    assert served["Content-Type"].startswith("image/svg+xml")
    root = ET.fromstring((REPO / "static" / "skillscope" / "favicon.svg").read_text())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
