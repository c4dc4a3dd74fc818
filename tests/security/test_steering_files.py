"""Issue 40 part 1: an allowed program runs what was allowed, not a file the model wrote for it.

Rules as in the attack: `allow Edit(**)`, `deny Bash(touch *)`, and one allow rule per program.
For each file that steers a program (a git config, a `.pth`, a lesskey, a module beside a
script...) the model writes it, then calls the allowed command, in the real bubblewrap sandbox.
Two layers hold, and each is tested on its own:

- the write: `Edit(**)` does not cover such a file, so the person is asked (here: nobody answers
  yes, the file is not written) and the marker the file would create stays absent;
- the environment: even when the file is there (the person allowed it, or an allowed command
  wrote it), the program does not obey it: `$HOME` is a fresh folder outside the workspace and
  the programs' own switches are off.

Every case has a positive control: the same file and command under the environment commands had
before (`$HOME` the workspace, no switches) does create the marker, so a test that passes is one
that could have failed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from skills_app.core.permissions import PermissionContext, ToolCall, decide, parse_rule
from skills_app.core.tools import BashTool, ToolContext, Workspace, describe_sandbox
from skills_app.core.tools import bash as bash_tool
from skills_app.core.tools import env as tool_env

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not describe_sandbox("auto").sandboxed,
    reason="needs a working bubblewrap (scripts/test.sh installs it)",
)
MARKER = "work/PWNED"
PY_SITE = ".local/lib/python3.11/site-packages"


@dataclass(frozen=True)
class Case:
    id: str
    files: dict[str, str]  # the planted files: workspace path -> content ({M}: the marker)
    allow: str  # the Bash allow rule
    command: str
    setup: str = ""  # a command run first (e.g. git init), as an earlier allowed call would
    env_holds: bool = True  # False: only the write rule holds (a file the program must read)
    given: tuple[tuple[str, str], ...] = ()  # the script or data the command reads, not steering
    rules_refuse: bool = False


HELLO = (("work/hello.py", "print('hello')\n"),)
APP_JS = (("work/app.js", "require('left-pad');\n"),)
GIT_INIT = "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x"
CASES = [
    Case(
        "git-fsmonitor-in-.git/config",
        {".git/config": "[core]\n\tfsmonitor = touch {M}\n"},
        "Bash(git status)",
        "git status",
        setup=GIT_INIT,
    ),
    Case(
        "git-diff-fsmonitor",
        {".git/config": "[core]\n\tfsmonitor = touch {M}\n"},
        "Bash(git diff *)",
        "git diff HEAD",
        setup=GIT_INIT,
    ),
    Case(
        "git-.gitconfig-at-the-root",
        {".gitconfig": "[core]\n\tfsmonitor = touch {M}\n"},
        "Bash(git grep *)",
        "git grep anything",
        setup=GIT_INIT,
    ),
    Case(
        "git-~/.config/git/config",
        {".config/git/config": "[core]\n\tfsmonitor = touch {M}\n"},
        "Bash(git status)",
        "git status",
        setup=GIT_INIT,
    ),
    Case(
        "git-sshCommand-with-fetch",
        {".git/config": "[core]\n\tsshCommand = touch {M}; false\n"},
        "Bash(git fetch *)",
        "git fetch ssh://example.invalid/repo.git",
        setup=GIT_INIT,
    ),
    Case(
        "python-.pth-in-user-site",
        {f"{PY_SITE}/zz.pth": "import os; open('{M}', 'w').close()\n"},
        "Bash(python3 work/hello.py)",
        "python3 work/hello.py",
        given=HELLO,
    ),
    Case(
        "pip-list-with-.pth",
        {f"{PY_SITE}/zz.pth": "import os; open('{M}', 'w').close()\n"},
        "Bash(pip list)",
        "pip list",
    ),
    Case(
        "python-usercustomize",
        {f"{PY_SITE}/usercustomize.py": "open('{M}', 'w').close()\n"},
        "Bash(python3 work/hello.py)",
        "python3 work/hello.py",
        given=HELLO,
    ),
    Case(
        "python-module-shadowing-the-standard-library",
        {"work/json.py": "open('{M}', 'w').close()\n"},
        "Bash(python3 work/hello.py)",
        "python3 work/hello.py",
        env_holds=False,
        given=(("work/hello.py", "import json\nprint(json.dumps(1))\n"),),
    ),
    Case(
        "less-lesskey-with-LESSOPEN",
        {".lesskey": "#env\nLESSOPEN=|touch {M}; cat %s\n"},
        "Bash(less *)",
        "less work/notes.txt",
        given=(("work/notes.txt", "notes\n"),),
    ),
    Case(
        "node-~/.node_modules",
        {".node_modules/left-pad.js": "require('fs').writeFileSync('{M}', '');\n"},
        "Bash(node work/app.js)",
        "node work/app.js",
        given=APP_JS,
    ),
    Case(
        "node-node_modules-beside-the-script",
        {"work/node_modules/left-pad/index.js": "require('fs').writeFileSync('{M}', '');\n"},
        "Bash(node work/app.js)",
        "node work/app.js",
        env_holds=False,
        given=APP_JS,
    ),
    Case(
        "bash-login-~/.profile",
        {".profile": "touch {M}\n"},
        "Bash(bash -lc *)",
        "bash -lc 'echo hi'",
        # The rules already refuse a login shell (its start-up files are code they cannot see).
        rules_refuse=True,
    ),
    Case(
        "curl-~/.curlrc",
        {".curlrc": 'output = "{M}"\n'},
        "Bash(curl *)",
        "curl -s file://$PWD/work/page.txt",
        given=(("work/page.txt", "page\n"),),
    ),
]
PROGRAMS = {"git", "python3", "pip", "less", "node", "bash", "curl"}
missing = sorted(p for p in PROGRAMS if shutil.which(p) is None)


def rules(case: Case) -> PermissionContext:
    texts = [("allow", "Edit(**)"), ("deny", "Bash(touch *)"), ("allow", case.allow)]
    return PermissionContext(
        workspace=Path("/ws"), admin_rules=tuple(parse_rule(t, behavior=b) for b, t in texts)
    )


def context(tmp_path: Path) -> tuple[Workspace, ToolContext]:
    ws = Workspace(tmp_path / "conv")
    return ws, ToolContext(workspace=ws, sandbox="bwrap")


async def bash(ctx: ToolContext, command: str) -> str:
    return (await BashTool().run({"command": command, "timeout": 30}, ctx)).content


def write(ws: Workspace, rel: str, text: str) -> None:
    path = ws.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("{M}", str(ws.root / MARKER)))


def plant(ws: Workspace, case: Case) -> None:
    for rel, text in [*case.given, *case.files.items()]:
        write(ws, rel, text)


@pytest.fixture
def legacy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment before the fix: $HOME the workspace, no program switches."""
    real = bash_tool.build_env

    def build_env(ws, extra, home=bash_tool.SANDBOX_HOME):  # type: ignore[no-untyped-def]
        env = real(ws, extra, home)
        for name in tool_env.program_switches(home):
            env.pop(name, None)
        env["HOME"] = str(ws.root)
        return env

    monkeypatch.setattr(bash_tool, "build_env", build_env)


@pytest.mark.skipif(bool(missing), reason=f"programs missing: {missing}")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_the_model_cannot_plant_a_file_an_allowed_program_obeys(
    case: Case, tmp_path: Path
) -> None:
    ws, ctx = context(tmp_path)
    policy = rules(case)
    if case.setup:
        await bash(ctx, case.setup)
    for rel, text in case.given:
        # The script or data itself: Edit(**) covers it as before.
        assert decide(ToolCall("Write", {"file_path": f"/ws/{rel}"}), policy).behavior == "allow"
        write(ws, rel, text)
    for rel in case.files:
        asked = decide(ToolCall("Write", {"file_path": f"/ws/{rel}"}), policy)
        # Asked, with the reason; nobody says yes here, so the file is not written.
        assert asked.behavior == "ask" and asked.protected, (rel, asked.reason)
        assert "needs an allow rule that names it" in asked.reason
    # The command the model then calls is allowed without asking, as in the attack.
    called = decide(ToolCall("Bash", {"command": case.command}), policy)
    assert called.behavior == ("deny" if case.rules_refuse else "allow"), called.reason
    output = await bash(ctx, case.command)
    assert not (ws.root / MARKER).exists(), output


ENV_CASES = [c for c in CASES if c.env_holds]


@pytest.mark.skipif(bool(missing), reason=f"programs missing: {missing}")
@pytest.mark.parametrize("case", ENV_CASES, ids=[c.id for c in ENV_CASES])
async def test_an_allowed_program_ignores_the_file_even_when_it_is_there(
    case: Case, tmp_path: Path
) -> None:
    ws, ctx = context(tmp_path)
    if case.setup:
        await bash(ctx, case.setup)
    plant(ws, case)
    output = await bash(ctx, case.command)
    assert not (ws.root / MARKER).exists(), output


@pytest.mark.skipif(bool(missing), reason=f"programs missing: {missing}")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_control_the_planted_file_does_run_under_the_old_environment(
    case: Case, tmp_path: Path, legacy_environment: None
) -> None:
    ws, ctx = context(tmp_path)
    if case.setup:
        await bash(ctx, case.setup)
    plant(ws, case)
    output = await bash(ctx, case.command)
    assert (ws.root / MARKER).exists(), output


# ---------------------------------------------------------------- under a reviewer's consent


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("control", [False, True], ids=["now", "control-old-environment"])
async def test_a_reviewed_skills_script_runs_without_a_planted_pth(
    settings, fake_anthropic, skill_manager, alice, control, request
) -> None:
    """The reviewed command runs without asking, as the reviewer consented, and only that: a
    `.pth` in the workspace's old user site (where `$HOME` was) is not run inside it. The
    control, under the old environment, shows the `.pth` did run there."""
    if control:
        request.getfixturevalue("legacy_environment")
    from asgiref.sync import sync_to_async

    from skills_app.models import Conversation, PermissionDecision, Run
    from skills_app.workspaces import workspace_for
    from tests.security.test_seam_consent import _command
    from tests.support.loop_helpers import run_turn, use_fake_model
    from tests.support.review_helpers import publish

    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    await sync_to_async(publish)(skill_manager)
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    ws = await sync_to_async(workspace_for)(conversation.pk)
    marker = ws.root / MARKER
    # As an earlier allowed command (or an approved write) would have left it.
    write(ws, f"{PY_SITE}/zz.pth", "import os; open('{M}', 'w').close()\n")
    seen: list[str] = []

    def responder(request: dict) -> object:
        from tests.support.fake_anthropic import Reply

        command = _command(request)
        last = request["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            seen.append(str(results[0]["content"]))
            return Reply.text("done")
        return Reply.tool_use("Bash", {"command": command}) if command else Reply.text("no")

    fake_anthropic.set_responder(responder)
    run = await run_turn(conversation, "/org-greet Ada", alice, answer="deny")
    assert run.status == Run.DONE, run.error
    decision = await PermissionDecision.objects.filter(
        conversation=conversation, tool="Bash"
    ).alast()
    assert decision is not None and decision.source == "review" and decision.decision == "allow"
    assert seen and "Hello, Ada!" in seen[0]  # the reviewed script did run
    assert marker.exists() == control
