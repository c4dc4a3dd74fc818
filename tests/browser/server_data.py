"""Rows put straight into the live server's database, for pages that need history to show.

Audit rows cannot be deleted (that is the point), so seeded history belongs to its own user,
`carol`, whom no other browser test logs in as.
"""

from __future__ import annotations

import json

from tests.browser.live_server import LiveServer

ADMIN = ("browser-admin", "browser-admin-pass-123")

CREATE_ADMIN = """
from django.contrib.auth.models import User
if not User.objects.filter(username={name!r}).exists():
    User.objects.create_superuser({name!r}, password={password!r})
"""

# Invocations of a few skills over two weeks, by carol, with every decision and both callers.
SEED_HISTORY = """
import random
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from skills_app.models import Conversation, Run, RunEvent, SkillInvocation
carol, _ = User.objects.get_or_create(username="carol")
if not Conversation.objects.filter(owner=carol).exists():
    now = timezone.now()
    rng = random.Random(14)  # the same fortnight every time
    plan = [("pdf", 4), ("xlsx", 3), ("docx", 2), ("claude-api", 3), ("pptx", 2),
            ("browser-probe", 1), ("slack-gif", 1)]
    for profile in ("meta-message", "tool-result"):
        conversation = Conversation.objects.create(owner=carol, title=f"Quarterly {{profile}}",
                                                   profile=profile)
        run = Run.objects.create(conversation=conversation, status=Run.DONE)
        for day in range(14):
            for skill, weight in plan:
                for _ in range(rng.randint(0, weight)):
                    roll = rng.random()
                    decision = "denied" if roll < 0.08 else "failed" if roll < 0.12 else "allowed"
                    inv = SkillInvocation.objects.create(
                        conversation=conversation, run=run, skill=skill,
                        caller="user" if rng.random() < 0.3 else "model", decision=decision,
                        decided_by="rule: allow Skill(*)" if decision == "allowed" else "",
                        injected_text=(f"Base directory for this skill: /skills/{{skill}}\\n\\n"
                                       f"Instructions of {{skill}}.") if decision == "allowed" else "",
                    )
                    SkillInvocation.objects.filter(pk=inv.pk).update(
                        created_at=now - timedelta(days=day, minutes=rng.randint(0, 600)))
    # One skill run with a tool call under it, for the rule tester's replay.
    inv = SkillInvocation.objects.create(
        conversation=conversation, run=run, skill="release-notes", caller="model",
        decision="allowed", decided_by="rule: allow Skill(release-notes)",
        injected_text="Base directory for this skill: /skills/release-notes\\n\\nDraft notes.",
        allowed_tools=["Bash(git *)"],
    )
    RunEvent.objects.create(
        conversation=conversation, run=run, seq=1, type="audit.tool",
        data={{"tool": "Bash", "input": {{"command": "git push origin main"}},
              "decision": "allow", "reason": "allowed by the skill's allowed-tools",
              "invocation_id": inv.pk, "tool_use_id": "toolu_replay"}},
    )
print(json.dumps({{"invocation": SkillInvocation.objects.filter(
    conversation__owner=carol, skill="release-notes").get().pk}}))
"""


def run_in_server(server: LiveServer, script: str) -> str:
    """Run Python in the live server's environment (Django set up, `json` imported); its stdout."""
    return server.host().run("import json\n" + script)


def seed_history(server: LiveServer) -> dict[str, int]:
    """Carol's two weeks of skill invocations (made once per server); ids the tests open."""
    out = run_in_server(server, SEED_HISTORY.format())
    return json.loads(out.strip().splitlines()[-1])


def create_admin(server: LiveServer) -> None:
    run_in_server(server, CREATE_ADMIN.format(name=ADMIN[0], password=ADMIN[1]))


# Reviews an organisation skill's newest version (submitted by mona, approved by rita: the live
# server wants four eyes) and makes it active, as the review page would.
PUBLISH = """
from django.contrib.auth.models import User
from skills_app.models import SkillPackage, SkillVersion
from skills_app.registry import review
mona, rita = User.objects.get(username="mona"), User.objects.get(username="rita")
for name in {names!r}:
    version = SkillPackage.objects.get(name=name, owner=None).versions.order_by("-number").first()
    if version.review_status in (SkillVersion.DRAFT, SkillVersion.CHANGES_REQUESTED):
        review.submit(version, mona)
    if version.review_status != SkillVersion.APPROVED:
        version.refresh_from_db()
        review.approve(version, rita, manifest_digest=review.manifest_of(version).digest)
    version.refresh_from_db()
    review.activate(version, rita)
"""
# Uploads organisation skill files as mona's draft (the one entrance uploads use).
UPLOAD_DRAFT = """
import base64
from django.contrib.auth.models import User
from skills_app.registry.uploads import UploadFile, create_draft_version
files = [UploadFile(path, base64.b64decode(data)) for path, data in {files!r}]
create_draft_version(files, user=User.objects.get(username="mona"), origin="upload")
"""


def publish(server: LiveServer, *names: str) -> None:
    """Review and activate the newest version of each organisation skill named."""
    run_in_server(server, PUBLISH.format(names=list(names)))


def upload_draft(server: LiveServer, files: dict[str, str | bytes]) -> None:
    """Store these files (paths start with the skill's folder) as an organisation draft."""
    import base64

    encoded = [
        (path, base64.b64encode(data.encode() if isinstance(data, str) else data).decode())
        for path, data in files.items()
    ]
    run_in_server(server, UPLOAD_DRAFT.format(files=encoded))
