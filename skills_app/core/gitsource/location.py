"""Where a skill source may point: the URL, branch and path rules (see the package docstring)."""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .errors import GitSourceError

Resolver = Callable[[str], list[str]]
_BRANCH_BAD = re.compile(r"(?:\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\])")
MAX_URL = 2000


@dataclass(frozen=True, slots=True)
class Location:
    """A checked source location: a remote URL, or the real path of a local repository."""

    url: str
    local: Path | None = None


def resolve_host(host: str) -> list[str]:
    """Every address `host` resolves to (the system resolver)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise GitSourceError(
            f"the host {host!r} cannot be resolved ({exc}); check the URL"
        ) from None
    return sorted({str(info[4][0]) for info in infos})


def check_location(
    url: str,
    *,
    local_roots: Sequence[Path] = (),
    allow_http: bool = False,
    allow_private_hosts: bool = False,
    resolver: Resolver = resolve_host,
) -> Location:
    """The location `url` names, or GitSourceError saying why it may not be a source."""
    url = url.strip()
    if not url:
        raise GitSourceError("give the repository's URL, e.g. https://github.com/owner/skills.git")
    if len(url) > MAX_URL or any(unicodedata.category(c) == "Cc" for c in url):
        raise GitSourceError("the URL is too long or contains control characters")
    if url.startswith("-"):
        raise GitSourceError(f"{url!r} looks like a command-line option, not a repository URL")
    if "::" in url.split("/", 1)[0]:
        # Git's remote helpers (ext::, fd::, ...): `ext::sh -c ...` runs a command.
        raise GitSourceError(
            f"{url.split('::', 1)[0]}:: transports are not allowed (ext:: runs a command); "
            "use an https:// URL"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") and (scheme == "file" or url.startswith(("/", "."))):
        return _local(unquote(parts.path) if scheme == "file" else url, local_roots)
    if scheme not in ("https", "http"):
        hint = " (give the https:// URL of the same repository)" if scheme else ""
        shown = scheme or url.split(":", 1)[0]
        raise GitSourceError(f"{shown}: URLs are not allowed for skill sources{hint}")
    if scheme == "http" and not allow_http:
        raise GitSourceError(
            "plain http:// is not allowed (anyone on the way could change the skills); use "
            "https://, or set GIT_SOURCE_ALLOW_HTTP=true for a trusted network"
        )
    if parts.username or parts.password:
        raise GitSourceError(
            "the URL carries credentials, which would be shown wherever the source is listed; "
            "only public repositories (or ones this server reaches without credentials) can be "
            "sources for now"
        )
    host = parts.hostname or ""
    if not host:
        raise GitSourceError(f"the URL {url!r} has no host")
    if not allow_private_hosts:
        for address in resolver(host):
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            if not ip.is_global or ip.is_multicast:
                raise GitSourceError(
                    f"{host} resolves to {address}, an internal address; sources must be on the "
                    "public internet (set GIT_SOURCE_ALLOW_PRIVATE_HOSTS=true for a server on "
                    "your own network)"
                )
    return Location(url)


def _local(raw: str, roots: Sequence[Path]) -> Location:
    if not roots:
        raise GitSourceError(
            "local repositories are not allowed as sources; give an https:// URL (an operator "
            "can allow folders with GIT_SOURCE_LOCAL_ROOTS)"
        )
    real = Path(raw).resolve()
    if not any(real.is_relative_to(Path(r).resolve()) for r in roots):
        raise GitSourceError(
            f"{raw} is not under a folder allowed for local repositories "
            f"(GIT_SOURCE_LOCAL_ROOTS); give an https:// URL"
        )
    if not (real / "HEAD").is_file() and not (real / ".git").exists():
        raise GitSourceError(f"{raw} is not a Git repository")
    return Location(str(real), real)


def check_branch(branch: str) -> str:
    """A branch name Git accepts (and that cannot be read as an option), else GitSourceError."""
    name = branch.strip()
    if (
        not name
        or name.startswith(("-", "/", "."))
        or name.endswith(("/", ".", ".lock"))
        or _BRANCH_BAD.search(name)
        or len(name) > 250
    ):
        raise GitSourceError(
            f"{branch!r} is not a usable branch name; give one such as main or release/2026"
        )
    return name


def check_subpath(path: str) -> str:
    """The folder inside the repository, normalised ("" = the root), else GitSourceError."""
    parts = [p for p in path.strip().replace("\\", "/").split("/") if p not in ("", ".")]
    for part in parts:
        if part == ".." or any(unicodedata.category(c) == "Cc" for c in part):
            raise GitSourceError(
                f"the path {path!r} leaves the repository or contains control characters; give "
                "a folder inside it, such as skills/pdf"
            )
        if part.lower().rstrip(". ") == ".git":
            raise GitSourceError(f"the path {path!r} points into Git's own data")
    return "/".join(parts)
