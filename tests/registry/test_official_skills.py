"""Every skill folder of the public anthropics/skills repository uploads, in all four ways.

The repository is test data only and is not part of this project: the test reads a local
snapshot (a git directory or a checkout) and skips, saying why, when there is none. Point
SKILLSCOPE_OFFICIAL_SKILLS at one to run it elsewhere, e.g. after
`git clone https://github.com/anthropics/skills /tmp/anthropic-skills`.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from django.test import Client

from skills_app.registry.uploads import version_dir
from tests.support.upload_ways import WAYS, upload

pytestmark = pytest.mark.django_db

DEFAULT_SNAPSHOT = "/work/.mirror/anthropics+skills/repo"
SNAPSHOT = Path(os.environ.get("SKILLSCOPE_OFFICIAL_SKILLS") or DEFAULT_SNAPSHOT)


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _skill_names() -> list[str]:
    """The skill folders under skills/ in the snapshot; [] when there is no snapshot."""
    if (SNAPSHOT / "skills").is_dir():
        return sorted(p.name for p in (SNAPSHOT / "skills").iterdir() if (p / "SKILL.md").is_file())
    if _is_git_dir(SNAPSHOT):
        done = subprocess.run(
            ["git", f"--git-dir={SNAPSHOT}", "ls-tree", "--name-only", "HEAD", "skills/"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode == 0:
            return sorted(line.split("/", 1)[1] for line in done.stdout.split() if "/" in line)
    return []


NAMES = _skill_names()
REASON = (
    f"no snapshot of github.com/anthropics/skills at {SNAPSHOT}; set SKILLSCOPE_OFFICIAL_SKILLS "
    "to a clone (or its git directory) to run these"
)


@pytest.fixture(scope="module")
def official(tmp_path_factory) -> Path:
    """The snapshot's skills/ folder, extracted from git when the snapshot is a git directory."""
    if (SNAPSHOT / "skills").is_dir():
        return SNAPSHOT / "skills"
    target = tmp_path_factory.mktemp("official-skills")
    archive = subprocess.run(
        ["git", f"--git-dir={SNAPSHOT}", "archive", "--format=tar", "HEAD", "skills"],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target / "skills"


@pytest.mark.skipif(not NAMES, reason=REASON)
@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name", NAMES or ["none"])
def test_every_official_skill_uploads(official, admin_user, alice, name, way):
    admin, user = Client(), Client()
    admin.force_login(admin_user)
    user.force_login(alice)
    version = upload(way, official / name, admin=admin, user=user)
    errors = [p for p in version.lint if p["severity"] == "error"]
    assert errors == []
    if name == "claude-api":
        # Its routes (POST /v1/messages, ...) were five false absolute-path findings.
        assert [p for p in version.lint if p["rule"] == "absolute-path"] == []
        assert "description-length" in {p["rule"] for p in version.lint}
    stored = sum(1 for p in (official / name).rglob("*") if p.is_file())
    assert sum(1 for p in version_dir(version).rglob("*") if p.is_file()) == stored
