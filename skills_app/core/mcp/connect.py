"""Talking to one MCP server through the official SDK: list its tools, call one.

A stdio server is the exact argv an admin registered, started by the SDK's `stdio_client` inside
the bubblewrap sandbox Bash uses (`tools.sandbox.workspace_prefix`): the conversation's
workspace writable, its skills read-only, no network, the host's system read-only, and the
folders the admin declared for the server read-only. Its environment is the SDK's minimal
inherited one (`get_default_environment`: HOME, LOGNAME, PATH, SHELL, TERM, USER) with HOME
moved into the sandbox, plus the keys the admin declared: never the app's own environment, so no
SECRET_KEY, model key or database address. A Streamable HTTP server is reached with the SDK's
`streamable_http_client` on a client the spec's `http_clients` factory builds for each session
(`HttpClientSpec`: the registered static headers, the timeouts, and for an OAuth server the
SDK's provider and the address guard); this module builds no HTTP client itself.

A spec with `keep_alive` (seconds, from MCP_SESSION_IDLE_SECONDS) keeps its session open for
the next operation, in a pool of the running event loop (`loop_owned`: an SDK session belongs
to the loop that opened it, and is closed before that loop ends). A kept session is found by
everything that makes it what it is: the server's argv, env and read-only folders or its URL
and headers; for a stdio server also the sandbox of the call (the conversation's workspace,
its hidden paths), so one conversation's server process never serves another; for an OAuth
server also the person's token, so one person's session never carries another's call. It is
closed after `keep_alive` idle seconds, when the pool holds more than `max_kept` (the least
recently used first), and as its loop ends. Each kept session is owned by one task of its own,
since the SDK's task groups must be exited by the task that entered them; calls from any task
of the loop send their requests through it. A session whose call failed in any way (an error
of the transport, a timeout, a crash, a cancelled call such as Stop) is dropped, never reused:
the next call opens a new one, and starts a stdio server again. A session whose stdio server
ended while idle is dropped as soon as its output closes. A kept session's server that says
its tool list changed (`notifications/tools/list_changed`) is reported to the listeners of
`on_tools_changed`. Without `keep_alive` each operation opens its own session and closes it.

Every wait is bounded: starting and greeting a server by `connect_timeout`, a call by
`call_timeout` on top; past them the operation fails with an `McpConnectError` naming the server
and the limit. A stdio server whose process ends mid-call (a crash) fails at once with an error
that says so, and the next call starts the server again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import hashlib
import json
import logging
import math
import tempfile
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar, cast

import anyio

from skills_app.core import loop_owned
from skills_app.core.mcp.definitions import ToolDefinition, definition_from_sdk
from skills_app.core.mcp.elicit import (
    Asker,
    ElicitAnswer,
    ElicitNote,
    ElicitQuestion,
    note_for,
    question_for,
)
from skills_app.core.mcp.oauth import OAuthSetup, SignInRequired, provider
from skills_app.core.mcp.prompts import PromptDefinition, prompt_from_sdk, prompt_text
from skills_app.core.tools.env import program_switches
from skills_app.core.tools.sandbox import describe_sandbox, refusal, workspace_prefix

# The SDK is imported where a server is talked to, not with this module: it takes 0.8 s of CPU
# to import, and Django's start-up reaches this module (the admin, the transcript filter), so
# every process paid it (`manage.py`, each web process, each test's helper process) though
# only the processes that run answers or test a server ever talk to one.
if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp import types as mcp_types
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.session import IncomingMessage, MessageHandlerFnT
    from mcp.client.stdio import StdioServerParameters

# The sandbox's /tmp is private and empty; a server that writes to $HOME writes there.
SANDBOX_HOME = "/tmp"
_STDERR_TAIL = 600

T = TypeVar("T")

logger = logging.getLogger(__name__)


async def _asking(ask: Asker, question: ElicitQuestion) -> ElicitAnswer:
    return await ask(question)


class McpConnectError(Exception):
    """A server that could not be reached, started, greeted or called in time; says which."""

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        super().__init__(message)
        # What a stdio server wrote on stderr: for the admin's `mcp test`, never for the model
        # (a server may print its own configuration there).
        self.stderr_tail = stderr_tail


@dataclass(frozen=True, slots=True)
class HttpClientSpec:
    """What the client of one session with a Streamable HTTP server must be."""

    headers: Mapping[str, str]
    connect_timeout: float
    read_timeout: float
    # An OAuth server's client: `auth` (the SDK's provider) signs each request with the person's
    # token, and every connection goes to an address checked for it (a public one unless
    # `allow_private`), never through a proxy the environment names.
    guarded: bool = False
    allow_private: bool = False
    auth: OAuthClientProvider | None = None


class HttpClients(Protocol):
    """The port that builds an HTTP server's client (`skills_app.mcp.transport.http_client`).

    It returns an httpx2 `AsyncClient` for the SDK's `streamable_http_client`, typed `Any`
    here: the core names no HTTP library. The session enters and closes it."""

    def __call__(self, spec: HttpClientSpec, /) -> Any: ...


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
    # Seconds a question of the server may wait for the person (the call's deadline is paused
    # meanwhile; an HTTP server's stream must stay open that long too).
    ask_timeout: float = 0.0
    # An OAuth server's client side for the calling person (`oauth.OAuthSetup`); None for a
    # server without OAuth.
    oauth: OAuthSetup | None = None
    # Seconds an idle session stays open for the next operation (0: one session per operation),
    # and how many sessions one event loop keeps open at most.
    keep_alive: float = 0.0
    max_kept: int = 16
    # How an http server's client is built (set by the adapter that made the spec); an http
    # spec without one cannot connect.
    http_clients: HttpClients | None = None


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
    # What the server asked the person during the call (`elicit`) and what it got: each shown.
    notes: tuple[ElicitNote, ...] = ()
    files: tuple[ResultFile, ...] = ()


async def _tools_of(session: ClientSession) -> list[ToolDefinition]:
    return await _every_page(
        session.list_tools, lambda page: [definition_from_sdk(tool) for tool in page.tools]
    )


async def _prompts_of(session: ClientSession) -> list[PromptDefinition]:
    return await _every_page(
        session.list_prompts, lambda page: [prompt_from_sdk(prompt) for prompt in page.prompts]
    )


PageT = TypeVar("PageT", bound="mcp_types.PaginatedResult")


async def _every_page(
    list_page: Callable[..., Awaitable[PageT]], items: Callable[[PageT], list[T]]
) -> list[T]:
    """Every item of one of the SDK's paginated lists (`list_page`), following its cursors."""
    from mcp import types as mcp_types

    found: list[T] = []
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await list_page(params=params)
        found += items(page)
        cursor = page.next_cursor
        if not cursor:
            return found


async def list_tools(spec: ServerSpec, place: Place) -> list[ToolDefinition]:
    """Every tool the server lists (all pages), as definitions."""
    return await _with_session(spec, place, _tools_of, spec.connect_timeout, "list its tools")


async def list_tools_and_prompts(
    spec: ServerSpec, place: Place
) -> tuple[list[ToolDefinition], list[PromptDefinition]]:
    """Every tool and every prompt the server lists, on one session (`mcp test`); no prompts
    from a server that does not say it has any."""

    async def work(session: ClientSession) -> tuple[list[ToolDefinition], list[PromptDefinition]]:
        tools = await _tools_of(session)
        capabilities = session.server_capabilities
        if capabilities is None or capabilities.prompts is None:
            return tools, []
        return tools, await _prompts_of(session)

    return await _with_session(spec, place, work, spec.connect_timeout, "list its tools")


async def call_tool(
    spec: ServerSpec,
    place: Place,
    tool: str,
    arguments: dict[str, Any],
    *,
    ask: Asker | None = None,
) -> CallOutcome:
    """Call one tool; the server's own errors come back as an error outcome, not an exception.
    A question the server asks mid-call goes to `ask` when it may be asked (`elicit`), else it
    is declined; the time the person takes to answer does not count against the call's limit."""

    call = _Call(ask=ask)

    async def work(session: ClientSession) -> CallOutcome:
        result = await session.call_tool(tool, arguments)
        return CallOutcome(
            result_text(result), bool(result.is_error), tuple(call.notes), result_files(result)
        )

    limit = spec.connect_timeout + spec.call_timeout
    return await _with_session(spec, place, work, limit, f"answer the call of {tool}", call=call)


@dataclass(slots=True)
class _Call:
    """One tool call in flight: what the server asked during it, and how to ask its person."""

    notes: list[ElicitNote] = field(default_factory=list)
    ask: Asker | None = None
    # The call's deadline, paused while the person is asked.
    scope: anyio.CancelScope | None = None
    # The context of the calling task: the question is asked in it, not in the context of the
    # task that reads the server's messages (a kept session's owner, made by an earlier call),
    # whose context-bound resources (the database executor of a finished request) may be gone.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)

    async def asked(self, question: ElicitQuestion) -> ElicitAnswer:
        scope = self.scope
        left = scope.deadline - anyio.current_time() if scope is not None else 0.0
        if scope is not None:
            scope.deadline = math.inf
        try:
            return await self.tell(question)
        finally:
            if scope is not None:
                scope.deadline = anyio.current_time() + max(left, 0.0)

    async def tell(self, question: ElicitQuestion) -> ElicitAnswer:
        """`ask(question)` run in the calling task's context; cancelled with the waiting task."""
        assert self.ask is not None
        task = asyncio.get_running_loop().create_task(
            _asking(self.ask, question), context=self.context.copy()
        )
        # Held until it ends (the loop holds tasks weakly), a withdrawal after a cancel too.
        _owners.add(task)
        task.add_done_callback(_owners.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait([task])
            raise


async def list_prompts(spec: ServerSpec, place: Place) -> list[PromptDefinition]:
    """Every prompt the server lists (all pages); none when it offers no prompts."""
    return await _with_session(spec, place, _prompts_of, spec.connect_timeout, "list its prompts")


async def get_prompt(spec: ServerSpec, place: Place, prompt: str, arguments: dict[str, str]) -> str:
    """The text of one prompt's messages, as the server fills it with these arguments."""

    async def work(session: ClientSession) -> str:
        return prompt_text(await session.get_prompt(prompt, arguments))

    limit = spec.connect_timeout + spec.call_timeout
    return await _with_session(spec, place, work, limit, f"give the prompt {prompt}")


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
    call: _Call | None = None,
) -> T:
    if spec.keep_alive > 0:
        return await _with_kept_session(spec, place, work, limit, what, call)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as opened:
        # TemporaryFile's text mode is a TextIOWrapper, typed as the wider IO[str].
        errlog = cast(TextIO, opened)
        greeted = False  # a server that never greeted is a start that failed, not a crash
        try:
            with anyio.fail_after(limit) as scope:
                if call is not None:
                    call.scope = scope
                async with _session(spec, place, errlog, elicited=lambda: call) as session:
                    greeted = True
                    return await work(session)
        except Exception as exc:
            raise _failure(
                spec, exc, greeted=greeted, what=what, limit=limit, tail=_tail(errlog)
            ) from None


async def _with_kept_session(
    spec: ServerSpec,
    place: Place,
    work: Callable[[ClientSession], Awaitable[T]],
    limit: float,
    what: str,
    call: _Call | None = None,
) -> T:
    """`work` on the loop's kept session for this server and place, opened if there is none.
    Any failure drops the session (the next operation opens a new one)."""
    pool = await loop_owned.get(_POOL_KEY, _Pool)
    kept: _Kept | None = None
    greeted = False
    try:
        with anyio.fail_after(limit) as scope:
            kept = pool.take(spec, place)
            session = await kept.opened()
            greeted = True
            if call is not None:
                call.scope = scope
                kept.calls.append(call)
            try:
                result = await work(session)
            finally:
                if call is not None:
                    kept.calls.remove(call)
    except BaseException as exc:
        tail = ""
        if kept is not None:
            tail = kept.tail()
            kept.drop()  # in doubt (a timeout, a crash, a cancelled call): never reused
        if not isinstance(exc, Exception):
            raise  # a cancelled call (Stop) stays a cancellation
        raise _failure(spec, exc, greeted=greeted, what=what, limit=limit, tail=tail) from None
    kept.give_back(spec)
    return result


def _failure(
    spec: ServerSpec, exc: Exception, *, greeted: bool, what: str, limit: float, tail: str
) -> Exception:
    """The error an operation that failed with `exc` raises: McpConnectError saying which limit
    or what happened, or the SignInRequired inside it."""
    if isinstance(exc, McpConnectError):
        return exc
    sign_in = _find(exc, SignInRequired)
    if sign_in is not None:
        return sign_in
    if spec.kind == "stdio" and greeted and _closed(exc):
        return McpConnectError(
            f'The MCP server "{spec.name}" stopped before it could {what}: its process '
            "ended or closed its output (it may have crashed). The next call starts it "
            "again.",
            stderr_tail=tail,
        )
    if not _timed_out(exc):
        return McpConnectError(
            f'The MCP server "{spec.name}" could not {what}: {_describe(exc)}.',
            stderr_tail=tail,
        )
    return McpConnectError(
        f'The MCP server "{spec.name}" did not {what} within {limit:g} seconds.',
        stderr_tail=tail,
    )


# --- sessions kept open -----------------------------------------------------------------------

ToolsChanged = Callable[[ServerSpec], None]
_tools_changed: list[ToolsChanged] = []


def on_tools_changed(listener: ToolsChanged) -> None:
    """Have `listener(spec)` called whenever a kept session's server says its tool list changed
    (`notifications/tools/list_changed`); registering the same listener again does nothing."""
    if listener not in _tools_changed:
        _tools_changed.append(listener)


def _session_key(spec: ServerSpec, place: Place) -> str:
    """What a kept session is for: the server as registered, for a stdio server the sandbox of
    the call, for an OAuth server the person's token and client. A digest, so the pool's keys
    hold no env value, header or token. The client factory is left out: a process has one."""
    parts: list[object] = [
        spec.kind,
        spec.name,
        list(spec.argv),
        sorted(spec.env.items()),
        list(spec.read_only),
        spec.url,
        sorted(spec.headers.items()),
        spec.connect_timeout,
        spec.call_timeout,
    ]
    if spec.kind == "stdio":
        parts += [
            str(place.root),
            str(place.skills_dir),
            place.sandbox,
            place.unsandboxed_allowed,
            list(place.hidden_paths),
        ]
    if spec.oauth is not None:
        grant = spec.oauth.grant
        tokens, client = grant.tokens, grant.client_info
        parts += [
            spec.oauth.redirect_uri,
            spec.oauth.allow_private,
            tokens.access_token if tokens is not None else "",
            client.client_id if client is not None else "",
        ]
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class _Kept:
    """One kept session and the task that owns it: the task opens it, waits while it serves,
    and closes it when told to, when idle past `keep_alive`, or as the loop ends."""

    def __init__(self, pool: _Pool, key: str, spec: ServerSpec, place: Place) -> None:
        self.pool, self.key, self.spec, self.place = pool, key, spec, place
        self.session: ClientSession | None = None
        self.failure: BaseException | None = None
        self.ready = anyio.Event()
        self.closing = anyio.Event()
        self.users = 0
        self.last_used = time.monotonic()
        self.dead = False  # never handed out again
        self.last_tail = ""
        # The calls in flight on this session. A server's question during a call is asked of
        # that call's person and noted in its result only when it is the one call in flight: a
        # plain HTTP session serves several people, and the question of one's call is not
        # another's (it is declined, unasked and unnoted).
        self.calls: list[_Call] = []
        # Closed by the owning task when the session ends.
        opened = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.errlog = cast(TextIO, opened)
        self.task = asyncio.get_running_loop().create_task(self._own())
        # Held until it ends: the loop keeps only weak references to its tasks.
        _owners.add(self.task)
        self.task.add_done_callback(_owners.discard)

    async def opened(self) -> ClientSession:
        """The greeted session; raises what its opening raised."""
        await self.ready.wait()
        if self.session is None or self.failure is not None:
            raise self.failure or McpConnectError(f'The MCP server "{self.spec.name}" closed.')
        return self.session

    def give_back(self, spec: ServerSpec) -> None:
        """The caller is done with the session, which worked: it serves the next call."""
        self.users -= 1
        self.last_used = time.monotonic()
        own = self.spec.oauth
        theirs = spec.oauth.grant if spec.oauth is not None else None
        if own is not None and theirs is not None and own.grant is not theirs and own.grant.changed:
            # The session's token was refreshed on a call after its first: the caller's grant
            # is the one stored, so it gets the new tokens (its next call opens a new session).
            theirs.tokens, theirs.client_info = own.grant.tokens, own.grant.client_info
            theirs.changed = True
            self.dead = True
            self.pool.forget(self)
        if self.dead and self.users == 0:
            self.closing.set()

    def drop(self) -> None:
        """Never hand this session out again; close it once no call uses it."""
        self.users = max(0, self.users - 1)
        self.dead = True
        self.pool.forget(self)
        if self.users == 0:
            self.closing.set()

    def close(self) -> None:
        self.dead = True
        self.pool.forget(self)
        self.closing.set()

    def tail(self) -> str:
        return self.last_tail if self.errlog.closed else _tail(self.errlog)

    def _ended(self) -> None:
        """The server closed its side (a stdio server's process ended): not handed out again."""
        self.dead = True
        self.pool.forget(self)
        if self.users == 0:
            self.closing.set()

    async def _message(self, message: IncomingMessage) -> None:
        from mcp import types as mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            for listener in list(_tools_changed):
                try:
                    listener(self.spec)
                except Exception:
                    logger.exception("A tools/list_changed listener failed for %s", self.spec.name)

    async def _own(self) -> None:
        try:
            async with _session(
                self.spec,
                self.place,
                self.errlog,
                on_message=self._message,
                on_end=self._ended,
                elicited=lambda: self.calls[0] if len(self.calls) == 1 else None,
            ) as session:
                self.session = session
                self.ready.set()
                await self._serve()
        except BaseException as exc:  # a failed start, or the loop ending (cancelled)
            self.failure = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self.dead = True
            self.pool.forget(self)
            self.ready.set()
            self.last_tail = _tail(self.errlog)
            self.errlog.close()

    async def _serve(self) -> None:
        keep = self.spec.keep_alive
        while not self.closing.is_set():
            idle = time.monotonic() - self.last_used
            if self.users == 0 and idle >= keep:
                self.dead = True  # before any await: no call takes a session on its way out
                self.pool.forget(self)
                return
            with anyio.move_on_after(keep - idle if self.users == 0 else keep):
                await self.closing.wait()


_POOL_KEY = ("skills_app.core.mcp.connect", "kept sessions")
_owners: set[asyncio.Task[Any]] = set()


class _Pool(contextlib.AbstractAsyncContextManager["_Pool"]):
    """The kept sessions of one event loop, the least recently used first."""

    def __init__(self) -> None:
        self.kept: OrderedDict[str, _Kept] = OrderedDict()

    def take(self, spec: ServerSpec, place: Place) -> _Kept:
        """The kept session for this call (a new one, opening, when there is none), in use."""
        key = _session_key(spec, place)
        kept = self.kept.get(key)
        if kept is None or kept.dead:
            kept = self.kept[key] = _Kept(self, key, spec, place)
        self.kept.move_to_end(key)
        kept.users += 1
        kept.last_used = time.monotonic()
        idle = [k for k in self.kept.values() if k.users == 0]
        for extra in idle[: max(0, len(self.kept) - spec.max_kept)]:
            extra.close()
        return kept

    def forget(self, kept: _Kept) -> None:
        if self.kept.get(kept.key) is kept:
            del self.kept[kept.key]

    async def close_all(self) -> int:
        owned = list(self.kept.values())
        self.kept.clear()
        for kept in owned:
            kept.close()
        for kept in owned:
            with contextlib.suppress(BaseException):
                await kept.task
        return len(owned)

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close_all()


async def kept_sessions() -> int:
    """How many sessions the running loop keeps open (tests, the bench)."""
    pool = await loop_owned.get(_POOL_KEY, _Pool)
    return len(pool.kept)


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
async def _session(
    spec: ServerSpec,
    place: Place,
    errlog: TextIO,
    *,
    on_message: MessageHandlerFnT | None = None,
    on_end: Callable[[], None] | None = None,
    elicited: Callable[[], _Call | None] = lambda: None,
) -> AsyncIterator[ClientSession]:
    """A greeted session; `on_message` gets the server's notifications, `on_end` is called when
    the server closes its side (a kept session's way of hearing that a stdio server ended), and
    `elicited()` is the call a server's question belongs to (None: no one's)."""
    from mcp import ClientSession
    from mcp import types as mcp_types
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    async with contextlib.AsyncExitStack() as stack:
        if spec.kind == "stdio":
            params = stdio_parameters(spec, place)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        elif spec.kind == "http":
            # The read limit lies past the operation's own deadline, which then fires first and
            # says which limit was passed (a bare read timeout reads as a broken stream).
            read_limit = spec.connect_timeout + spec.call_timeout + spec.ask_timeout + 5.0
            if spec.http_clients is None:
                raise McpConnectError(
                    f'The MCP server "{spec.name}" has no HTTP client factory in its spec.'
                )
            needs = HttpClientSpec(
                headers=spec.headers,
                connect_timeout=spec.connect_timeout,
                read_timeout=read_limit,
            )
            if spec.oauth is not None:
                needs = replace(
                    needs,
                    guarded=True,
                    allow_private=spec.oauth.allow_private,
                    auth=provider(spec.url, spec.oauth),
                )
            client = spec.http_clients(needs)
            await stack.enter_async_context(client)
            read, write = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=client)
            )
        else:
            raise McpConnectError(f"Unknown MCP server kind {spec.kind!r}: use stdio or http.")
        if on_end is not None:
            read = await _watched(stack, read, on_end)

        async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
            # A server's question mid-call: asked of the call's person when it may be, else
            # declined; noted for the call's result either way.
            call = elicited()
            if call is None:
                return mcp_types.ElicitResult(action="decline")
            note = note_for(spec.name, params)
            question = question_for(spec.name, params)
            if call.ask is None or question.refused:
                if call.ask is not None:
                    with contextlib.suppress(Exception):
                        await call.tell(question)  # shown declined, not waited for
                call.notes.append(note)
                return mcp_types.ElicitResult(action="decline")
            try:
                answer = await call.asked(question)
            except Exception:
                logger.exception("Asking the person for %s's question failed", spec.name)
                answer = ElicitAnswer("cancel", why="the question could not be asked")
            call.notes.append(replace(note, answered=answer.action, why=answer.why))
            if answer.action == "accept":
                return mcp_types.ElicitResult(action="accept", content=dict(answer.content or {}))
            return mcp_types.ElicitResult(
                action="cancel" if answer.action == "cancel" else "decline"
            )

        session = await stack.enter_async_context(
            ClientSession(read, write, message_handler=on_message, elicitation_callback=elicit)
        )
        with anyio.fail_after(spec.connect_timeout):
            await session.initialize()
        yield session


async def _watched(stack: contextlib.AsyncExitStack, read: Any, on_end: Callable[[], None]) -> Any:
    """`read` passed on through a stream of our own, calling `on_end` once it ends."""
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def forward() -> None:
        async with send:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                async for item in read:
                    await send.send(item)
        on_end()

    group = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(group.cancel_scope.cancel)  # on the way out, before the group is awaited
    group.start_soon(forward)
    await stack.enter_async_context(receive)
    return receive


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
