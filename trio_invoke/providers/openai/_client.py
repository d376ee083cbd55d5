"""``OpenAIChatClient``: streams from any OpenAI-compatible ``/chat/completions`` endpoint.

OpenAI itself, and the local servers that speak its API: Ollama, vLLM, llama.cpp's server,
LM Studio. It runs on httpx (which runs on Trio), so it needs the extra ``trio_invoke[openai]``.

The layers, outside in:

* :class:`OpenAIChatClient` builds the request (``stream: true``, ``stream_options``, the tools
  the loop passes down in ``RunOptions.tools``, ``tool_choice``, ``parallel_tool_calls`` and the
  pass-through ``model_options``), sends it, and retries 429/5xx answers and connection failures
  that happen before any of the response was read.
* ``_ResponseStream`` reads the body piece by piece and feeds it to the sans-IO SSE parser
  (``providers/_sse.py``), then each event's data to the sans-IO ``ChunkDecoder``
  (``_decode.py``), which turns chat-completion chunks into updates.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from email.utils import parsedate_to_datetime
from types import MappingProxyType, TracebackType
from typing import Any, Final

import trio

from ..._exceptions import (
    ConfigurationError,
    HTTPStatusError,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeoutError,
)
from ..._messages import ChatMessage
from ..._options import RunOptions
from ..._updates import AgentResponseUpdate
from .._sse import ServerSentEvent, SSEParser
from ._decode import PREVIEW, ChunkDecoder, error_message, preview, wire_message

try:
    import httpx
except ImportError as exc:  # pragma: no cover - the test hides httpx and re-imports this module
    raise ImportError(
        'OpenAIChatClient needs httpx, which is not installed: pip install "trio_invoke[openai]"'
    ) from exc

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_TIMEOUT", "OpenAIChatClient"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
"""Where requests go when neither ``base_url`` nor ``OPENAI_BASE_URL`` says otherwise."""
DEFAULT_TIMEOUT: Final = httpx.Timeout(120.0, connect=10.0)
"""10 s to connect; 120 s for each read (the longest silence allowed within a response, which
includes the wait for the first token), write and pool wait."""

_RESERVED: Final = frozenset(
    {"model", "messages", "stream", "tools", "tool_choice", "parallel_tool_calls"}
)
"""Request fields the client sets itself; ``model_options`` may not set them."""
_RETRY_TRANSPORT: Final = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)
"""Connection failures before any of the response arrived: safe to retry."""
_DRAIN_AFTER_DONE: Final = 1.0
"""Seconds to wait, after ``[DONE]``, for the end of the body, so the connection can be reused."""


def _retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms`` (OpenAI), else ``Retry-After`` as
    seconds or as an HTTP date (RFC 9110, 10.2.3). ``None`` if absent or unreadable."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name, "").strip()
        if not value:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            if scale != 1.0:
                continue
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            seconds = when.timestamp() - (time.time() if now is None else now)
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


# -- the I/O part ----------------------------------------------------------------------------


class _ResponseStream:
    """The updates of one streamed response: an async iterator that reads the body as it goes.

    An error (network, protocol) is raised after the updates that came before it.
    """

    def __init__(self, response: httpx.Response, url: str, timeout: httpx.Timeout) -> None:
        self._response = response
        self._url = url
        self._timeout = timeout
        self._bytes = response.aiter_bytes()
        self._parser = SSEParser()
        self._decoder = ChunkDecoder()
        self._pending: deque[AgentResponseUpdate] = deque()
        self._error: ModelResponseError | None = None
        self._ended = False
        self._drain_owed = False
        self._head = b""  # the start of the body, to say what came instead of events

    def __aiter__(self) -> _ResponseStream:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        while not self._pending:
            if self._error is not None:
                error, self._error = self._error, None
                self._ended = True
                raise error
            if self._ended:
                if self._drain_owed:  # after the Finish went out, not before
                    self._drain_owed = False
                    await self._drain()
                raise StopAsyncIteration
            await self._read()
        return self._pending.popleft()

    async def _read(self) -> None:
        try:
            piece: bytes | None = await anext(self._bytes)
        except StopAsyncIteration:
            piece = None
        except httpx.TimeoutException as exc:
            self._ended = True
            raise _timeout_error(exc, self._url, self._timeout) from exc
        except httpx.HTTPError as exc:
            self._ended = True
            raise ModelConnectionError(
                f"the connection to {self._url} broke in the middle of the response: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        try:
            if piece is None:
                self._ended = True
                self._pending.extend(self._decoder.end_of_body(self._diagnosis()))
                return
            if len(self._head) < PREVIEW:
                self._head += piece[: PREVIEW - len(self._head)]
            for event in self._parser.feed(piece):
                self._pending.extend(self._event(event))
        except ModelResponseError as exc:
            self._error = exc  # raised once the updates before it are delivered
            return
        if self._decoder.finished:
            self._ended = self._drain_owed = True

    def _event(self, event: ServerSentEvent) -> list[AgentResponseUpdate]:
        if event.event == "error":
            raise ModelResponseError(
                f"the server reported an error in the stream: {error_message(event.data, '')}"
            )
        return self._decoder.feed(event.data)

    async def _drain(self) -> None:
        """Read to the end of the body after ``[DONE]`` (briefly), so that the connection goes
        back to the pool instead of being closed."""
        with trio.move_on_after(_DRAIN_AFTER_DONE):
            try:
                while True:
                    await anext(self._bytes)
            except (StopAsyncIteration, httpx.HTTPError):
                pass

    def _diagnosis(self) -> str:
        if self._decoder.events:
            return ""
        kind = self._response.headers.get("content-type", "no content-type")
        head = self._head.decode("utf-8", errors="replace")
        return f"; the body ({kind}) starts {head!r}" if head else f"; the body ({kind}) is empty"

    async def aclose(self) -> None:
        """Stop reading the body and release the connection (closed if the body is unfinished).

        httpx reads a body through a chain of nested async generators; closing only the outer
        one would leave the inner ones to the garbage collector (Trio warns about that). So the
        chain is resumed once more inside a cancelled scope: the innermost generator meets the
        cancellation at its next network read, and every generator of the chain finishes,
        httpcore closing the response on the way out.
        """
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                while True:
                    await anext(self._bytes)  # buffered data comes back without a checkpoint
            except (StopAsyncIteration, httpx.HTTPError):
                pass


def _timeout_error(
    exc: httpx.TimeoutException, url: str, timeout: httpx.Timeout, suffix: str = ""
) -> ModelTimeoutError:
    kind, seconds = {
        httpx.ConnectTimeout: ("connect", timeout.connect),
        httpx.WriteTimeout: ("write", timeout.write),
        httpx.PoolTimeout: ("pool", timeout.pool),
    }.get(type(exc), ("read", timeout.read))
    return ModelTimeoutError(
        f"the model server at {url} timed out ({kind} timeout, {seconds} s){suffix}"
    )


class OpenAIChatClient:
    """A :class:`ChatClient` for any OpenAI-compatible ``/chat/completions`` endpoint.

    Example, against a local Ollama::

        model = OpenAIChatClient("llama3.2", base_url="http://localhost:11434/v1")
        agent = FunctionInvokingChatClient(model, [get_weather])
        response = await agent.get_response([ChatMessage.user("Weather in Paris?")])

    Each ``run`` opens its own HTTP connection and closes it at the end. To reuse connections
    across runs and rounds (worth it over TLS), open the client once around them::

        async with OpenAIChatClient("gpt-4o-mini") as model:
            ...

    Args:
        model: The model name the server knows (``"gpt-4o-mini"``, ``"llama3.2"``, ...).
        base_url: The API root, up to and without ``/chat/completions``. Defaults to the
            ``OPENAI_BASE_URL`` environment variable, else ``https://api.openai.com/v1``.
        api_key: Sent as ``Authorization: Bearer ...``. Defaults to ``OPENAI_API_KEY``; with
            neither, no ``Authorization`` header is sent (local servers need none).
        timeout: Seconds, an ``httpx.Timeout``, or ``None`` for no timeout; applies to every
            request. The read timeout bounds each silence within a response, including the wait
            for the first token. Default: 10 s to connect, 120 s for the rest.
        max_retries: How often to retry a request that failed before any of its response was
            read: HTTP 429 and 5xx, and connection failures. Default 2.
        retry_backoff: Seconds before the first retry; doubled for each further retry (with a
            little jitter), unless the server sent ``Retry-After``. ``0`` retries at once.
        max_retry_delay: The longest wait before a retry, in seconds. A ``Retry-After`` longer
            than this is not waited for: the ``HTTPStatusError`` is raised at once.
        model_options: Request fields sent with every request (``{"temperature": 0}``); a
            run's ``RunOptions.model_options`` override them key by key, and ``None`` leaves a
            field out (see :meth:`request_body`).
        headers: Extra HTTP headers for every request.
        http_client: An ``httpx.AsyncClient`` of yours to send requests with; you open and
            close it. Default: the client's own, per run or per ``async with``.
        on_retry: Called before each retry's wait as ``on_retry(error, retry, delay)``: the
            error that the retry answers (an :class:`HTTPStatusError`, a
            :class:`ModelConnectionError` or a :class:`ModelTimeoutError`), the retry's number
            (1 for the first, up to ``max_retries``) and the seconds it will wait. It runs
            synchronously in the calling task, so keep it quick (log, print, count); what it
            raises propagates and ends the request. Example:
            ``on_retry=lambda error, n, delay: print(f"retrying after {error}, {n} of 2")``.

    Raises:
        ConfigurationError: an empty model name, a ``base_url`` that is not an http(s) URL, a
            negative retry setting, or ``model_options`` that set a field the client owns.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
        max_retry_delay: float = 60.0,
        model_options: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        on_retry: Callable[[Exception, int, float], object] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
        base = base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL", "")
        base = (base or DEFAULT_BASE_URL).rstrip("/")
        try:
            parsed = httpx.URL(base)
        except httpx.InvalidURL as exc:
            raise ConfigurationError(f"base_url {base!r} is not a valid URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigurationError(
                f"base_url must be an http(s) URL such as http://localhost:11434/v1, got {base!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        for label, value in (
            ("retry_backoff", retry_backoff),
            ("max_retry_delay", max_retry_delay),
        ):
            if not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ConfigurationError(f"{label} must be a number >= 0, got {value!r}")
        self.model = model
        """The model name sent with every request."""
        self.base_url = base
        """The API root; requests go to ``{base_url}/chat/completions``."""
        self.url = f"{base}/chat/completions"
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self.max_retries = max_retries
        self.retry_backoff = float(retry_backoff)
        self.max_retry_delay = float(max_retry_delay)
        self.model_options: Mapping[str, Any] = MappingProxyType(
            _checked_options(model_options or {})
        )
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._has_key = bool(key)
        self._headers = {"Accept": "text/event-stream", **(headers or {})}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._http_client = http_client
        self._pool: httpx.AsyncClient | None = None
        self.on_retry = on_retry
        """Called before each retry (see the ``on_retry`` argument); ``None``: nothing is."""

    def __repr__(self) -> str:
        key = ", api_key=***" if self._has_key else ""
        return f"OpenAIChatClient({self.model!r}, base_url={self.base_url!r}{key})"

    # -- connections ---------------------------------------------------------------------------

    async def __aenter__(self) -> OpenAIChatClient:
        """Open a connection pool that the runs inside the block share.

        Cancellation: nothing is opened until this returns.
        """
        if self._pool is not None:
            raise RuntimeError("this OpenAIChatClient is already open; enter it once at a time")
        if self._http_client is None:
            self._pool = self._new_http_client()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the connection pool (see :meth:`aclose`).

        Cancellation: the connections are closed all the same.
        """
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool opened by ``async with`` (a client passed as ``http_client`` stays
        open). Cancellation: the connections are closed anyway (httpx shields the close)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()

    def _new_http_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout)

    # -- the ChatClient surface ----------------------------------------------------------------

    def request_body(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> dict[str, Any]:
        """The JSON body :meth:`run` sends for ``messages`` and ``options``.

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
            "messages": [wire_message(message) for message in messages],
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

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        """Send ``messages`` and stream the model's response as updates.

        The request is sent (and retried) on entry; the body is read as you iterate. The stream
        ends with one ``Finish`` carrying the finish reason and the usage; every started tool
        call gets its ``ToolCallEnd`` before it.

        Raises:
            HTTPStatusError: the server answered 4xx/5xx (after the retries, for 429 and 5xx).
            ModelConnectionError: the server could not be reached (after the retries), or the
                connection broke mid-response (raised while iterating).
            ModelTimeoutError: a connect, read, write or pool timeout ran out.
            ModelResponseError: the stream was malformed or ended early (raised while
                iterating, after the updates that came before the problem).
            ConfigurationError: the request cannot be built (see :meth:`request_body`).

        Cancellation: cancelling the surrounding scope, or leaving the ``async with`` early,
        closes the HTTP response and its connection before the block exits; updates not yet
        received are lost. A cancelled retry wait sends nothing more.
        """
        content = _encode(self.request_body(messages, options))
        async with AsyncExitStack() as stack:
            http = self._http_client if self._http_client is not None else self._pool
            if http is None:
                http = await stack.enter_async_context(self._new_http_client())
            response = await self._send(http, content)
            stack.push_async_callback(response.aclose)
            stream = _ResponseStream(response, self.url, self.timeout)
            stack.push_async_callback(stream.aclose)
            yield stream

    # -- sending, with retries -----------------------------------------------------------------

    async def _send(self, http: httpx.AsyncClient, content: bytes) -> httpx.Response:
        attempt = 0
        while True:
            request = http.build_request(
                "POST", self.url, content=content, headers=self._headers, timeout=self.timeout
            )
            request.headers["Content-Type"] = "application/json"
            try:
                response = await http.send(request, stream=True)
            except _RETRY_TRANSPORT as exc:
                if attempt < self.max_retries:
                    delay = self._backoff(attempt)
                    attempt += 1
                    if self.on_retry is not None:
                        self.on_retry(self._transport_error(exc, 1), attempt, delay)
                    await trio.sleep(delay)
                    continue
                raise self._transport_error(exc, attempt + 1) from exc
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, attempt + 1) from exc
            if response.status_code < 300:
                return response
            error = await _status_error(response)
            retryable = error.status_code == 429 or error.status_code >= 500
            if not retryable or attempt >= self.max_retries:
                raise error
            if error.retry_after is not None and error.retry_after > self.max_retry_delay:
                raise error  # the server asks for a longer wait than we are willing to make
            delay = error.retry_after if error.retry_after is not None else self._backoff(attempt)
            attempt += 1
            if self.on_retry is not None:
                self.on_retry(error, attempt, delay)
            await trio.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        delay = min(self.retry_backoff * 2.0**attempt, self.max_retry_delay)
        return delay * random.uniform(0.75, 1.0)  # jitter: clients that failed together spread

    def _transport_error(self, exc: httpx.HTTPError, attempts: int) -> Exception:
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        if isinstance(exc, httpx.TimeoutException):
            return _timeout_error(exc, self.url, self.timeout, tries)
        return ModelConnectionError(
            f"could not get a response from {self.url}: {type(exc).__name__}: {exc}{tries}"
        )


async def _status_error(response: httpx.Response) -> HTTPStatusError:
    """Read (and close) an error response into an :class:`HTTPStatusError`."""
    try:
        body = (await response.aread()).decode("utf-8", errors="replace")
    except httpx.HTTPError:
        body = ""
    finally:
        await response.aclose()
    return HTTPStatusError(
        response.status_code,
        error_message(body, response.reason_phrase),
        body=preview(body, 4000),
        retry_after=_retry_after(response.headers),
    )


def _checked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    clash = sorted(_RESERVED.intersection(options))
    if clash:
        raise ConfigurationError(
            f"model_options may not set {', '.join(clash)}: the client sets "
            f"{'it' if len(clash) == 1 else 'them'} (tools and tool_choice come from RunOptions)"
        )
    return dict(options)


def _encode(body: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"the request body is not JSON-serialisable: {exc}") from exc
