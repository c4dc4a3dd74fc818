"""The review page's file diffs: a changed line is shown, whatever text it starts with."""

from __future__ import annotations

import hashlib

from skills_app.core.review import PackageFile
from skills_app.registry.diffs import diff_file


def text_file(rel: str, text: str) -> PackageFile:
    return PackageFile(rel, len(text), hashlib.sha256(text.encode()).hexdigest(), text)


def test_lines_that_read_like_the_diff_headers_are_still_shown_as_changes():
    # A removed `---` reads "----" in the diff and an added `++i;` reads "+++i;": like the
    # "---"/"+++" file headers, which only the diff's first two lines are.
    old = text_file("scripts/count.js", "---\nlet i = 0;\n---\ni += 1;\n")
    new = text_file("scripts/count.js", "---\nlet i = 0;\n++i;\n")
    lines = [(line.kind, line.text) for line in diff_file(old, new, "scripts/count.js").lines]
    assert lines == [
        ("hunk", "@@ -1,4 +1,3 @@"),
        ("same", " ---"),
        ("same", " let i = 0;"),
        ("del", "----"),
        ("del", "-i += 1;"),
        ("add", "+++i;"),
    ]
