"""Hostile and broken uploads: each is refused with its own message and leaves nothing behind."""

from __future__ import annotations

import os
import stat
import zipfile

import pytest

from skills_app.models import SkillVersion
from skills_app.registry import uploads
from skills_app.registry.uploads import UploadError, UploadFile
from tests.support.upload_helpers import (
    make_zip,
    patch_headers,
    skill_md,
    snapshot,
    special_entry,
    symlink_entry,
    write_folder,
    zip_with_entry,
)

pytestmark = pytest.mark.django_db

GOOD = {"ok/SKILL.md": skill_md("ok")}


@pytest.fixture(autouse=True)
def existing():
    """Storage and tables are not empty, so "unchanged" means more than "still empty"."""
    uploads.install_archive(make_zip({"present/SKILL.md": skill_md("present")}), "p.zip", user=None)


def refused(data: bytes, filename: str = "upload.zip", **kw) -> str:
    """The refusal message; asserts that storage and the database did not change."""
    before = snapshot()
    with pytest.raises(UploadError) as exc:
        uploads.install_archive(data, filename, user=None, **kw)
    assert snapshot() == before
    return exc.value.message


def test_a_dot_dot_path_is_refused():
    message = refused(make_zip({**GOOD, "ok/../../escape.txt": "x"}))
    assert "contains '..'" in message and "ok/../../escape.txt" in message


def test_an_absolute_path_is_refused():
    assert "absolute path" in refused(make_zip({**GOOD, "/etc/passwd": "x"}))


def test_a_windows_drive_path_is_refused():
    assert "absolute path" in refused(make_zip({**GOOD, "C:\\Windows\\evil.txt": "x"}))


def test_a_symlink_is_refused():
    data = zip_with_entry(symlink_entry("ok/link"), b"/etc/passwd", extra=GOOD)
    message = refused(data)
    assert "ok/link is a symbolic link" in message


@pytest.mark.parametrize("kind", [stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK])
def test_a_device_or_special_file_is_refused(kind):
    data = zip_with_entry(special_entry("ok/dev", kind), b"", extra=GOOD)
    assert "ok/dev is a device or special file" in refused(data)


def test_an_archive_expanding_past_the_total_limit_is_refused(settings):
    settings.UPLOAD_MAX_TOTAL_BYTES = 8000
    files = {**GOOD, "ok/a.bin": os.urandom(5000), "ok/b.bin": os.urandom(5000)}
    assert "expands to more than 8,000 bytes" in refused(make_zip(files))


def test_an_archive_with_too_many_files_is_refused(settings):
    settings.UPLOAD_MAX_FILES = 3
    files = {**GOOD, **{f"ok/{i}.txt": "x" for i in range(3)}}
    message = refused(make_zip(files))
    assert "holds 4 files and folders; the limit is 3" in message


def test_a_single_file_over_the_limit_is_refused(settings):
    settings.UPLOAD_MAX_FILE_BYTES = 2048
    message = refused(make_zip({**GOOD, "ok/big.bin": os.urandom(3000)}))
    assert "ok/big.bin is 3,000 bytes; one file may be at most 2,048 bytes" in message


def test_a_file_with_a_zip_bomb_ratio_is_refused():
    message = refused(make_zip({**GOOD, "ok/zeros.txt": b"\0" * (2 * 1024 * 1024)}))
    assert "ok/zeros.txt expands" in message and "zip bomb" in message


def test_an_archive_whose_total_ratio_is_too_high_is_refused():
    files = {**GOOD, **{f"ok/{i}.txt": b"\0" * (600 * 1024) for i in range(4)}}
    message = refused(make_zip(files))
    assert message.startswith("the archive expands") and "zip bomb" in message


def test_a_header_that_understates_a_files_size_is_not_trusted():
    data = make_zip({**GOOD, "ok/data.bin": b"A" * 5000}, compression=zipfile.ZIP_STORED)
    # The uncompressed size field: offset 22 in the local header, 24 in the central directory.
    data = patch_headers(data, "ok/data.bin", local=22, central=24, value=100, fmt="<I")
    assert "ok/data.bin cannot be read from the archive" in refused(data)


def test_duplicate_paths_are_refused():
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = zip_with_entry(zipfile.ZipInfo("ok/SKILL.md"), skill_md("ok").encode(), extra=GOOD)
    assert "'ok/SKILL.md' appears twice" in refused(data)


def test_paths_differing_only_in_letter_case_are_refused():
    message = refused(make_zip({**GOOD, "ok/Notes.md": "a", "ok/notes.md": "b"}))
    assert "'ok/Notes.md' and 'ok/notes.md' differ only in letter case" in message


def test_a_file_used_as_a_folder_is_refused():
    message = refused(make_zip({**GOOD, "ok/data": "a", "ok/data/inner.txt": "b"}))
    assert "'ok/data' is a file, but 'ok/data/inner.txt' uses it as a folder" in message


def test_a_name_with_a_control_character_is_refused():
    assert "control character U+0007" in refused(make_zip({**GOOD, "ok/be\x07ll.txt": "x"}))


def test_a_name_with_a_bidi_override_is_refused():
    assert "control character U+202E" in refused(make_zip({**GOOD, "ok/txt.\u202eexe": "x"}))


def test_an_encrypted_member_is_refused():
    data = make_zip({**GOOD, "ok/secret.txt": "x"})
    # zipfile clears the flags it writes, so set the "encrypted" bit in the raw headers.
    data = patch_headers(data, "ok/secret.txt", local=6, central=8, value=0x1, fmt="<H")
    assert "ok/secret.txt is encrypted" in refused(data)


def test_more_than_one_skill_root_is_refused():
    message = refused(make_zip({**GOOD, "other/SKILL.md": skill_md("other")}))
    assert "holds 2 skill folders (ok, other) where one is expected" in message


def test_files_beside_the_skill_folder_are_refused():
    message = refused(make_zip({**GOOD, "README.md": "x"}))
    assert "has company outside it (README.md)" in message


def test_a_missing_skill_md_is_refused():
    message = refused(make_zip({"ok/README.md": "x"}))
    assert message.startswith("no SKILL.md where one is expected")


def test_a_skill_md_too_deep_to_be_a_skill_is_named():
    message = refused(make_zip({"a/b/c/SKILL.md": skill_md("c")}))
    assert "found only a/b/c/SKILL.md" in message


def test_a_file_nested_deeper_than_the_registry_reads_is_refused():
    deep = "ok/" + "/".join("d" * 7) + "/x.txt"
    assert "folders deep inside the skill" in refused(make_zip({**GOOD, deep: "x"}))


def test_yaml_that_does_not_parse_is_refused():
    text = "---\nname: ok\ndescription: [unclosed\n---\nBody\n"
    message = refused(make_zip({"ok/SKILL.md": text}))
    assert message.startswith("ok: the frontmatter is not valid YAML")


def test_yaml_with_an_impossible_date_is_refused():
    text = "---\nname: ok\ndescription: D.\nversion: 2024-13-45\n---\nBody\n"
    message = refused(make_zip({"ok/SKILL.md": text}))
    assert "2024-13-45" in message or "month must be in 1..12" in message
    assert "quote" in message


def test_a_skill_md_that_is_not_utf8_is_refused():
    data = make_zip({"ok/SKILL.md": b"---\nname: ok\ndescription: caf\xe9\n---\nBody\n"})
    assert "SKILL.md is not UTF-8" in refused(data)


def test_something_that_is_not_a_zip_is_refused():
    assert "is not a zip archive" in refused(b"just some text, no archive", "skill.zip")


def test_a_file_that_is_not_a_zip_or_skill_is_refused():
    assert "is not a .zip or .skill file" in refused(make_zip(GOOD), "skill.tar.gz")


def test_an_empty_zip_is_refused():
    assert "the upload is empty" in refused(make_zip({}))


def test_an_invalid_plugin_name_is_refused():
    message = refused(make_zip({"My Plugin/skills/a/SKILL.md": skill_md("a")}))
    assert message.startswith("the plugin name is not usable")


def test_a_plugin_at_the_root_of_a_folder_upload_needs_a_name():
    before = snapshot()
    with pytest.raises(UploadError, match="the plugin has no name"):
        uploads.install_files([UploadFile("skills/a/SKILL.md", skill_md("a").encode())], user=None)
    assert snapshot() == before


def test_a_failure_while_storing_the_second_skill_removes_the_first(monkeypatch):
    real = SkillVersion.objects.create
    calls = []

    def create(**kw):
        calls.append(kw["package"].name)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(**kw)

    monkeypatch.setattr(SkillVersion.objects, "create", create)
    data = make_zip(
        {"kit/skills/a/SKILL.md": skill_md("a"), "kit/skills/b/SKILL.md": skill_md("b")}
    )
    before = snapshot()
    with pytest.raises(RuntimeError, match="disk full"):
        uploads.install_archive(data, "kit.zip", user=None)
    assert calls == ["kit:a", "kit:b"]
    assert snapshot() == before


# --- the same rules for folders (browser and CLI) ------------------------------------------------


def folder_refused(files: list[UploadFile]) -> str:
    before = snapshot()
    with pytest.raises(UploadError) as exc:
        uploads.install_files(files, user=None)
    assert snapshot() == before
    return exc.value.message


def test_a_browser_folder_with_a_dot_dot_path_is_refused():
    files = [UploadFile("ok/SKILL.md", skill_md("ok").encode()), UploadFile("ok/../x", b"x")]
    assert "contains '..'" in folder_refused(files)


def test_a_browser_folder_with_too_many_files_is_refused(settings):
    settings.UPLOAD_MAX_FILES = 2
    files = [UploadFile(f"ok/{i}", b"x") for i in range(3)]
    assert "holds 3 files and folders; the limit is 2" in folder_refused(files)


def test_a_browser_folder_with_a_file_over_the_limit_is_refused(settings):
    settings.UPLOAD_MAX_FILE_BYTES = 1024
    files = [UploadFile("ok/SKILL.md", skill_md("ok").encode()), UploadFile("ok/b", b"x" * 2000)]
    assert "ok/b is 2,000 bytes" in folder_refused(files)


def test_a_folder_on_disk_with_a_symlink_is_refused(tmp_path):
    folder = write_folder(tmp_path / "ok", {"SKILL.md": skill_md("ok")})
    (folder / "link").symlink_to("/etc/passwd")
    before = snapshot()
    with pytest.raises(UploadError, match="ok/link is a symbolic link"):
        uploads.install_directory(folder, user=None)
    assert snapshot() == before
