"""The pure rules of attachments: names, kinds, limits, what the model is given."""

from __future__ import annotations

import base64

import pytest

from skills_app.core import attachments as core
from skills_app.core.attachments import AttachedFile, AttachmentError, Limits
from skills_app.core.demo import use_attachments
from skills_app.core.tools.workspace import Workspace, WorkspaceError

PNG = (
    b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00\x00\x00\x10\x00\x00\x00\x10" + b"\0" * 20
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\windows\\win.ini", "win.ini"),
        ("skills/pdf/SKILL.md", "SKILL.md"),
        (".env", "env"),
        ("..", "attachment"),
        ("", "attachment"),
        ("My Report (1).pdf", "My_Report__1.pdf"),
        ("\u202egpj.exe", "gpj.exe"),
        ("a\x00b.pdf", "ab.pdf"),
        ("$(rm -rf ~).txt", "rm_-rf.txt"),
    ],
)
def test_a_name_is_reduced_to_one_plain_component(given, expected):
    assert core.safe_name(given) == expected


def test_a_long_name_keeps_its_extension():
    name = core.safe_name("x" * 500 + ".xlsx")
    assert name.endswith(".xlsx") and len(name) <= core.MAX_NAME_CHARS


def test_an_image_that_is_not_one_is_refused_with_what_to_do():
    with pytest.raises(AttachmentError, match="named like a PNG image but its content is not"):
        core.media_type("cat.png", b"GIF89a....")
    with pytest.raises(AttachmentError, match="named like a PDF"):
        core.media_type("report.pdf", b"PK\x03\x04")


def test_the_content_decides_the_kind_of_an_unknown_name():
    assert core.media_type("screenshot", PNG[:16]) == "image/png"
    assert core.media_type("data.csv", b"a,b\n1,2") == "text/csv"


def test_limits_say_the_numbers():
    limits = Limits(max_file_bytes=1024, max_files=2)
    with pytest.raises(AttachmentError, match="the limit is 1 KB per file"):
        core.check_limits([2048], limits)
    with pytest.raises(AttachmentError, match=r"At most 2 files .*\(1 already attached\)"):
        core.check_limits([10, 10], limits, pending=1)
    with pytest.raises(AttachmentError, match="empty"):
        core.check_limits([0], limits)
    core.check_limits([1024, 1], limits)


def test_images_and_pdfs_become_blocks_within_the_api_limits():
    image = AttachedFile("a.png", "in/a.png", "image/png", len(PNG))
    block = core.content_block(image, PNG)
    assert block["type"] == "image" and base64.b64decode(block["source"]["data"]) == PNG
    pdf = AttachedFile("r.pdf", "in/r.pdf", core.PDF_TYPE, len(PDF))
    assert core.content_block(pdf, PDF)["type"] == "document"
    big = b"\x89PNG\r\n\x1a\n" + b"\0" * (4 * 1024 * 1024)
    assert core.content_block(AttachedFile("b.png", "in/b.png", "image/png", len(big)), big) is None
    sheet = AttachedFile("s.xlsx", "in/s.xlsx", "application/zip", 3)
    assert core.content_block(sheet, b"PK\x03") is None


def test_the_note_lists_paths_the_demo_reads_back():
    files = [AttachedFile("r.pdf", "in/r.pdf", core.PDF_TYPE, 2048)]
    note = core.model_note(files)
    assert "in/r.pdf (application/pdf, 2 KB)" in note
    assert core.paths_in_note(note) == ["in/r.pdf"]
    assert core.paths_in_note("- in/x.pdf (text)") == []  # only a real note counts


def test_the_demo_uses_the_attached_file_instead_of_the_example_name():
    assert use_attachments("pdftotext input.pdf out.txt", ["in/r.pdf"]) == (
        "pdftotext in/r.pdf out.txt"
    )
    assert use_attachments("python3 /s/scripts/x.py book.xlsx", ["in/b.xlsx"]) == (
        "python3 /s/scripts/x.py in/b.xlsx"
    )
    assert use_attachments("wc README.md", ["in/r.pdf"]) == "wc README.md"


def test_saving_never_writes_through_a_planted_link_or_over_a_file(tmp_path):
    ws = Workspace(tmp_path / "ws")
    secret = tmp_path / "secret.txt"
    secret.write_text("server secret")
    (ws.root / "in" / "report.pdf").symlink_to(secret)
    path = ws.save_input("report.pdf", PDF)
    assert path == "in/report-2.pdf"
    assert secret.read_text() == "server secret"
    assert ws.save_input("report.pdf", PDF) == "in/report-3.pdf"


def test_a_linked_in_folder_is_replaced_not_followed(tmp_path):
    ws = Workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "in").rmdir()
    (ws.root / "in").symlink_to(outside)
    assert ws.save_input("a.txt", b"hello") == "in/a.txt"
    assert not (outside / "a.txt").exists()
    assert (ws.root / "in").is_dir() and not (ws.root / "in").is_symlink()


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", ""])
def test_save_refuses_anything_but_a_plain_name(tmp_path, name):
    with pytest.raises(WorkspaceError):
        Workspace(tmp_path / "ws").save_input(name, b"x")
