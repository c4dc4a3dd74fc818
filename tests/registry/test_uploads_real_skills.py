"""Uploads take skills shaped like the official ones: a description past the spec's 1,024
characters, API routes in prose and code, empty `__init__.py` files, nested folders. Each is a
small fixture of our own that reproduces one thing the official skills do."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import ManagementUtility
from django.test import Client

from skills_app.core.catalog import ELLIPSIS
from skills_app.core.skillfile import lint_skill_dir
from skills_app.registry import uploads
from skills_app.registry.skills import current_catalog, get_registry
from tests.support.upload_ways import WAYS, upload

pytestmark = pytest.mark.django_db

SENTENCE = (
    "Drafts release notes from merged changes, groups them by area, flags breaking changes and "
    "writes a short upgrade guide for each one. "
)
LONG_DESCRIPTION = (SENTENCE * 12)[:1067].rstrip() + "."
assert len(LONG_DESCRIPTION) == 1068

ROUTES_BODY = textwrap.dedent(
    """\
    # Talking to the API

    Everything goes through `POST /v1/messages`; batches use `POST /v1/messages/batches` and
    the model list is `GET /v1/models` (one model: `GET /v1/models/{model_id}`). The admin API
    lives under /api/organizations/members and the webhook under /webhooks/events/incoming.
    See [the reference](/docs/api/overview) for details.

    ```python
    response = client.post("/v1/messages/count_tokens", json=payload)
    users = requests.get(f"{base}/api/users/list")
    ```

    ```bash
    curl https://api.example.com/v1/messages -d @body.json > /dev/null
    ```

    ```js
    fetch('/internal/reports/daily');
    app.get('/orders/history/:id', handler);
    ```

    Write the draft to <workspace>/drafts/notes.md and scratch files to /tmp/notes/draft.md.
    """
)


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def _frontmatter(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n"


@pytest.fixture
def long_description(tmp_path) -> Path:
    return _write(
        tmp_path / "release-notes",
        {"SKILL.md": _frontmatter("release-notes", LONG_DESCRIPTION) + "Write the notes.\n"},
    )


@pytest.fixture
def api_routes(tmp_path) -> Path:
    return _write(
        tmp_path / "api-guide",
        {"SKILL.md": _frontmatter("api-guide", "Explains the HTTP API.") + ROUTES_BODY},
    )


@pytest.fixture
def office_helpers(tmp_path) -> Path:
    """Python packages with empty __init__.py files, three folders deep."""
    return _write(
        tmp_path / "sheet-tools",
        {
            "SKILL.md": _frontmatter("sheet-tools", "Builds spreadsheets.")
            + "Run `scripts/office/pack.py`.\n",
            "scripts/__init__.py": "",
            "scripts/office/__init__.py": "",
            "scripts/office/helpers/__init__.py": "",
            "scripts/office/pack.py": "print('packed')\n",
            "references/formats/deep/notes.md": "# Notes\n",
        },
    )


@pytest.fixture
def clients(admin_user, alice) -> dict[str, Client]:
    admin, user = Client(), Client()
    admin.force_login(admin_user)
    user.force_login(alice)
    return {"admin": admin, "user": user}


@pytest.mark.parametrize("way", WAYS)
def test_a_description_over_the_spec_limit_installs_with_a_warning(way, long_description, clients):
    version = upload(way, long_description, **clients)
    rules = {(p["rule"], p["severity"]) for p in version.lint}
    assert ("description-length", "warning") in rules
    assert version.frontmatter["description"] == LONG_DESCRIPTION


@pytest.mark.parametrize("way", WAYS)
def test_api_routes_in_prose_and_code_are_not_taken_for_paths(way, api_routes, clients):
    version = upload(way, api_routes, **clients)
    assert [p for p in version.lint if p["rule"] == "absolute-path"] == []


@pytest.mark.parametrize("way", WAYS)
def test_empty_files_in_nested_folders_are_installed_as_files(way, office_helpers, clients):
    version = upload(way, office_helpers, **clients)
    stored = uploads.version_dir(version)
    assert (stored / "scripts/office/helpers/__init__.py").read_bytes() == b""
    assert (stored / "scripts/office/pack.py").read_text() == "print('packed')\n"
    assert (stored / "references/formats/deep/notes.md").is_file()


def test_the_admin_folder_picker_no_longer_calls_an_empty_file_empty(office_helpers, clients):
    version = upload("admin-folder", office_helpers, **clients)
    assert version.number == 1  # positive control of the fix: this failed with "empty" before


def test_a_description_over_the_limit_is_a_warning_not_an_error(long_description):
    problems = lint_skill_dir(long_description)
    assert [(p.rule, p.severity) for p in problems] == [("description-length", "warning")]
    assert "1068 characters" in problems[0].message and "1024" in problems[0].message


def test_the_catalog_lists_it_cut_to_the_catalog_entry_limit(settings, long_description):
    settings.SKILLS_DIRS = [long_description.parent]
    settings.SKILL_CATALOG_ENTRY_CAP = 300
    catalog = current_catalog(get_registry())
    line = next(x for x in catalog.splitlines() if x.startswith('"release-notes"'))
    entry = line.split(": ", 1)[1]
    assert 290 < len(entry) <= 300 and entry.endswith(ELLIPSIS)


def test_the_skills_page_shows_the_overshoot_as_a_warning(
    settings, long_description, skill_manager
):
    settings.SKILLS_DIRS = [long_description.parent]
    client = Client()
    client.force_login(skill_manager)  # lint is in the developer view
    page = client.get("/skills/").content.decode()
    row = page[page.index('data-skill="release-notes" data-source') :]
    row = row[: row.index("</tr>")]
    assert "0 error(s), 1 warning(s)" in row and "description-length" in row


def test_filesystem_paths_are_still_flagged_with_the_reason_and_without_quoting_them(tmp_path):
    folder = _write(
        tmp_path / "paths",
        {
            "SKILL.md": _frontmatter("paths", "d")
            + "Open /home/alice/private-notes.md, then /etc/secret-app/config.yml.\n"
            + "On Windows: C:\\Users\\bob\\private.txt\n"
        },
    )
    found = [p for p in lint_skill_dir(folder) if p.rule == "absolute-path"]
    assert [p.line for p in found] == [6, 6, 7]
    assert "home folder" in found[0].message and "system folder" in found[1].message
    assert "Windows" in found[2].message
    for problem in found:
        assert "alice" not in problem.message and "secret-app" not in problem.message
        assert "bob" not in problem.message


@dataclass(frozen=True, slots=True)
class Ended:
    returncode: int
    stdout: str
    stderr: str


def _validate(capsys: pytest.CaptureFixture[str], *args: str) -> Ended:
    """`manage.py skills validate` as manage.py runs it (its argv, its output, its exit status),
    in this process; tests/management/test_skills_command.py runs the command's own process."""
    capsys.readouterr()
    code: int | str | None = 0
    try:
        ManagementUtility(["manage.py", "skills", "validate", *args]).execute()
    except SystemExit as ended:
        code = ended.code
    out, err = capsys.readouterr()
    return Ended(int(code or 0), out, err)


def test_validate_passes_an_overshoot_and_strict_fails_it(long_description, api_routes, capsys):
    relaxed = _validate(capsys, str(long_description))
    assert relaxed.returncode == 0, relaxed.stderr
    assert "warning [description-length]" in relaxed.stdout
    strict = _validate(capsys, "--strict", str(long_description))
    assert strict.returncode == 1
    assert "--strict: 1 of the warnings break a rule of the Agent Skills spec" in strict.stderr
    clean = _validate(capsys, "--strict", str(api_routes))
    assert clean.returncode == 0, clean.stdout + clean.stderr
