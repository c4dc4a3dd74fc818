"""Talking to one MCP server through the official SDK: list its tools, call one.

A stdio server is the exact argv an admin registered, started by the SDK's `stdio_client` inside
the bubblewrap sandbox Bash uses (`tools.sandbox.workspace_prefix`): the conversation's
workspace writable, its skills read-only, no network, the host's system read-only, and the
folders the admin declared for the server read-only. Its environment is the SDK's minimal
inherited one (`get_default_environment`: HOME, LOGNAME, PATH, SHELL, TERM, USER) with HOME
moved into the sandbox, plus the keys the admin declared: never the app's own environment, so no
SECRET_KEY, model key or database address. A Streamable HTTP server is reached with the SDK's
`streamable_http_client` on an httpx2 client carrying the registered static headers, with the
process's one TLS context (`tls_context`).

Each operation opens its own session and closes it (the process ends with it): nothing of one
conversation's sandbox outlives its call. Every wait is bounded: starting and greeting a server
by `connect_timeout`, a call by `call_timeout` on top; past them the operation fails with an
`McpConnectError` naming the server and the limit. A stdio server whose process ends mid-call
(a crash) fails at once with an error that says so; since each call starts its own process, the
next call starts the server again.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

import anyio
import httpx2

from skills_app.core.mcp.definitions import ToolDefinition, definition_from_sdk
from skills_app.core.mcp.oauth import GuardedTransport, OAuthSetup, SignInRequired, provider
from skills_app.core.tools.env import program_switches
from skills_app.core.tools.sandbox import describe_sandbox, refusal, workspace_prefix

# The SDK is imported where a server is talked to, not with this module: it takes 0.8 s of CPU
# to import, and Django's start-up reaches this module (the admin, the transcript filter), so
# every process paid it (`manage.py`, each web process, each test's helper process) though
# only the processes that run answers or test a server ever talk to one.
if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp import types as mcp_types
    from mcp.client.stdio import StdioServerParameters

# The sandbox's /tmp is private and empty; a server that writes to $HOME writes there.
SANDBOX_HOME = "/tmp"
_STDERR_TAIL = 600

T = TypeVar("T")


class McpConnectError(Exception):
    """A server that could not be reached, started, greeted or called in time; says which."""

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        super().__init__(message)
        # What a stdio server wrote on stderr: for the admin's `mcp test`, never for the model
        # (a server may print its own configuration there).
        self.stderr_tail = stderr_tail


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One registered server as the client needs it (env values included: they never leave)."""

    name: str
    kind: str
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    read_only: tuple[str, ...] = ()
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 10.0
    call_timeout: float = 60.0
    # An OAuth server's client side for the calling person (`oauth.OAuthSetup`); None for a
    # server without OAuth.
    oauth: OAuthSetup | None = None


@dataclass(frozen=True, slots=True)
class Place:
    """Where a stdio server runs: a workspace and the sandbox settings of the call."""

    root: Path
    skills_dir: Path
    sandbox: str = "auto"
    unsandboxed_allowed: bool = False
    hidden_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResultFile:
    """An image or an embedded resource of a call's result, as bytes, for the person to see
    (the tool decides whether it is kept: `tool.keep_files`). `name`: the resource's own last
    URI segment ("" for an image)."""

    kind: str  # "image" or "resource"
    media_type: str
    data: bytes
    name: str = ""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """A tool's answer as text for the model, and whether the server called it an error; its
    images and embedded resources as files."""

    text: str
    is_error: bool
    files: tuple[ResultFile, ...] = ()


async def list_tools(spec: ServerSpec, place: Place) -> list[ToolDefinition]:
    """Every tool the server lists (all pages), as definitions."""

    from mcp import types as mcp_types

    async def work(session: ClientSession) -> list[ToolDefinition]:
        found: list[ToolDefinition] = []
        cursor: str | None = None
        while True:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            found += [definition_from_sdk(tool) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return found

    return await _with_session(spec, place, work, spec.connect_timeout, "list its tools")


async def call_tool(
    spec: ServerSpec, place: Place, tool: str, arguments: dict[str, Any]
) -> CallOutcome:
    """Call one tool; the server's own errors come back as an error outcome, not an exception."""

    async def work(session: ClientSession) -> CallOutcome:
        result = await session.call_tool(tool, arguments)
        return CallOutcome(result_text(result), bool(result.is_error), result_files(result))

    limit = spec.connect_timeout + spec.call_timeout
    return await _with_session(spec, place, work, limit, f"answer the call of {tool}")


def result_text(result: mcp_types.CallToolResult) -> str:
    """The text of a call's content blocks (an embedded text resource's text included); audio
    and links are named, images and binary resources left to `result_files`."""
    from mcp import types as mcp_types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            continue  # a file (`result_files`); the tool says what became of it
        elif isinstance(block, mcp_types.AudioContent):
            parts.append(
                f"[audio {block.mime_type}, {len(block.data)} base64 characters, not shown]"
            )
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource link: {block.uri}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            text = getattr(block.resource, "text", None)
            if isinstance(text, str):
                parts.append(text)
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def result_files(result: mcp_types.CallToolResult) -> tuple[ResultFile, ...]:
    """The images and embedded resources of a call's result, decoded (undecodable base64 is
    left out: a server that sends it sends nothing to show)."""
    from mcp import types as mcp_types

    found: list[ResultFile] = []
    for block in result.content:
        if isinstance(block, mcp_types.ImageContent):
            data = _decoded(block.data)
            if data is not None:
                found.append(ResultFile("image", block.mime_type, data))
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1]
            kind = resource.mime_type or "application/octet-stream"
            text = getattr(resource, "text", None)
            blob = getattr(resource, "blob", None)
            data = text.encode("utf-8") if isinstance(text, str) else _decoded(blob)
            if data is not None:
                found.append(ResultFile("resource", kind, data, name))
    return tuple(found)


def _decoded(text: object) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        return None


async def _with_session(
    spec: ServerSpec,
    place: Place,
    work: Callable[[ClientSession], Awaitable[T]],
    limit: float,
    what: str,
) -> T:
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as opened:
        # TemporaryFile's text mode is a TextIOWrapper, typed as the wider IO[str].
        errlog = cast(TextIO, opened)
        greeted = False  # a server that never greeted is a start that failed, not a crash
        try:
            with anyio.fail_after(limit):
                async with _session(spec, place, errlog) as session:
                    greeted = True
                    return await work(session)
        except McpConnectError:
            raise
        except Exception as exc:
            sign_in = _find(exc, SignInRequired)
            if sign_in is not None:
                raise sign_in from None
            if spec.kind == "stdio" and greeted and _closed(exc):
                raise McpConnectError(
                    f'The MCP server "{spec.name}" stopped before it could {what}: its process '
                    "ended or closed its output (it may have crashed). The next call starts it "
                    "again.",
                    stderr_tail=_tail(errlog),
                ) from None
            if not _timed_out(exc):
                raise McpConnectError(
                    f'The MCP server "{spec.name}" could not {what}: {_describe(exc)}.',
                    stderr_tail=_tail(errlog),
                ) from None
            raise McpConnectError(
                f'The MCP server "{spec.name}" did not {what} within {limit:g} seconds.',
                stderr_tail=_tail(errlog),
            ) from None


E = TypeVar("E", bound=BaseException)


def _find(exc: BaseException, kind: type[E]) -> E | None:
    """`exc` itself or the first `kind` inside it (in exception groups or as a cause)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, kind):
            return item
        if isinstance(item, BaseExceptionGroup):
            todo.extend(item.exceptions)
        for linked in (item.__cause__, item.__context__):
            if linked is not None:
                todo.append(linked)
    return None


def _closed(exc: BaseException) -> bool:
    """The connection closed under a request (a stdio server's process ended mid-call)."""
    from mcp import MCPError
    from mcp import types as mcp_types

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, MCPError) and exc.error.code == mcp_types.CONNECTION_CLOSED


def _timed_out(exc: BaseException) -> bool:
    """A deadline passed: the operation's own, or the greeting's inside the SDK's task groups,
    which arrives wrapped in an exception group (and on a late-waking loop may fire first)."""
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(TimeoutError) is not None
    return False


@contextlib.asynccontextmanager
async def _session(spec: ServerSpec, place: Place, errlog: TextIO) -> AsyncIterator[ClientSession]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        if spec.kind == "stdio":
            params = stdio_parameters(spec, place)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        elif spec.kind == "http":
            # The read limit lies past the operation's own deadline, which then fires first and
            # says which limit was passed (a bare read timeout reads as a broken stream).
            read_limit = spec.connect_timeout + spec.call_timeout + 5.0
            timeout = httpx2.Timeout(spec.connect_timeout, read=read_limit)
            if spec.oauth is None:
                client = httpx2.AsyncClient(
                    headers=dict(spec.headers), timeout=timeout, verify=tls_context()
                )
            else:
                # Only the server's own token goes out (`oauth`): a fresh client, no cookies,
                # every connection's address checked (discovery and redirects included), no
                # proxy from the environment (it would look the names up past the check).
                transport = GuardedTransport(
                    allow_private=spec.oauth.allow_private, verify=tls_context()
                )
                client = httpx2.AsyncClient(
                    headers=dict(spec.headers),
                    timeout=timeout,
                    transport=transport,
                    trust_env=False,
                    auth=provider(spec.url, spec.oauth),
                )
            await stack.enter_async_context(client)
            read, write = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=client)
            )
        else:
            raise McpConnectError(f"Unknown MCP server kind {spec.kind!r}: use stdio or http.")
        session = await stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(spec.connect_timeout):
            await session.initialize()
        yield session


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings of every HTTP server's client, built once a process.

    The client's own default (`verify=True`, the CA bundle, SSL_CERT_FILE and SSL_CERT_DIR read
    from the environment), which httpx2 would otherwise build again for each client: loading
    the CA bundle is about half of a short call (bench/RESULTS.md), and each call opens its own
    client. SSL_CERT_FILE or SSL_CERT_DIR changed later
    in the process is not seen until the process restarts."""
    return httpx2.create_ssl_context()


def stdio_parameters(spec: ServerSpec, place: Place) -> StdioServerParameters:
    """The SDK's parameters for a stdio server: bubblewrap around the argv, the declared env."""
    from mcp.client.stdio import StdioServerParameters

    if not spec.argv:
        raise McpConnectError(f'The MCP server "{spec.name}" has no command to run.')
    status = describe_sandbox(place.sandbox)
    # In the sandbox the server gets Bash's switches too (`tools.env.program_switches`): the
    # workspace is its working folder, and the model writes there.
    env = (
        {**program_switches(SANDBOX_HOME), **spec.env, "HOME": SANDBOX_HOME}
        if status.sandboxed
        else dict(spec.env)
    )
    # Python puts the working folder (the workspace) first on sys.path for `python -m NAME`
    # and `python -c`, so a NAME.py the model wrote there would run instead of the server's
    # module; with PYTHONSAFEPATH (Python 3.11 and later) it does not. Set last: a declared
    # key cannot turn it off.
    env["PYTHONSAFEPATH"] = "1"
    if status.sandboxed:
        prefix = workspace_prefix(
            place.root,
            place.skills_dir,
            hidden_paths=place.hidden_paths,
            read_only=spec.read_only,
        )
        argv = [*prefix, *spec.argv]
    elif place.unsandboxed_allowed:
        argv = list(spec.argv)
    else:
        raise McpConnectError(refusal(status, f'The MCP server "{spec.name}"'))
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=place.root)


def _describe(exc: BaseException) -> str:
    """The innermost message of an error (the SDK's task groups wrap them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tail(errlog: TextIO) -> str:
    errlog.flush()
    errlog.seek(0)
    return errlog.read()[-_STDERR_TAIL:].strip()
