"""Generated archives: every upload either installs cleanly or is refused with an UploadError."""

from __future__ import annotations

import io
import os
import warnings
import zipfile

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from skills_app.models import SkillVersion
from skills_app.registry import uploads
from skills_app.registry.uploads import UploadError, UploadFile
from tests.support.upload_helpers import make_zip, skill_md, snapshot

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=int(os.environ.get("UPLOAD_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

segment = st.one_of(
    st.sampled_from(["ok", "skills", "scripts", "SKILL.md", "skill.md", "..", ".", "", "a", "A"]),
    st.text(alphabet="abcXYZ-_.", min_size=1, max_size=8),
    st.text(min_size=1, max_size=6),  # any unicode, control characters included
)
member_path = st.one_of(
    st.lists(segment, min_size=1, max_size=5).map("/".join),
    st.builds(lambda p: "/" + p, st.text(min_size=1, max_size=10)),
)
frontmatter = st.one_of(
    st.just(skill_md("ok")),
    st.builds(
        lambda key, value, body: f"---\n{key}: {value}\n---\n{body}\n",
        st.sampled_from(["name", "description", "user-invocable", "allowed-tools", "version"]),
        st.text(max_size=30),
        st.text(max_size=50),
    ),
    st.binary(max_size=80).map(lambda b: b.decode("latin-1")),
)
content = st.one_of(st.binary(max_size=300), frontmatter.map(str.encode))
members = st.lists(st.tuples(member_path, content), max_size=8)
modes = st.sampled_from([0, 0o100644, 0o100755, 0o120777, 0o020644, 0o040755, 0o010644])


def build_zip(entries: list[tuple[str, bytes]], entry_modes: list[int]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        warnings.simplefilter("ignore")  # duplicate names are one of the things generated
        for (name, data), mode in zip(entries, entry_modes, strict=False):
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


def check(run) -> None:
    before = snapshot()
    try:
        results = run()
    except UploadError as exc:
        assert exc.message
        assert snapshot() == before
        return
    for result in results:
        folder = uploads.version_dir(result.version)
        assert folder.is_dir()
        # Stored: a personal version active at once, an organisation one as a draft to review.
        version = result.version
        if result.package.owner_id is None:
            assert version.review_status == SkillVersion.DRAFT
            assert version.reviews.filter(action="uploaded").exists()
        else:
            assert result.package.active_version_id is not None


@FUZZ
@given(entries=members, entry_modes=st.lists(modes, max_size=8), filename=st.text(max_size=12))
@example(entries=[("ok/SKILL.md", skill_md("ok").encode())], entry_modes=[], filename="x.zip")
def test_generated_archives_install_or_are_refused(entries, entry_modes, filename):
    try:
        data = build_zip(entries, entry_modes)
    except (ValueError, UnicodeEncodeError):
        assume(False)  # zipfile itself would not write it; not an upload anyone can make
    check(lambda: uploads.install_archive(data, filename + ".zip", user=None))


@FUZZ
@given(
    base=st.sampled_from(
        [
            make_zip({"ok/SKILL.md": skill_md("ok"), "ok/a.txt": "a" * 200}),
            make_zip({"kit/skills/a/SKILL.md": skill_md("a"), "kit/skills/b/SKILL.md": "x"}),
        ]
    ),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=6),
    cut=st.one_of(st.none(), st.integers(min_value=0)),
)
def test_damaged_archives_install_or_are_refused(base, flips, cut):
    data = bytearray(base)
    for position, value in flips:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    check(lambda: uploads.install_archive(bytes(data), "damaged.zip", user=None))


@FUZZ
@given(entries=members)
def test_generated_browser_folders_install_or_are_refused(entries):
    files = [UploadFile(path, data) for path, data in entries]
    check(lambda: uploads.install_files(files, user=None))
