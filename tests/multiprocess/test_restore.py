"""Backups restore (docs/deploy.md, "Backups and restore"): the guide's own scripts, for real.

`deploy/skillscope-backup` dumps the PostgreSQL database and archives SKILLSCOPE_VAR_DIR (the
conversations' workspaces and the uploaded skills); `deploy/skillscope-restore` puts both into a
new, empty database and directory. The conversation must read back whole from the restored
database (its rows, runs and event log, and the request it would send next), its workspace file
and the uploaded skill's files must be there byte for byte, and a web process started on the
restored copy must show the conversation to its owner with the session they had.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.multiprocess.conftest import ROOT, Deployment, documented_environment

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

DEPLOY = ROOT / "deploy"


def _run(script: str, *args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["sh", str(DEPLOY / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_a_backup_restores_into_a_fresh_database_and_the_conversation_reads_back(
    migrated, collected_static, tmp_path
):
    var_dir = tmp_path / "var"
    env = documented_environment(
        tmp_path,
        DATABASE_URL=migrated.url,
        REDIS_URL="redis://127.0.0.1:1/0",
        STATIC_ROOT=str(collected_static),
        SKILLSCOPE_VAR_DIR=str(var_dir),
    )
    deployment = Deployment(env=env, logs=tmp_path)
    user = deployment.db_tool("setup", "restore-owner")
    conversation = user["conversation"]
    seeded = deployment.db_tool("seed", str(conversation))
    # What a conversation leaves on disk: its workspace, and an uploaded skill's files.
    workspace = var_dir / "workspaces" / str(conversation) / "work" / "notes.txt"
    workspace.parent.mkdir(parents=True, exist_ok=True)
    workspace.write_bytes(b"alpha\nbeta \xe2\x9c\x93\n")
    skill = var_dir / "media" / "skills" / "report" / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text("---\nname: report\ndescription: Writes the weekly report.\n---\nSteps.\n")
    before = deployment.db_tool("state", str(conversation))
    deployment.close_host()  # its database tool is done; the backup needs no process of it

    tools = {
        "PATH": f"{migrated.bindir}:/usr/bin:/bin",
        "PGHOST": "127.0.0.1",
        "PGPORT": str(migrated.port),
        "PGUSER": "postgres",
    }
    backups = tmp_path / "backups"
    made = _run(
        "skillscope-backup",
        env={
            **tools,
            "BACKUP_DIR": str(backups),
            "VAR_DIR": str(var_dir),
            "PGDATABASE": "skillscope",
            "DUMP_AS": "",
        },
    )
    backup = Path(made.strip().splitlines()[-1])
    assert (backup / "database.dump").stat().st_size > 0

    restored_var = tmp_path / "restored-var"
    _run(
        "skillscope-restore",
        str(backup),
        "skillscope_restored",
        str(restored_var),
        env={**tools, "OWNER": "", "RESTORE_AS": ""},
    )

    restored_env = {
        **env,
        "DATABASE_URL": migrated.url.rsplit("/", 1)[0] + "/skillscope_restored",
        "SKILLSCOPE_VAR_DIR": str(restored_var),
    }
    restored = Deployment(env=restored_env, logs=tmp_path)
    try:
        after = restored.db_tool("state", str(conversation))
        assert after == before
        assert [r["text"] for r in after["rows"]] == seeded["texts"]
        assert (
            restored_var / workspace.relative_to(var_dir)
        ).read_bytes() == workspace.read_bytes()
        assert (restored_var / skill.relative_to(var_dir)).read_text() == skill.read_text()

        # A web process on the restored copy shows the conversation to its owner, signed in with
        # the session they had (sessions are rows too).
        restored.spawn_web("web-restored")
        restored.wait_ready("web-restored")
        code, _, page = restored.get("web-restored", f"/c/{conversation}/", cookie=user["session"])
        assert code == 200
        for text in seeded["texts"]:
            assert text.split()[0] in page
    finally:
        restored.stop_all()  # its web process and its database tool
    # The restore never overwrites: a second one into the same database refuses.
    again = subprocess.run(
        [
            "sh",
            str(DEPLOY / "skillscope-restore"),
            str(backup),
            "skillscope_restored",
            str(tmp_path / "x"),
        ],
        env={**tools, "OWNER": "", "RESTORE_AS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode != 0 and "already exists" in again.stderr
