"""Issue 11, containment: commands are sandboxed by default, refused without a sandbox unless
permitted, reach nothing of the server, and leave no process behind (not even a server kill)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from skills_app.core.tools import BashTool, ToolContext, ToolError, Workspace, describe_sandbox
from tests.core.tools.test_tools_bash import live_processes_with, wait_until_gone

REPO = Path(__file__).resolve().parents[2]
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


@pytest.fixture
def server(tmp_path: Path) -> dict[str, Path]:
    """A server's layout: var/ with its secrets, and two users' workspaces beside each other."""
    var = tmp_path / "var"
    var.mkdir()
    (var / "secret_key").write_text("django-insecure-SECRET-CANARY\n")
    (var / "db.sqlite3").write_text("SQLite format 3 sessions CANARY\n")
    other = Workspace(var / "workspaces" / "other")
    (other.work_dir / "private.txt").write_text("OTHER-USER-CANARY\n")
    return {"var": var, "mine": var / "workspaces" / "mine"}


async def run(ctx: ToolContext, command: str, timeout: float = 20) -> str:
    result = await BashTool().run({"command": command, "timeout": timeout}, ctx)
    return result.content


async def test_without_a_sandbox_commands_are_refused_unless_permitted(server) -> None:
    ws = Workspace(server["mine"])
    with pytest.raises(ToolError) as refused:
        await run(ToolContext(workspace=ws, sandbox="none"), "cat ../../secret_key")
    message = str(refused.value)
    assert "without a sandbox" in message
    assert "apt-get install bubblewrap" in message and "run unsandboxed commands" in message
    permitted = ToolContext(workspace=ws, sandbox="none", unsandboxed_allowed=True)
    assert "Exit code: 0" in await run(permitted, "true")


def test_the_default_mode_is_auto_and_says_what_it_gives(tmp_path: Path) -> None:
    assert ToolContext(workspace=Workspace(tmp_path / "w")).sandbox == "auto"
    assert ToolContext(workspace=Workspace(tmp_path / "w")).unsandboxed_allowed is False
    none = describe_sandbox("none")
    assert not none.sandboxed and "WITHOUT a sandbox" in none.summary()
    auto = describe_sandbox("auto")
    assert auto.sandboxed == (shutil.which("bwrap") is not None) or auto.problem


@needs_bwrap
async def test_auto_sandboxes_and_nothing_of_the_server_is_reachable(server) -> None:
    ws = Workspace(server["mine"])
    ctx = ToolContext(workspace=ws)  # the defaults: auto, no unsandboxed permission
    out = await run(
        ctx,
        "cat ../../secret_key ../../db.sqlite3 ../other/work/private.txt; ls ../..; "
        f"cat {server['var']}/secret_key; ls /proc/1/root/ 2>&1 | head -3; "
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c SECRET_KEY; echo end",
    )
    assert "CANARY" not in out
    assert "end" in out
    # Positive control: the files are there for the server itself.
    assert "CANARY" in (server["var"] / "secret_key").read_text()


@needs_bwrap
async def test_in_bwrap_only_the_workspace_is_writable_and_skills_are_read_only(server) -> None:
    ws = Workspace(server["mine"])
    (ws.skills_dir / "s").mkdir()
    (ws.skills_dir / "s" / "SKILL.md").write_text("body\n")
    out = await run(
        ToolContext(workspace=ws),
        "echo x > ../../planted; echo x > skills/s/SKILL.md; echo x > /usr/planted;"
        " echo ok > work/fine; cat work/fine",
    )
    assert out.splitlines()[-3] == "ok"
    assert not (server["var"] / "planted").exists()
    assert (ws.skills_dir / "s" / "SKILL.md").read_text() == "body\n"


# A long sleep whose command line carries the marker (python ignores the extra argument).
SLEEPER = "python3 -c 'import time; time.sleep(79)' {m}"
ESCAPES = {
    "setsid subshell": "(setsid {s} &)",
    "nohup": "nohup {s} > /dev/null 2>&1 &",
    "double fork": "( ( {s} & ) & )",
    "setsid -f": "setsid -f {s}",
    "disown": "{s} & disown",
}


@pytest.mark.parametrize("mode", ["none", pytest.param("bwrap", marks=needs_bwrap)])
@pytest.mark.parametrize("escape", sorted(ESCAPES))
async def test_no_descendant_outlives_the_call(tmp_path: Path, mode: str, escape: str) -> None:
    marker = f"m{uuid.uuid4().hex}"
    ctx = ToolContext(workspace=Workspace(tmp_path / "w"), sandbox=mode, unsandboxed_allowed=True)
    # Wait until the escapee runs (bounded), so the check below is about killing, not racing.
    started = f"for i in $(seq 200); do pgrep -f {marker} >/dev/null && break; sleep 0.01; done"
    out = await run(
        ctx, f"{ESCAPES[escape].format(s=SLEEPER.format(m=marker))}; {started}; echo up"
    )
    assert "up" in out
    assert wait_until_gone(marker, seconds=3.0) == []


@pytest.mark.parametrize("mode", ["none", pytest.param("bwrap", marks=needs_bwrap)])
async def test_a_timeout_kills_what_left_the_session(tmp_path: Path, mode: str) -> None:
    marker = f"m{uuid.uuid4().hex}"
    ctx = ToolContext(workspace=Workspace(tmp_path / "w"), sandbox=mode, unsandboxed_allowed=True)
    started = time.monotonic()
    out = await run(ctx, f"(setsid {SLEEPER.format(m=marker)} &); sleep 60", timeout=0.5)
    assert "timed out" in out and time.monotonic() - started < 8
    assert wait_until_gone(marker, seconds=3.0) == []


SERVER = """
import asyncio, sys
from pathlib import Path
from skills_app.core.tools import BashTool, ToolContext, Workspace
ws = Workspace(Path(sys.argv[1]))
ctx = ToolContext(workspace=ws, sandbox=sys.argv[2], unsandboxed_allowed=True)
marker = sys.argv[3]
command = (
    f"(setsid sh -c 'while :; do date > work/tick; sleep 0.05; done; : {marker}' &); "
    f"nohup python3 -c 'import time; time.sleep(79)' {marker} > /dev/null 2>&1 & "
    "echo started > work/started; sleep 60"
)
asyncio.run(BashTool().run({"command": command, "timeout": 100}, ctx))
"""


@pytest.mark.parametrize("mode", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_a_server_kill_takes_every_command_process_with_it(tmp_path: Path, mode: str) -> None:
    marker = f"m{uuid.uuid4().hex}"
    root = tmp_path / "w"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(root), mode, marker], env=env)
    try:
        deadline = time.monotonic() + 20
        # Both escapees run (the loop has written its tick once) before the server is killed.
        while not ((root / "work" / "started").exists() and (root / "work" / "tick").exists()):
            assert time.monotonic() < deadline, "the command never started"
            assert proc.poll() is None, "the server process died early"
            time.sleep(0.02)
        assert live_processes_with(marker), "positive control: the escapees are running"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert wait_until_gone(marker, seconds=5.0) == []
    tick = root / "work" / "tick"
    stamp = tick.stat().st_mtime_ns
    # Nothing is left to write: the loop that wrote every 50 ms is gone (checked above), so the
    # file must not change any more; a single observation after the gone-check suffices.
    assert tick.stat().st_mtime_ns == stamp
