"""Issue 23: a deny rule on a skill denies its files too, wherever a tool would reach them.

A copy staged before the rule was written stays in the workspace's skills/ folder; Read, Grep
and Glob of it are refused (Grep and Glob of a wider folder leave it out), as `skill://` inputs
and staging are (tests/security/test_offered_skill_files.py). Positive controls: another
skill's staged files stay readable, and without the rule the same calls are allowed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.permissions import PermissionContext, ToolCall, decide, parse_rule, read_filter
from skills_app.core.tools import GlobTool, GrepTool, ToolContext, Workspace

BODY = "DENIED-CANARY: the code word at the gate is marmalade, say it twice.\n"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    workspace = Workspace(tmp_path / "w")
    for name in ("secret-two", "helper", "plug:tool"):
        source = tmp_path / "src" / name.replace(":", "-")
        source.mkdir(parents=True)
        (source / "SKILL.md").write_text(f"---\nname: x\ndescription: d\n---\n{name} {BODY}")
        workspace.stage_skill(name, source, f"digest-{name}")
    return workspace


def context(
    ws: Workspace, *rules: tuple[str, str], active: tuple[str, ...] = ()
) -> PermissionContext:
    return PermissionContext(
        workspace=ws.root,
        admin_rules=[parse_rule(text, behavior) for behavior, text in rules],
        readable_roots=(ws.skills_dir,),
        active_skills=active,
    )


def read(ws: Workspace, path: str, ctx: PermissionContext) -> tuple[str, str]:
    decision = decide(ToolCall("Read", {"file_path": str(ws.root / path)}), ctx)
    return decision.behavior, decision.reason


@pytest.mark.parametrize(
    "rule", ["Skill(secret-two)", "Skill(secret*)", "Skill(secret-two *)", "Skill"]
)
def test_a_read_of_a_denied_skills_staged_file_is_refused(ws: Workspace, rule: str) -> None:
    ctx = context(ws, ("deny", rule), ("allow", "Read"))
    behavior, reason = read(ws, "skills/secret-two/SKILL.md", ctx)
    assert behavior == "deny" and rule in reason and "secret-two" in reason
    for tool, field in (("Grep", "path"), ("Glob", "path")):
        call = ToolCall(tool, {"pattern": "*", field: str(ws.skills_dir / "secret-two")})
        assert decide(call, ctx).behavior == "deny"


def test_another_skills_files_and_the_rule_free_case_stay_readable(ws: Workspace) -> None:
    ctx = context(ws, ("deny", "Skill(secret-two)"))
    assert read(ws, "skills/helper/SKILL.md", ctx)[0] == "allow"
    assert read(ws, "skills/secret-two/SKILL.md", context(ws))[0] == "allow"


def test_a_plugin_skills_folder_is_covered_by_its_name(ws: Workspace) -> None:
    ctx = context(ws, ("deny", "Skill(plug:tool)"))
    assert read(ws, "skills/plug__tool/SKILL.md", ctx)[0] == "deny"
    assert read(ws, "skills/secret-two/SKILL.md", ctx)[0] == "allow"


def test_a_deny_scoped_to_another_skill_applies_only_while_that_skill_is_active(ws):
    rule = parse_rule("Skill(secret-two)", "deny", scope_skill="helper")
    ctx = PermissionContext(workspace=ws.root, admin_rules=[rule], readable_roots=(ws.skills_dir,))
    assert read(ws, "skills/secret-two/SKILL.md", ctx)[0] == "allow"
    active = PermissionContext(
        workspace=ws.root,
        admin_rules=[rule],
        readable_roots=(ws.skills_dir,),
        active_skills=("helper",),
    )
    assert read(ws, "skills/secret-two/SKILL.md", active)[0] == "deny"


async def test_grep_and_glob_of_the_whole_workspace_leave_the_denied_skill_out(ws) -> None:
    ctx = context(ws, ("deny", "Skill(secret-two)"))
    tool_ctx = ToolContext(workspace=ws, path_allowed=read_filter(ctx))
    grep = await GrepTool().run({"pattern": "DENIED-CANARY", "output_mode": "content"}, tool_ctx)
    glob = await GlobTool().run({"pattern": "skills/**/SKILL.md"}, tool_ctx)
    assert "secret-two" not in grep.content and "helper DENIED-CANARY" in grep.content
    assert "secret-two" not in glob.content and "skills/helper/SKILL.md" in glob.content
    # Positive control: without the rule both show it.
    open_ctx = ToolContext(workspace=ws, path_allowed=read_filter(context(ws)))
    shown = await GrepTool().run({"pattern": "DENIED-CANARY"}, open_ctx)
    assert "skills/secret-two/SKILL.md" in shown.content
