"""Words of a slash command's arguments that name files the conversation does not have.

`/text-stats README.md` with no README.md in the workspace would have the skill count the word
"README.md"; the person is told instead that the file is not there, in a note the model never sees.
"""

from __future__ import annotations

import re

from .tools.workspace import Workspace, WorkspaceError

# A word with a folder in it, or a name with an extension that starts with a letter ("notes.md",
# not "2.5.0" or "e.g."). Addresses and options are not paths.
_NAME_WITH_EXTENSION = re.compile(r"[\w][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}")
_TRIM = "\"'`,;:()[]<>"


def path_like_words(args: str) -> list[str]:
    """The words of `args` that look like file paths, in order, each once."""
    found: list[str] = []
    for raw in args.split():
        word = raw.strip(_TRIM)
        if not word or word in found or "://" in word or word.startswith("-"):
            continue
        folder = "/" in word and word.strip("/") != "" and not word.startswith("//")
        if folder or _NAME_WITH_EXTENSION.fullmatch(word):
            found.append(word)
    return found


def _present(workspace: Workspace, word: str) -> bool:
    # Attached files land in in/, so "README.md" names in/README.md as well.
    for candidate in (word, f"in/{word}", f"work/{word}"):
        try:
            if workspace.resolve(candidate).exists():
                return True
        except WorkspaceError:
            return False  # outside the workspace: not among its files
    return False


def missing_files(args: str, workspace: Workspace) -> list[str]:
    """The path-like words of `args` that name nothing in the workspace."""
    return [word for word in path_like_words(args) if not _present(workspace, word)]


def missing_files_note(missing: list[str]) -> str:
    """The plain note for those words."""
    if len(missing) == 1:
        return f"{missing[0]} is not among this conversation's files: attach it first."
    names = ", ".join(missing[:-1]) + f" and {missing[-1]}"
    return f"{names} are not among this conversation's files: attach them first."
