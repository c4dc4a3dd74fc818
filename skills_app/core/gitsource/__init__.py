"""Skills from Git: where a source may point, fetching one commit, and reading its tree safely.

A skill source is a Git repository URL, a branch and a path inside the repository. What this
package guarantees about reading one (each has its test in tests/test_git_sources.py):

- **Where.** Only `https://` (and `http://` when the operator allows it) to a host that does not
  resolve to a loopback, private, link-local or otherwise internal address, or a local
  repository under one of the operator's `GIT_SOURCE_LOCAL_ROOTS`. Every other scheme is refused
  before anything runs: `file://` outside those roots, `ssh://`, `git://`, `ext::` (which runs a
  command), `fd::`, options disguised as URLs (`--upload-pack=...`). Credentials in the URL are
  refused (they would be shown wherever the source is).
- **What is fetched.** One branch at depth 1 (where the transport supports it) into a fresh,
  temporary bare repository that nothing checks out: no hooks, no working tree, no submodules.
- **What is read.** The tree at `path` of that commit is listed in the object store (names
  only); the manifests (`marketplace.json`, `plugin.json`, at most 512 KB) say where the skills
  are; then each skill's folder alone is read: symbolic links, submodules (gitlinks),
  `.git`-like names (`.git`, `.GIT`, `.git.`, `git~1`, `.gitmodules`), names with control
  characters or separators, more than the upload limits of files or bytes, and folders deeper
  than the registry reads are refused with the path and what to do, for that skill. A blob's
  size is read from its header before its content is.

Nothing here knows Django: `skills_app.registry.sources` stores what it returns.
"""

from __future__ import annotations

from .errors import GitSourceError
from .fetch import FetchedCommit, fetch_commit
from .location import Location, check_branch, check_location, check_subpath
from .plugins import SkillFolder, find_skill_folders
from .tree import GitEntry, GitFile, TreeLimits, list_tree, read_blob, read_folder

__all__ = [
    "FetchedCommit",
    "GitEntry",
    "GitFile",
    "GitSourceError",
    "Location",
    "SkillFolder",
    "TreeLimits",
    "check_branch",
    "check_location",
    "check_subpath",
    "fetch_commit",
    "find_skill_folders",
    "list_tree",
    "read_blob",
    "read_folder",
]
