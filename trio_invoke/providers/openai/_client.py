"""``OpenAIChatClient``: streams from any OpenAI-compatible ``/chat/completions`` endpoint.

OpenAI itself, the hosted APIs that speak its protocol (DeepSeek, OpenRouter, Moonshot, ...),
and the local servers: Ollama, vLLM, llama.cpp's server, LM Studio. It runs on httpx2 (which
runs on Trio), so it needs the extra ``trio_invoke[openai]``.

The layers, outside in:

* :class:`OpenAIChatClient` checks its settings once (an attrs class with validators), builds
  the request (``stream: true``, ``stream_options``, the tools the loop passes down in
  ``RunOptions.tools``, ``tool_choice``, ``parallel_tool_calls``, the pass-through
  ``model_options``, and the messages as the provider family takes them: ``_wire``) and sends it.
* ``providers/_http.py`` (shared with the other HTTP clients) retries 429/5xx answers and
  connection failures that happen before any of the response was read, reads error bodies, and
  reads the streamed body into the sans-IO SSE parser, then each event into the sans-IO
  ``ChunkDecoder`` (``_decode``), with a deadline on progress.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Final

import attrs

from ..._exceptions import ConfigurationError
from ..._facts import RESPONSE_FACTS
from ..._messages import ChatMessage
from ..._once import entered_once
from ..._options import RunOptions
from ..._updates import AgentResponseUpdate
from ._decode import ChunkDecoder, error_message
from ._wire import ProviderFamily, provider_family, wire_messages

try:
    import httpx2
except ImportError as exc:  # pragma: no cover - the test hides httpx2 and re-imports this module
    raise ImportError(
        "OpenAIChatClient needs httpx2, which is not installed: "
        'pip install "trio-invoke[openai] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[openai]")'
    ) from exc

from .._http import RetryPolicy, checked_timeout
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

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "OpenAIChatClient"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
"""Where requests go when neither ``base_url`` nor ``OPENAI_BASE_URL`` says otherwise."""
DEFAULT_TIMEOUT: Final = httpx2.Timeout(120.0, connect=10.0)
"""10 s to connect; 120 s for each read and for progress within a response (which includes the
wait for the first token), write and pool wait."""

_RESERVED: Final = frozenset(
    {"model", "messages", "stream", "tools", "tool_choice", "parallel_tool_calls"}
)
"""Request fields the client sets itself; ``model_options`` may not set them."""


# -- settings: converters and validators ------------------------------------------------------


def _base_url(value: str | None) -> str:
    return base_url_from(
        value,
        env="OPENAI_BASE_URL",
        default=DEFAULT_BASE_URL,
        example="http://localhost:11434/v1",
        path="/chat/completions",
        not_ending="/chat/completions",
    )


def _api_key(value: str | None) -> str | None:
    return api_key_from(value, env="OPENAI_API_KEY")


def _checked_options(options: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return checked_options(
        options, reserved=_RESERVED, owned="tools and tool_choice come from RunOptions"
    )


def _send_reasoning(_: object, __: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(f"send_reasoning must be True, False or None, got {value!r}")


_optional_callable = attrs.validators.optional(attrs.validators.is_callable())


@attrs.define(eq=False, repr=False, field_transformer=reconfigurable)
class OpenAIChatClient(Pooled):
    """A :class:`ChatClient` for any OpenAI-compatible ``/chat/completions`` endpoint.

    Example, against a local Ollama::

        model = OpenAIChatClient("llama3.2", base_url="http://localhost:11434/v1")
        agent = FunctionInvokingChatClient(model, [get_weather])
        response = await agent.get_response([ChatMessage.user("Weather in Paris?")])

    Each ``run`` opens its own HTTP connection and closes it at the end. To reuse connections
    across runs and rounds (worth it over TLS), open the client once around them::

        async with OpenAIChatClient("gpt-4o-mini") as model:
            ...

    A copy (``copy.copy``, ``copy.deepcopy``, pickling) is a new client with the same
    settings and a connection pool of its own, not open; it shares an ``http_client`` of
    yours, and pickling a client that has one is a ``TypeError``.

    Each argument but ``api_key``, ``headers`` and ``http_client`` is an attribute of the same
    name; one assigned later (``model.max_retries = 5``) is checked as the constructor checks
    it, and takes effect from the next request.

    Args:
        model: The model name the server knows (``"gpt-4o-mini"``, ``"llama3.2"``, ...).
        base_url: The API root, up to and without ``/chat/completions``. Defaults to the
            ``OPENAI_BASE_URL`` environment variable, else ``https://api.openai.com/v1``. A
            query string stays at the end of the URL (Azure OpenAI's deployments:
            ``.../openai/deployments/NAME?api-version=2024-10-21``).
        api_key: Sent as ``Authorization: Bearer ...``. Defaults to ``OPENAI_API_KEY``; with
            neither, no ``Authorization`` header is sent (local servers need none).
        timeout: Seconds, an ``httpx2.Timeout``, or ``None`` for no timeout; applies to every
            request. The read timeout bounds each silence within a response, including the wait
            for the first token, and the time a response may go without progress (keep-alive
            comments and empty chunks do not count). Default: 10 s to connect, 120 s for the
            rest.
        max_retries: How often to retry a request that failed before any of its response was
            read: HTTP 429 and 5xx, and connection failures. Default 2.
        retry_backoff: Seconds before the first retry; doubled for each further retry (with a
            little jitter), unless the server sent ``Retry-After``. ``0`` retries at once.
        max_retry_delay: The longest wait before a retry, in seconds. A ``Retry-After`` longer
            than this is not waited for: the ``HTTPStatusError`` is raised at once.
        model_options: Request fields sent with every request (``{"temperature": 0}``); a
            run's ``RunOptions.model_options`` override them key by key, and ``None`` leaves a
            field out (see :meth:`request_body`).
        headers: Extra HTTP headers for every request. One of a name the client sets (in any
            case) replaces the client's, ``Authorization`` from ``api_key`` included (a proxy's
            own token wins over ``OPENAI_API_KEY`` in the environment).
        http_client: An ``httpx2.AsyncClient`` of yours to send requests with; you open and
            close it. Default: the client's own, per run or per ``async with``. A redirect is
            never followed, whatever its ``follow_redirects``: it is an ``HTTPStatusError``.
        on_retry: Called before each retry's wait as ``on_retry(error, retry, delay)``: the
            error that the retry answers (an :class:`HTTPStatusError`, a
            :class:`ModelConnectionError` or a :class:`ModelTimeoutError`), the retry's number
            (1 for the first, up to ``max_retries``) and the seconds it will wait. It runs
            synchronously in the calling task, so keep it quick (log, print, count); what it
            raises propagates and ends the request. Example:
            ``on_retry=lambda error, n, delay: print(f"retrying after {error}, {n} of 2")``.
        send_reasoning: Whether an assistant message's reasoning (and OpenRouter's
            ``reasoning_details``) goes back to the server, in the field it came in. ``None``,
            the default, decides per provider family (:attr:`family`): yes for DeepSeek,
            OpenRouter, Moonshot and local servers, no for OpenAI and other hosted APIs.

    Raises:
        ConfigurationError: an empty model name, a ``base_url`` that is not an http(s) URL, a
            timeout or retry setting that is negative, NaN or not a number, ``model_options``
            that set a field the client owns, an ``http_client`` that is not an
            ``httpx2.AsyncClient``, ``send_reasoning=True`` for OpenAI's API, or an API key
            or header that cannot go in an HTTP header (a newline, whitespace around it,
            non-ASCII; the message does not show the key or the header's value).
    """

    model: str = attrs.field(validator=check_model)
    """The model name sent with every request."""
    base_url: str = attrs.field(default=None, kw_only=True, converter=_base_url)
    """The API root; requests go to ``{base_url}/chat/completions``."""
    _api_key: str | None = attrs.field(default=None, kw_only=True, converter=_api_key)
    timeout: httpx2.Timeout = attrs.field(
        default=DEFAULT_TIMEOUT, kw_only=True, converter=checked_timeout
    )
    """The timeouts of every request."""
    max_retries: int = attrs.field(default=2, kw_only=True)
    retry_backoff: float = attrs.field(default=0.5, kw_only=True)
    max_retry_delay: float = attrs.field(default=60.0, kw_only=True)
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
    send_reasoning: bool | None = attrs.field(default=None, kw_only=True, validator=_send_reasoning)
    """Whether reasoning goes back to the server: ``None`` decides per :attr:`family`."""
    on_retry: Callable[[Exception, int, float], object] | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(attrs.validators.is_callable()),
    )
    """Called before each retry (see the ``on_retry`` argument); ``None``: nothing is."""
    url: str = attrs.field(init=False)
    """``{base_url}/chat/completions``."""
    family: ProviderFamily = attrs.field(init=False)
    """The provider family, told from ``base_url``'s host: it decides how a conversation goes
    back (reasoning, OpenRouter's ``reasoning_details``)."""
    provider_name: str = attrs.field(init=False)
    """Who serves ``base_url``, told from its host, as OpenTelemetry's GenAI conventions name
    it (``"openai"``, ``"azure.ai.openai"``, ``"groq"``, ``"gcp.gemini"``, ...; ``"openai"``
    for a host it does not know): ``trio_invoke.otel``'s ``gen_ai.provider.name``."""
    _retry: RetryPolicy = attrs.field(init=False)
    _headers: dict[str, str] = attrs.field(init=False)
    _pool: httpx2.AsyncClient | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        derive = object.__setattr__  # past the ``reconfigured`` hook: that is for later changes
        self._derive("/chat/completions", "openai")
        derive(self, "family", provider_family(self.base_url))
        if self.send_reasoning and not self.family.takes_reasoning:
            raise ConfigurationError(
                f"send_reasoning=True cannot apply to {self.base_url}: the {self.family.name} "
                "API takes no reasoning back"
            )
        key = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        headers = merged_headers({"Accept": "text/event-stream"}, key, self._extra_headers)
        derive(self, "_headers", headers)

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        return f"OpenAIChatClient({self.model!r}, base_url={shown_url(self.base_url)!r}{key})"

    # -- the ChatClient surface ----------------------------------------------------------------

    def request_body(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> dict[str, Any]:
        """The JSON body :meth:`run` sends for ``messages`` and ``options``.

        The messages go as the provider family takes them (reasoning where it goes back, images
        of tool results in a user message after the tool messages: see ``_wire``).
        ``tool_choice`` and ``parallel_tool_calls`` go out only with tools (OpenAI rejects them
        without). ``model_options`` (the client's, then the run's) are merged in last; a value of
        ``None`` leaves that field out, e.g. ``{"stream_options": None}`` for a server that
        rejects it (you then get no usage).

        Raises:
            ConfigurationError: ``options.model_options`` sets a field the client owns.
        """
        options = options or RunOptions()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(messages, self.family, self.send_reasoning),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if options.tools:
            body["tools"] = [definition.to_dict() for definition in options.tools]
            if options.tool_choice is not None:
                choice = options.tool_choice
                body["tool_choice"] = choice if isinstance(choice, str) else dict(choice)
            if options.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = options.parallel_tool_calls
        body.update(self.model_options)
        body.update(_checked_options(options.model_options))
        return {key: value for key, value in body.items() if value is not None}

    def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentResponseUpdate]]:
        """Send ``messages`` and stream the model's response as updates.

        The request is sent (and retried) on entry; the body is read as you iterate. The stream
        ends with one ``Finish`` carrying the finish reason and the usage; every started tool
        call gets its ``ToolCallEnd`` before it. Reasoning arrives as ``ReasoningDelta`` (before
        the text it precedes), OpenRouter's ``reasoning_details`` as ``ProviderDataDelta``.

        Raises:
            RuntimeError: the value ``run()`` returned is entered a second time (each is one
                model call: call ``run()`` again).
            HTTPStatusError: the server answered 4xx/5xx (after the retries, for 429 and 5xx).
            ModelConnectionError: the server could not be reached (after the retries), or the
                connection broke mid-response (raised while iterating).
            ModelTimeoutError: a connect, read, write or pool timeout ran out, or the response
                made no progress for the read timeout (raised while iterating).
            ModelResponseError: the stream was malformed or ended early (raised while
                iterating, after the updates that came before the problem).
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
            response, stream = await self._post(
                http, body, ChunkDecoder(RESPONSE_FACTS.get()), error_message
            )
            stack.push_async_callback(response.aclose)
            stack.push_async_callback(stream.aclose)
            yield stream
