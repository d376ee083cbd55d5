"""``AnthropicChatClient``: streams from Anthropic's Messages API (``POST {base_url}/v1/messages``).

It runs on httpx2 (which runs on Trio), so it needs the extra ``trio_invoke[anthropic]``.

The layers, outside in:

* :class:`AnthropicChatClient` checks its settings once (an attrs class with validators), builds
  the request (the conversation as the Messages API takes it, ``_wire``; ``max_tokens``,
  ``thinking``, the tools the loop passes down in ``RunOptions.tools``, ``tool_choice``, the
  pass-through ``model_options``) and sends it with the ``x-api-key`` and ``anthropic-version``
  headers.
* ``providers/_http.py`` (shared with the OpenAI client) retries 429 (after its
  ``retry-after``), 529 ``overloaded_error`` and other 5xx answers and connection failures that
  happen before any of the response was read, reads error bodies, and reads the streamed body
  into the sans-IO SSE parser, then each event into the sans-IO ``AnthropicDecoder``
  (``_decode``), with a deadline on progress.
* A response that stops with ``pause_turn`` (a long turn of server tools the API paused) is
  continued as Anthropic documents it: the client sends the conversation again with the paused
  response appended as the assistant's, and streams the continuation as more of the same
  response -- one ``Finish``, the usage summed -- up to ``max_continuations`` times.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import MappingProxyType
from typing import Any, Final

import attrs
import trio

from ..._content import json_copy
from ..._exceptions import ConfigurationError
from ..._facts import RESPONSE_FACTS
from ..._messages import ChatMessage, Usage
from ..._once import entered_once
from ..._options import RunOptions
from ..._updates import AgentResponseUpdate, Finish
from ._decode import AnthropicDecoder, error_description
from ._wire import pending_container, wire_conversation, wire_tool_choice, wire_tools

try:
    import httpx2
except ImportError as exc:  # pragma: no cover - the test hides httpx2 and re-imports this module
    raise ImportError(
        "AnthropicChatClient needs httpx2, which is not installed: "
        'pip install "trio-invoke[anthropic] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[anthropic]")'
    ) from exc

from .._http import RetryPolicy, SSEStream, checked_timeout
from .._settings import (
    Pooled,
    api_key_from,
    base_url_from,
    check_http_client,
    check_model,
    checked_headers,
    checked_options,
    merged_headers,
    reconfigurable,
    shown_url,
)

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "AnthropicChatClient"]

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
"""Where requests go when neither ``base_url`` nor ``ANTHROPIC_BASE_URL`` says otherwise."""
API_VERSION: Final = "2023-06-01"
"""The ``anthropic-version`` header: the current (and only stable) version of the API."""
DEFAULT_TIMEOUT: Final = httpx2.Timeout(120.0, connect=10.0)
"""10 s to connect; 120 s for each read and for progress within a response (which includes the
wait for the first token), write and pool wait."""

_RESERVED: Final = frozenset({"model", "messages", "system", "stream", "tools", "tool_choice"})
"""Request fields the client sets itself; ``model_options`` may not set them."""


# -- settings: converters and validators ------------------------------------------------------


def _base_url(value: str | None) -> str:
    return base_url_from(
        value,
        env="ANTHROPIC_BASE_URL",
        default=DEFAULT_BASE_URL,
        example=DEFAULT_BASE_URL,
        path="/v1/messages",
        not_ending="/v1",
    )


def _api_key(value: str | None) -> str | None:
    return api_key_from(value, env="ANTHROPIC_API_KEY")


def _max_tokens(_: object, __: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_tokens must be an integer >= 1, got {value!r}")


def _thinking(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise ConfigurationError(
            "thinking must be shaped as the API's: a mapping with a 'type', such as "
            f'{{"type": "enabled", "budget_tokens": 4000}}, got {value!r}'
        )
    try:
        json.dumps(dict(value))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"thinking must hold JSON values only: {exc}") from None
    if value["type"] == "enabled":
        budget = value.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ConfigurationError(
                "thinking of type 'enabled' needs budget_tokens, an integer >= 1 (the API's "
                f"minimum is 1024), got {budget!r}"
            )
    return MappingProxyType(dict(value))


def _server_tools(value: Sequence[Mapping[str, Any]] | None) -> tuple[Mapping[str, Any], ...]:
    """Each a mapping shaped as the API's tool declarations, with a ``type`` and a ``name``
    (strings), JSON, the names unique; read-only copies."""
    if value is None:
        return ()
    if isinstance(value, Mapping | str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(
            "server_tools must be a sequence of tool declarations shaped as the API's, such "
            'as [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}], '
            f"got {value!r}"
        )
    tools: list[Mapping[str, Any]] = []
    names: set[str] = set()
    for n, tool in enumerate(value):
        if not isinstance(tool, Mapping):
            raise ConfigurationError(
                f"server_tools[{n}] must be a mapping with a 'type' and a 'name', got {tool!r}"
            )
        for key in ("type", "name"):
            if not isinstance(tool.get(key), str) or not tool[key]:
                raise ConfigurationError(
                    f"server_tools[{n}] needs a {key!r}, a non-empty string (such as "
                    f'{{"type": "web_search_20250305", "name": "web_search"}}), got {dict(tool)!r}'
                )
        name = tool["name"]
        if name in names:
            raise ConfigurationError(f"server_tools has two tools named {name!r}")
        names.add(name)
        try:
            tools.append(MappingProxyType(json_copy(tool, f"server_tools[{n}]")))
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"server_tools[{n}] must hold JSON values only: {exc}"
            ) from None
    return tuple(tools)


def _checked_options(options: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return checked_options(
        options,
        reserved=_RESERVED,
        owned="system comes from the system messages, tools and tool_choice from RunOptions",
    )


def _count(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{attribute.name} must be an integer >= 0, got {value!r}")


def _version(_: object, __: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"anthropic_version must be a non-empty string, got {value!r}")


def _interleaved(headers: Mapping[str, str]) -> bool:
    """Interleaved thinking is on (an ``anthropic-beta`` header names it): its budget is the
    whole context window, and may be above ``max_tokens``."""
    return any(
        name.lower() == "anthropic-beta" and "interleaved-thinking" in value
        for name, value in headers.items()
    )


@attrs.define(eq=False, repr=False, field_transformer=reconfigurable)
class AnthropicChatClient(Pooled):
    """A :class:`ChatClient` for Anthropic's Messages API.

    Example::

        model = AnthropicChatClient("claude-sonnet-4-5", thinking={"type": "enabled",
                                                                  "budget_tokens": 2048})
        agent = FunctionInvokingChatClient(model, [get_weather])
        response = await agent.get_response([ChatMessage.user("Weather in Paris?")])

    Each ``run`` opens its own HTTP connection and closes it at the end; to reuse connections
    across runs and rounds, open the client once around them (``async with
    AnthropicChatClient(...) as model:``).

    A copy (``copy.copy``, ``copy.deepcopy``, pickling) is a new client with the same
    settings and a connection pool of its own, not open; it shares an ``http_client`` of
    yours, and pickling a client that has one is a ``TypeError``.

    With thinking on, the thinking blocks of each response -- with their signatures, and the
    redacted ones -- stay on the round's assistant message (``provider_data["thinking_blocks"]``;
    their text is also ``ChatMessage.reasoning``) and go back unchanged in the later rounds of
    the tool loop, as the API requires.

    Each argument but ``api_key``, ``headers`` and ``http_client`` is an attribute of the same
    name; one assigned later (``model.max_retries = 5``) is checked as the constructor checks
    it, and takes effect from the next request.

    Args:
        model: The model name (``"claude-sonnet-4-5"``, ``"claude-haiku-4-5"``, ...).
        base_url: The API root, without ``/v1``: requests go to ``{base_url}/v1/messages``.
            Defaults to the ``ANTHROPIC_BASE_URL`` environment variable, else
            ``https://api.anthropic.com``. A query string stays at the end of the URL.
        api_key: Sent as ``x-api-key``. Defaults to ``ANTHROPIC_API_KEY``; with neither, no key
            is sent (a proxy in front of the API may not need one).
        max_tokens: The most tokens a response may generate (the API requires the field).
            Default 4096. ``RunOptions(model_options={"max_tokens": ...})`` overrides it per run.
        thinking: Extended thinking, shaped as the API's ``thinking`` field:
            ``{"type": "enabled", "budget_tokens": 4000}`` (the budget below ``max_tokens``,
            unless ``headers`` turn on interleaved thinking:
            ``{"anthropic-beta": "interleaved-thinking-2025-05-14"}``),
            ``{"type": "adaptive"}`` on models that decide themselves, or ``None`` (the
            default) to leave it out. Sent as it is.
        anthropic_version: The ``anthropic-version`` header, default ``"2023-06-01"``. Beta
            features go in ``headers={"anthropic-beta": "..."}``.
        timeout: Seconds, an ``httpx2.Timeout``, or ``None`` for no timeout; applies to every
            request. The read timeout bounds each silence within a response, including the wait
            for the first token, and the time a response may go without progress (``ping``
            events do not count, but while a thinking or tool use block is open or a server
            tool runs, when the API sends nothing else). Default: 10 s to connect, 120 s for
            the rest.
        max_retries: How often to retry a request that failed before any of its response was
            read: HTTP 429, 529 (``overloaded_error``) and other 5xx, and connection failures.
            Default 2.
        retry_backoff: Seconds before the first retry; doubled for each further retry (with a
            little jitter), unless the server sent ``retry-after``. ``0`` retries at once.
        max_retry_delay: The longest wait before a retry, in seconds. A ``retry-after`` longer
            than this is not waited for: the ``HTTPStatusError`` is raised at once.
        max_continuations: How many times a response that stops with ``pause_turn`` is
            continued within one run (default 10); past that the response ends with
            ``Finish(LENGTH)``, the turn unfinished.
        server_tools: Tools the API runs itself (server tools), declared as the API's ``tools``
            entries are, each a mapping with its ``type`` and ``name``:
            ``[{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]``, web
            fetch, code execution, ... (a beta one needs its ``anthropic-beta`` header). They
            go in every request's ``tools`` after the loop's function tools, also when the loop
            has none. The model's use of one streams no tool call (the API runs it); its
            blocks stay on the assistant message (``provider_data["server_blocks"]``) and go
            back in later requests, where they came. Default: none.
        model_options: Request fields sent with every request (``{"temperature": 0}``,
            ``{"metadata": {...}}``); a run's ``RunOptions.model_options`` override them key by
            key, and ``None`` leaves a field out.
        headers: Extra HTTP headers for every request (``anthropic-beta``, ...). One of a name
            the client sets (in any case) replaces the client's, ``x-api-key`` from ``api_key``
            and ``anthropic-version`` included.
        http_client: An ``httpx2.AsyncClient`` of yours to send requests with; you open and
            close it. Default: the client's own, per run or per ``async with``. A redirect is
            never followed, whatever its ``follow_redirects``: it is an ``HTTPStatusError``.
        on_retry: Called before each retry's wait as ``on_retry(error, retry, delay)``, as for
            :class:`OpenAIChatClient`.

    Raises:
        ConfigurationError: an empty model name, a ``base_url`` that is not an http(s) URL (or
            ends in ``/v1`` or ``/v1/messages``), ``max_tokens`` below 1, a ``thinking`` that
            is not shaped as the API's (or whose ``budget_tokens`` is not below
            ``max_tokens``, without interleaved thinking), a timeout or retry
            setting that is negative, NaN or not a number, ``server_tools`` that are not
            mappings with a ``type`` and a ``name`` (strings; two with one name),
            ``model_options`` that set a field the client owns, an ``http_client`` that is not
            an ``httpx2.AsyncClient``, or an API key or header that cannot go in an HTTP header
            (a newline, whitespace around it, non-ASCII; the message does not show the key or
            the header's value).
    """

    model: str = attrs.field(validator=check_model)
    """The model name sent with every request."""
    base_url: str = attrs.field(default=None, kw_only=True, converter=_base_url)
    """The API root; requests go to ``{base_url}/v1/messages``."""
    _api_key: str | None = attrs.field(default=None, kw_only=True, converter=_api_key)
    max_tokens: int = attrs.field(default=4096, kw_only=True, validator=_max_tokens)
    """The request's ``max_tokens``."""
    thinking: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, converter=_thinking
    )
    """The request's ``thinking`` field, or ``None`` to leave it out."""
    anthropic_version: str = attrs.field(default=API_VERSION, kw_only=True, validator=_version)
    """The ``anthropic-version`` header."""
    timeout: httpx2.Timeout = attrs.field(
        default=DEFAULT_TIMEOUT, kw_only=True, converter=checked_timeout
    )
    """The timeouts of every request."""
    max_retries: int = attrs.field(default=2, kw_only=True)
    retry_backoff: float = attrs.field(default=0.5, kw_only=True)
    max_retry_delay: float = attrs.field(default=60.0, kw_only=True)
    max_continuations: int = attrs.field(default=10, kw_only=True, validator=_count)
    """How many ``pause_turn`` continuations one run makes at most."""
    server_tools: tuple[Mapping[str, Any], ...] = attrs.field(
        default=None, kw_only=True, converter=_server_tools
    )
    """The tools the API runs itself, declared in every request's ``tools`` after the loop's
    function tools."""
    model_options: Mapping[str, Any] = attrs.field(
        default=None, kw_only=True, converter=_checked_options
    )
    """Request fields sent with every request."""
    _extra_headers: Mapping[str, str] = attrs.field(
        default=None, kw_only=True, converter=checked_headers, alias="headers"
    )
    _http_client: httpx2.AsyncClient | None = attrs.field(
        default=None, kw_only=True, validator=check_http_client
    )
    on_retry: Callable[[Exception, int, float], object] | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(attrs.validators.is_callable()),
    )
    """Called before each retry (see the ``on_retry`` argument); ``None``: nothing is."""
    url: str = attrs.field(init=False)
    """``{base_url}/v1/messages``."""
    provider_name: str = attrs.field(init=False)
    """Who serves ``base_url``, told from its host, as OpenTelemetry's GenAI conventions name
    it (``"anthropic"``; ``"deepseek"`` or ``"moonshot_ai"`` for their Anthropic-compatible
    APIs, ...; ``"anthropic"`` for a host it does not know): ``trio_invoke.otel``'s
    ``gen_ai.provider.name``."""
    _retry: RetryPolicy = attrs.field(init=False)
    _headers: dict[str, str] = attrs.field(init=False)
    _pool: httpx2.AsyncClient | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        derive = object.__setattr__  # past the ``reconfigured`` hook: that is for later changes
        self._derive("/v1/messages", "anthropic")
        defaults = {"Accept": "text/event-stream", "anthropic-version": self.anthropic_version}
        key = {"x-api-key": self._api_key} if self._api_key else {}
        headers = merged_headers(defaults, key, self._extra_headers)
        derive(self, "_headers", headers)
        thinking = self.thinking
        if (
            thinking is not None
            and thinking["type"] == "enabled"
            and thinking["budget_tokens"] >= self.max_tokens
            and not _interleaved(headers)
        ):
            raise ConfigurationError(
                f"thinking budget_tokens ({thinking['budget_tokens']}) must be below "
                f"max_tokens ({self.max_tokens}): the thinking counts towards max_tokens "
                "(with interleaved thinking, the anthropic-beta header "
                "interleaved-thinking-2025-05-14, it may be above)"
            )

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        return f"AnthropicChatClient({self.model!r}, base_url={shown_url(self.base_url)!r}{key})"

    # -- the ChatClient surface ----------------------------------------------------------------

    def request_body(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> dict[str, Any]:
        """The JSON body :meth:`run` sends for ``messages`` and ``options``.

        System messages go to ``system``, the rest as the Messages API takes them (see
        ``_wire``: merged roles, tool results as ``tool_result`` blocks in one user message,
        thinking and server tool blocks echoed). ``tools`` (the function tools of
        ``options.tools``, then the client's ``server_tools``), and ``tool_choice`` (with
        ``disable_parallel_tool_use`` for ``parallel_tool_calls=False``), go out only with
        tools, of either kind. ``model_options`` (the client's, then the run's) are merged in
        last; ``None`` leaves a field out.

        Raises:
            ConfigurationError: ``options.model_options`` sets a field the client owns,
                ``options.tool_choice`` is not one the API has, a server tool has the name
                of a function tool, or a user message comes with the results of calls that
                code execution waits for (programmatic tool calling: the API takes
                ``tool_result`` blocks only there).
        """
        options = options or RunOptions()
        system, wire = wire_conversation(messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if system:
            body["system"] = system
        body["messages"] = wire
        if self.thinking is not None:
            body["thinking"] = dict(self.thinking)
        tools = self._tools(options)
        if tools:
            body["tools"] = tools
            choice = wire_tool_choice(options.tool_choice, options.parallel_tool_calls)
            if choice is not None:
                body["tool_choice"] = choice
        container = pending_container(messages)
        if container is not None:
            body["container"] = container
        body["stream"] = True
        body.update(self.model_options)
        body.update(_checked_options(options.model_options))
        return {key: value for key, value in body.items() if value is not None}

    def _tools(self, options: RunOptions) -> list[dict[str, Any]]:
        """The request's ``tools``: the loop's function tools, then the server tools."""
        names = {tool.name for tool in options.tools}
        for tool in self.server_tools:
            if tool["name"] in names:
                raise ConfigurationError(
                    f"server tool {tool['name']!r} ({tool['type']}) has the name of a function "
                    f"tool, {tool['name']!r}: the model could not tell them apart (rename the "
                    "function tool)"
                )
        return [
            *wire_tools(options.tools),
            *(json_copy(t, "server_tools") for t in self.server_tools),
        ]

    def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentResponseUpdate]]:
        """Send ``messages`` and stream the model's response as updates.

        The request is sent (and retried) on entry; the body is read as you iterate. The stream
        ends with one ``Finish`` carrying the stop reason and the usage; every started tool
        call gets its ``ToolCallEnd`` before it. Thinking arrives as ``ReasoningDelta`` and, for
        the assistant message to carry back, as ``ProviderDataDelta`` pieces of
        ``thinking_blocks``. A ``pause_turn`` is continued within the run (see the class).

        Raises:
            RuntimeError: the value ``run()`` returned is entered a second time (each is one
                model call: call ``run()`` again).
            HTTPStatusError: the server answered 4xx/5xx (after the retries, for 429, 529 and
                5xx), with the error's ``error_type`` and ``message``.
            ModelConnectionError: the server could not be reached (after the retries), or the
                connection broke mid-response (raised while iterating).
            ModelTimeoutError: a connect, read, write or pool timeout ran out, or the response
                made no progress for the read timeout (raised while iterating).
            ModelResponseError: the stream was malformed, ended early, or carried an ``error``
                event (``overloaded_error`` mid-stream: its ``error_type``); raised while
                iterating, after the updates that came before it.
            ConfigurationError: the request cannot be built (see :meth:`request_body`), or
                its body is not JSON (a NaN or an infinity in an option; nothing is sent).

        Cancellation: cancelling the surrounding scope, or leaving the ``async with`` early,
        closes the HTTP response and its connection before the block exits; updates not yet
        received are lost. A cancelled retry wait sends nothing more.
        """
        return self._run(messages, options)

    @entered_once
    @asynccontextmanager
    async def _run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        """The generator behind :meth:`run`."""
        body = self.request_body(messages, options)
        async with AsyncExitStack() as stack:
            http = await self._http(stack)
            turn = _Turn(self, http, body)
            stack.push_async_callback(turn.aclose)
            await turn.start()
            yield turn

    async def _open(
        self, http: httpx2.AsyncClient, body: Mapping[str, Any], decoder: AnthropicDecoder
    ) -> tuple[httpx2.Response, SSEStream]:
        return await self._post(http, body, decoder, error_description)


class _Turn:
    """The updates of one run: the response, and its continuations after ``pause_turn``."""

    def __init__(
        self, client: AnthropicChatClient, http: httpx2.AsyncClient, body: dict[str, Any]
    ) -> None:
        self._client = client
        self._http = http
        self._body = body
        self._continuations = 0
        self._before = Usage()  # the usage of the paused responses before the current one
        self._decoder = self._new_decoder()
        self._response: httpx2.Response | None = None
        self._stream: SSEStream | None = None

    def _new_decoder(self, after: AnthropicDecoder | None = None) -> AnthropicDecoder:
        more = self._continuations < self._client.max_continuations
        prefix = f"{self._continuations}." if self._continuations else ""
        return AnthropicDecoder(
            key_prefix=prefix, continue_pause=more, facts=RESPONSE_FACTS.get(), after=after
        )

    async def start(self) -> None:
        self._response, self._stream = await self._client._open(
            self._http, self._body, self._decoder
        )

    def __aiter__(self) -> _Turn:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        while True:
            if self._stream is None:  # started on entry; closed when the run's block is left
                raise trio.ClosedResourceError(
                    "this response stream was closed (its run's async with was left)"
                )
            try:
                update = await self._stream.__anext__()
            except StopAsyncIteration:
                if not self._decoder.paused:
                    raise
                await self._continue()
                continue
            if isinstance(update, Finish) and self._continuations:
                update = Finish(update.finish_reason, self._before + (update.usage or Usage()))
            return update

    async def _continue(self) -> None:
        """Send the conversation again with the paused response appended (merged into a
        trailing assistant message, as the API merges consecutive turns of one role)."""
        paused = self._decoder
        await self.aclose()
        self._before = self._before + paused.usage
        messages = list(self._body["messages"])
        blocks = paused.blocks
        if messages and messages[-1]["role"] == "assistant":
            last = messages[-1]
            messages[-1] = {**last, "content": [*last["content"], *blocks]}
        elif blocks:  # (a message with no content is refused)
            messages.append({"role": "assistant", "content": blocks})
        self._body = {**self._body, "messages": messages}
        self._continuations += 1
        self._decoder = self._new_decoder(paused)
        await self.start()

    async def aclose(self) -> None:
        """Stop reading and close the current response (and its connection, if unfinished).

        Cancellation: none needed for the stream; the response's close is shielded by httpx2.
        """
        stream, response = self._stream, self._response
        self._stream = self._response = None
        if stream is not None:
            await stream.aclose()
        if response is not None:
            await response.aclose()
