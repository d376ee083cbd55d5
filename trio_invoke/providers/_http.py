"""What the HTTP model clients share, on httpx2: retries, error responses, the streamed body.

A provider's client (``openai/_client.py``, ``anthropic/_client.py``) builds its request and its
sans-IO event decoder; everything between the socket and the decoder lives here:

* :class:`RetryPolicy` and :func:`send`: a request is retried on HTTP 429 and 5xx and on
  connection failures -- only before any of the response was read, after the server's
  ``Retry-After`` (:func:`retry_after`) or an exponential backoff with jitter, and never when the
  server asks for a longer wait than ``max_retry_delay``.
* :func:`status_error`: an error response read (and closed) into an ``HTTPStatusError``, the
  message taken from the body by the provider's own reader.
* :class:`SSEStream`: the body read piece by piece through the SSE parser into the decoder's
  updates, with a deadline on *progress*: keep-alive comments and events that produce no update
  do not move it, so a server that only pings ends with ``ModelTimeoutError`` after the read
  timeout instead of holding the run forever. Closing it releases the connection at once.
* :func:`checked_timeout`: a timeout setting checked and made an ``httpx2.Timeout``;
  :func:`encode_json`: a request body as the bytes to send.

This module needs httpx2: the clients import it only after their own import guard, which names
their extra.

Why a hand-written retry loop and not stamina (which supports Trio, and whose ``retry_on`` may
return a delay, enough for ``Retry-After``): the rules here are few and exact -- a retry only
before any of the response was read, the server's delay or none at all when it is longer than
``max_retry_delay``, multiplicative jitter -- and the loop that keeps them is forty lines, while
stamina would add two runtime dependencies (stamina, tenacity) to extras whose point is one HTTP
stack, and its process-wide switches (``stamina.set_active``, testing mode) would change this
library's behaviour from the outside.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Final, Protocol

import attrs

try:
    import httpx2
except ImportError as exc:  # pragma: no cover - the extras sessions import this without httpx2
    raise ImportError(
        "trio_invoke's HTTP clients need httpx2, which is not installed: "
        'pip install "trio-invoke[openai] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(or [anthropic]; from a checkout: pip install ".[openai]")'
    ) from exc
import trio

from .._exceptions import (
    ConfigurationError,
    HTTPStatusError,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeoutError,
)
from .._text import wire_text
from .._updates import AgentResponseUpdate
from .._validate import non_finite
from ._sse import MAX_EVENT_SIZE, ServerSentEvent, SSEParser

__all__ = [
    "PREVIEW",
    "RETRY_TRANSPORT",
    "Describe",
    "EventDecoder",
    "RetryPolicy",
    "SSEStream",
    "checked_timeout",
    "encode_json",
    "finish_chain",
    "preview",
    "retry_after",
    "send",
    "status_error",
    "timeout_error",
]

PREVIEW: Final = 300
RETRY_TRANSPORT: Final = (
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.ReadError,
    httpx2.WriteError,
    httpx2.RemoteProtocolError,
)
"""Connection failures before any of the response arrived: safe to retry."""
ERROR_BODY_LIMIT: Final = 64 * 1024
"""The most bytes of an error response's body that are read."""
ERROR_TEXT_LIMIT: Final = 4000
"""The most characters of an error's message, and of the body it keeps."""
DRAIN_AFTER_DONE: Final = 1.0
"""Seconds to wait, after the end of the events, for the end of the body (connection reuse)."""


def preview(text: str, limit: int = PREVIEW) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# -- settings ------------------------------------------------------------------------------------


def _is_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value < math.inf  # NaN fails both comparisons
    )


def checked_timeout(value: object) -> httpx2.Timeout:
    """``value`` (seconds, an ``httpx2.Timeout`` or ``None``) as an ``httpx2.Timeout``.

    Raises:
        ConfigurationError: a negative, NaN or infinite number, or not a number at all; the
            message names the value.
    """
    if isinstance(value, httpx2.Timeout):
        for kind in ("connect", "read", "write", "pool"):
            seconds = getattr(value, kind)
            if seconds is not None and not _is_seconds(seconds):
                raise ConfigurationError(
                    f"timeout: the {kind} timeout must be a number of seconds >= 0 or None, "
                    f"got {seconds!r}"
                )
        return value
    if value is not None and not _is_seconds(value):
        raise ConfigurationError(
            f"timeout must be a number of seconds >= 0, an httpx2.Timeout or None, got {value!r}"
        )
    return httpx2.Timeout(value)  # type: ignore[arg-type]  # checked just above


def _count(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{attribute.name} must be an integer >= 0, got {value!r}")


def _seconds(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not _is_seconds(value):
        raise ConfigurationError(f"{attribute.name} must be a number >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """When and how long to wait before sending a failed request again.

    Raises:
        ConfigurationError: a negative or non-integer ``max_retries``; a negative, NaN, infinite
            or non-number delay.
    """

    max_retries: int = attrs.field(default=2, validator=_count)
    """Retries after the first attempt."""
    retry_backoff: float = attrs.field(default=0.5, validator=_seconds)
    """Seconds before the first retry, doubled for each further one (with jitter)."""
    max_retry_delay: float = attrs.field(default=60.0, validator=_seconds)
    """The longest wait; a ``Retry-After`` beyond it is not waited for."""

    def backoff(self, attempt: int) -> float:
        """The wait before retry ``attempt + 1`` when the server said nothing."""
        delay = min(self.retry_backoff * 2.0**attempt, self.max_retry_delay)
        return delay * random.uniform(0.75, 1.0)  # jitter: clients that failed together spread

    def wait_for(self, error: HTTPStatusError, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``error``, or ``None`` to raise it: it is not
        429 or 5xx, the retries are spent, or the server asks for too long a wait."""
        if not (error.status_code == 429 or error.status_code >= 500):
            return None
        if attempt >= self.max_retries:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_delay else None
        return self.backoff(attempt)


def retry_after(headers: httpx2.Headers, now: float | None = None) -> float | None:
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
            if when.tzinfo is None:  # asctime, or -0000: an HTTP date is GMT all the same
                when = when.replace(tzinfo=UTC)
            seconds = when.timestamp() - (time.time() if now is None else now)
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


# -- sending ---------------------------------------------------------------------------------


def encode_json(body: Mapping[str, Any]) -> bytes:
    """The request body as UTF-8 JSON; text that is not valid Unicode is made valid
    (:func:`~trio_invoke._text.wire_text`: a lone surrogate becomes U+FFFD).

    Raises:
        ConfigurationError: the body holds something that is not JSON: a value of a type JSON
            does not have, a container that holds itself, or NaN or an infinity (which
            ``json.dumps`` would write as the bare tokens ``NaN`` and ``Infinity``, not JSON);
            the message names its place.
    """
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        found = non_finite(body) if isinstance(exc, ValueError) else None
        problem = f"{found[1]!r} at {found[0]} is not a JSON number" if found else str(exc)
        raise ConfigurationError(f"the request body is not JSON-serialisable: {problem}") from exc
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Surrogates only occur inside JSON strings, so mending the whole text mends each one.
        return wire_text(text).encode()


def timeout_error(
    exc: httpx2.TimeoutException, url: str, timeout: httpx2.Timeout, suffix: str = ""
) -> ModelTimeoutError:
    kind, seconds = {
        httpx2.ConnectTimeout: ("connect", timeout.connect),
        httpx2.WriteTimeout: ("write", timeout.write),
        httpx2.PoolTimeout: ("pool", timeout.pool),
    }.get(type(exc), ("read", timeout.read))
    return ModelTimeoutError(
        f"the model server at {url} timed out ({kind} timeout, {seconds} s){suffix}"
    )


def _transport_error(
    exc: httpx2.HTTPError, url: str, timeout: httpx2.Timeout, attempts: int
) -> Exception:
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    if isinstance(exc, httpx2.TimeoutException):
        return timeout_error(exc, url, timeout, tries)
    return ModelConnectionError(
        f"could not get a response from {url}: {type(exc).__name__}: {exc}{tries}"
    )


Describe = Callable[[str, str], "str | tuple[str, str | None]"]
"""A provider's reader of error bodies: ``describe(body, reason_phrase)`` gives the provider's
message, or ``(message, error_type)`` for a provider that names its errors (Anthropic)."""


async def status_error(response: httpx2.Response, describe: Describe) -> HTTPStatusError:
    """Read (and close) an error response into an :class:`HTTPStatusError`; ``describe(body,
    reason_phrase)`` finds the provider's message (and error type) in the body.

    Only the first :data:`ERROR_BODY_LIMIT` bytes are read (a longer body is cut off and its
    connection closed), and the message is cut to :data:`ERROR_TEXT_LIMIT` characters as the
    body is: a server's error page, however large, makes an error of a readable size.
    """
    pieces: list[bytes] = []
    size = 0
    chain = response.aiter_bytes()
    try:
        async for piece in chain:
            pieces.append(piece)
            size += len(piece)
            if size >= ERROR_BODY_LIMIT:
                await finish_chain(chain)
                break
    except httpx2.HTTPError:
        pass
    finally:
        await response.aclose()
    body = b"".join(pieces)[:ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
    described = describe(body, response.reason_phrase)
    message, error_type = (described, None) if isinstance(described, str) else described
    return HTTPStatusError(
        response.status_code,
        preview(message, ERROR_TEXT_LIMIT),
        body=preview(body, ERROR_TEXT_LIMIT),
        retry_after=retry_after(response.headers),
        error_type=error_type,
    )


async def send(
    http: httpx2.AsyncClient,
    build: Callable[[], httpx2.Request],
    *,
    url: str,
    timeouts: httpx2.Timeout,
    retry: RetryPolicy,
    describe: Describe,
    on_retry: Callable[[Exception, int, float], object] | None = None,
) -> httpx2.Response:
    """Send the request ``build()`` makes (once per attempt) and return the streaming response,
    its status below 300; retry as :class:`RetryPolicy` says, telling ``on_retry(error, retry,
    delay)`` before each retry's wait (``retry`` counts from 1). A redirect is not followed:
    it is an ``HTTPStatusError`` like any other answer of 300 or more.

    Raises:
        HTTPStatusError: the last answer was 4xx/5xx.
        ModelConnectionError, ModelTimeoutError: the last attempt got no response, or ``http``
            is closed.

    Cancellation: a cancelled wait or send sends nothing more; no response is left open.
    """
    attempt = 0
    while True:
        if http.is_closed:  # httpx2 would raise a RuntimeError
            raise ModelConnectionError(
                f"could not send to {url}: the httpx2.AsyncClient it sends with is closed"
            )
        try:
            # Never follow a redirect, even with an http_client that does: the request would go
            # elsewhere with its headers (httpx2 drops only Authorization: x-api-key would go).
            response = await http.send(build(), stream=True, follow_redirects=False)
        except RETRY_TRANSPORT as exc:
            if attempt < retry.max_retries:
                backoff = retry.backoff(attempt)
                attempt += 1
                if on_retry is not None:
                    on_retry(_transport_error(exc, url, timeouts, 1), attempt, backoff)
                await trio.sleep(backoff)
                continue
            raise _transport_error(exc, url, timeouts, attempt + 1) from exc
        except httpx2.HTTPError as exc:
            raise _transport_error(exc, url, timeouts, attempt + 1) from exc
        if response.status_code < 300:
            return response
        error = await status_error(response, describe)
        delay = retry.wait_for(error, attempt)
        if delay is None:
            raise error
        attempt += 1
        if on_retry is not None:
            on_retry(error, attempt, delay)
        await trio.sleep(delay)


# -- the streamed body ------------------------------------------------------------------------


class EventDecoder(Protocol):
    """A provider's sans-IO decoder: server-sent events in, updates out."""

    @property
    def finished(self) -> bool:
        """The response is complete (its final update was produced)."""

    @property
    def events(self) -> int:
        """How many events were fed."""

    @property
    def working(self) -> bool:
        """The model is at work on what the stream does not show yet (Anthropic: a thinking
        block with its text omitted, a tool's input buffered, a server tool running): the
        server sends only keep-alives then, and any piece of the body counts as progress."""

    def event(self, event: ServerSentEvent) -> list[AgentResponseUpdate]:
        """The updates in one event. Raises ``ModelResponseError`` for a broken stream."""

    def end_of_body(self, diagnosis: str) -> list[AgentResponseUpdate]:
        """The updates still owed at the end of the body (``diagnosis`` describes an odd body).
        Raises ``ModelResponseError`` if the response was not complete."""

    # Optional: ``message(data: str) -> list[AgentResponseUpdate]``, the updates of an event of
    # the default type with this data, as ``event`` gives them (the event's id unused). When a
    # decoder has it, :class:`SSEStream` hands it a piece that is one such event alone without
    # making the event (``SSEParser.lone_message``).


class SSEStream:
    """The updates of one streamed response: an async iterator that reads the body as it goes.

    An error (network, protocol, no progress) is raised after the updates that came before it.
    The read timeout bounds the time between two events that produce an update (and the wait
    for the first): a server that sends keep-alive comments, or chunks with nothing in them,
    for that long ends the stream with :class:`ModelTimeoutError`.

    The deadline is a cancel scope around each read that follows a piece without progress. The
    first read, and a read that follows progress, is bounded by httpx2's own read timeout -- the
    same seconds, counted from that read's start rather than from the response's arrival or the
    progress just before it, a difference of the time the caller took -- and its timeout reads
    the same. So the pieces of a streaming answer, nearly all of which make progress, pay for no
    cancel scope of ours.
    """

    def __init__(
        self,
        response: httpx2.Response,
        decoder: EventDecoder,
        *,
        url: str,
        timeout: httpx2.Timeout,
    ) -> None:
        self._response = response
        self._decoder = decoder
        self._url = url
        self._timeout = timeout
        self._patience = math.inf if timeout.read is None else timeout.read
        self._clock = trio.lowlevel.current_clock()  # (the run's own: two calls fewer a piece)
        self._deadline = self._clock.current_time() + self._patience
        self._bytes = response.aiter_bytes()
        self._parser = SSEParser(MAX_EVENT_SIZE)
        self._message: Callable[[str], list[AgentResponseUpdate]] | None = getattr(
            decoder, "message", None
        )
        self._pending: deque[AgentResponseUpdate] = deque()
        self._error: ModelResponseError | None = None
        self._ended = False
        self._drain_owed = False
        self._fresh = True
        """No piece yet, or the last piece made progress: the next read needs no cancel scope
        of ours (see :meth:`__anext__`)."""
        self._exhausted = False
        self._closed = False
        """The body's iterator has ended: there is nothing left to close."""
        self._head = b""  # the start of the body, to say what came instead of events

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        pending = self._pending
        while not pending:
            if self._closed:
                raise trio.ClosedResourceError(
                    "this response stream was closed (its run's async with was left)"
                )
            if self._error is not None:
                error, self._error = self._error, None
                self._ended = True
                raise error
            if self._ended:
                if self._drain_owed:  # after the final update went out, not before
                    self._drain_owed = False
                    await self._drain()
                raise StopAsyncIteration
            if self._fresh:
                # The last piece made progress: httpx2's read timeout, the same seconds as the
                # patience, bounds this read from its start, so no cancel scope of our own on
                # the path every piece takes (entering one costs more than parsing a chunk).
                try:
                    piece: bytes | None = await anext(self._bytes)
                except StopAsyncIteration:
                    piece = None
                except httpx2.HTTPError as exc:
                    raise self._broken(exc, fresh=True) from exc
            else:
                piece = await self._read()
            self._take(piece)
        return pending.popleft()

    async def _read(self) -> bytes | None:
        """The next piece of the body (``None`` at its end), by the progress deadline."""
        with trio.move_on_at(self._deadline):
            try:
                return await anext(self._bytes)
            except StopAsyncIteration:
                return None
            except httpx2.HTTPError as exc:
                raise self._broken(exc, fresh=False) from exc
        self._ended = True  # the deadline passed
        raise self._no_progress()

    def _broken(self, exc: httpx2.HTTPError, *, fresh: bool) -> Exception:
        """What a failed read of the body raises: a timeout, or a broken connection."""
        self._ended = True
        if isinstance(exc, httpx2.TimeoutException):
            if fresh and isinstance(exc, httpx2.ReadTimeout):
                return self._no_progress()
            return timeout_error(exc, self._url, self._timeout)
        return ModelConnectionError(
            f"the connection to {self._url} broke in the middle of the response: "
            f"{type(exc).__name__}: {exc}"
        )

    def _take(self, piece: bytes | None) -> None:
        """Parse ``piece`` (``None``: the end of the body) into updates."""
        try:
            if piece is None:
                self._ended = self._exhausted = True
                self._pending.extend(self._decoder.end_of_body(self._diagnosis()))
                return
            if len(self._head) < PREVIEW:
                self._head += piece[: PREVIEW - len(self._head)]
            pending = self._pending
            before = len(pending)
            parser = self._parser
            message = self._message
            if message is not None and (data := parser.lone_message(piece)) is not None:
                pending.extend(message(data))  # one event alone in its piece: the usual case
            else:
                decode = self._decoder.event
                for event in parser.feed(piece):
                    pending.extend(decode(event))
            if parser.too_large:  # a hostile or broken server: never hold it all
                raise ModelResponseError(
                    f"the response from {self._url} holds an event of over "
                    f"{parser.max_event_size:,} bytes that does not end (no blank line): not "
                    "a model's stream"
                )
            self._fresh = len(pending) > before or self._decoder.working
            if self._fresh:
                self._deadline = self._clock.current_time() + self._patience
        except ModelResponseError as exc:
            self._error = exc  # raised once the updates before it are delivered
            return
        if self._decoder.finished:
            self._ended = self._drain_owed = True

    def _no_progress(self) -> ModelTimeoutError:
        return ModelTimeoutError(
            f"the model server at {self._url} timed out (read timeout, {self._patience} s "
            "without progress: keep-alive comments and events with nothing in them do not count)"
        )

    async def _drain(self) -> None:
        """Read to the end of the body after the last event (briefly), so that the connection
        goes back to the pool instead of being closed."""
        with trio.move_on_after(DRAIN_AFTER_DONE):
            try:
                while True:
                    await anext(self._bytes)
            except StopAsyncIteration:
                self._exhausted = True
            except httpx2.HTTPError:
                pass

    def _diagnosis(self) -> str:
        if self._decoder.events:
            return ""
        kind = self._response.headers.get("content-type", "no content-type")
        head = self._head.decode("utf-8", errors="replace")
        return f"; the body ({kind}) starts {head!r}" if head else f"; the body ({kind}) is empty"

    async def aclose(self) -> None:
        """Stop reading the body and release the connection: back to the pool when the body
        was read to its end, or when the response was complete (its last event came: the rest
        is read here, as after the last update, within ``DRAIN_AFTER_DONE``); else closed (see
        :func:`finish_chain`).

        Cancellation: none needed; in a cancelled scope nothing more is read, and the
        connection is closed at once.
        """
        self._closed = True
        self._pending.clear()
        try:
            if not self._exhausted and self._decoder.finished and not _cancelled():
                await self._drain()  # the caller left at the Finish, say
        finally:
            if not self._exhausted:  # (read to its end: the chain has finished already)
                await finish_chain(self._bytes)


def _cancelled() -> bool:
    """Whether the current task is in a cancelled scope (its effective deadline is past)."""
    return trio.current_effective_deadline() == -math.inf


async def finish_chain(chain: AsyncIterator[bytes]) -> None:
    """Finish httpx2's body iterator ``chain`` without reading the rest of the body.

    httpx2 reads a body through a chain of nested async generators; closing only the outer
    one would leave the inner ones to the garbage collector (Trio warns about that). So the
    chain is resumed once more inside a cancelled scope: the innermost generator meets the
    cancellation at its next network read, and every generator of the chain finishes,
    httpcore2 closing the response on the way out. This does not block.
    """
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            while True:
                await anext(chain)  # buffered data comes back without a checkpoint
        except (StopAsyncIteration, httpx2.HTTPError):
            pass
