"""What a reviewer is shown (core.review.package, core.review.pages): every file read whatever
the package's size, every text kept whole, the review in pages that leave nothing out and never
grow with a file, what a reviewer could not read, and when a version cannot be shown at all.
No database."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from skills_app.core.permissions import ToolCall
from skills_app.core.review import Consent, build_manifest, covering_entry, read_package
from skills_app.core.review.commands import named_skill_files
from skills_app.core.review.package import (
    LEGACY_SHOWN_FILES,
    LEGACY_SHOWN_TEXT_BYTES,
    PackageFile,
    shown_to_reviewer,
    unseen,
)
from skills_app.core.review.pages import (
    MAX_MANIFEST_ENTRIES,
    MAX_PAGES,
    PageItem,
    paginate,
    split_text,
    unshowable,
)
from skills_app.core.skillfile import parse_skill_dir


def _file(rel: str, text: str | None, size: int | None = None) -> PackageFile:
    data = (text or "\0").encode()
    return PackageFile(rel, size if size is not None else len(data), "0" * 64, text)


def _folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    folder = tmp_path / "demo"
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


# -- reading a package ----------------------------------------------------------------------------


def test_every_file_is_read_however_many_there_are(tmp_path):
    files = {f"filler/f{n:04d}.txt": b"x\n" for n in range(LEGACY_SHOWN_FILES + 20)}
    folder = _folder(tmp_path, {"SKILL.md": b"---\n---\n", **files, "zz/run.sh": b"echo hi\n"})
    read = read_package(folder)
    assert len(read) == LEGACY_SHOWN_FILES + 22
    assert read[-1].rel == "zz/run.sh" and read[-1].text == "echo hi\n"


def test_a_text_is_text_whatever_its_size_and_a_nul_or_bad_utf8_makes_a_binary(tmp_path):
    long = b"a line of the reference\n" * (LEGACY_SHOWN_TEXT_BYTES // 10)
    folder = _folder(
        tmp_path, {"long.md": long, "nul.sh": b"#!/bin/sh\n\0\nid\n", "latin.sh": b"# caf\xe9\n"}
    )
    read = {f.rel: f for f in read_package(folder)}
    assert read["long.md"].text == long.decode() and read["long.md"].size > LEGACY_SHOWN_TEXT_BYTES
    assert read["long.md"].sha256 == hashlib.sha256(long).hexdigest()
    assert read["nul.sh"].text is None and read["latin.sh"].text is None


def test_before_paging_a_reviewer_was_shown_the_first_500_files_and_texts_up_to_512_kb():
    files = [_file(f"f{n:04d}.txt", "x") for n in range(LEGACY_SHOWN_FILES + 1)]
    legacy = shown_to_reviewer(files, whole=False)
    assert legacy["f0000.txt"] and legacy["f0499.txt"]
    assert not legacy["f0500.txt"]  # the 501st by path
    assert shown_to_reviewer(files)["f0500.txt"]
    few = [
        _file("big.md", "x", size=LEGACY_SHOWN_TEXT_BYTES + 1),
        _file("bin.dat", None),
        _file("small.md", "x", size=LEGACY_SHOWN_TEXT_BYTES),
    ]
    assert shown_to_reviewer(few, whole=False) == {
        "big.md": False,
        "bin.dat": False,
        "small.md": True,
    }
    assert shown_to_reviewer(few) == {"big.md": True, "bin.dat": False, "small.md": True}


# -- what a reviewer could not read -------------------------------------------------------------


def test_named_skill_files_are_the_paths_through_the_folder_variable_and_after_a_cd():
    assert named_skill_files('python3 "${CLAUDE_SKILL_DIR}/scripts/./x.py" --out out/r.md') == [
        "scripts/x.py"
    ]
    assert named_skill_files("bash {baseDir}/../../work/evil.sh") == ["../../work/evil.sh"]
    assert named_skill_files("cd {baseDir} && ./bin/tool out/r.md && python3 scripts/y.py") == [
        "bin/tool",
        "scripts/y.py",
    ]
    assert named_skill_files("python3 scripts/x.py out/r.md") == []  # relative to the workspace


def test_unseen_paths_are_binaries_files_the_version_lacks_and_folders_or_patterns_with_them():
    shown = {"scripts/a.py": True, "scripts/b.py": True, "bin/tool": False, "docs/x.md": True}
    assert unseen(["scripts/a.py", "scripts", "scripts/*.py", "docs/"], shown) == []
    assert unseen(["bin/tool", "bin", "*", "work/run.sh", "../x.sh", "nothing/*.py"], shown) == [
        "bin/tool",
        "bin",
        "*",
        "work/run.sh",
        "../x.sh",
        "nothing/*.py",
    ]


def test_a_manifest_consents_to_no_command_that_names_a_file_its_reviewer_could_not_read(tmp_path):
    body = (
        "---\nname: demo\ndescription: A demo skill for the tests.\n"
        "allowed-tools: Bash(${CLAUDE_SKILL_DIR}/bin/*)\n---\n"
        "Run `bash ${CLAUDE_SKILL_DIR}/scripts/ok.sh now`.\n\n"
        "```bash\nbash ${CLAUDE_SKILL_DIR}/bin/tool\nbash ${CLAUDE_SKILL_DIR}/work/run.sh\n```\n"
    )
    folder = _folder(
        tmp_path,
        {"SKILL.md": body.encode(), "scripts/ok.sh": b"echo ok\n", "bin/tool": b"\x7fELF\0\0"},
    )
    manifest = build_manifest(parse_skill_dir(folder), read_package(folder))
    consent = {e.text: e.consent for e in manifest.entries}
    assert consent == {
        "Bash(${CLAUDE_SKILL_DIR}/bin/*)": False,
        "bash ${CLAUDE_SKILL_DIR}/scripts/ok.sh now": True,
        "bash ${CLAUDE_SKILL_DIR}/bin/tool": False,
        "bash ${CLAUDE_SKILL_DIR}/work/run.sh": False,
    }
    notes = [e.note for e in manifest.entries if not e.consent]
    assert all("could not show as text" in note for note in notes)


def test_a_consent_covers_no_entry_naming_a_file_its_reviewer_was_not_shown(tmp_path):
    body = (
        "---\nname: demo\ndescription: A demo skill for the tests.\n---\n"
        "```bash\nbash ${CLAUDE_SKILL_DIR}/zz/run.sh\n```\n"
    )
    folder = _folder(tmp_path, {"SKILL.md": body.encode(), "zz/run.sh": b"echo hi\n"})
    files = read_package(folder)
    entries = build_manifest(parse_skill_dir(folder), files).entries
    call = ToolCall("Bash", {"command": "bash /skill/zz/run.sh"})
    shown = Consent("demo", "d" * 64, "the review", entries, shown=shown_to_reviewer(files))
    assert covering_entry(shown, call, "/skill") is not None
    legacy = {**shown_to_reviewer(files), "zz/run.sh": False}  # e.g. past the first 500
    cut = Consent("demo", "d" * 64, "the review", entries, shown=legacy)
    assert covering_entry(cut, call, "/skill") is None


# -- pages ----------------------------------------------------------------------------------------


@given(
    st.lists(
        st.tuples(st.text("ab\n", max_size=40) | st.none(), st.integers(0, 30)),
        max_size=30,
    ),
    st.integers(1, 5),
    st.integers(8, 50),
)
def test_every_character_of_every_file_is_on_exactly_one_page_and_no_page_overflows(
    specs, per_page, budget
):
    items = [PageItem(f"f{n:03d}", text, extra) for n, (text, extra) in enumerate(specs)]
    pages = paginate(items, files_per_page=per_page, chars_per_page=budget)
    assert pages and [p.number for p in pages] == list(range(1, len(pages) + 1))
    rebuilt: dict[str, str] = {}
    order = []
    for page in pages:
        assert len(page.pieces) <= per_page
        weight = sum(
            max((p.end - p.start) + (items[p.index].extra if p.whole else 0), 1)
            for p in page.pieces
        )
        assert weight <= budget or len(page.pieces) == 1
        for piece in page.pieces:
            text = items[piece.index].text or ""
            rebuilt[piece.rel] = rebuilt.get(piece.rel, "") + text[piece.start : piece.end]
            order.append(piece.index)
    assert order == sorted(order) and set(order) == set(range(len(items)))
    assert rebuilt == {i.rel: i.text or "" for i in items}


def test_a_text_longer_than_a_page_is_cut_after_a_line_end():
    text = "".join(f"line {n:02d}\n" for n in range(30))  # 8 characters a line
    spans = split_text(text, 20)
    assert all(text[end - 1] == "\n" for _start, end in spans)
    assert "".join(text[a:b] for a, b in spans) == text
    assert split_text("x" * 45, 20) == [(0, 20), (20, 40), (40, 45)]  # no line end: cut anyway


def test_a_file_too_long_for_a_page_with_its_diff_comes_in_parts_without_it():
    items = [PageItem("a.md", "x" * 10), PageItem("b.md", "y\n" * 30, extra=5)]
    pages = paginate(items, chars_per_page=25)
    pieces = [p for page in pages for p in page.pieces]
    assert pieces[0].whole and (pieces[0].part, pieces[0].parts) == (1, 1)
    assert [(p.rel, p.part, p.parts, p.whole) for p in pieces[1:]] == [
        ("b.md", 1, 3, False),
        ("b.md", 2, 3, False),
        ("b.md", 3, 3, False),
    ]
    assert (pages[0].first, pages[0].last) == (1, 1)


def test_a_version_needing_more_pages_than_the_review_shows_cannot_be_shown_and_says_what_to_do():
    fits = [_file(f"f{n}", "x") for n in range(200 * MAX_PAGES)]
    assert unshowable(fits, 10) == ""
    too_many = [*fits, _file("one-more", "x")]
    refusal = unshowable(too_many, 10)
    assert "cannot be shown whole" in refusal and f"{MAX_PAGES + 1} pages" in refusal
    assert "Remove files or split it into smaller skills" in refusal


def test_a_manifest_longer_than_the_review_lists_cannot_be_shown():
    files = [_file("SKILL.md", "body")]
    assert unshowable(files, MAX_MANIFEST_ENTRIES) == ""
    refusal = unshowable(files, MAX_MANIFEST_ENTRIES + 1)
    assert "command manifest" in refusal and "cannot be shown whole" in refusal


def test_a_skills_own_shell_script_is_named_in_plain_words() -> None:
    from skills_app.core.review.words import explain_command

    assert explain_command("bash ${CLAUDE_SKILL_DIR}/scripts/x.sh") == (
        "Runs the skill's own shell script `scripts/x.sh`."
    )
