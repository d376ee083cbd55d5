"""A small HTTP/1.1 server on 127.0.0.1 that replays scripted responses, for the HTTP clients'
tests: real sockets and real HTTP, no mocks of httpx2.

Each request takes the next :class:`Reply`: a status, headers, and a body written in the given
pieces -- one socket write per piece, and the server waits until every other task is blocked
before the next one, so the client really reads each piece on its own (split mid-line, mid-UTF-8
character, wherever the test cut it). The body then completes, is cut off, or stalls until the
client goes away. The server records every request and counts connections.
"""

from __future__ import annotations

import gc
import http
import itertools
import json
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs
import trio
import trio.testing

from trio_invoke import AgentResponseUpdate, ChatClient, ChatMessage, RunOptions


@attrs.define
class Reply:
    """One scripted response."""

    pieces: Sequence[bytes] = ()
    """The body, in the pieces to write."""
    status: int = 200
    headers: Mapping[str, str] = attrs.field(factory=dict)
    content_type: str = "text/event-stream"
    framing: Literal["chunked", "close"] = "chunked"
    """``chunked``: Transfer-Encoding: chunked (the body ends with a terminator, the connection
    stays open). ``close``: no length, the body ends when the server closes the connection."""
    ending: Literal["complete", "cut", "stall", "silent"] = "complete"
    """After the pieces: end the body properly, close the connection without ending it, or
    stall (send nothing more) until the client closes the connection. ``silent`` stalls before
    even the status line."""
    paced: bool = True
    """Wait for all other tasks to block between pieces, so each is read on its own."""
    interval: float = 0.0
    """Seconds to sleep before each piece (virtual time under ``autojump_clock``)."""

    @classmethod
    def error(cls, status: int, body: Any, headers: Mapping[str, str] | None = None) -> Reply:
        """An error response; ``body`` is JSON-encoded unless it is bytes."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        content_type = "text/plain" if isinstance(body, bytes) else "application/json"
        return cls([raw], status, headers or {}, content_type, paced=False)


@attrs.frozen
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Header names in lower case."""
    body: bytes
    lines: Sequence[tuple[str, str]] = ()
    """The header lines as they came: (name, value), names in lower case, repeats kept."""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class SSEServer:
    """Serve the scripted replies, one per request, in order.

    Start it in a nursery: ``await nursery.start(server.serve)``; then ``server.url`` is the
    ``base_url`` to give the client. A request past the end of the script gets a 500.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        respond: Callable[[Request], Reply] | None = None,
        check: Callable[[Request], Reply | None] | None = None,
    ) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.respond = respond
        """Makes the reply to a request once the scripted replies are used up (a model that
        answers from what it is sent); ``None``: such a request gets a 500."""
        self.check = check
        """Looks at each request first: a reply it returns is sent instead of the next scripted
        one (a server that refuses what it cannot take, as a provider does)."""
        self.requests: list[Request] = []
        self.connections = 0
        """How many connections clients opened."""
        self.closed_while_stalled = trio.Event()
        """Set when a client closed a connection whose response was stalling."""
        self.closed_while_sending = trio.Event()
        """Set when a client closed a connection while the server was still writing to it."""
        self.port = 0

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root(self) -> str:
        """The server's root, the base URL of APIs whose paths start with ``/v1`` (Anthropic)."""
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._connection, listeners)
            task_status.started()

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        buffer = bytearray()
        try:
            while True:
                request = await _read_request(stream, buffer)
                if request is None:
                    return
                self.requests.append(request)
                refusal = self.check(request) if self.check is not None else None
                if refusal is not None:
                    reply = refusal
                elif self.replies:
                    reply = self.replies.popleft()
                elif self.respond is not None:
                    reply = self.respond(request)
                else:
                    reply = _UNSCRIPTED
                if not await self._reply(stream, reply):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed_while_sending.set()
            return  # the client went away: that is its right
        finally:
            await stream.aclose()

    async def _reply(self, stream: trio.SocketStream, reply: Reply) -> bool:
        """Write ``reply``; return whether the connection stays open for another request."""
        if reply.ending == "silent":
            return await self._stall(stream)
        known = reply.status in http.HTTPStatus._value2member_map_
        phrase = http.HTTPStatus(reply.status).phrase if known else ""  # 529: Anthropic's own
        head = [f"HTTP/1.1 {reply.status} {phrase}", f"Content-Type: {reply.content_type}"]
        head.append(
            "Transfer-Encoding: chunked" if reply.framing == "chunked" else "Connection: close"
        )
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for piece in reply.pieces:
            if reply.interval:
                await trio.sleep(reply.interval)
            if reply.paced:
                await trio.testing.wait_all_tasks_blocked()
            if not piece:
                continue
            if reply.framing == "chunked":
                await stream.send_all(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                await stream.send_all(piece)
        if reply.paced:
            await trio.testing.wait_all_tasks_blocked()
        if reply.ending == "stall":
            return await self._stall(stream)
        if reply.ending == "cut" or reply.framing == "close":
            return False
        await stream.send_all(b"0\r\n\r\n")
        return True

    async def _stall(self, stream: trio.SocketStream) -> bool:
        try:
            while await stream.receive_some():
                pass  # anything the client sends while we stall is ignored
        except trio.BrokenResourceError:
            pass
        self.closed_while_stalled.set()
        return False


_UNSCRIPTED = Reply.error(500, {"error": {"message": "the test server has no reply scripted"}})


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> Request | None:
    """Read one request (head and Content-Length body); ``None`` when the client closed."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some()
        if not data:
            return None
        buffer += data
    end = buffer.index(b"\r\n\r\n")
    lines = buffer[:end].decode("latin-1").split("\r\n")
    del buffer[: end + 4]
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    fields: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
        fields.append((name.strip().lower(), value.strip()))
    length = int(headers.get("content-length", "0"))
    while len(buffer) < length:
        data = await stream.receive_some()
        if not data:
            return None
        buffer += data
    body = bytes(buffer[:length])
    del buffer[:length]
    return Request(method, path, headers, body, tuple(fields))


# -- helpers of the HTTP clients' tests --------------------------------------------------------

WEATHER = (ChatMessage.user("What's the weather in Paris?"),)


def cut(raw: bytes, size: int = 7) -> list[bytes]:
    """``raw`` in pieces of ``size`` bytes, also cut after the first byte of every multi-byte
    UTF-8 character: cuts land mid-line, mid-field and mid-character."""
    points = set(range(size, len(raw), size))
    points |= {i + 1 for i, byte in enumerate(raw) if byte >= 0xC0}
    bounds = [0, *sorted(points), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def cuts_inside_a_character(pieces: Sequence[bytes]) -> int:
    """How many piece boundaries fall inside a UTF-8 character."""
    return sum(1 for piece in pieces[1:] if piece and 0x80 <= piece[0] < 0xC0)


async def stream_updates(
    client: ChatClient,
    messages: Sequence[ChatMessage] = WEATHER,
    options: RunOptions | None = None,
    into: list[AgentResponseUpdate] | None = None,
) -> list[AgentResponseUpdate]:
    """Every update of one run; with ``into``, updates land there as they come (so a test can
    see what arrived before an exception)."""
    updates = [] if into is None else into
    with trio.fail_after(20):
        async with client.run(messages, options) as stream:
            async for update in stream:
                updates.append(update)
    return updates


def no_resource_warnings() -> None:
    """Collect garbage and assert that nothing warned of a resource left open."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, [str(w.message) for w in leaks]
