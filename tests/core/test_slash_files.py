"""A slash command's argument that names a file the conversation does not have gets a plain
note (issue 42: `/text-stats README.md` counted the word "README.md")."""

from __future__ import annotations

import pytest

from skills_app.core.slash_files import missing_files, missing_files_note, path_like_words
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import write_skills
from tests.support.recording_ports import Chat, rule


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ("README.md", ["README.md"]),
        ("count in/notes/weekly-sync.md please", ["in/notes/weekly-sync.md"]),
        ('"draft.txt", and ./out/a.json', ["draft.txt", "./out/a.json"]),
        ("version 2.5.0, e.g. soon", []),
        ("see https://example.org/a.md --verbose", []),
        ("the quick brown fox", []),
    ],
)
def test_words_that_look_like_paths_are_picked_out(args, words):
    assert path_like_words(args) == words


def test_files_in_the_workspace_or_attached_are_not_missing(tmp_path):
    chat = Chat(tmp_path, skills_dir=write_skills(tmp_path / "skills"))
    workspace = chat.workspace
    (workspace.root / "in" / "README.md").write_text("attached\n")
    (workspace.work_dir / "notes.md").write_text("notes\n")
    assert missing_files("README.md notes.md work/notes.md", workspace) == []
    assert missing_files("CHANGES.md ../../etc/passwd.txt /etc/hosts", workspace) == [
        "CHANGES.md",
        "../../etc/passwd.txt",
        "/etc/hosts",
    ]


def test_the_note_names_the_files_and_agrees_in_number():
    assert missing_files_note(["README.md"]) == (
        "README.md is not among this conversation's files: attach it first."
    )
    assert missing_files_note(["a.md", "b.md", "c.md"]) == (
        "a.md, b.md and c.md are not among this conversation's files: attach them first."
    )


async def test_a_slash_command_naming_a_missing_file_gets_a_note_the_model_never_sees(tmp_path):
    chat = Chat(tmp_path, skills_dir=write_skills(tmp_path / "skills"), rules=[rule("Skill")])
    chat.model.enqueue(Reply.text("Hi!"), Reply.text("Hi again!"))
    await chat.turn("/greeter README.md")
    notes = [r for r in chat.rows if r.kind == "notice"]
    assert [n.content[0]["text"] for n in notes] == [
        "README.md is not among this conversation's files: attach it first."
    ]
    assert notes[0].to_model is False
    assert "attach it first" not in str(chat.calls[0].messages)
    # Once the file is there, no note.
    (chat.workspace.root / "in" / "README.md").write_text("now attached\n")
    await chat.turn("/greeter README.md")
    assert len([r for r in chat.rows if r.kind == "notice"]) == 1
