"""A stand-in for a live OpenAI-compatible model server, on 127.0.0.1, for the examples' and
the README's ``--base-url`` paths: real HTTP and real SSE through ``OpenAIChatClient``.

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
