"""The OpenAI chunk decoder (``trio_invoke.providers.openai._decode``), sans-IO: bytes in through
the SSE parser (or each event's data), updates out, cut anywhere; no HTTP and no httpx.

What providers really stream: reasoning (DeepSeek, vLLM, OpenRouter, ...), reasoning_details,
tool-call deltas keyed oddly. And usage: a response's usage is the last usage the stream
reported. Some servers send it more than once -- vLLM and SGLang with
``stream_options.continuous_usage_stats`` put the running counts on every chunk, then the totals
in a usage chunk of its own -- and the counts are running totals, never increments: the last one
stands, nothing is added up.

The recorded streams of DeepSeek, OpenRouter, Z.ai's GLM and llama.cpp's server in
tests/data/streams are cut anywhere too.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recorded import recorded, recorded_json, streams

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    ModelResponseError,
    ProviderDataDelta,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallAccumulator,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from trio_invoke._updates import AgentResponseUpdate
from trio_invoke.providers._sse import SSEParser
from trio_invoke.providers.openai._decode import ChunkDecoder
from trio_invoke.providers.openai._wire import provider_family, wire_messages


def decode(pieces: Iterable[bytes]) -> list[AgentResponseUpdate]:
    """Every update of a body fed in ``pieces``, the end of the body included."""
    parser, decoder = SSEParser(), ChunkDecoder()
    updates: list[AgentResponseUpdate] = []
    for piece in pieces:
        for event in parser.feed(piece):
            updates += decoder.event(event)
    return updates + decoder.end_of_body()


def message_of(updates: Iterable[AgentResponseUpdate]) -> ChatMessage | None:
    accumulator = ToolCallAccumulator()
    for update in updates:
        if not isinstance(update, Finish):
            accumulator.add(update)
    return accumulator.message()


def sse(*chunks: dict[str, Any] | str) -> bytes:
    events = [c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in chunks]
    return "".join(f"data: {e}\n\n" for e in events).encode()


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def cuts(raw: bytes, points: Iterable[int]) -> list[bytes]:
    bounds = [0, *sorted(set(points)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


# -- provider-shaped streams ------------------------------------------------------------------

DEEPSEEK_TOOLS = sse(  # DeepSeek thinking mode: reasoning_content, then two calls by index
    chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
    chunk({"content": None, "reasoning_content": "Paris: weather "}),
    chunk({"content": None, "reasoning_content": "and time. Both tools — at once."}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_00_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Pa'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ris"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_01_b",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"zone": "Europe/Paris"}'},
                }
            ]
        }
    ),
    chunk(
        {"content": "", "reasoning_content": None},
        "tool_calls",
        usage={"prompt_tokens": 90, "completion_tokens": 40, "total_tokens": 130},
    ),
    "[DONE]",
)
VLLM_REASONING = sse(  # vLLM >= 0.10: `reasoning`; the name on the first piece, no arguments
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning": "I should"}),
    chunk({"reasoning": " look it up."}),
    chunk({"content": "Let me check. "}),
    chunk({"tool_calls": [{"index": 0, "id": "chatcmpl-tool-1", "function": {"name": "search"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "trio"}'}}]}),
    chunk({"content": ""}, "tool_calls"),
    chunk({}, usage={"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70})
    | {"choices": []},
    "[DONE]",
)
VLLM_BOTH_NAMES = sse(  # a server in transition sends the same text under both names
    chunk({"reasoning_content": "same", "reasoning": "same"}),
    chunk({"content": "ok"}, "stop"),
    "[DONE]",
)
OPENROUTER_DETAILS = (
    sse(  # reasoning + reasoning_details: text in pieces, then its signature,
        chunk(  # and an encrypted detail at the same index (as Gemini sends through OpenRouter)
            {
                "role": "assistant",
                "content": "",
                "reasoning": "Check",
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "Check", "format": "gemini", "index": 0}
                ],
            }
        ),
        chunk(
            {
                "content": "",
                "reasoning": " the map.",
                "reasoning_details": [
                    {"type": "reasoning.text", "text": " the map.", "format": "gemini", "index": 0}
                ],
            }
        ),
        chunk(
            {
                "content": "",
                "reasoning": None,
                "reasoning_details": [
                    {
                        "type": "reasoning.text",
                        "signature": "sig==",
                        "format": "gemini",
                        "index": 0,
                    },
                    {"type": "reasoning.encrypted", "data": "CiUB", "id": "tool_1", "index": 0},
                ],
            }
        ),
        chunk(
            {
                "content": None,
                "tool_calls": [
                    {"index": 0, "id": "tool_1", "type": "function", "function": {"name": "map"}}
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        chunk({"content": "", "reasoning": None, "reasoning_details": []}, "tool_calls"),
    )
    + b": OPENROUTER PROCESSING\n\n"
    + sse("[DONE]")
)


@pytest.mark.parametrize("raw", [DEEPSEEK_TOOLS, VLLM_REASONING, OPENROUTER_DETAILS])
def test_provider_shaped_streams_decode_the_same_cut_at_every_byte(raw: bytes) -> None:
    expected = decode([raw])
    for point in range(1, len(raw)):
        assert decode([raw[:point], raw[point:]]) == expected, point
    assert decode([raw[i : i + 1] for i in range(len(raw))]) == expected


@given(
    st.sampled_from([DEEPSEEK_TOOLS, VLLM_REASONING, OPENROUTER_DETAILS, VLLM_BOTH_NAMES]),
    st.data(),
)
def test_provider_shaped_streams_decode_the_same_under_any_split(
    raw: bytes, data: st.DataObject
) -> None:
    points = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=30))
    assert decode(cuts(raw, points)) == decode([raw])


def test_deepseek_reasoning_and_parallel_calls() -> None:
    updates = decode([DEEPSEEK_TOOLS])
    assert updates == [
        ReasoningDelta("Paris: weather ", field="reasoning_content"),
        ReasoningDelta("and time. Both tools — at once.", field="reasoning_content"),
        ToolCallStart("call_00_a", "get_weather"),
        ToolCallArgs("call_00_a", '{"city": "Pa'),
        ToolCallArgs("call_00_a", 'ris"}'),
        ToolCallStart("call_01_b", "get_time"),
        ToolCallArgs("call_01_b", '{"zone": "Europe/Paris"}'),
        ToolCallEnd("call_00_a"),
        ToolCallEnd("call_01_b"),
        Finish(FinishReason.TOOL_CALLS, Usage(90, 40)),
    ]
    message = message_of(updates)
    assert message is not None
    assert (
        message.to_dict()["reasoning_content"] == "Paris: weather and time. Both tools — at once."
    )


def test_vllm_reasoning_before_the_text_it_precedes() -> None:
    updates = decode([VLLM_REASONING])
    assert updates[:3] == [
        ReasoningDelta("I should", field="reasoning"),
        ReasoningDelta(" look it up.", field="reasoning"),
        TextDelta("Let me check. "),
    ]
    message = message_of(updates)
    assert message is not None
    assert message.to_dict() == {
        "role": "assistant",
        "content": "Let me check. ",
        "tool_calls": [
            {
                "id": "chatcmpl-tool-1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q": "trio"}'},
            }
        ],
        "reasoning": "I should look it up.",
    }


def test_the_same_text_under_both_names_is_reasoning_once() -> None:
    assert decode([VLLM_BOTH_NAMES]) == [
        ReasoningDelta("same", field="reasoning_content"),
        TextDelta("ok"),
        Finish(FinishReason.STOP),
    ]
    different = sse(chunk({"reasoning_content": "a", "reasoning": "b"}), "[DONE]")
    assert decode([different])[:2] == [
        ReasoningDelta("a", field="reasoning_content"),
        ReasoningDelta("b", field="reasoning"),
    ]


@pytest.mark.parametrize("token", [b"NaN", b"-Infinity", b"1e400"])
def test_reasoning_details_that_are_not_json_are_a_response_error(token: bytes) -> None:
    # json.loads reads these as floats that no JSON document can carry back to OpenRouter.
    detail = {"type": "reasoning.encrypted", "data": "eyJ", "index": 0, "score": 0.125}
    body = sse(chunk({"reasoning_details": [detail]}), "[DONE]").replace(b"0.125", token)
    with pytest.raises(ModelResponseError, match="reasoning_details item that is not JSON"):
        decode([body])


def test_openrouter_reasoning_details_become_one_item_per_type_and_index() -> None:
    updates = decode([OPENROUTER_DETAILS])
    assert all(
        isinstance(u, ProviderDataDelta)
        for u in updates
        if not isinstance(u, ReasoningDelta | ToolCallStart | ToolCallArgs | ToolCallEnd | Finish)
    )
    message = message_of(updates)
    assert message is not None
    assert (message.reasoning, message.reasoning_field) == ("Check the map.", "reasoning")
    assert message.provider_data["reasoning_details"] == [
        {
            "type": "reasoning.text",
            "text": "Check the map.",
            "format": "gemini",
            "index": 0,
            "signature": "sig==",
        },
        {"type": "reasoning.encrypted", "data": "CiUB", "id": "tool_1", "index": 0},
    ]


# -- tool-call deltas: index, id, neither --------------------------------------------------


def call(
    index: Any = None,
    call_id: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    piece: dict[str, Any] = {"function": {}}
    if index is not None:
        piece["index"] = index
    if call_id is not None:
        piece["id"] = call_id
    if name is not None:
        piece["function"]["name"] = name
    if arguments is not None:
        piece["function"]["arguments"] = arguments
    return piece


def calls_of(*deltas: list[dict[str, Any]]) -> list[ToolCall]:
    updates = decode([sse(*(chunk({"tool_calls": d}) for d in deltas), chunk({}, "tool_calls"))])
    message = message_of(updates)
    return list(message.tool_calls or ()) if message is not None else []


@pytest.mark.parametrize(
    "indices",
    [("0", "1"), ("0", 1), (0, "1"), ("00", "01"), ("1", "0"), ("3", "7")],
)
def test_string_indices_never_credit_arguments_to_the_wrong_call(indices: tuple[Any, Any]) -> None:
    a, b = indices
    other = {str(a): int(a), int(a): str(a)}  # the same index, written the other way
    assert calls_of(
        [call(a, "call_A", "f", '{"x": ')],
        [call(other[a], arguments="1}")],
    ) == [ToolCall("call_A", "f", '{"x": 1}')]
    assert calls_of(
        [call(a, "call_A", "get_weather", "")],
        [call(b, "call_B", "get_time", "")],
        [call(a, arguments='{"city": ')],
        [call(b, arguments='{"zone": ')],
        [call(a, arguments='"Paris"}')],
        [call(b, arguments='"UTC"}')],
    ) == [
        ToolCall("call_A", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_B", "get_time", '{"zone": "UTC"}'),
    ]


@pytest.mark.parametrize("index", ["a", "1.0", " 1", "-1", "", "٣", 1.0, -1, True, [0], {"i": 0}])
def test_an_index_that_is_not_an_integer_is_refused(index: Any) -> None:
    with pytest.raises(ModelResponseError, match="index is not an integer"):
        calls_of([{"index": index, "id": "c", "function": {"name": "f", "arguments": "{}"}}])


def test_whole_calls_with_neither_index_nor_id_are_separate_calls() -> None:
    # one per chunk, and several in one delta
    one_per_chunk = calls_of(
        [call(name="get_weather", arguments='{"city": "Paris"}')],
        [call(name="get_time", arguments='{"zone": "UTC"}')],
        [call(name="get_weather", arguments='{"city": "Rome"}')],
    )
    in_one_delta = calls_of(
        [
            call(name="get_weather", arguments='{"city": "Paris"}'),
            call(name="get_time", arguments='{"zone": "UTC"}'),
            call(name="get_weather", arguments='{"city": "Rome"}'),
        ]
    )
    for found in (one_per_chunk, in_one_delta):
        assert [(c.name, json.loads(c.arguments)) for c in found] == [
            ("get_weather", {"city": "Paris"}),
            ("get_time", {"zone": "UTC"}),
            ("get_weather", {"city": "Rome"}),
        ]
        assert len({c.id for c in found}) == 3  # each got an id of its own


def test_unnamed_pieces_with_neither_index_nor_id_continue_the_latest_call() -> None:
    assert [
        (c.name, c.arguments)
        for c in calls_of(
            [call(name="a", arguments='{"x":')],
            [call(arguments=" 1}")],
            [call(name="b")],
            [call(arguments='{"y": 2}')],
        )
    ] == [("a", '{"x": 1}'), ("b", '{"y": 2}')]
    with pytest.raises(ModelResponseError, match="without a function name"):
        calls_of([call(arguments="{}")])  # nothing to continue


def test_pieces_by_id_find_a_call_that_started_with_an_index() -> None:
    assert calls_of(
        [call(0, "c1", "f", '{"a"')],
        [call(call_id="c1", arguments=": 1}")],
    ) == [ToolCall("c1", "f", '{"a": 1}')]


@pytest.mark.parametrize("index", [int, str], ids=["integer index", "string index"])
@pytest.mark.parametrize("calls", [2, 3])
def test_calls_that_share_an_id_stay_whole_when_every_piece_repeats_it(
    calls: int, index: type[Any]
) -> None:
    # Parallel calls that the server gave one id, each piece repeating it and the name (as
    # servers that send whole calls do): the calls after the first are renamed to be unique,
    # and each piece still goes to the call at its index, never starting another.
    names = [f"tool_{n}" for n in range(calls)]
    found = calls_of(
        *(
            [call(index(n), "same", names[n], text) for n in range(calls)]
            for text in ('{"n": ', "1", "}")
        )
    )
    assert [(c.name, c.arguments) for c in found] == [(name, '{"n": 1}') for name in names]
    assert [c.id for c in found] == ["same", *(f"same_{n}" for n in range(1, calls))]
    # A new id and a name at the index of a renamed call is still a new call.
    assert calls_of(
        [call(0, "same", "f", "{}"), call(1, "same", "g", '{"a": 1}')],
        [call(1, "other", "h", '{"b": 2}')],  # a server that reuses index 1
    ) == [
        ToolCall("same", "f", "{}"),
        ToolCall("same_1", "g", '{"a": 1}'),
        ToolCall("other", "h", '{"b": 2}'),
    ]


def test_a_string_choice_index_is_choice_zero() -> None:
    raw = sse(
        {"choices": [{"index": "0", "delta": {"content": "hi"}, "finish_reason": "stop"}]},
        "[DONE]",
    )
    assert decode([raw]) == [TextDelta("hi"), Finish(FinishReason.STOP)]


# -- recorded streams (tests/data/streams, sources in SOURCES.json) ---------------------------

RECORDED = [n for p in ("deepseek", "openrouter", "zai", "llamacpp") for n in streams(p)]


def outcome(pieces: list[bytes], *, fast: bool = False) -> list[AgentResponseUpdate]:
    """The updates of a body fed in ``pieces``; a recorded error counts as one more update, so
    that a stream that ends in an error compares the same way under every split. ``fast``: as
    ``SSEStream`` feeds it, a piece that is one event alone going to ``decoder.message``."""
    parser, decoder = SSEParser(), ChunkDecoder()
    updates: list[AgentResponseUpdate] = []
    try:
        for piece in pieces:
            data = parser.lone_message(piece) if fast else None
            if data is not None:
                updates += decoder.message(data)
                continue
            for event in parser.feed(piece):
                updates += decoder.event(event)
        return updates + decoder.end_of_body()
    except ModelResponseError as exc:
        return [*updates, TextDelta(f"<raised {exc}>")]


def test_the_recorded_openai_compatible_streams_are_there() -> None:
    assert len(RECORDED) == 6


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_stream_decodes_the_same_one_byte_at_a_time(name: str) -> None:
    raw = recorded(name)
    expected = outcome([raw])
    assert isinstance(expected[-1], Finish) or name.endswith("error.sse")
    assert outcome([raw[i : i + 1] for i in range(len(raw))]) == expected


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_stream_decodes_the_same_one_event_a_piece_on_the_fast_path(name: str) -> None:
    raw = recorded(name)
    events = [event + b"\n\n" for event in raw.split(b"\n\n")]
    events[-1] = events[-1][:-2]  # (what follows the last blank line, if anything)
    assert b"".join(events) == raw
    assert outcome(events, fast=True) == outcome([raw])
    error = sse({"error": {"message": "overloaded"}})  # an error chunk: raised the same way
    assert outcome([b"\n", error], fast=True) == outcome([b"\n" + error])
    assert len(outcome([b"\n", error], fast=True)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_stream_decodes_the_same_cut_in_two_at_every_byte(name: str) -> None:
    raw = recorded(name)
    expected = outcome([raw])
    for point in range(1, len(raw)):
        assert outcome([raw[:point], raw[point:]]) == expected, point


@settings(max_examples=60)
@given(st.sampled_from(RECORDED), st.data())
def test_a_recorded_stream_decodes_the_same_under_any_split(name: str, data: st.DataObject) -> None:
    raw = recorded(name)
    points = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=40))
    assert outcome(cuts(raw, points)) == outcome([raw])


def test_recorded_deepseek_reasoning_then_a_tool_call() -> None:
    updates = decode([recorded("deepseek/deepseek-v4-flash-reasoning_content-tool-call.sse")])
    reasoning = [u for u in updates if isinstance(u, ReasoningDelta)]
    assert len(reasoning) == 17  # the first chunk's "" is no piece
    assert all(u.field == "reasoning_content" for u in reasoning)
    first_call = next(i for i, u in enumerate(updates) if isinstance(u, ToolCallStart))
    assert updates[:first_call] == reasoning  # all of it before the call
    message = message_of(updates)
    assert message is not None
    assert message.reasoning == (
        "The user asks about the weather in San Francisco. I should use the weather tool."
    )
    assert message.tool_calls == (
        ToolCall("call_00_IhCAliIHtM9gKpgfqbBV9873", "weather", '{"location": "San Francisco"}'),
    )
    # prompt_tokens_details.cached_tokens and DeepSeek's prompt_cache_hit_tokens both say 256
    assert updates[-1] == Finish(
        FinishReason.TOOL_CALLS, Usage(374, 61, cache_read_input_tokens=256)
    )


OPENROUTER = "openrouter/claude-sonnet-4-reasoning_details-tool-call"


def test_recorded_openrouter_reasoning_details_merge_into_what_openrouter_takes_back() -> None:
    updates = decode([recorded(f"{OPENROUTER}.sse")])
    message = message_of(updates)
    assert message is not None
    request = recorded_json(f"{OPENROUTER}.turn2.request.json")
    sent = next(m for m in request["messages"] if m["role"] == "assistant")
    assert message.reasoning_field == "reasoning"
    assert message.tool_calls == tuple(ToolCall.from_dict(c) for c in sent["tool_calls"])
    ours, theirs = message.provider_data["reasoning_details"], sent["reasoning_details"]
    assert len(ours) == len(theirs) == 1  # the text pieces and the signature: one item

    def without_text(item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k != "text"}

    assert without_text(ours[0]) == without_text(theirs[0])  # signature, format, index, type
    # The client that recorded the exchange sent the text back without its first piece (and
    # OpenRouter took it); the merge keeps every piece, as the stream sent them.
    assert ours[0]["text"] == message.reasoning
    assert message.reasoning.startswith("The user is asking for weather information for")
    assert message.reasoning.endswith(theirs[0]["text"])
    assert message.reasoning.endswith(sent["reasoning"])


def test_recorded_glm_and_llamacpp_stream_reasoning_content() -> None:
    glm = message_of(decode([recorded("zai/glm-4.5-reasoning_content-tool-call.sse")]))
    assert glm is not None
    assert glm.reasoning_field == "reasoning_content"
    assert glm.reasoning is not None
    assert glm.reasoning.startswith("The user is asking for the weather in Florence, Italy.")
    assert glm.text == "\n\n"  # GLM sends a newline before and after its reasoning
    assert glm.tool_calls == (
        ToolCall("call_e6e3edb2371843ad9503e65b", "weather", '{"location": "Florence, Italy"}'),
    )
    name = "llamacpp/gpt-oss-20b-reasoning_content-tool-call.sse"
    llama = decode([recorded(name)])
    assert llama[-1] == Finish(FinishReason.TOOL_CALLS, Usage(139, 34))  # usage after finish
    message = message_of(llama)
    assert message is not None
    assert (message.reasoning, message.reasoning_field) == (
        "We need to call the weather function.",
        "reasoning_content",
    )
    assert [c.arguments for c in message.tool_calls or ()] == ['{"location":"Florence, Italy"}']


def test_openrouters_reasoning_field_with_a_second_round_of_text() -> None:
    updates = decode([recorded(f"{OPENROUTER}.turn2.sse")])
    assert not any(isinstance(u, ReasoningDelta) for u in updates)
    assert updates[-1] == Finish(FinishReason.STOP, Usage(549, 54))
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)).startswith(
        "The current weather in Florence, Italy is 40°C"
    )


def test_a_recorded_mid_stream_error_comes_after_the_reasoning_before_it() -> None:
    parser, decoder = SSEParser(), ChunkDecoder()
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelResponseError, match="Token limit reached"):
        for event in parser.feed(recorded("openrouter/minimax-m2-midstream-error.sse")):
            seen += decoder.event(event)
    reasoning = "".join(u.text for u in seen if isinstance(u, ReasoningDelta))
    assert reasoning == "We need to respond to a greeting. The user"
    assert not any(isinstance(u, Finish) for u in seen)  # the error, not a finish


# -- usage: the last one reported -----------------------------------------------------------------


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


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["a", "a_1", "a_2", "a_2_3", "b"]), min_size=1, max_size=6))
def test_call_ids_are_unique_in_a_response_whatever_ids_the_server_gives(ids: list[str]) -> None:
    # A renamed id (``a`` -> ``a_2``) may be one the server gave another call: never twice.
    calls = [
        chunk({"tool_calls": [{"index": n, "id": i, "function": {"name": "f", "arguments": "{}"}}]})
        for n, i in enumerate(ids)
    ]
    updates = decode([sse(*calls, chunk({}, "tool_calls"), "[DONE]")])
    starts = [u.id for u in updates if isinstance(u, ToolCallStart)]
    assert len(starts) == len(ids)
    assert len(set(starts)) == len(ids), starts
    message = message_of(updates)
    assert message is not None
    assert [call.id for call in message.tool_calls or ()] == starts


def test_an_error_event_after_done_does_not_count() -> None:
    # Nothing counts after [DONE], an error event no more than a chunk: the response is whole.
    body = sse(chunk({"content": "ok"}, "stop"), "[DONE]")
    late = b'event: error\ndata: {"error": {"message": "late"}}\n\n'
    assert decode([body + late]) == decode([body]) == [TextDelta("ok"), Finish(FinishReason.STOP)]


def test_recorded_cache_counts() -> None:
    glm = decode([recorded("zai/glm-4.5-reasoning_content-tool-call.sse")])[-1]
    assert glm == Finish(FinishReason.TOOL_CALLS, Usage(179, 72, cache_read_input_tokens=43))
    openrouter = decode([recorded(f"{OPENROUTER}.sse")])[-1]  # reports 0 read and 0 written
    assert openrouter == Finish(FinishReason.TOOL_CALLS, Usage(424, 110))


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (
            {"prompt_tokens_details": {"cached_tokens": 1024}},
            Usage(2000, 10, cache_read_input_tokens=1024),
        ),
        (
            {"prompt_cache_hit_tokens": 512, "prompt_cache_miss_tokens": 1488},
            Usage(2000, 10, cache_read_input_tokens=512),
        ),
        (  # both: OpenAI's field counts
            {"prompt_tokens_details": {"cached_tokens": 300}, "prompt_cache_hit_tokens": 299},
            Usage(2000, 10, cache_read_input_tokens=300),
        ),
        (
            {"prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 1900}},
            Usage(2000, 10, cache_creation_input_tokens=1900),
        ),
        ({"prompt_tokens_details": None}, Usage(2000, 10)),
        ({"prompt_tokens_details": {"audio_tokens": 0}}, Usage(2000, 10)),
    ],
)
def test_usage_counts_the_tokens_the_prompt_cache_served_and_stored(
    reported: dict[str, Any], expected: Usage
) -> None:
    updates = decode_events(vllm({"content": "ok"}, "stop", usage=counts(2000, 10) | reported))
    assert updates[-1] == Finish(FinishReason.STOP, expected)


@pytest.mark.parametrize("bad", [-1, "256", 2.5, True, None, [256], {"n": 256}, math.nan])
def test_a_usage_count_that_is_not_an_integer_of_at_least_0_is_ignored(bad: Any) -> None:
    reported = {
        "prompt_tokens": bad,
        "completion_tokens": bad,
        "prompt_tokens_details": {"cached_tokens": bad, "cache_write_tokens": bad},
        "prompt_cache_hit_tokens": bad,
    }
    assert decode_events(vllm({}, "stop", usage=reported))[-1] == Finish(FinishReason.STOP, Usage())
    # A bad count in one place leaves the next place it may be in.
    reported = counts(2000, 10) | {
        "prompt_tokens_details": {"cached_tokens": bad},
        "prompt_cache_hit_tokens": 64,
    }
    assert decode_events(vllm({}, "stop", usage=reported))[-1] == Finish(
        FinishReason.STOP, Usage(2000, 10, cache_read_input_tokens=64)
    )


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


# -- finish reasons beyond OpenAI's ----------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("stop", FinishReason.STOP),
        ("eos", FinishReason.STOP),  # Together
        ("length", FinishReason.LENGTH),
        ("model_length", FinishReason.LENGTH),  # Mistral: the context window is full
        ("insufficient_system_resource", FinishReason.LENGTH),  # DeepSeek: cut off mid-answer
        ("content_filter", FinishReason.CONTENT_FILTER),
    ],
)
def test_a_response_cut_off_is_never_a_stop(reason: str, expected: FinishReason) -> None:
    updates = decode([sse(chunk({"content": "Half an ans"}, reason), "[DONE]")])
    assert updates[-1] == Finish(expected, None)


def test_a_finish_reason_of_error_is_a_response_error_after_the_text() -> None:
    # vLLM and Mistral end a failed generation with finish_reason "error" (and no error object).
    parser, decoder = SSEParser(), ChunkDecoder()
    updates: list[Any] = []
    with pytest.raises(ModelResponseError, match="finish_reason 'error'"):
        for one in parser.feed(sse(chunk({"content": "Half"}), chunk({}, "error"), "[DONE]")):
            updates += decoder.event(one)
    assert updates == [TextDelta("Half")]


def test_reasoning_tokens_reported_beside_the_completion_tokens_are_output_tokens() -> None:
    # xAI (and Gemini's OpenAI API) count reasoning apart from completion_tokens, and in
    # total_tokens: recorded from grok-3-mini (charmbracelet/fantasy's xai-grok-3-mini
    # thinking-streaming cassette). OpenAI, DeepSeek, Z.ai count it in completion_tokens.
    grok = {
        "prompt_tokens": 288,
        "completion_tokens": 27,
        "total_tokens": 628,
        "prompt_tokens_details": {"text_tokens": 288, "cached_tokens": 287},
        "completion_tokens_details": {"reasoning_tokens": 313, "audio_tokens": 0},
    }
    updates = decode_events(vllm({"content": "ok"}, "stop", usage=grok))
    assert updates[-1] == Finish(
        FinishReason.STOP, Usage(288, 27 + 313, cache_read_input_tokens=287)
    )
    assert Usage(288, 27 + 313).total_tokens == 628
    deepseek = {
        "prompt_tokens": 339,
        "completion_tokens": 83,
        "total_tokens": 422,
        "completion_tokens_details": {"reasoning_tokens": 39},
    }
    updates = decode_events(vllm({"content": "ok"}, "stop", usage=deepseek))
    assert updates[-1] == Finish(FinishReason.STOP, Usage(339, 83))


# -- keys of a tool call beyond id, type and function ----------------------------------------


def test_geminis_thought_signature_on_a_tool_call_stays_on_the_call_and_goes_back() -> None:
    # Gemini 3 through its OpenAI-compatible API signs each function call in the call's
    # extra_content, and answers HTTP 400 ("Function call is missing a thought_signature")
    # to a later request whose assistant tool call lacks it.
    signed = {"google": {"thought_signature": "CiQB0e2Kb3Ws=="}}
    raw = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "extra_content": signed,
                        "function": {"arguments": '{"city":"Paris"}', "name": "get_weather"},
                        "id": "function-call-1",
                        "type": "function",
                        "index": 0,
                    }
                ],
            },
            "tool_calls",
        ),
        "[DONE]",
    )
    message = message_of(decode([raw]))
    assert message is not None
    [call] = message.tool_calls or ()
    assert call == ToolCall(
        "function-call-1",
        "get_weather",
        '{"city":"Paris"}',
        provider_data={"extra_content": signed},
    )
    [sent] = wire_messages([message], provider_family("https://generativelanguage.googleapis.com"))
    assert sent["tool_calls"][0]["extra_content"] == signed
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_dict()))) == message


# Gemini's OpenAI-compatible stream sends each call whole in one piece with no index (recorded
# in noho/dayu-agent#45 and THU-MAIC/OpenMAIC#1556), and is reported (HKUDS/OpenHarness#338,
# open-webui/computer#224) to send a call's extra_content on a trailing piece of its own, with
# no index: the latest call's, as any unnumbered, unnamed piece is.
SIGNED_LATE = sse(
    chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "function": {"arguments": '{"city":"Paris"}', "name": "get_weather"},
                    "id": "function-call-1",
                    "type": "function",
                }
            ],
        },
        model="gemini-3-flash-preview",
    ),
    chunk({"tool_calls": [{"extra_content": {"google": {"thought_signature": "CiQB0e2K=="}}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "function": {"arguments": '{"zone":"Europe/Paris"}', "name": "get_time"},
                    "id": "function-call-2",
                    "type": "function",
                }
            ]
        }
    ),
    chunk(
        {
            "tool_calls": [
                {
                    "id": "function-call-2",
                    "type": "function",
                    "function": {},
                    "extra_content": {"google": {"thought_signature": "CiQB7f3L=="}},
                }
            ]
        }
    ),
    chunk({}, "stop"),
    "[DONE]",
)


def test_a_calls_keys_on_a_later_piece_reach_the_call_on_its_end() -> None:
    updates = decode(cuts(SIGNED_LATE, range(0, len(SIGNED_LATE), 37)))
    first = {"extra_content": {"google": {"thought_signature": "CiQB0e2K=="}}}
    second = {"extra_content": {"google": {"thought_signature": "CiQB7f3L=="}}}
    assert [u for u in updates if not isinstance(u, Finish)] == [
        ToolCallStart("function-call-1", "get_weather"),
        ToolCallArgs("function-call-1", '{"city":"Paris"}'),
        ToolCallStart("function-call-2", "get_time"),
        ToolCallArgs("function-call-2", '{"zone":"Europe/Paris"}'),
        ToolCallEnd("function-call-1", provider_data=first),
        ToolCallEnd("function-call-2", provider_data=second),
    ]
    message = message_of(updates)
    assert message is not None
    assert [call.provider_data for call in message.tool_calls or ()] == [first, second]
    [sent] = wire_messages([message], provider_family("https://generativelanguage.googleapis.com"))
    assert [call["extra_content"] for call in sent["tool_calls"]] == [
        first["extra_content"],
        second["extra_content"],
    ]


def test_later_pieces_add_to_a_calls_keys_and_repeating_them_changes_nothing() -> None:
    signed = {"google": {"thought_signature": "sig"}}
    raw = sse(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "extra_content": signed,
                        "function": {"name": "f", "arguments": "{", "strict": True},
                    }
                ]
            }
        ),
        # A server that repeats the call's keys on every piece: nothing new, nothing on the end.
        chunk(
            {"tool_calls": [{"index": 0, "extra_content": signed, "function": {"arguments": "}"}}]}
        ),
        chunk({"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "g"}}]}),
        chunk({"tool_calls": [{"index": 1, "extra_content": {"google": {"n": 1}}}]}),
        chunk({"tool_calls": [{"index": 1, "extra_content": {"vertex": {"n": 2}}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"strict": False}}]}, "tool_calls"),
    )
    updates = decode([raw])
    ends = [u for u in updates if isinstance(u, ToolCallEnd)]
    assert [dict(end.provider_data) for end in ends] == [
        {},
        {"extra_content": {"google": {"n": 1}, "vertex": {"n": 2}}, "function": {"strict": False}},
    ]
    message = message_of(updates)
    assert message is not None
    first, second = message.tool_calls or ()
    assert first.provider_data == {"extra_content": signed, "function": {"strict": True}}
    assert first.arguments == "{}"
    assert second.provider_data == {
        "extra_content": {"google": {"n": 1}, "vertex": {"n": 2}},
        "function": {"strict": False},
    }


def test_a_calls_new_keys_after_it_ended_are_a_response_error() -> None:
    raw = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f"}}]}, "tool_calls"),
        chunk({"tool_calls": [{"index": 0, "extra_content": {"google": {"s": "x"}}}]}),
    )
    with pytest.raises(ModelResponseError, match="'extra_content' for tool call 'c1' after it"):
        decode([raw])
    # What the call already has, repeated after its end, is no news.
    raw = sse(
        chunk(
            {"tool_calls": [{"index": 0, "id": "c1", "x": 1, "function": {"name": "f"}}]},
            "tool_calls",
        ),
        chunk({"tool_calls": [{"index": 0, "x": 1}]}),
    )
    [call] = (message_of(decode([raw])) or ChatMessage.user("")).tool_calls or ()
    assert call.provider_data == {"x": 1}


def test_a_functions_own_other_keys_stay_on_the_call_and_go_back_inside_its_function() -> None:
    # Keys of a call's function beyond name and arguments are kept as the call's own other
    # keys are (under provider_data["function"]), and go back inside the function.
    raw = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "extra_content": {"k": 1},
                        "function": {
                            "name": "f",
                            "arguments": '{"a":',
                            "signature": "s1",
                            "meta": {"n": [1, None]},
                            "dropped": None,
                        },
                    },
                    {"index": 1, "id": "c2", "function": {"name": "g", "strict": True}},
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}, "tool_calls"),
        "[DONE]",
    )
    updates = decode([raw])
    starts = [u for u in updates if isinstance(u, ToolCallStart)]
    assert starts == [
        ToolCallStart(
            "c1",
            "f",
            provider_data={
                "extra_content": {"k": 1},
                "function": {"signature": "s1", "meta": {"n": [1, None]}},
            },
        ),
        ToolCallStart("c2", "g", provider_data={"function": {"strict": True}}),
    ]
    message = message_of(updates)
    assert message is not None
    first, _ = message.tool_calls or ()
    assert first.arguments == '{"a": 1}'
    assert first.provider_data["function"] == {"signature": "s1", "meta": {"n": [1, None]}}
    # The next request's assistant message has them inside each call's function.
    [sent] = wire_messages([message], provider_family("http://localhost:8000/v1"))
    assert sent["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {
                "name": "f",
                "arguments": '{"a": 1}',
                "signature": "s1",
                "meta": {"n": [1, None]},
            },
            "extra_content": {"k": 1},
        },
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "g", "arguments": "{}", "strict": True},
        },
    ]
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    # A function with name and arguments only (nearly every server's): nothing kept.
    plain = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}, "tool_calls")
    )
    [start] = [u for u in decode([plain]) if isinstance(u, ToolCallStart)]
    assert start.provider_data == {}


def test_a_tool_call_key_that_is_not_json_is_a_response_error() -> None:
    call = {"index": 0, "id": "c1", "extra_content": {"score": 0.5}, "function": {"name": "f"}}
    raw = sse(chunk({"tool_calls": [call]}, "tool_calls")).replace(b"0.5", b"NaN")
    with pytest.raises(ModelResponseError, match="tool call that is not JSON"):
        decode([raw])
