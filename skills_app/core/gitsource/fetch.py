"""Fetching one branch of a source into a fresh bare repository (dulwich, pure Python)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dulwich.client import (
    FetchPackResult,
    GitClient,
    HttpGitClient,
    LocalGitClient,
    default_urllib3_manager,
)
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.repo import Repo
from urllib3 import BaseHTTPResponse, PoolManager
from urllib3.exceptions import HTTPError

from .errors import GitSourceError
from .location import Location


@dataclass(frozen=True, slots=True)
class FetchedCommit:
    repo_path: Path
    commit: str  # 40 hex digits
    pack_bytes: int


class RedirectRefused(HTTPError):
    """A Git server answered with a redirect, which is never followed."""


class _NoRedirects(PoolManager):
    """A pool that never follows a redirect: its target was not checked like the source's URL
    (internal addresses, schemes), so following it would let a public host point the server at
    an internal one."""

    # The signature is PoolManager's own, which urllib3 itself marks as overriding its base's.
    def urlopen(  # type: ignore[override]
        self, method: str, url: str, redirect: bool = True, **kw: Any
    ) -> BaseHTTPResponse:
        response = super().urlopen(method, url, redirect=False, **kw)
        target = response.get_redirect_location()
        if target:
            response.release_conn()
            raise RedirectRefused(
                f"the server redirected {url} to {target}; redirects are not followed: use the "
                "final address as the source's URL"
            )
        return response


def _client(location: Location, timeout: float) -> tuple[GitClient, str]:
    if location.local is not None:
        return LocalGitClient(), str(location.local)
    parsed = urlparse(location.url)
    pool: Any = default_urllib3_manager(None, pool_manager_cls=_NoRedirects, timeout=timeout)
    client = HttpGitClient.from_parsedurl(parsed, pool_manager=pool, quiet=True)
    return client, parsed.path


def fetch_commit(
    location: Location,
    branch: str,
    workdir: Path,
    *,
    timeout: float = 60.0,
    max_pack_bytes: int = 200 * 1024 * 1024,
) -> FetchedCommit:
    """Fetch `branch` (depth 1 where the transport allows) into a new bare repo in `workdir`."""
    ref = f"refs/heads/{branch}".encode()
    repo = Repo.init_bare(str(workdir), mkdir=True)
    client, path = _client(location, timeout)
    found: dict[str, bytes] = {}

    def wants(refs: dict[bytes, bytes], depth: int | None = None) -> list[bytes]:
        sha = refs.get(ref)
        if sha is None:
            branches = sorted(
                r.decode(errors="replace").removeprefix("refs/heads/")
                for r in refs
                if r.startswith(b"refs/heads/")
            )
            shown = ", ".join(branches[:10]) or "none"
            raise GitSourceError(
                f"the repository has no branch {branch!r} (branches: {shown}); pick one of them"
            )
        found["sha"] = sha
        return [sha]

    try:
        result: FetchPackResult = client.fetch(
            path,
            repo,
            determine_wants=wants,  # type: ignore[arg-type]
            depth=None if location.local is not None else 1,
        )
    except GitSourceError:
        raise
    except NotGitRepository:
        raise GitSourceError(f"{location.url} is not a Git repository") from None
    except (GitProtocolError, HangupException, OSError) as exc:
        raise GitSourceError(
            f"fetching {location.url} failed ({exc}); check the URL and that the server is "
            "reachable, then sync again"
        ) from None
    del result
    pack_bytes = sum(
        f.stat().st_size for f in (Path(workdir) / "objects").rglob("*") if f.is_file()
    )
    if pack_bytes > max_pack_bytes:
        raise GitSourceError(
            f"the fetched branch is {pack_bytes // (1024 * 1024)} MB, over the limit of "
            f"{max_pack_bytes // (1024 * 1024)} MB (GIT_SOURCE_MAX_FETCH_BYTES); point the "
            "source at a smaller repository"
        )
    sha = found.get("sha")
    if sha is None:
        raise GitSourceError(f"the repository has no branch {branch!r}")
    return FetchedCommit(Path(workdir), sha.decode(), pack_bytes)
