"""Organisation skills through their review in tests: upload a draft, submit, approve, activate.

The skill below is written for these tests: a greeting script run with the person's words, a
hidden instruction marker, and the one command its body asks for.
"""

from __future__ import annotations

import textwrap
from typing import Any

from skills_app.models import SkillVersion
from skills_app.registry import review, uploads

GREET_MARKER = (
    "GREETBODY-7c1e: greet every person by the exact name they give and add a cheery line"
)
GREET_SKILL_MD = textwrap.dedent(
    f"""\
    ---
    name: org-greet
    description: Greets people by name with a cheerful line from the organisation.
    argument-hint: "[name]"
    allowed-tools: Bash(python3 ${{CLAUDE_SKILL_DIR}}/scripts/greet.py --version)
    ---
    # Greeting

    {GREET_MARKER}.

    Run exactly this command, with the person's name:

    ```bash
    python3 ${{CLAUDE_SKILL_DIR}}/scripts/greet.py "$ARGUMENTS"
    ```

    Then answer with what it printed.
    """
)
GREET_SCRIPT = 'import sys\nprint("Hello, " + " ".join(sys.argv[1:]) + "! Have a fine day.")\n'


def greet_files(
    script: str = GREET_SCRIPT, skill_md: str = GREET_SKILL_MD
) -> list[uploads.UploadFile]:
    return [
        uploads.UploadFile("org-greet/SKILL.md", skill_md.encode()),
        uploads.UploadFile("org-greet/scripts/greet.py", script.encode()),
    ]


def upload_draft(
    user: Any, files: list[uploads.UploadFile] | None = None, *, origin: str = "upload"
) -> SkillVersion:
    """An organisation draft of org-greet (or of `files`), uploaded by `user`."""
    results = uploads.create_draft_version(files or greet_files(), user=user, origin=origin)
    return results[0].version


def approve(version: SkillVersion, reviewer: Any, *, submitter: Any = None) -> SkillVersion:
    """Submit (as `submitter`, default the reviewer) and approve with the manifest shown."""
    version.refresh_from_db()
    if version.review_status in (SkillVersion.DRAFT, SkillVersion.CHANGES_REQUESTED):
        review.submit(version, submitter or reviewer)
    review.approve(version, reviewer, manifest_digest=review.manifest_of(version).digest)
    version.refresh_from_db()
    return version


def publish(
    user: Any, files: list[uploads.UploadFile] | None = None, *, reviewer: Any = None
) -> SkillVersion:
    """Upload, submit, approve and make active: an organisation skill live for everyone."""
    version = upload_draft(user, files)
    approve(version, reviewer or user, submitter=user)
    review.activate(version, reviewer or user)
    version.refresh_from_db()
    return version


def reviewer_user() -> Any:
    """A skill manager who reviews what tests upload without a person of their own."""
    from django.contrib.auth import get_user_model

    from skills_app.accounts import roles

    user, created = get_user_model().objects.get_or_create(username="test-reviewer")
    if created:
        roles.grant(user, roles.get_role("skill-manager"))
    return user


def go_live(result: Any) -> Any:
    """An install result whose organisation draft has been reviewed and made active."""
    version = result.version
    if version.package.owner_id is not None or version.review_status == SkillVersion.APPROVED:
        return result
    who = reviewer_user()
    approve(version, who)
    review.activate(version, who)
    version.refresh_from_db()
    result.package.refresh_from_db()
    return result
