"""The OpenAI-compatible server the ``http`` workloads talk to: prebuilt bodies, over loopback.

Run by the benchmark in a process of its own (``python benchmarks/openai_server.py``), so that it
never shares the measured client's interpreter; it prints ``port N`` once it listens on
127.0.0.1, and serves until its standard input closes (the benchmark's exit closes it too). It
runs in a process group of its own, so that a Ctrl-C of the benchmark in a terminal, which goes
to the terminal's process group, leaves its stopping to the benchmark.

``POST .../chat/completions`` answers with a streamed body chosen by the request's ``model``:

* ``text-N``: N content deltas of 5 characters, then the finish chunk, the usage chunk and
  ``[DONE]``;
* ``tools-N-P``: N parallel tool calls, each in P chunks (the name, then its arguments in
  P - 1 pieces), then the finish, usage and ``[DONE]``;
* ``agent-R-C``: the model of an agent run: while the conversation holds fewer than R x C
  tool messages, C parallel tool calls of the ``noop`` tool (arguments in 4 pieces); then a
  short text answer. Which round it is comes from the tool messages the request carries.

The chunks are shaped like OpenAI's own (ids, ``created``, ``system_fingerprint``,
``logprobs: null``, ``usage: null`` on every chunk when usage is asked for), and each event is
written as its own HTTP chunk (``Transfer-Encoding: chunked``), as a server that flushes every
event does. Bodies are built once per name and cached; a request costs the server a regex over
its body and one write. It is plain asyncio (standard library only) so that it runs anywhere
the benchmark does.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from functools import cache
from typing import Any

CREATED = 1_741_569_952
FINGERPRINT = "fp_eb9dce56a8"
_MODEL = re.compile(rb'"model"\s*:\s*"([^"]*)"')
_TOOL_MESSAGE = re.compile(rb'"role"\s*:\s*"tool"')
ARGUMENTS = '{"city": "Paris", "unit": "celsius", "days": 3, "hourly": false, "lang": "fr"}'


def _chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "gpt-4o-mini-2024-07-18",
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
        "choices": choices,
        "usage": usage,
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _delta(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])


def _ending(finish: str, completion_tokens: int) -> list[bytes]:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": completion_tokens,
        "total_tokens": 120 + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    return [_delta({}, finish), _chunk([], usage), b"data: [DONE]\n\n"]


def split(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` consecutive pieces of nearly equal length (none empty)."""
    size, extra = divmod(len(text), pieces)
    out, start = [], 0
    for index in range(pieces):
        end = start + size + (index < extra)
        out.append(text[start:end])
        start = end
    return out


def text_events(deltas: int) -> list[bytes]:
    first = _delta({"role": "assistant", "content": "", "refusal": None})
    return [first, *(_delta({"content": "abcde"}) for _ in range(deltas)), *_ending("stop", deltas)]


def tool_events(calls: int, chunks: int, name: str = "get_weather") -> list[bytes]:
    events = []
    for index in range(calls):
        start = {
            "index": index,
            "id": f"call_{index:06d}abcdefghijklmnop",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        delta: dict[str, Any] = {"tool_calls": [start]}
        if index == 0:
            delta = {"role": "assistant", "content": None, **delta, "refusal": None}
        events.append(_delta(delta))
        arguments = ARGUMENTS if name != "noop" else f'{{"i": {index}, "note": "piece by piece"}}'
        for piece in split(arguments, chunks - 1):
            events.append(
                _delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    return [*events, *_ending("tool_calls", calls * chunks)]


def frame(events: list[bytes]) -> bytes:
    """The response: its head, then each event as one HTTP chunk, then the last chunk."""
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
    )
    return head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


@cache
def body(model: str, round_: int = 0) -> bytes:
    kind, *numbers = model.split("-")
    values = [int(n) for n in numbers]
    if kind == "text":
        (deltas,) = values
        return frame(text_events(deltas))
    if kind == "tools":
        calls, chunks = values
        return frame(tool_events(calls, chunks))
    if kind == "agent":
        rounds, calls = values
        if round_ < rounds:
            return frame(tool_events(calls, 5, "noop"))
        return frame(text_events(20))
    raise ValueError(model)


def _reply(request: bytes) -> bytes:
    found = _MODEL.search(request)
    if found is None:
        return _error(400, "no model in the request")
    model = found.group(1).decode()
    try:
        if model.startswith("agent-"):
            calls = int(model.rsplit("-", 1)[1])
            return body(model, len(_TOOL_MESSAGE.findall(request)) // calls)
        return body(model)
    except (ValueError, TypeError):
        return _error(404, f"no such model: {model}")


def _error(status: int, message: str) -> bytes:
    raw = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    return (
        b"HTTP/1.1 %d Error\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (status, len(raw), raw)
    )


class _Connection(asyncio.Protocol):
    """HTTP/1.1 with keep-alive: requests with a ``Content-Length`` body, answered in turn."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            request = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            self.server.requests += 1
            assert self.transport is not None
            if head.startswith(b"get /stats"):
                stats = json.dumps(
                    {"connections": self.server.connections, "requests": self.server.requests}
                ).encode()
                self.transport.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(stats), stats)
                )
            else:
                self.transport.write(_reply(request))


class Server:
    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Connection(self), "127.0.0.1", 0, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        print(f"port {port}", flush=True)
        stdin_closed = loop.create_future()

        def on_input() -> None:
            if not os.read(sys.stdin.fileno(), 4096) and not stdin_closed.done():
                stdin_closed.set_result(None)

        loop.add_reader(sys.stdin.fileno(), on_input)
        async with server:
            await stdin_closed


if __name__ == "__main__":
    asyncio.run(Server().serve())
