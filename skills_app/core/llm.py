"""The model adapter: the streaming Anthropic client, yielding the core's own events
(`events.ModelEvent`), and the request it sends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

# The SDK itself is imported where a model is called (`load_sdk`), not with this module: its
# types take 1.3 s of CPU to import, and every process that loads the models would pay for it
# (`manage.py migrate`, `check`, a test's helper process), though only the processes that run
# answers ever call a model. Those load it when they start (webapp/asgi.py, which `runworker`
# imports too), so the first answer does not wait for it.
if TYPE_CHECKING:
    import anthropic

from . import loop_owned
from .caching import with_cache_breakpoints
from .events import BlockDone, BlockStarted, MessageDone, ModelEvent, TextDelta, ThinkingDelta
from .llm_errors import RETRYABLE_KINDS, ModelError, status_error
from .model_catalog import EFFORT_LEVELS, get_model
from .model_options import request_options

DEFAULT_BASE_URL = "https://api.anthropic.com"


def load_sdk() -> None:
    """Import the SDK (once per process; then free)."""
    import anthropic  # noqa: F401


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One Messages API request, as the agent loop builds it.

    `system`, `tools` and `messages` are what the loop composed from stored rows; `as_kwargs`
    adds the cache breakpoints and the per-model settings without changing them.
    thinking: True on, False off, None the model's default. effort: "low".."max" or None.
    """

    model: str
    system: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    max_tokens: int
    thinking: bool | None = None
    effort: str | None = None
    temperature: float | None = None
    cache: bool = True

    def __post_init__(self) -> None:
        # A bad setting is a programming error: say so here, not as a failed model call.
        if self.effort is not None and self.effort not in EFFORT_LEVELS:
            raise ValueError(
                f'ModelRequest.effort "{self.effort}" is not one of {", ".join(EFFORT_LEVELS)}.'
            )

    @property
    def output_limit(self) -> int:
        """The output limit this request is sent with (max_tokens, capped by the model)."""
        info = get_model(self.model)
        return min(self.max_tokens, info.max_output) if info else self.max_tokens

    def as_kwargs(self) -> dict[str, Any]:
        """The request body: exactly what is sent (`_sdk_kwargs` makes it `stream()` arguments)."""
        options = request_options(
            get_model(self.model),
            max_tokens=self.max_tokens,
            thinking=self.thinking,
            effort=self.effort,
            temperature=self.temperature,
        )
        # With caching, the system prompt becomes a list of blocks carrying the breakpoint.
        system: str | list[dict[str, Any]]
        if self.cache:
            tools, system, messages = with_cache_breakpoints(self.tools, self.system, self.messages)
        else:
            tools, system, messages = self.tools, self.system, self.messages
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": options.pop("max_tokens"),
            "messages": messages,
        }
        # The API rejects an empty system string list and tools=[] is noise; omit them when empty.
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = tools
        kwargs.update(options)
        return kwargs


class ModelClient(Protocol):
    """What the agent loop needs from a model: a streaming call."""

    model: str
    label: str
    is_demo: bool

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


async def final_message(
    events: AsyncIterator[ModelEvent],
    *,
    cut: str = "The model's answer ended unexpectedly. Try again.",
) -> dict[str, Any]:
    """The whole answer of a model call whose deltas nobody watches (a title, a summary, a
    trigger attempt); ModelError("stream_cut", `cut`) when the stream ends without it."""
    message: dict[str, Any] | None = None
    async for event in events:  # to its end: whoever streams may settle the call after it
        if isinstance(event, MessageDone):
            message = event.message
    if message is None:
        raise ModelError("stream_cut", cut)
    return message


@dataclass(slots=True)
class _Progress:
    """What has streamed so far, so a failure can hand back the completed part."""

    done: dict[int, dict[str, Any]] = field(default_factory=dict)
    open_types: dict[int, str] = field(default_factory=dict)
    # Pieces per block, joined only when needed: appending to a str would be quadratic.
    texts: dict[int, list[str]] = field(default_factory=dict)
    json_bufs: dict[int, str] = field(default_factory=dict)

    def partial_content(self) -> list[dict[str, Any]]:
        """Completed blocks plus any text still streaming; a half tool_use is dropped."""
        blocks = dict(self.done)
        for index, kind in self.open_types.items():
            if kind == "text" and "".join(self.texts.get(index, ())):
                blocks[index] = {"type": "text", "text": "".join(self.texts[index])}
        return [blocks[i] for i in sorted(blocks)]


def _block_json(block: Any) -> dict[str, Any]:
    # exclude_unset keeps exactly the fields the API sent; parsed_output is SDK-only.
    data: dict[str, Any] = block.to_dict(mode="json", exclude_none=True)
    data.pop("parsed_output", None)
    return data


class AnthropicModel:
    """The real model: Anthropic's Messages API through the official async SDK, always streaming."""

    is_demo = False

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str,
        max_retries: int = 2,
        timeout: float = 600.0,
        models: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.label = f"Claude ({model})"
        # The configured ids (ANTHROPIC_MODELS), named when the API does not serve a model.
        self.models = tuple(models)
        # An explicit URL so the SDK never falls back to reading ANTHROPIC_BASE_URL itself.
        self.base_url = base_url or DEFAULT_BASE_URL
        self.timeout = timeout
        self._options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": self.base_url,
            "max_retries": max_retries,
            "timeout": timeout,
        }

    async def _client_for_running_loop(self) -> anthropic.AsyncAnthropic:
        # An async HTTP pool belongs to the event loop that opened it and must be closed on it:
        # one client per loop, closed as that loop ends (`loop_owned`).
        return await loop_owned.get(self, self._new_client)

    def _new_client(self) -> anthropic.AsyncAnthropic:
        # The SDK's aiohttp client (its `aiohttp` extra; the SDK's pool limits and timeouts, the
        # environment's proxies): a paced stream costs half the CPU per delta of the default
        # httpx client, as much as a client of our own did (bench/RESULTS.md).
        import anthropic

        return anthropic.AsyncAnthropic(
            **self._options, http_client=anthropic.DefaultAioHttpClient()
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one model reply as our events; raise ModelError (with partial content) on failure.

        The SDK's raw event stream, accumulated into the final message by the SDK's own
        `accumulate_event` (what `messages.stream()` does), without the helper events that
        `messages.stream()` also builds and validates for every delta (a text event with the
        whole text so far, per delta): a third of the SDK's CPU per delta, for nothing we use
        (bench/PROFILE.md). Text deltas skip the accumulation too (their pieces are kept here
        and joined once, when the block stops).
        """
        import anthropic
        from anthropic.lib.streaming._messages import accumulate_event

        progress = _Progress()
        saw_stop = False
        kwargs = _sdk_kwargs(request.as_kwargs())
        snapshot: Any = None
        json_bufs: dict[int, bytes] = {}
        # Whether the API answered: a connection lost after that cut the answer short (what
        # happened decides: the SDK raises the same APIConnectionError before and after).
        answered = False
        try:
            client = await self._client_for_running_loop()
            async with await client.messages.create(**kwargs, stream=True) as stream:
                answered = True
                async for event in stream:
                    # Text deltas are kept in `progress.texts` and put into the snapshot when
                    # their block stops: the SDK's accumulation sets a pydantic field per delta.
                    if event.type == "message_start" or (
                        snapshot is not None and not _is_text_delta(event)
                    ):
                        snapshot = accumulate_event(
                            event=event, current_snapshot=snapshot, json_bufs=json_bufs
                        )
                    for ours in self._translate(event, progress, snapshot):
                        yield ours
                    if event.type == "message_stop":
                        saw_stop = True
            final = snapshot
        except ModelError:
            raise
        except anthropic.APIStatusError as error:
            raise self._status_error(error, progress, request) from error
        except anthropic.APITimeoutError as error:
            raise self._timeout_error(progress) from error
        except anthropic.APIConnectionError as error:
            # Mid-stream too: the SDK (2.17 on) wraps a failed read of the body, its HTTP
            # client's timeout as APITimeoutError and every other error as this one.
            if answered:
                raise self._cut_error(progress) from error
            raise self._unreachable_error(progress) from error
        except ValueError as error:
            # The SDK raises ValueError when streamed tool input JSON cannot be parsed.
            raise self._bad_json_error(progress) from error
        if not saw_stop or progress.open_types or final is None:
            # The body ended cleanly but the API never said the message (or a block) was complete.
            raise self._cut_error(progress)
        usage = final.usage.to_dict(mode="json", exclude_none=True)
        message: dict[str, Any] = {
            "id": final.id,
            "model": final.model,
            "role": "assistant",
            "content": [progress.done[i] for i in sorted(progress.done)],
            "stop_reason": final.stop_reason,
            "stop_sequence": final.stop_sequence,
            "usage": usage,
        }
        if final.stop_details is not None:
            # Why a refusal happened (a policy category), when the API says.
            message["stop_details"] = final.stop_details.to_dict(mode="json", exclude_none=True)
        yield MessageDone(message=message)

    def _translate(self, event: Any, progress: _Progress, snapshot: Any) -> list[ModelEvent]:
        """Map one SDK stream event to ours, keeping track of what has completed.

        `snapshot` is the message accumulated so far: a finished block is read from it.
        """
        if event.type == "content_block_start":
            block = event.content_block
            progress.open_types[event.index] = block.type
            if block.type == "text":
                progress.texts[event.index] = [block.text or ""]
            is_tool = block.type in ("tool_use", "server_tool_use")
            return [
                BlockStarted(
                    index=event.index,
                    block_type=block.type,
                    tool_name=block.name if is_tool else None,
                    tool_use_id=block.id if is_tool else None,
                )
            ]
        if event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                progress.texts.setdefault(event.index, []).append(delta.text)
                return [TextDelta(index=event.index, text=delta.text)]
            if delta.type == "thinking_delta":
                # Not kept for partial content: a thinking block without its signature is unusable.
                return [ThinkingDelta(index=event.index, text=delta.thinking)]
            if delta.type == "input_json_delta":
                progress.json_bufs[event.index] = (
                    progress.json_bufs.get(event.index, "") + delta.partial_json
                )
            return []
        if event.type == "content_block_stop":
            content = snapshot.content[event.index]
            if content.type == "text":
                # The text deltas skipped the SDK's accumulation (`stream`): the block's text.
                content.text = "".join(progress.texts.get(event.index, ()))
            block = _block_json(content)
            if block.get("type") in ("tool_use", "server_tool_use"):
                # The SDK parses input leniently (a truncated object becomes {}), so check the raw JSON.
                raw = progress.json_bufs.get(event.index, "")
                try:
                    parsed = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError:
                    parsed = None
                if not isinstance(parsed, dict):
                    progress.open_types.pop(event.index, None)
                    raise self._bad_json_error(progress)
                block["input"] = parsed
            progress.open_types.pop(event.index, None)
            progress.done[event.index] = block
            return [BlockDone(index=event.index, block=block)]
        return []

    def _status_error(
        self, error: anthropic.APIStatusError, progress: _Progress, request: ModelRequest
    ) -> ModelError:
        return status_error(
            error_type=str(error.type or ""),
            status_code=error.status_code,
            detail=error.api_message or "",
            model=request.model,
            models=self.models,
            partial_content=progress.partial_content(),
        )

    def _timeout_error(self, progress: _Progress) -> ModelError:
        return ModelError(
            "timeout",
            f"The model API did not answer within {self.timeout:g} s. Try again, "
            "or ask for a shorter answer.",
            partial_content=progress.partial_content(),
        )

    def _unreachable_error(self, progress: _Progress) -> ModelError:
        return ModelError(
            "connection",
            f"Could not reach the model API at {self.base_url}. Check the address "
            "(ANTHROPIC_BASE_URL) and the network, then try again.",
            partial_content=progress.partial_content(),
        )

    def _cut_error(self, progress: _Progress) -> ModelError:
        return ModelError(
            "stream_cut",
            "The connection to the model was cut before the reply finished. "
            "What arrived so far was kept; try again.",
            partial_content=progress.partial_content(),
        )

    def _bad_json_error(self, progress: _Progress) -> ModelError:
        return ModelError(
            "invalid_tool_json",
            "The model sent a tool call whose input is not valid JSON, so it was not run. Try again.",
            partial_content=progress.partial_content(),
        )


def _is_text_delta(event: Any) -> bool:
    return bool(event.type == "content_block_delta" and event.delta.type == "text_delta")


# Sampling parameters are request fields the SDK no longer names; they travel in extra_body.
_EXTRA_BODY_FIELDS = ("temperature", "top_p", "top_k")


def _sdk_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The request body as `messages.create` keyword arguments (unnamed fields in extra_body)."""
    kwargs = {k: v for k, v in body.items() if k not in _EXTRA_BODY_FIELDS}
    extra = {k: body[k] for k in _EXTRA_BODY_FIELDS if k in body}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


__all__ = [
    "RETRYABLE_KINDS",
    "AnthropicModel",
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "final_message",
]
