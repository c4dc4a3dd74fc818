from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.tools import (
    EditTool,
    ReadTool,
    ToolContext,
    ToolError,
    Workspace,
    WorkspaceError,
    WriteTool,
    default_tools,
)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside.txt"
    secret.write_text("TOP SECRET\n")
    return secret


# --- Read ---------------------------------------------------------------------------------


async def test_it_reads_with_line_numbers(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "a.txt").write_text("alpha\nbeta\n")
    result = await ReadTool().run({"file_path": "work/a.txt"}, ctx)
    assert result.content == "     1\talpha\n     2\tbeta"
    assert not result.is_error


async def test_it_reads_a_window_and_says_how_to_continue(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = await ReadTool().run({"file_path": "work/n.txt", "offset": 3, "limit": 2}, ctx)
    assert result.content.splitlines()[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "showing lines 3-4 of 10" in result.content
    assert "offset=5" in result.content


async def test_it_cuts_long_lines(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "long.txt").write_text("x" * 5000 + "\nshort\n")
    result = await ReadTool().run({"file_path": "work/long.txt"}, ctx)
    first, second = result.content.splitlines()[:2]
    assert first.endswith("[line cut]") and len(first) < 2100
    assert second == "     2\tshort"


async def test_it_refuses_binary_files(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "img.png").write_bytes(b"\x89PNG\x00\x00\x01")
    with pytest.raises(ToolError, match="is a binary file"):
        await ReadTool().run({"file_path": "work/img.png"}, ctx)


async def test_it_says_a_missing_file_does_not_exist(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="does not exist: work/nope.txt"):
        await ReadTool().run({"file_path": "work/nope.txt"}, ctx)


async def test_it_refuses_to_read_a_directory(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        await ReadTool().run({"file_path": "out"}, ctx)


async def test_it_reads_staged_skill_files(ws: Workspace, ctx: ToolContext, tmp_path: Path) -> None:
    src = tmp_path / "skill"
    src.mkdir()
    (src / "SKILL.md").write_text("hello skill\n")
    ws.stage_skill("demo", src, "d")
    result = await ReadTool().run({"file_path": "skills/demo/SKILL.md"}, ctx)
    assert "hello skill" in result.content


@pytest.mark.parametrize("path", ["../outside.txt", "../../etc/passwd", "/etc/passwd"])
async def test_it_refuses_to_read_outside_the_workspace(
    ctx: ToolContext, outside: Path, path: str
) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        await ReadTool().run({"file_path": path}, ctx)


async def test_it_refuses_to_read_through_a_symlink_leading_out(
    ws: Workspace, ctx: ToolContext, outside: Path
) -> None:
    (ws.work_dir / "link.txt").symlink_to(outside)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ReadTool().run({"file_path": "work/link.txt"}, ctx)


# --- Write --------------------------------------------------------------------------------


async def test_it_writes_a_file_and_reports_the_artifact(ws: Workspace, ctx: ToolContext) -> None:
    result = await WriteTool().run({"file_path": "out/deep/r.md", "content": "# Hi\n"}, ctx)
    assert (ws.out_dir / "deep" / "r.md").read_text() == "# Hi\n"
    assert result.artifacts == ("out/deep/r.md",)
    assert result.content.startswith("Created out/deep/r.md")
    again = await WriteTool().run({"file_path": "out/deep/r.md", "content": ""}, ctx)
    assert again.content.startswith("Updated")
    assert (ws.out_dir / "deep" / "r.md").read_text() == ""


async def test_it_reports_no_artifact_for_scratch_files(ws: Workspace, ctx: ToolContext) -> None:
    result = await WriteTool().run({"file_path": "work/s.txt", "content": "x"}, ctx)
    assert result.artifacts == ()


async def test_it_refuses_to_write_into_a_staged_skill(
    ws: Workspace, ctx: ToolContext, tmp_path: Path
) -> None:
    src = tmp_path / "skill"
    src.mkdir()
    (src / "SKILL.md").write_text("original\n")
    staged = ws.stage_skill("demo", src, "d")
    for path in ("skills/demo/SKILL.md", "skills/demo/new.txt"):
        with pytest.raises(WorkspaceError, match="read-only"):
            await WriteTool().run({"file_path": path, "content": "evil"}, ctx)
    assert (staged / "SKILL.md").read_text() == "original\n"
    assert not (staged / "new.txt").exists()


async def test_it_refuses_to_write_through_a_symlink_leading_out(
    ws: Workspace, ctx: ToolContext, outside: Path, tmp_path: Path
) -> None:
    (ws.work_dir / "link.txt").symlink_to(outside)
    (ws.work_dir / "dirlink").symlink_to(tmp_path)
    for path in ("work/link.txt", "work/dirlink/planted.txt", "../planted.txt", "/tmp/planted.txt"):
        with pytest.raises(WorkspaceError):
            await WriteTool().run({"file_path": path, "content": "pwned"}, ctx)
    assert outside.read_text() == "TOP SECRET\n"
    assert not (tmp_path / "planted.txt").exists()


async def test_it_refuses_to_write_over_a_directory(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        await WriteTool().run({"file_path": "out", "content": "x"}, ctx)


# --- Edit ---------------------------------------------------------------------------------


async def test_it_edits_one_exact_occurrence(ws: Workspace, ctx: ToolContext) -> None:
    (ws.out_dir / "e.md").write_bytes(b"a = 1\r\nb = 2\r\n")
    result = await EditTool().run(
        {"file_path": "out/e.md", "old_string": "b = 2", "new_string": "b = 3"}, ctx
    )
    assert (ws.out_dir / "e.md").read_bytes() == b"a = 1\r\nb = 3\r\n"
    assert result.content == "Replaced 1 occurrence in out/e.md."
    assert result.artifacts == ("out/e.md",)


async def test_it_says_when_old_string_is_not_found(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "e.txt").write_text("hello\n")
    with pytest.raises(ToolError, match="old_string not found"):
        await EditTool().run(
            {"file_path": "work/e.txt", "old_string": "bye", "new_string": "x"}, ctx
        )


async def test_it_refuses_an_ambiguous_edit_unless_replace_all(
    ws: Workspace, ctx: ToolContext
) -> None:
    (ws.work_dir / "e.txt").write_text("x x x\n")
    with pytest.raises(ToolError, match="found 3 times.*replace_all"):
        await EditTool().run({"file_path": "work/e.txt", "old_string": "x", "new_string": "y"}, ctx)
    assert (ws.work_dir / "e.txt").read_text() == "x x x\n"
    result = await EditTool().run(
        {"file_path": "work/e.txt", "old_string": "x", "new_string": "y", "replace_all": True}, ctx
    )
    assert (ws.work_dir / "e.txt").read_text() == "y y y\n"
    assert result.content == "Replaced 3 occurrences in work/e.txt."


async def test_it_refuses_pointless_edits(ws: Workspace, ctx: ToolContext) -> None:
    (ws.work_dir / "e.txt").write_text("x\n")
    with pytest.raises(ToolError, match="identical"):
        await EditTool().run({"file_path": "work/e.txt", "old_string": "x", "new_string": "x"}, ctx)
    with pytest.raises(ToolError, match="old_string is empty"):
        await EditTool().run({"file_path": "work/e.txt", "old_string": "", "new_string": "x"}, ctx)


async def test_it_refuses_to_edit_a_missing_file(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await EditTool().run(
            {"file_path": "work/no.txt", "old_string": "a", "new_string": "b"}, ctx
        )


async def test_it_refuses_to_edit_a_staged_skill(
    ws: Workspace, ctx: ToolContext, tmp_path: Path
) -> None:
    src = tmp_path / "skill"
    src.mkdir()
    (src / "SKILL.md").write_text("original\n")
    staged = ws.stage_skill("demo", src, "d")
    with pytest.raises(WorkspaceError, match="read-only"):
        await EditTool().run(
            {"file_path": "skills/demo/SKILL.md", "old_string": "original", "new_string": "evil"},
            ctx,
        )
    assert (staged / "SKILL.md").read_text() == "original\n"


async def test_it_refuses_to_edit_through_a_symlink_leading_out(
    ws: Workspace, ctx: ToolContext, outside: Path
) -> None:
    (ws.work_dir / "link.txt").symlink_to(outside)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await EditTool().run(
            {"file_path": "work/link.txt", "old_string": "TOP", "new_string": "NO"}, ctx
        )
    assert outside.read_text() == "TOP SECRET\n"


# --- registry -----------------------------------------------------------------------------


async def test_the_registry_lists_tools_in_a_stable_order_and_turns_errors_into_results(
    ctx: ToolContext,
) -> None:
    registry = default_tools()
    assert registry.names() == ["Read", "Write", "Edit", "Glob", "Grep", "Bash"]
    schemas = registry.schemas()
    assert [s["name"] for s in schemas] == registry.names()
    assert schemas[0]["input_schema"]["required"] == ["file_path"]
    assert registry.without(["Bash", "Write"]).names() == ["Read", "Edit", "Glob", "Grep"]
    error = await registry.call("Read", {"file_path": "/etc/passwd"}, ctx)
    assert error.is_error and "outside the workspace" in error.content
    unknown = await registry.call("Nope", {}, ctx)
    assert unknown.is_error and "Available tools: Read" in unknown.content


def test_the_registry_refuses_duplicate_names() -> None:
    with pytest.raises(ValueError, match="unique"):
        type(default_tools())([ReadTool(), ReadTool()])
