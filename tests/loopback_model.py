"""A stand-in for a live OpenAI-compatible model server, on 127.0.0.1, for the examples' and
the README's ``--base-url`` paths: real HTTP and real SSE through ``OpenAIChatClient``; and
one speaking Anthropic's Messages API (:func:`loopback_anthropic_model`), for
``AnthropicChatClient``'s.

It answers from what it is sent, the way a simple model would: with tools offered (and
``tool_choice`` not ``"none"``) and no tool result yet since the last user message, it calls
every offered tool once, in one response, with arguments made from each tool's schema (a
string is ``"Paris"``, a number ``1``, the first value of an enum); otherwise it answers in
text, quoting the tool results it was given.
"""

from __future__ import annotations

import json
from typing import Any

from sse_server import Reply, Request, SSEServer


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments with every required property of an object schema, of its declared type."""
    values = {
        "string": "Paris",
        "integer": 1,
        "number": 1,
        "boolean": True,
        "array": [],
        "object": {},
    }
    arguments: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        prop = properties.get(name, {})
        if "enum" in prop:
            arguments[name] = prop["enum"][0]
            continue
        kinds = prop.get("type", "string")
        kind = (
            next((k for k in kinds if k != "null"), "string") if isinstance(kinds, list) else kinds
        )
        arguments[name] = values.get(kind, "Paris")
    return arguments


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "loopback", "object": "chat.completion.chunk", "choices": [choice]})


def _body(*chunks: str, usage: tuple[int, int]) -> bytes:
    usage_chunk = json.dumps(
        {
            "id": "loopback",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
        }
    )
    return "".join(f"data: {c}\n\n" for c in (*chunks, usage_chunk, "[DONE]")).encode()


def respond(request: Request) -> Reply:
    body = request.json
    messages = body["messages"]
    tools = body.get("tools", [])
    since_user = []
    for message in reversed(messages):
        if message["role"] == "user":
            break
        since_user.append(message)
    answered = any(m["role"] == "tool" for m in since_user)
    if tools and not answered and body.get("tool_choice") != "none":
        calls = [
            {
                "index": i,
                "id": f"call_lb{len(messages)}_{i}",
                "type": "function",
                "function": {
                    "name": tool["function"]["name"],
                    "arguments": json.dumps(arguments_for(tool["function"]["parameters"])),
                },
            }
            for i, tool in enumerate(tools)
        ]
        chunks = [_chunk({"role": "assistant", "tool_calls": calls}), _chunk({}, "tool_calls")]
        return Reply([_body(*chunks, usage=(len(messages) * 10, 5))], paced=False)
    results = [m["content"] for m in reversed(since_user) if m["role"] == "tool"]
    text = "The tools said: " + "; ".join(results) if results else "Hello from the loopback model."
    chunks = [_chunk({"role": "assistant", "content": text}), _chunk({}, "stop")]
    return Reply([_body(*chunks, usage=(len(messages) * 10, 7))], paced=False)


def loopback_model() -> SSEServer:
    """A server to start with ``await nursery.start(server.serve)``; ``server.url`` is the
    ``base_url``."""
    return SSEServer(respond=respond)


def _event(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def respond_anthropic(request: Request) -> Reply:
    """As :func:`respond`, in the Messages API's shapes (``POST /v1/messages``)."""
    body = request.json
    messages = body["messages"]
    tools = body.get("tools", [])
    last = messages[-1]["content"] if messages else []
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    start = {"id": "msg_loopback", "type": "message", "role": "assistant", "content": [],
             "usage": {"input_tokens": len(messages) * 10, "output_tokens": 1}}  # fmt: skip
    events = [_event("message_start", message=start)]
    if tools and not results and body.get("tool_choice", {}).get("type") != "none":
        for index, definition in enumerate(tools):
            block = {"type": "tool_use", "id": f"toolu_lb{len(messages)}_{index}",
                     "name": definition["name"], "input": {}}  # fmt: skip
            piece = json.dumps(arguments_for(definition["input_schema"]))
            delta = {"type": "input_json_delta", "partial_json": piece}
            events += [
                _event("content_block_start", index=index, content_block=block),
                _event("content_block_delta", index=index, delta=delta),
                _event("content_block_stop", index=index),
            ]
        stop = "tool_use"
    else:
        said = [b["content"] if isinstance(b["content"], str) else "" for b in results]
        text = "The tools said: " + "; ".join(said) if said else "Hello from the loopback model."
        events += [
            _event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            _event("content_block_delta", index=0, delta={"type": "text_delta", "text": text}),
            _event("content_block_stop", index=0),
        ]
        stop = "end_turn"
    events += [
        _event("message_delta", delta={"stop_reason": stop}, usage={"output_tokens": 7}),
        _event("message_stop"),
    ]
    return Reply(["".join(events).encode()], paced=False)


def loopback_anthropic_model() -> SSEServer:
    """A Messages API server to start with ``await nursery.start(server.serve)``;
    ``server.root`` is the ``base_url``."""
    return SSEServer(respond=respond_anthropic)
