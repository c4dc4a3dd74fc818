from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from skills_app.core.tools import BashLimits, BashTool, ToolContext, ToolError, Workspace

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed"
)


@pytest.fixture
def ctx(ws: Workspace) -> ToolContext:
    # The unsandboxed path, as a user with the "run unsandboxed commands" permission has it.
    return ToolContext(
        workspace=ws,
        env={"SKILL_DIR": str(ws.skills_dir / "demo")},
        sandbox="none",
        unsandboxed_allowed=True,
    )


@pytest.fixture
def bwrap_ctx(ws: Workspace) -> ToolContext:
    return ToolContext(workspace=ws, sandbox="bwrap")


@pytest.fixture
def staged(ws: Workspace, tmp_path: Path) -> Path:
    src = tmp_path / "skill-src"
    src.mkdir()
    (src / "SKILL.md").write_text("original\n")
    return ws.stage_skill("demo", src, "d1")


def live_processes_with(marker: str) -> list[int]:
    """Pids of non-zombie processes whose command line contains `marker`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state = stat[stat.rindex(")") + 2 :].split()[0]
        if marker.encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def wait_until_gone(marker: str, seconds: float = 3.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (alive := live_processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def wait_until_dead(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat[stat.rindex(")") + 2] == "Z":
            return True
        time.sleep(0.05)
    return False


async def run(ctx: ToolContext, command: str, tool: BashTool | None = None, **extra: object):
    return await (tool or BashTool()).run({"command": command, **extra}, ctx)


# --- ordinary use -------------------------------------------------------------------------


async def test_it_runs_in_the_workspace_root_and_reports_the_exit_code(
    ws: Workspace, ctx: ToolContext
) -> None:
    result = await run(ctx, "pwd; echo oops >&2")
    assert result.content == f"{ws.root}\noops\n\nExit code: 0"
    assert not result.is_error
    failed = await run(ctx, "exit 3")
    assert failed.is_error and failed.content == "Exit code: 3"


async def test_it_reports_files_created_or_changed_under_out(
    ws: Workspace, ctx: ToolContext
) -> None:
    (ws.out_dir / "same.txt").write_text("same")
    (ws.out_dir / "changed.txt").write_text("old")
    result = await run(
        ctx, 'echo new > "$OUTPUT_DIR/new.md"; echo more >> out/changed.txt; echo x > work/s'
    )
    assert result.artifacts == ("out/changed.txt", "out/new.md")


async def test_it_never_passes_the_server_environment_on(
    ws: Workspace, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-leak")
    monkeypatch.setenv("SECRET_KEY", "django-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://leak")
    result = await run(ctx, "env")
    assert "leak" not in result.content
    assert "ANTHROPIC_API_KEY" not in result.content and "SECRET_KEY" not in result.content
    env = dict(line.split("=", 1) for line in result.content.splitlines() if "=" in line)
    # $HOME is a fresh folder outside the workspace, so nothing written there is read as config.
    assert not env["HOME"].startswith(str(ws.root)) and env["HOME"] != "/"
    assert env["WORK_DIR"] == str(ws.work_dir)
    assert env["OUTPUT_DIR"] == str(ws.out_dir)
    assert env["SKILLS_DIR"] == str(ws.skills_dir)
    assert env["SKILL_DIR"] == str(ws.skills_dir / "demo")
    assert env["TMPDIR"].startswith(str(ws.work_dir))
    assert env["LC_ALL"] == "C.UTF-8"


async def test_it_closes_stdin_so_cat_returns_at_once(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await run(ctx, "cat; echo after", timeout=10)
    assert time.monotonic() - started < 3
    assert result.content == "after\n\nExit code: 0"


async def test_it_stops_background_jobs_when_the_command_ends(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await run(ctx, "sleep 30 & echo $!", timeout=20)
    assert time.monotonic() - started < 3
    pid = int(result.content.split()[0])
    assert wait_until_dead(pid) is True


async def test_it_rejects_an_unknown_sandbox(ws: Workspace, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="unknown sandbox"):
        await run(ToolContext(workspace=ws, sandbox="docker"), "true")


# --- limits -------------------------------------------------------------------------------


async def test_it_kills_an_endless_loop_at_the_timeout(ctx: ToolContext) -> None:
    marker = f"loop-{uuid.uuid4().hex}"
    started = time.monotonic()
    # One second: the command's CPU limit is its timeout plus a second, so the wall clock ends
    # it unless this process is kept off the CPU for a whole second (a 0.5 s timeout, with half
    # a second's margin, lost to the CPU limit once on a machine loaded by four test workers).
    result = await run(ctx, f": {marker}; while :; do :; done", timeout=1)
    assert time.monotonic() - started < 10  # the loop never ends; margin for a loaded machine
    assert result.is_error
    assert "timed out after 1 seconds" in result.content
    assert wait_until_gone(marker) == []


async def test_it_caps_the_timeout_at_the_context_maximum(ws: Workspace) -> None:
    ctx = ToolContext(workspace=ws, bash_timeout_max=1)
    started = time.monotonic()
    result = await run(ctx, "sleep 20", timeout=600)
    # Well under the 20 s the command would take, with margin for a loaded machine.
    assert time.monotonic() - started < 15
    assert "timed out after 1 seconds" in result.content


async def test_it_stops_a_runaway_loop_with_the_cpu_limit(ctx: ToolContext) -> None:
    tool = BashTool(BashLimits(cpu_seconds=1))
    started = time.monotonic()
    result = await run(ctx, "exec bash -c 'while :; do :; done'", tool, timeout=20)
    assert time.monotonic() - started < 8  # CPU seconds, so slower on a busy machine
    assert "SIGXCPU" in result.content and "CPU time limit" in result.content


async def test_it_limits_memory(ctx: ToolContext) -> None:
    result = await run(ctx, "python3 -c 'bytearray(2 * 1024**3)'", timeout=20)
    assert result.is_error
    assert "MemoryError" in result.content


async def test_it_limits_the_size_of_written_files(ws: Workspace, ctx: ToolContext) -> None:
    tool = BashTool(BashLimits(file_size_bytes=1024 * 1024))
    result = await run(ctx, "head -c 5000000 /dev/zero > out/big.bin", tool, timeout=20)
    assert result.is_error
    assert "SIGXFSZ" in result.content and "file size limit exceeded" in result.content
    assert (ws.out_dir / "big.bin").stat().st_size <= 1024 * 1024


async def test_it_caps_an_output_flood_keeping_head_and_tail(ws: Workspace) -> None:
    ctx = ToolContext(workspace=ws, output_limit=1000)
    result = await run(ctx, "seq 1 100000", timeout=20)
    total = len("".join(f"{i}\n" for i in range(1, 100001)))
    assert result.content.startswith("1\n2\n3\n")
    assert result.content.endswith("99999\n100000\n\nExit code: 0")
    assert f"[... {total - 1000} bytes of output cut ...]" in result.content
    assert len(result.content) < 1200


# Every fork bomb here stops forking by itself after BOMB_SECONDS ($SECONDS is inherited by
# subshells), so a regression in the kill path cannot leave a bomb running on the test machine.
# The checks therefore look for survivors within one second of the call returning, well before
# the bomb would have died out on its own.
BOMB_SECONDS = 3


async def test_it_kills_a_fork_bomb_and_leaves_no_process_behind(ctx: ToolContext) -> None:
    marker = f"bomb-{uuid.uuid4().hex}"
    started = time.monotonic()
    # The trailing sleep keeps the shell alive so the timeout path (not just the exit path) runs.
    bomb = f"bomb() {{ [ $SECONDS -lt {BOMB_SECONDS} ] && {{ bomb | bomb & }}; }}"
    result = await run(ctx, f": {marker}; {bomb}; bomb; sleep 30; :", timeout=0.5)
    # The timeout path ended it (the trailing `sleep 30` never ran out), with room for a busy box.
    assert time.monotonic() - started < 10
    assert "timed out" in result.content
    assert wait_until_gone(marker, seconds=5.0) == []


async def test_it_cleans_up_the_classic_fork_bomb_when_the_shell_exits(ctx: ToolContext) -> None:
    marker = f"bomb-{uuid.uuid4().hex}"
    started = time.monotonic()
    await run(
        ctx, f": {marker}; :(){{ [ $SECONDS -lt {BOMB_SECONDS} ] && {{ :|:& }}; }};:", timeout=0.5
    )
    # The timeout path ended it (the trailing `sleep 30` never ran out), with room for a busy box.
    assert time.monotonic() - started < 10
    assert wait_until_gone(marker, seconds=5.0) == []


# --- staged skills and the bubblewrap sandbox -----------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="root only: the copy belongs to another uid")
async def test_without_a_sandbox_root_cannot_change_a_staged_skill(
    ws: Workspace, ctx: ToolContext, staged: Path
) -> None:
    # The staged copy belongs to "nobody" and a root command runs without capabilities, so
    # modes and ownership hold: no write, no chmod, no rename, no replacing skills/ itself.
    attempts = [
        "echo evil >> skills/demo/SKILL.md",
        "chmod u+w skills/demo/SKILL.md",
        "chown root skills/demo/SKILL.md",
        "mv skills/demo skills/gone",
        "rm -rf skills/demo",
        "ln -sfn /etc skills/demo/out",
    ]
    for command in attempts:
        result = await run(ctx, command)
        assert result.is_error, command
    assert (staged / "SKILL.md").read_text() == "original\n"
    assert os.readlink(staged / "out") == "../../out"
    status = (await run(ctx, "grep CapEff /proc/self/status")).content
    assert "CapEff:\t0000000000000000" in status


async def test_it_says_how_to_install_bubblewrap_when_it_is_missing(
    bwrap_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolError, match="apt-get install bubblewrap.*SANDBOX=none"):
        await run(bwrap_ctx, "true")


@needs_bwrap
async def test_in_bwrap_it_runs_in_the_workspace_and_reports_artifacts(
    ws: Workspace, bwrap_ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-leak")
    result = await run(
        bwrap_ctx, "pwd; env; echo hi > out/r.md; python3 -c 'print(6*7)'", timeout=20
    )
    assert result.content.startswith(f"{ws.root}\n")
    assert "leak" not in result.content
    assert "42" in result.content
    assert result.artifacts == ("out/r.md",)
    assert (ws.out_dir / "r.md").read_text() == "hi\n"


@needs_bwrap
async def test_in_bwrap_staged_skills_are_read_only_even_for_root(
    bwrap_ctx: ToolContext, staged: Path
) -> None:
    result = await run(
        bwrap_ctx,
        "echo evil >> skills/demo/SKILL.md; rm -f skills/demo/SKILL.md; touch skills/demo/new;"
        " mount -o remount,rw,bind skills; echo evil >> skills/demo/SKILL.md; cat skills/demo/SKILL.md",
        timeout=20,
    )
    assert "original" in result.content
    assert (staged / "SKILL.md").read_text() == "original\n"
    assert not (staged / "new").exists()


@needs_bwrap
async def test_in_bwrap_nothing_outside_the_workspace_is_visible_or_writable(
    ws: Workspace, bwrap_ctx: ToolContext, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("TOP SECRET\n")
    result = await run(
        bwrap_ctx,
        "cat ../outside.txt; cat /etc/shadow; ls /root; echo pwned > ../planted.txt;"
        " echo pwned > /etc/planted; echo done",
        timeout=20,
    )
    assert "TOP SECRET" not in result.content
    assert "root:" not in result.content
    assert result.content.splitlines()[-3] == "done"
    assert not (tmp_path / "planted.txt").exists()
    assert not Path("/etc/planted").exists()


@needs_bwrap
async def test_in_bwrap_there_is_no_network(bwrap_ctx: ToolContext) -> None:
    result = await run(
        bwrap_ctx, "echo > /dev/tcp/1.1.1.1/80 && echo connected; ls /sys/class/net", timeout=10
    )
    assert "connected" not in result.content
    assert "eth0" not in result.content


@needs_bwrap
async def test_in_bwrap_a_fork_bomb_is_killed_with_its_namespace(bwrap_ctx: ToolContext) -> None:
    marker = f"bomb-{uuid.uuid4().hex}"
    started = time.monotonic()
    bomb = f"bomb() {{ [ $SECONDS -lt {BOMB_SECONDS} ] && {{ bomb | bomb & }}; }}"
    result = await run(bwrap_ctx, f": {marker}; {bomb}; bomb; sleep 30; :", timeout=0.5)
    # The timeout path ended it (the trailing `sleep 30` never ran out), with room for a busy box.
    assert time.monotonic() - started < 10
    assert "timed out" in result.content
    assert wait_until_gone(marker, seconds=5.0) == []
