"""Reviewing a skill before it goes live: its files, its command manifest, and the consent a
review gives (DESIGN "Consent and responsibility"; docs/review.md).

- `package`: the files of one skill version, text or binary, with sizes and digests, and
  which of them a reviewer was shown;
- `pages`: the review of a version in pages, every file reachable, and when it cannot be shown;
- `commands`: the commands a body asks the model to run (fenced shell blocks, inline code);
- `words`: a command or a permission rule in plain words;
- `manifest`: the command manifest a reviewer approves (allowed-tools, commands, `!` commands,
  hooks), each entry shown exactly, explained, and marked whether approval consents to it;
- `consent`: which calls an approved manifest covers.
"""

from __future__ import annotations

from .consent import Consent, consent_rules, covering_entry
from .manifest import Manifest, ManifestEntry, build_manifest
from .package import PackageFile, read_package, shown_to_reviewer, unseen

__all__ = [
    "Consent",
    "Manifest",
    "ManifestEntry",
    "PackageFile",
    "build_manifest",
    "consent_rules",
    "covering_entry",
    "read_package",
    "shown_to_reviewer",
    "unseen",
]
