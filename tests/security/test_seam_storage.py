"""Seams of the storage quota (#26) with the workspace layout and the designs' tools (#30).

Attacks, each as an ordinary user whose quota is nearly used:
- a command writes outside in/, work/ and out/ (the workspace root is its working directory,
  and `skill_run` gives it a `runs/` folder): the watcher and the quota counted only those three;
- "as the source design" of tool-result, `write_file` and `edit_file` write without the quota
  (Skillscope's Write and Edit reserve first);
- `skill_run` copies its declared inputs (up to 20 files of 20 MB) into the workspace before
  the command runs, outside any reservation.
Positive controls: what fits is written, and what is stored is never removed.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.tools.base import ToolContext
from skills_app.core.tools.bash import BashTool
from skills_app.core.tools.sandbox import describe_sandbox
from skills_app.core.tools.storage import workspace_bytes
from skills_app.models import Conversation, PermissionRule, Run, StorageAccount
from skills_app.runs.factory import workspace_for
from skills_app.runs.storage import QuotaGate
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)
MB = 1_000_000
KB = 1_000


@pytest.fixture
def sandboxed():
    if not describe_sandbox("auto").sandboxed:
        pytest.skip("bubblewrap does not work here")


def _context(conversation: Conversation) -> ToolContext:
    ws = workspace_for(conversation.pk)
    ws.ensure_layout()
    return ToolContext(workspace=ws, storage=QuotaGate(conversation.owner_id, conversation.pk))


def _disk_bytes(root) -> int:
    """Every regular file under the workspace but the staged skills (independent of the code)."""
    total = 0
    for path in root.rglob("*"):
        if (
            path.is_file()
            and not path.is_symlink()
            and "skills" not in path.relative_to(root).parts[:1]
        ):
            total += path.stat().st_size
    return total


async def test_a_command_cannot_store_past_the_quota_outside_work_and_out(
    settings, sandboxed, alice
):
    settings.STORAGE_QUOTA_BYTES = 20 * MB
    settings.STORAGE_RUN_WRITE_LIMIT = 50 * MB
    conversation = await Conversation.objects.acreate(owner=alice)
    ctx = await sync_to_async(_context)(conversation)
    # The command's working directory is the workspace root; runs/ is skill_run's record folder.
    # A pause in each round: 144 MB of zeros are written faster than the watcher's 50 ms ticks
    # come round on a loaded machine (a full run once saw the loop end before it was stopped);
    # with it, the quota is passed in the second round and the loop cannot end for 2.4 s.
    command = (
        "mkdir -p runs/x junk; for i in $(seq 1 12); do head -c 4000000 /dev/zero > junk/f$i; "
        "head -c 4000000 /dev/zero > runs/x/g$i; head -c 4000000 /dev/zero > top$i; sleep 0.2; "
        "done; echo end"
    )
    result = await BashTool().run({"command": command, "timeout": 60}, ctx)
    held = _disk_bytes(ctx.workspace.root)
    # 144 MB were attempted; the watcher measures every 50 ms, so how far past the quota it gets
    # depends on the disk and the load (as in tests/policy/test_quotas.py). On any machine the
    # loop is stopped before its end, wherever it wrote.
    assert result.is_error and "storage limit" in result.content, result.content
    assert "end" not in result.content.split("Stopped")[0], result.content
    assert held < 144 * MB, f"{held:,} bytes stored against a 20 MB quota"
    # What the quota recorded is what the disk holds.
    assert workspace_bytes(ctx.workspace) == held
    # The next call gets nothing to write until files are removed.
    again = await BashTool().run({"command": "head -c 2000000 /dev/zero > top-more"}, ctx)
    assert again.is_error, again.content
    assert not (ctx.workspace.root / "top-more").exists() or (
        (ctx.workspace.root / "top-more").stat().st_size == 0
    )


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.BUNDLED_SKILLS_DIR = tmp_path / "no-bundled"
    return fake_anthropic


def _results(fake) -> list[str]:
    out = []
    for request in accepted(fake)[1:]:
        block = request["messages"][-1]["content"][0]
        content = block["content"]
        out.append(content if isinstance(content, str) else str(content))
    return out


async def test_the_designs_write_file_and_edit_file_keep_to_the_quota(settings, fake, alice):
    settings.STORAGE_QUOTA_BYTES = 100 * KB
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Write")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Edit")
    conversation = await Conversation.objects.acreate(
        owner=alice, profile="tool-result", base_prompt="design"
    )
    fake.enqueue(
        Reply.tool_use("write_file", {"path": "work/a.txt", "content": "a" * (70 * KB)}),
        Reply.tool_use("write_file", {"path": "work/b.txt", "content": "b" * (70 * KB)}),
        Reply.tool_use(
            "edit_file", {"path": "work/a.txt", "old_text": "aaaa", "new_text": "c" * (70 * KB)}
        ),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "write the files", alice)
    assert run.status == Run.DONE, run.error
    first, second, edited = _results(fake)
    assert first == f"Wrote {70 * KB} bytes"  # positive control: it fits
    assert second.startswith("Error: Your storage is full"), second
    assert edited.startswith("Error: Your storage is full"), edited
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert not (ws.work_dir / "b.txt").exists()
    assert (ws.work_dir / "a.txt").read_text() == "a" * (70 * KB)  # nothing stored is lost
    assert workspace_bytes(ws) <= 100 * KB
    assert (await StorageAccount.objects.aget(user_id=alice.pk)).reserved_bytes == 0


async def test_skill_run_inputs_cannot_copy_past_the_quota(settings, fake, sandboxed, alice):
    settings.STORAGE_QUOTA_BYTES = 1 * MB
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    # A seed that fits (written through the quota), then twenty copies of it as inputs.
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "greeter"}),
        Reply.tool_use(
            "skill_run",
            {"skill": "greeter", "command": "head -c 400000 /dev/zero > $WORK_DIR/seed.bin"},
        ),
        Reply.tool_use(
            "skill_run",
            {
                "skill": "greeter",
                "command": "ls work/copies | wc -l",
                "inputs": [
                    {"src": "workspace://work/seed.bin", "dst": f"work/copies/c{i}.bin"}
                    for i in range(20)
                ],
            },
        ),
        # Saving work/seed.bin as a download copies it into out/: once fits, twice does not.
        *[
            Reply.tool_use(
                "skill_run",
                {
                    "skill": "greeter",
                    "command": "true",
                    "output_files": ["work/seed.bin"],
                    "save_as_artifacts": True,
                },
            )
            for _ in range(2)
        ],
        Reply.text("done"),
    )
    run = await run_turn(conversation, "copy it", alice)
    assert run.status == Run.DONE, run.error
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert (ws.work_dir / "seed.bin").stat().st_size == 400_000  # positive control
    _load, _seed, copied, saved, saved_again = _results(fake)
    assert "inputs do not fit in your storage" in copied, copied
    assert "out/seed.bin" in saved  # positive control: one copy fits
    assert "output files do not fit in your storage" in saved_again, saved_again
    held = _disk_bytes(ws.root)
    assert held <= 1 * MB, f"{held:,} bytes stored against a 1 MB quota"
    assert (await StorageAccount.objects.aget(user_id=alice.pk)).reserved_bytes == 0


@pytest.mark.django_db
def test_personal_skill_uploads_count_against_the_quota(settings, alice, skill_manager):
    """Personal skills are a person's stored bytes too: uploading new versions (30 MB each at
    the default limits) walked past the storage quota with nothing counting them."""
    import os as _os

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from skills_app.models import SkillVersion
    from skills_app.policy import storage
    from tests.security.helpers import client_of
    from tests.support.upload_helpers import make_zip

    settings.STORAGE_QUOTA_BYTES = 2 * MB
    settings.ALLOW_PERSONAL_SKILLS = True

    def upload(user, n: int):
        archive = make_zip(
            {
                f"bulky-{n}/SKILL.md": f"---\nname: bulky-{n}\ndescription: Bulk {n}.\n---\nBody.\n",
                # Random bytes: a zip cannot shrink them, and each version is new content.
                f"bulky-{n}/assets/blob.bin": _os.urandom(600 * KB),
            }
        )
        return client_of(user).post(
            reverse("skills-upload"), {"archive": SimpleUploadedFile(f"b{n}.zip", archive)}
        )

    codes = [upload(alice, n).status_code for n in range(5)]
    assert codes[:3] == [200, 200, 200], codes  # positive control: what fits is stored
    refused = upload(alice, 9)
    assert refused.status_code == 400
    assert "Your storage is full" in refused.content.decode()
    stored = SkillVersion.objects.filter(package__owner=alice).count()
    assert stored <= 3, f"{stored} personal versions of 600 KB under a 2 MB quota"
    assert storage.standing(alice.pk).used >= 3 * 600 * KB
    assert storage.standing(alice.pk).used <= 2 * MB
