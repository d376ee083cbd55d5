"""Anthropic-shaped event streams for the tests, built the way the Messages API sends them:
``event:`` and ``data:`` lines, the JSON padded with spaces before its last brace as the API pads
it, ``ping`` events with their own spacing (``{"type": "ping"}``), and the usage fields the API
sends today (``cache_creation``, ``service_tier``; ``message_delta`` repeating the input counts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from trio_invoke import ChatMessage, Finish, ToolCallAccumulator
from trio_invoke._updates import AgentResponseUpdate
from trio_invoke.providers._sse import SSEParser
from trio_invoke.providers.anthropic._decode import AnthropicDecoder

MODEL = "claude-sonnet-4-5-20250929"


def event(kind: str, pad: int = 0, **data: Any) -> bytes:
    text = json.dumps({"type": kind, **data}, ensure_ascii=False, separators=(",", ":"))
    if pad:
        text = text[:-1] + " " * pad + "}"
    return f"event: {kind}\ndata: {text}\n\n".encode()


def ping() -> bytes:
    return b'event: ping\ndata: {"type": "ping"}\n\n'


def message_start(
    input_tokens: int = 25, cache_read: int = 0, cache_creation: int = 0, msg_id: str = "msg_01A"
) -> bytes:
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_creation,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": 3,  # a placeholder, as the API sends it
        "service_tier": "standard",
    }
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return event("message_start", pad=9, message=message)


def text_block(index: int, *pieces: str, ping_after: int | None = None) -> bytes:
    out = event("content_block_start", 4, index=index, content_block={"type": "text", "text": ""})
    for n, piece in enumerate(pieces):
        delta = {"type": "text_delta", "text": piece}
        out += event("content_block_delta", 2, index=index, delta=delta)
        if ping_after == n:
            out += ping()
    return out + event("content_block_stop", 6, index=index)


def tool_block(index: int, call_id: str, name: str, *pieces: str, stop: bool = True) -> bytes:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    out = event("content_block_start", 11, index=index, content_block=block)
    for piece in ("", *pieces):  # the API's first piece is ""
        delta = {"type": "input_json_delta", "partial_json": piece}
        out += event("content_block_delta", 3, index=index, delta=delta)
    return out + (event("content_block_stop", index=index) if stop else b"")


def thinking_block(index: int, *pieces: str, signature: str = "EqQBCkYIBhgCIkBfcm5==") -> bytes:
    block = {"type": "thinking", "thinking": "", "signature": ""}
    out = event("content_block_start", 12, index=index, content_block=block)
    for piece in (*pieces, ""):  # the API's last thinking piece is ""
        delta = {"type": "thinking_delta", "thinking": piece}
        out += event("content_block_delta", index=index, delta=delta)
    delta = {"type": "signature_delta", "signature": signature}
    out += event("content_block_delta", 8, index=index, delta=delta)
    return out + event("content_block_stop", index=index)


def redacted_block(
    index: int, data: str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"
) -> bytes:
    block = {"type": "redacted_thinking", "data": data}
    return event("content_block_start", index=index, content_block=block) + event(
        "content_block_stop", index=index
    )


def message_end(stop_reason: str = "end_turn", output_tokens: int = 40, **usage: int) -> bytes:
    counts = {"input_tokens": 25, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    counts.update(usage)
    counts["output_tokens"] = output_tokens
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    return event("message_delta", 5, delta=delta, usage=counts) + event("message_stop", 1)


def error_event(kind: str = "overloaded_error", message: str = "Overloaded") -> bytes:
    return event("error", error={"details": None, "type": kind, "message": message})


TEXT = message_start() + text_block(0, "Bonjour", " ! Ça va ? ", "👋", ping_after=0) + message_end()
PARALLEL = (
    message_start(120)
    + text_block(0, "Both at once.")
    + tool_block(1, "toolu_01W", "get_weather", '{"city": ', '"Paris"}')
    + ping()
    + tool_block(2, "toolu_01T", "get_time", '{"zone": "Europe/Paris"}')
    + message_end("tool_use", 77, input_tokens=120)
)
THINKING = (
    message_start(300)
    + thinking_block(0, "Weather first; ", "then time — ", "Fahrenheit?")
    + tool_block(1, "toolu_01X", "get_weather", '{"city": "Paris"}')
    + message_end("tool_use", 90, input_tokens=300)
)
REDACTED = (
    message_start(92)
    + redacted_block(0)
    + ping()
    + thinking_block(1, "Hmm.", signature="Sig2==")
    + redacted_block(2, "EtgBCkYIBxgCKkDQ")
    + text_block(3, "Done.")
    + message_end("end_turn", 12, input_tokens=92)
)
NO_ARGUMENTS = message_start() + tool_block(0, "toolu_01N", "clock") + message_end("tool_use", 9)
ERROR_MIDWAY = message_start() + text_block(0, "Partial") + error_event()
CACHED = (
    message_start(10, cache_read=2000, cache_creation=300)
    + text_block(0, "ok")
    + message_end(
        "end_turn",
        5,
        input_tokens=10,
        cache_read_input_tokens=2000,
        cache_creation_input_tokens=300,
    )
)
INTERLEAVED = (  # thinking between the text and the calls and between the calls, in one response
    message_start()
    + thinking_block(0, "Plan.", signature="S0")
    + text_block(1, "Checking.")
    + thinking_block(2, "Then the weather.", signature="S1")
    + tool_block(3, "toolu_a", "get_weather", '{"city": "Paris"}')
    + redacted_block(4, "R2")
    + thinking_block(5, "And the time.", signature="S3")
    + tool_block(6, "toolu_b", "get_time", '{"zone": "CET"}')
    + message_end("tool_use")
)
TEXT_BETWEEN_CALLS = (  # text after a call (interleaved thinking), and a last call after it
    message_start()
    + thinking_block(0, "Weather first.", signature="S0")
    + text_block(1, "Checking.")
    + tool_block(2, "toolu_a", "get_weather", '{"city": "Paris"}')
    + thinking_block(3, "Now the time.", signature="S1")
    + text_block(4, " And the time.")
    + tool_block(5, "toolu_b", "get_time", '{"zone": "CET"}')
    + message_end("tool_use")
)
SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
RESULTS = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
UNKNOWN = (  # server tool blocks, an event type and a delta type the decoder does not know
    message_start()
    + event("content_block_start", index=0, content_block=SEARCH)
    + event(
        "content_block_delta",
        index=0,
        delta={"type": "input_json_delta", "partial_json": '{"query": "trio"}'},
    )
    + event("content_block_stop", index=0)
    + event("content_block_start", index=1, content_block=RESULTS)
    + event("content_block_stop", index=1)
    + event("brand_new_event", something=1)
    + event("content_block_start", index=2, content_block={"type": "text", "text": ""})
    + event("content_block_delta", index=2, delta={"type": "text_delta", "text": "Found it."})
    + event("content_block_delta", index=2, delta={"type": "future_delta", "x": 1})
    + event("content_block_stop", index=2)
    + message_end()
)
MCP_USE = {  # the MCP connector's blocks, as the API streams them
    "type": "mcp_tool_use",
    "id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
    "name": "echo",
    "server_name": "example-mcp",
    "input": {},
}
MCP_RESULT = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_014Q35RayjACSWkSj4X2yov1",
    "is_error": False,
    "content": [{"type": "text", "text": "hi"}],
}
MCP = (  # an MCP connector tool's input in input_json_delta pieces, as a tool_use's
    message_start()
    + event("content_block_start", index=0, content_block=MCP_USE)
    + event("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": ""})
    + event(
        "content_block_delta",
        index=0,
        delta={"type": "input_json_delta", "partial_json": '{"text": "hi"}'},
    )
    + event("content_block_stop", index=0)
    + event("content_block_start", index=1, content_block=MCP_RESULT)
    + event("content_block_stop", index=1)
    + text_block(2, "The server echoed hi.")
    + message_end()
)
SHAPED = {
    "text": TEXT,
    "parallel": PARALLEL,
    "thinking": THINKING,
    "redacted": REDACTED,
    "no-arguments": NO_ARGUMENTS,
    "error": ERROR_MIDWAY,
    "cached": CACHED,
    "unknown": UNKNOWN,
    "mcp": MCP,
    "interleaved": INTERLEAVED,
    "text_between_calls": TEXT_BETWEEN_CALLS,
}
"""Anthropic-shaped bodies by name."""


def decode(pieces: Iterable[bytes], decoder: AnthropicDecoder | None = None) -> list[Any]:
    """Every update of a body fed in ``pieces``, the end of the body included."""
    parser, decoder = SSEParser(), decoder or AnthropicDecoder()
    updates: list[AgentResponseUpdate] = []
    for piece in pieces:
        for one in parser.feed(piece):
            updates += decoder.event(one)
    return updates + decoder.end_of_body()


def message_of(updates: Iterable[AgentResponseUpdate]) -> ChatMessage | None:
    accumulator = ToolCallAccumulator()
    for update in updates:
        if not isinstance(update, Finish):
            accumulator.add(update)
    accumulator.finish()
    return accumulator.message()


# A web search turn, in the shape the API streams it (the web_search_20250305 server tool):
# the model's words, its server_tool_use (the query in input_json_delta pieces), the
# web_search_tool_result the API adds whole, then text that cites a result (citations_delta)
# and a call of a function tool.
WEB_USE = {"type": "server_tool_use", "id": "srvtoolu_01Web", "name": "web_search", "input": {}}
WEB_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01Web",
    "content": [
        {
            "type": "web_search_result",
            "title": "Paris weather today",
            "url": "https://weather.example/paris",
            "encrypted_content": "EqgfCioIARgBIiQ3YTY0==",
            "page_age": None,
        },
        {
            "type": "web_search_result",
            "title": "Paris forecast",
            "url": "https://forecast.example/fr/paris",
            "encrypted_content": "Eo0OCioIARgBIiQ3YTY1==",
            "page_age": "2 hours ago",
        },
    ],
}
WEB_CITATION = {
    "type": "web_search_result_location",
    "cited_text": "Sunny, 21 °C in Paris this afternoon.",
    "url": "https://weather.example/paris",
    "title": "Paris weather today",
    "encrypted_index": "EpABCioIARgBIiQ3YTY2==",
}
WEB_SEARCH = (
    message_start(2037)
    + text_block(0, "I'll look that up.")
    + event("content_block_start", index=1, content_block=WEB_USE)
    + b"".join(
        event(
            "content_block_delta",
            index=1,
            delta={"type": "input_json_delta", "partial_json": piece},
        )
        for piece in ("", '{"query": "Paris', ' weather today"}')
    )
    + event("content_block_stop", index=1)
    + ping()
    + event("content_block_start", index=2, content_block=WEB_RESULT)
    + event("content_block_stop", index=2)
    + event("content_block_start", index=3, content_block={"type": "text", "text": ""})
    + event(
        "content_block_delta",
        index=3,
        delta={"type": "citations_delta", "citation": WEB_CITATION},
    )
    + event("content_block_delta", index=3, delta={"type": "text_delta", "text": "It is sunny."})
    + event("content_block_stop", index=3)
    + tool_block(4, "toolu_01Time", "get_time", '{"zone": "Europe/Paris"}')
    + message_end("tool_use", 160, input_tokens=2037)
)
