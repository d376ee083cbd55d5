"""The OpenAI chunk decoder (``trio_invoke.providers.openai._decode``), sans-IO: each event's data
in, updates out, no HTTP and no httpx.

Usage: a response's usage is the last usage the stream reported. Some servers send it more than
once -- vLLM and SGLang with ``stream_options.continuous_usage_stats`` put the running counts on
every chunk, then the totals in a usage chunk of its own -- and the counts are running totals,
never increments: the last one stands, nothing is added up.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    Finish,
    FinishReason,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from trio_invoke._updates import AgentResponseUpdate
from trio_invoke.providers.openai._decode import ChunkDecoder


def decode_events(*events: dict[str, Any] | str) -> list[AgentResponseUpdate]:
    """Every update of a response whose events carry ``events`` (a dict is a JSON chunk)."""
    decoder = ChunkDecoder()
    updates: list[AgentResponseUpdate] = []
    for data in events:
        updates += decoder.feed(data if isinstance(data, str) else json.dumps(data))
    return updates + decoder.end_of_body()


def counts(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def vllm(
    delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None
) -> dict[str, Any]:
    """A chunk in vLLM's shape; ``usage`` is left out unless given, as vLLM does."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-9c3f0b6e1d2a4f7b",
        "object": "chat.completion.chunk",
        "created": 1741570301,
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "choices": [],
    }
    if delta is not None:
        chunk["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def arguments(piece: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}


# With continuous_usage_stats every chunk carries the running counts, the finish chunk too, and
# the usage chunk (empty choices) the totals.
CONTINUOUS_TEXT = (
    vllm({"role": "assistant", "content": ""}, usage=counts(31, 0)),
    vllm({"content": "Il fait "}, usage=counts(31, 1)),
    vllm({"content": "beau"}, usage=counts(31, 2)),
    vllm({"content": "."}, usage=counts(31, 3)),
    vllm({"content": ""}, "stop", usage=counts(31, 4)),
    vllm(None, usage=counts(31, 4)),
    "[DONE]",
)
CONTINUOUS_CALL = (
    vllm({"role": "assistant", "content": ""}, usage=counts(120, 0)),
    vllm(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "chatcmpl-tool-a1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        },
        usage=counts(120, 7),
    ),
    vllm(arguments('{"city": '), usage=counts(120, 12)),
    vllm(arguments('"Paris"}'), usage=counts(120, 15)),
    vllm({"content": ""}, "tool_calls", usage=counts(120, 16)),
    vllm(None, usage=counts(120, 17)),
    "[DONE]",
)


def test_continuous_usage_on_every_chunk_keeps_the_last() -> None:
    assert decode_events(*CONTINUOUS_TEXT) == [
        TextDelta("Il fait "),
        TextDelta("beau"),
        TextDelta("."),
        Finish(FinishReason.STOP, Usage(31, 4)),
    ]


def test_continuous_usage_with_a_tool_call_keeps_the_last() -> None:
    assert decode_events(*CONTINUOUS_CALL) == [
        ToolCallStart("chatcmpl-tool-a1", "get_weather"),
        ToolCallArgs("chatcmpl-tool-a1", '{"city": '),
        ToolCallArgs("chatcmpl-tool-a1", '"Paris"}'),
        ToolCallEnd("chatcmpl-tool-a1"),
        Finish(FinishReason.TOOL_CALLS, Usage(120, 17)),  # the last, not the sum nor the first
    ]


def test_usage_on_the_finish_chunk_then_in_a_usage_chunk_keeps_the_later() -> None:
    updates = decode_events(
        vllm({"content": "ok"}),
        vllm({}, "stop", usage=counts(10, 2)),
        vllm(None, usage=counts(12, 3)),
    )
    assert updates[-1] == Finish(FinishReason.STOP, Usage(12, 3))


def test_a_null_usage_after_the_usage_chunk_keeps_it() -> None:
    openai_style = vllm({"content": "ok"}, "stop") | {"usage": None}
    updates = decode_events(vllm(None, usage=counts(8, 1)), openai_style)
    assert updates[-1] == Finish(FinishReason.STOP, Usage(8, 1))


def test_usage_after_done_does_not_count() -> None:
    updates = decode_events(
        vllm({"content": "ok"}, "stop"),
        vllm(None, usage=counts(5, 1)),
        "[DONE]",
        vllm(None, usage=counts(50, 10)),
    )
    assert updates[-1] == Finish(FinishReason.STOP, Usage(5, 1))


usage_fields = st.one_of(
    st.none(),  # no "usage" key
    st.just("null"),  # "usage": null, as api.openai.com sends on ordinary chunks
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
)


def with_usage(chunk: dict[str, Any], usage: Any) -> dict[str, Any]:
    if usage == "null":
        return chunk | {"usage": None}
    return chunk if usage is None else chunk | {"usage": counts(*usage)}


@given(
    st.lists(st.tuples(st.text(max_size=5), usage_fields), max_size=8),
    st.lists(usage_fields, max_size=3),
    st.booleans(),
)
def test_the_usage_of_a_response_is_the_last_one_reported(
    chunks: list[tuple[str, Any]], after: list[Any], done: bool
) -> None:
    """Text chunks, the finish chunk, then usage chunks (empty ``choices``), each with usage,
    ``"usage": null`` or no usage key; with or without ``[DONE]``."""
    events: list[dict[str, Any] | str] = [
        *(with_usage(vllm({"content": text}), usage) for text, usage in chunks),
        vllm({}, "stop"),
        *(with_usage(vllm(None), usage) for usage in after),
    ]
    if done:
        events.append("[DONE]")
    reported = [Usage(*u) for u in [*(u for _, u in chunks), *after] if isinstance(u, tuple)]
    expected = reported[-1] if reported else None
    assert decode_events(*events)[-1] == Finish(FinishReason.STOP, expected)
