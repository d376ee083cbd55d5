"""The Anthropic event decoder (``trio_invoke.providers.anthropic._decode``), sans-IO: bytes in
through the SSE parser, updates out; no HTTP and no httpx2.

On Anthropic-shaped streams (``anthropic_streams``) and on recorded ones (tests/data/streams,
sources in SOURCES.json): every event and block type, stop reasons, usage with the cache counts,
errors in the stream, and the same updates for any split of the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from anthropic_streams import (
    CACHED,
    INTERLEAVED,
    MCP,
    MCP_RESULT,
    MCP_USE,
    NO_ARGUMENTS,
    PARALLEL,
    REDACTED,
    RESULTS,
    SEARCH,
    SHAPED,
    TEXT,
    TEXT_BETWEEN_CALLS,
    THINKING,
    UNKNOWN,
    decode,
    event,
    message_end,
    message_of,
    message_start,
    redacted_block,
    text_block,
    thinking_block,
    tool_block,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from recorded import cuts, recorded, recorded_json, streams

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    ModelResponseError,
    ProviderDataDelta,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from trio_invoke._accumulate import ToolCallAccumulator
from trio_invoke.providers._sse import SSEParser
from trio_invoke.providers.anthropic._decode import (
    SERVER_BLOCKS,
    STOP_REASONS,
    THINKING_BLOCKS,
    AnthropicDecoder,
    error_description,
    error_message,
)
from trio_invoke.providers.anthropic._wire import wire_conversation


def outcome(pieces: Iterable[bytes]) -> list[Any]:
    """:func:`decode`, with an error counted as one more update (so that a stream that ends in
    an error compares the same way under every split)."""
    parser, decoder = SSEParser(), AnthropicDecoder()
    updates: list[Any] = []
    try:
        for piece in pieces:
            for one in parser.feed(piece):
                updates += decoder.event(one)
        return updates + decoder.end_of_body()
    except ModelResponseError as exc:
        return [*updates, ("raised", str(exc), exc.error_type)]


def server_blocks(updates: Iterable[Any]) -> list[Any]:
    """The blocks of the ``server_blocks`` pieces in ``updates``."""
    return [
        update.update["block"]
        for update in updates
        if isinstance(update, ProviderDataDelta) and update.field == SERVER_BLOCKS
    ]


def shown(updates: Iterable[Any]) -> list[Any]:
    """``updates`` without the ``server_blocks`` pieces."""
    return [
        update
        for update in updates
        if not (isinstance(update, ProviderDataDelta) and update.field == SERVER_BLOCKS)
    ]


# -- Anthropic-shaped streams ------------------------------------------------------------------


def test_text_with_a_ping_between_its_pieces() -> None:
    assert decode([TEXT]) == [
        TextDelta("Bonjour"),
        TextDelta(" ! Ça va ? "),
        TextDelta("👋"),
        Finish(FinishReason.STOP, Usage(25, 40)),
    ]


def test_parallel_tool_use_after_text() -> None:
    assert decode([PARALLEL]) == [
        TextDelta("Both at once."),
        ToolCallStart("toolu_01W", "get_weather"),
        ToolCallArgs("toolu_01W", '{"city": '),
        ToolCallArgs("toolu_01W", '"Paris"}'),
        ToolCallEnd("toolu_01W"),
        ToolCallStart("toolu_01T", "get_time"),
        ToolCallArgs("toolu_01T", '{"zone": "Europe/Paris"}'),
        ToolCallEnd("toolu_01T"),
        Finish(FinishReason.TOOL_CALLS, Usage(120, 77)),
    ]


def test_a_tool_use_with_no_input_pieces_has_the_arguments_of_an_empty_object() -> None:
    updates = decode([NO_ARGUMENTS])
    assert updates[:2] == [ToolCallStart("toolu_01N", "clock"), ToolCallEnd("toolu_01N")]
    message = message_of(updates)
    assert message is not None
    assert message.tool_calls == (ToolCall("toolu_01N", "clock", "{}"),)


def test_a_tool_use_whose_whole_input_is_in_its_start() -> None:
    block = {"type": "tool_use", "id": "toolu_9", "name": "add", "input": {"a": 1, "b": "é"}}
    raw = (
        message_start()
        + event("content_block_start", index=0, content_block=block)
        + event("content_block_stop", index=0)
        + message_end("tool_use")
    )
    assert decode([raw])[:3] == [
        ToolCallStart("toolu_9", "add"),
        ToolCallArgs("toolu_9", '{"a":1,"b":"é"}'),
        ToolCallEnd("toolu_9"),
    ]


def test_thinking_streams_as_reasoning_and_its_signed_block_stays_on_the_message() -> None:
    updates = decode([THINKING])
    reasoning = [u for u in updates if isinstance(u, ReasoningDelta)]
    assert reasoning == [
        ReasoningDelta("Weather first; "),
        ReasoningDelta("then time — "),
        ReasoningDelta("Fahrenheit?"),
    ]
    first_call = next(i for i, u in enumerate(updates) if isinstance(u, ToolCallStart))
    assert all(isinstance(u, ReasoningDelta | ProviderDataDelta) for u in updates[:first_call])
    message = message_of(updates)
    assert message is not None
    assert message.reasoning == "Weather first; then time — Fahrenheit?"
    assert message.provider_data[THINKING_BLOCKS] == [
        {
            "type": "thinking",
            "thinking": "Weather first; then time — Fahrenheit?",
            "signature": "EqQBCkYIBhgCIkBfcm5==",
        }
    ]
    assert message.tool_calls == (ToolCall("toolu_01X", "get_weather", '{"city": "Paris"}'),)
    stored = json.loads(json.dumps(message.to_dict()))
    assert ChatMessage.from_dict(stored) == message  # the blocks survive storage


def test_redacted_and_thinking_blocks_keep_their_order() -> None:
    message = message_of(decode([REDACTED]))
    assert message is not None
    assert message.provider_data[THINKING_BLOCKS] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"},
        {"type": "thinking", "thinking": "Hmm.", "signature": "Sig2=="},
        {"type": "redacted_thinking", "data": "EtgBCkYIBxgCKkDQ"},
    ]
    assert (message.text, message.reasoning) == ("Done.", "Hmm.")


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"1e400"])
def test_a_redacted_block_that_is_not_json_is_a_response_error(token: bytes) -> None:
    # json.loads reads these as floats that no JSON document can carry back: the block could
    # not be sent again, so the stream is a ModelResponseError, not a bare ValueError.
    block = {"type": "redacted_thinking", "data": "E", "score": 0.125}
    raw = message_start() + event("content_block_start", index=0, content_block=block)
    with pytest.raises(ModelResponseError, match="redacted_thinking block that is not JSON"):
        decode([raw.replace(b"0.125", token) + message_end()])


def test_a_signature_in_several_pieces_is_joined() -> None:
    raw = (
        message_start()
        + event(
            "content_block_start",
            index=0,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        )
        + event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "a"})
        + event(
            "content_block_delta", index=0, delta={"type": "signature_delta", "signature": "S1"}
        )
        + event(
            "content_block_delta", index=0, delta={"type": "signature_delta", "signature": "S2"}
        )
        + event("content_block_stop", index=0)
        + text_block(1, "hi")
        + message_end()
    )
    message = message_of(decode([raw]))
    assert message is not None
    assert message.provider_data[THINKING_BLOCKS] == [
        {"type": "thinking", "thinking": "a", "signature": "S1S2"}
    ]


def test_keys_keep_the_blocks_of_continued_responses_apart() -> None:
    first = decode([THINKING], AnthropicDecoder())
    second = decode([THINKING], AnthropicDecoder(key_prefix="1."))
    keys = {u.key for u in first + second if isinstance(u, ProviderDataDelta)}
    assert keys == {"0", "1.0"}


def test_cache_counts_are_in_the_usage_and_in_input_tokens() -> None:
    assert decode([CACHED])[-1] == Finish(
        FinishReason.STOP,
        Usage(10 + 2000 + 300, 5, cache_read_input_tokens=2000, cache_creation_input_tokens=300),
    )


def test_the_last_usage_counts_never_a_sum() -> None:
    raw = (
        message_start(50, cache_read=0)
        + text_block(0, "x")
        + event("message_delta", delta={"stop_reason": None}, usage={"output_tokens": 3})
        + event(
            "message_delta",
            delta={"stop_reason": "end_turn"},
            usage={"output_tokens": 7, "input_tokens": 60, "cache_read_input_tokens": 40},
        )
        + event("message_stop")
    )
    assert decode([raw])[-1] == Finish(FinishReason.STOP, Usage(100, 7, cache_read_input_tokens=40))


def test_usage_with_iterations_is_the_sum_of_the_passes() -> None:
    passes = [
        {"input_tokens": 100, "output_tokens": 83, "cache_read_input_tokens": 55096},
        {"input_tokens": 181, "output_tokens": 8, "cache_read_input_tokens": 0},
    ]
    raw = (
        message_start(100, cache_read=55096)
        + text_block(0, "Hello!")
        + event(
            "message_delta",
            delta={"stop_reason": "end_turn"},
            usage={"input_tokens": 181, "output_tokens": 8, "iterations": passes},
        )
        + event("message_stop")
    )
    assert decode([raw])[-1] == Finish(
        FinishReason.STOP, Usage(100 + 55096 + 181, 91, cache_read_input_tokens=55096)
    )


@pytest.mark.parametrize(("stop_reason", "reason"), sorted(STOP_REASONS.items()))
def test_every_stop_reason_without_calls(stop_reason: str, reason: FinishReason) -> None:
    raw = message_start() + text_block(0, "x") + message_end(stop_reason)
    expected = FinishReason.STOP if reason is FinishReason.TOOL_CALLS else reason
    assert decode([raw])[-1] == Finish(expected, Usage(25, 40))


def test_the_stop_reasons_the_api_defines_are_all_mapped() -> None:
    assert STOP_REASONS == {
        "end_turn": FinishReason.STOP,
        "stop_sequence": FinishReason.STOP,
        "tool_use": FinishReason.TOOL_CALLS,
        "max_tokens": FinishReason.LENGTH,
        "model_context_window_exceeded": FinishReason.LENGTH,
        "refusal": FinishReason.CONTENT_FILTER,
    }


@pytest.mark.parametrize("stop_reason", ["end_turn", "tool_use", "max_tokens", "a_new_reason"])
def test_calls_make_the_reason_tool_calls(stop_reason: str) -> None:
    raw = message_start() + tool_block(0, "toolu_1", "f", "{}") + message_end(stop_reason)
    assert decode([raw])[-1].finish_reason is FinishReason.TOOL_CALLS


def test_a_refused_response_with_calls_is_content_filter() -> None:
    # The streaming classifier stopped the response after a tool_use block (the shape of
    # anthropic-sdk-python's tests/fixtures/fable-fallback/stream-a-toolrefusal.sse, with a
    # client tool): the API says a refused turn must be reset, not answered, so the Finish
    # says it was refused, as the OpenAI client keeps content_filter with calls.
    stop = event(
        "message_delta",
        delta={
            "stop_reason": "refusal",
            "stop_sequence": None,
            "stop_details": {"type": "refusal", "category": None, "explanation": None},
        },
        usage={"input_tokens": 28, "output_tokens": 106},
    ) + event("message_stop")
    for calls in (
        tool_block(0, "toolu_1", "f", '{"q": "x"}'),
        tool_block(0, "toolu_1", "f", '{"q": "x', stop=False),
    ):
        raw = message_start() + calls + text_block(1, "Here is") + stop
        updates = decode([raw])
        assert ToolCallEnd("toolu_1") in updates
        assert updates[-1] == Finish(FinishReason.CONTENT_FILTER, Usage(28, 106))


def test_an_unknown_stop_reason_is_stop() -> None:
    raw = message_start() + text_block(0, "x") + message_end("something_new")
    assert decode([raw])[-1].finish_reason is FinishReason.STOP


def test_stop_sequence_is_kept() -> None:
    raw = (
        message_start()
        + text_block(0, "1 2 3")
        + event("message_delta", delta={"stop_reason": "stop_sequence", "stop_sequence": "4"})
        + event("message_stop")
    )
    decoder = AnthropicDecoder()
    assert decode([raw], decoder)[-1].finish_reason is FinishReason.STOP
    assert decoder.stop_sequence == "4"


def test_pause_turn_is_left_to_the_client_to_continue() -> None:
    raw = message_start() + text_block(0, "Searching...") + message_end("pause_turn", 30)
    decoder = AnthropicDecoder()
    assert decode([raw], decoder) == [TextDelta("Searching...")]  # no Finish
    assert decoder.finished
    assert decoder.paused
    assert decoder.usage == Usage(25, 30)


def test_pause_turn_that_no_one_continues_is_an_unfinished_turn() -> None:
    raw = message_start() + text_block(0, "Searching...") + message_end("pause_turn", 30)
    decoder = AnthropicDecoder(continue_pause=False)
    assert decode([raw], decoder)[-1] == Finish(FinishReason.LENGTH, Usage(25, 30))
    assert not decoder.paused


def test_pause_turn_with_tool_calls_answers_the_calls_first() -> None:
    raw = message_start() + tool_block(0, "toolu_1", "f", "{}") + message_end("pause_turn")
    decoder = AnthropicDecoder()
    assert decode([raw], decoder)[-1].finish_reason is FinishReason.TOOL_CALLS
    assert not decoder.paused


def test_unknown_events_blocks_and_deltas_are_skipped_but_kept_in_the_blocks() -> None:
    decoder = AnthropicDecoder()
    updates = decode([UNKNOWN], decoder)
    assert shown(updates) == [
        TextDelta("Found it."),
        Finish(FinishReason.STOP, Usage(25, 40)),
    ]
    assert server_blocks(updates) == decoder.blocks[:2]
    assert decoder.blocks == [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "trio"},
        },
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Found it."},
    ]


OTHER_DELTAS = [
    {"type": "text_delta", "text": "not the model's answer"},
    {"type": "thinking_delta", "thinking": "not the model's reasoning"},
    {"type": "signature_delta", "signature": "Sig=="},
    {"type": "input_json_delta", "partial_json": 5},
    {"type": "future_delta", "x": 1},
]


@pytest.mark.parametrize(
    "start",
    [
        MCP_USE,
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "future_tool_use", "id": "futu_1", "name": "f", "input": {}},
    ],
    ids=["mcp_tool_use", "server_tool_use", "a type Anthropic adds"],
)
def test_deltas_on_a_block_the_decoder_does_not_model_are_never_fatal(
    start: dict[str, Any],
) -> None:
    # The API streams the input of server tools and MCP connector tools in input_json_delta
    # pieces, as a tool_use's: the pieces make the block's input, and no update comes of them
    # (nor of any other delta on such a block). Only a tool_use block is a call of the loop's.
    pieces = ["", '{"text": ', '"hi"}']
    deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
    deltas[2:2] = OTHER_DELTAS
    raw = (
        message_start()
        + event("content_block_start", index=0, content_block=start)
        + b"".join(event("content_block_delta", index=0, delta=delta) for delta in deltas)
        + event("content_block_stop", index=0)
        + event("content_block_start", index=1, content_block=MCP_RESULT)
        + event("content_block_stop", index=1)
        + text_block(2, "The server echoed hi.")
        + message_end()
    )
    decoder = AnthropicDecoder()
    updates = decode([raw], decoder)
    assert shown(updates) == [
        TextDelta("The server echoed hi."),
        Finish(FinishReason.STOP, Usage(25, 40)),
    ]
    assert server_blocks(updates) == decoder.blocks[:2]
    assert decoder.blocks == [
        {**start, "input": {"text": "hi"}},
        MCP_RESULT,
        {"type": "text", "text": "The server echoed hi."},
    ]


def test_an_mcp_connector_tool_is_kept_in_the_blocks_not_called() -> None:
    decoder = AnthropicDecoder()
    updates = decode([MCP], decoder)
    assert shown(updates) == [
        TextDelta("The server echoed hi."),
        Finish(FinishReason.STOP, Usage(25, 40)),
    ]
    assert server_blocks(updates) == decoder.blocks[:-1]
    assert decoder.blocks[0] == {**MCP_USE, "input": {"text": "hi"}}


@pytest.mark.parametrize(
    ("start", "deltas", "expected"),
    [
        (
            {"type": "compaction", "content": None},
            [{"type": "compaction_delta", "content": "Summary."}],
            {"type": "compaction", "content": "Summary."},
        ),
        (
            {"type": "compaction", "content": "", "encrypted_content": ""},
            [{"type": "compaction_delta", "content": "Summary.", "encrypted_content": "EqQB=="}],
            {"type": "compaction", "content": "Summary.", "encrypted_content": "EqQB=="},
        ),
        (  # each delta holds the fields whole, as the API's SDKs read it: the last one holds
            {"type": "compaction", "content": "partial"},
            [
                {"type": "compaction_delta", "content": "A first summary."},
                {"type": "compaction_delta", "content": "The summary."},
            ],
            {"type": "compaction", "content": "The summary."},
        ),
        (  # a compaction_delta belongs to a compaction block: elsewhere it is skipped
            {"type": "future_block", "content": None},
            [{"type": "compaction_delta", "content": "Summary."}],
            {"type": "future_block", "content": None},
        ),
    ],
)
def test_a_compaction_blocks_delta_brings_its_content(
    start: dict[str, Any], deltas: list[dict[str, Any]], expected: dict[str, Any]
) -> None:
    raw = (
        message_start()
        + event("content_block_start", index=0, content_block=start)
        + b"".join(event("content_block_delta", index=0, delta=delta) for delta in deltas)
        + event("content_block_stop", index=0)
        + text_block(1, "Hello!")
        + message_end()
    )
    decoder = AnthropicDecoder()
    updates = decode([raw], decoder)
    assert shown(updates) == [TextDelta("Hello!"), Finish(FinishReason.STOP, Usage(25, 40))]
    assert server_blocks(updates) == [expected]
    assert decoder.blocks == [expected, {"type": "text", "text": "Hello!"}]


def test_blocks_are_the_content_as_the_api_returns_it() -> None:
    decoder = AnthropicDecoder()
    decode([THINKING], decoder)
    assert decoder.blocks == [
        {
            "type": "thinking",
            "thinking": "Weather first; then time — Fahrenheit?",
            "signature": "EqQBCkYIBhgCIkBfcm5==",
        },
        {"type": "tool_use", "id": "toolu_01X", "name": "get_weather", "input": {"city": "Paris"}},
    ]


@pytest.mark.parametrize(
    "raw", [INTERLEAVED, THINKING, REDACTED], ids=["interleaved", "front", "redacted"]
)
def test_thinking_goes_back_where_it_was_among_the_text_and_the_calls(raw: bytes) -> None:
    # The API refuses thinking blocks of the latest assistant message moved or changed ("you
    # cannot rearrange or modify the sequence of these blocks"): each goes back where it came,
    # between the calls too (interleaved thinking streams it there; other implementations'
    # tests stream [thinking, tool_use, thinking, tool_use] responses).
    decoder = AnthropicDecoder()
    message = message_of(decode([raw], decoder))
    assert message is not None
    stored = ChatMessage.from_dict(json.loads(json.dumps(message.to_dict())))
    for sent in (message, stored):
        _, wire = wire_conversation([ChatMessage.user("?"), sent])
        assert wire[1]["content"] == decoder.blocks


def test_max_tokens_inside_a_tool_call_ends_the_call_with_what_came() -> None:
    raw = (
        message_start()
        + tool_block(0, "toolu_cut", "write", '{"text": "unfini', stop=False)
        + message_end("max_tokens")
    )
    updates = decode([raw])
    assert updates[-2:] == [
        ToolCallEnd("toolu_cut"),
        Finish(FinishReason.TOOL_CALLS, Usage(25, 40)),
    ]
    message = message_of(updates)
    assert message is not None
    assert message.tool_calls == (ToolCall("toolu_cut", "write", '{"text": "unfini'),)


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("overloaded_error", "Overloaded"),
        ("api_error", "Internal server error"),
        ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    ],
)
def test_an_error_event_comes_after_the_updates_before_it(kind: str, message: str) -> None:
    raw = (
        message_start()
        + text_block(0, "Partial")
        + event("error", error={"details": None, "type": kind, "message": message})
    )
    result = outcome([raw])
    assert result[0] == TextDelta("Partial")
    assert result[-1] == (
        "raised",
        f"the server reported an error in the stream: {kind}: {message}",
        kind,
    )


def test_an_error_event_named_only_by_the_sse_event_field() -> None:
    raw = message_start() + b'event: error\ndata: {"error": {"message": "boom"}}\n\n'
    with pytest.raises(ModelResponseError, match="boom") as caught:
        decode([raw])
    assert caught.value.error_type is None


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (message_start() + text_block(0, "x"), "ended before the response was complete"),
        (b"", r"no stop_reason and no message_stop after 0 events"),
        (message_start() + b"data: {not json\n\n", "not valid JSON"),
        (message_start() + b"data: [1, 2]\n\n", "not a JSON object"),
        (
            message_start()
            + event("content_block_delta", index=3, delta={"type": "text_delta", "text": "x"}),
            "content block 3, which never started",
        ),
        (
            message_start() + text_block(0, "x") + event("content_block_stop", index=0),
            "after its content_block_stop",
        ),
        (
            message_start() + text_block(0, "x") + text_block(0, "y"),
            "started content block 0 twice",
        ),
        (
            message_start()
            + event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            + event(
                "content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": "{"},
            ),
            "input_json_delta for a text block",
        ),
        (
            message_start()
            + event(
                "content_block_start",
                index=0,
                content_block={"type": "tool_use", "id": "t", "name": "f", "input": {}},
            )
            + event("content_block_delta", index=0, delta={"type": "text_delta", "text": "x"}),
            "text_delta for a tool_use block",
        ),
        *(
            (
                message_start()
                + event("content_block_start", index=0, content_block=block)
                + event("content_block_delta", index=0, delta={"type": kind, field: "x"}),
                f"{kind} for a {block['type']} block",
            )
            for block in (
                {"type": "text", "text": ""},
                {"type": "tool_use", "id": "t", "name": "f", "input": {}},
                {"type": "redacted_thinking", "data": "R"},
            )
            for kind, field in (("thinking_delta", "thinking"), ("signature_delta", "signature"))
        ),
        (
            message_start()
            + event("content_block_start", index=0, content_block={"type": "text", "text": ""})
            + event("content_block_delta", index=0, delta={"type": "text_delta", "text": 5}),
            "text is not a string",
        ),
        (
            message_start()
            + event(
                "content_block_start", index=0, content_block={"type": "tool_use", "name": "f"}
            ),
            "started without an id",
        ),
        (
            message_start()
            + event("content_block_start", index=0, content_block={"type": "tool_use", "id": "t"}),
            "started without a name",
        ),
        (
            message_start() + tool_block(0, "t1", "f", "{}") + tool_block(1, "t1", "g", "{}"),
            "tool_use id 't1' twice",
        ),
        (message_start() + event("content_block_start", index=-1), "not an integer >= 0"),
        (message_start() + event("content_block_start", index=0), "started without a type"),
    ],
)
def test_broken_streams_are_a_model_response_error_naming_the_problem(
    raw: bytes, match: str
) -> None:
    with pytest.raises(ModelResponseError, match=match):
        decode([raw])


def test_a_body_that_ends_after_the_stop_reason_without_message_stop_is_complete() -> None:
    raw = (
        message_start()
        + text_block(0, "x")
        + event("message_delta", delta={"stop_reason": "end_turn"})
    )
    assert decode([raw])[-1] == Finish(FinishReason.STOP, Usage(25, 3))


def test_nothing_counts_after_message_stop() -> None:
    raw = TEXT + text_block(5, "late") + message_end("max_tokens")
    assert decode([raw]) == decode([TEXT])
    for junk in (b"data: [DONE]\n\n", event("error", error={"type": "x", "message": "y"})):
        assert outcome([TEXT + junk]) == decode([TEXT])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            ("Overloaded", "overloaded_error"),
        ),
        ('{"type":"error","error":{"type":"api_error"}}', ("Bad Gateway", "api_error")),
        ('{"error": "upstream timed out"}', ("upstream timed out", None)),
        ('{"message": "no route"}', ("no route", None)),
        ('{"detail": "Not Found"}', ("Not Found", None)),
        ("<html>502 Bad Gateway</html>", ("<html>502 Bad Gateway</html>", None)),
        ("", ("Bad Gateway", None)),
    ],
)
def test_error_bodies(body: str, expected: tuple[str, str | None]) -> None:
    assert error_description(body, "Bad Gateway") == expected


def test_the_recorded_401_body() -> None:
    body = recorded("anthropic/http-401-authentication_error.json").decode()
    assert error_description(body, "Unauthorized") == ("invalid x-api-key", "authentication_error")
    assert error_message(body) == "authentication_error: invalid x-api-key"


# -- any split gives the same updates ---------------------------------------------------------

RECORDED = streams("anthropic")
BODIES = {**{f"shaped:{k}": v for k, v in SHAPED.items()}, **{n: recorded(n) for n in RECORDED}}


def test_the_recorded_anthropic_streams_are_there() -> None:
    assert len(RECORDED) == 8


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_stream_decodes_the_same_one_byte_at_a_time(name: str) -> None:
    raw = BODIES[name]
    assert outcome([raw[i : i + 1] for i in range(len(raw))]) == outcome([raw])


@pytest.mark.parametrize("name", sorted(f"shaped:{k}" for k in SHAPED))
def test_a_shaped_stream_decodes_the_same_cut_in_two_at_every_byte(name: str) -> None:
    raw = BODIES[name]
    expected = outcome([raw])
    for point in range(1, len(raw)):
        assert outcome([raw[:point], raw[point:]]) == expected, point


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_stream_decodes_the_same_cut_in_two_at_every_byte(name: str) -> None:
    raw = BODIES[name]
    expected = outcome([raw])
    for point in range(1, len(raw)):
        assert outcome([raw[:point], raw[point:]]) == expected, point


@settings(max_examples=80)
@given(st.sampled_from(sorted(BODIES)), st.data())
def test_any_split_of_the_bytes_gives_the_same_updates(name: str, data: st.DataObject) -> None:
    raw = BODIES[name]
    points = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=40))
    assert outcome(cuts(raw, points)) == outcome([raw])


def as_sent(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocks as the API reads them: text blocks next to each other as one, a call without its
    input (arguments that are not an object go as ``{}``)."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "text" and out and out[-1]["type"] == "text":
            out[-1] = {"type": "text", "text": out[-1]["text"] + block["text"]}
        else:
            out.append({k: v for k, v in block.items() if k != "input"})
    return out


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("text"), st.lists(st.text(min_size=1, max_size=8), max_size=4)),
            st.tuples(st.just("tool"), st.lists(st.text(max_size=6), max_size=4)),
            st.tuples(st.just("thinking"), st.lists(st.text(min_size=1, max_size=8), max_size=4)),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from(sorted(STOP_REASONS)),
    st.data(),
)
def test_any_generated_stream_under_any_split(
    blocks: list[tuple[str, list[str]]], stop_reason: str, data: st.DataObject
) -> None:
    """Any sequence of text, tool and thinking blocks: the updates are the same for any split,
    each block's pieces come through whole, and calls come in block order."""
    raw = message_start()
    texts, calls, thoughts = [], [], []
    for index, (kind, pieces) in enumerate(blocks):
        if kind == "text":
            raw += text_block(index, *pieces)
            texts += pieces
        elif kind == "tool":
            raw += tool_block(index, f"toolu_{index}", f"tool_{index}", *pieces)
            calls.append(ToolCall(f"toolu_{index}", f"tool_{index}", "".join(pieces) or "{}"))
        else:
            raw += thinking_block(index, *pieces, signature=f"sig{index}")
            thoughts += pieces
    raw += message_end(stop_reason)
    points = data.draw(st.lists(st.integers(1, len(raw) - 1), max_size=30))
    updates = decode(cuts(raw, points))
    decoder = AnthropicDecoder()
    assert updates == decode([raw], decoder)
    message = message_of(updates) or ChatMessage.assistant("")  # None: the response was empty
    assert message.text == "".join(texts)
    assert list(message.tool_calls or ()) == calls
    assert message.reasoning == ("".join(thoughts) or None)
    # It goes back as the API returned it, block for block (the API refuses the latest
    # assistant message's blocks moved, with thinking on), text after a call too.
    _, wire = wire_conversation([ChatMessage.user("?"), message])
    assert as_sent(wire[1]["content"] if wire[1:] else []) == as_sent(decoder.blocks)
    if stop_reason == "refusal":
        assert updates[-1].finish_reason is FinishReason.CONTENT_FILTER
    elif calls:
        assert updates[-1].finish_reason is FinishReason.TOOL_CALLS


# -- the recorded streams ---------------------------------------------------------------------


def test_recorded_text_with_a_ping() -> None:
    updates = decode([recorded("anthropic/text-end_turn.sse")])
    assert "".join(u.text for u in updates if isinstance(u, TextDelta)) == (
        'Olá!\n\n(This is the most common way to say "hi" in Portuguese. You could also say '
        '"Oi!" for a more casual greeting.)'
    )
    assert updates[-1] == Finish(FinishReason.STOP, Usage(16, 38))


def test_recorded_parallel_tool_use_after_text() -> None:
    updates = decode([recorded("anthropic/parallel-tool_use-after-text.sse")])
    message = message_of(updates)
    assert message is not None
    assert message.text == "I'll add and multiply the numbers 2 and 3 for you."
    assert message.tool_calls == (
        ToolCall("toolu_01GrN36ErVgy85ECZ6pbzBL4", "add", '{"a": 2, "b": 3}'),
        ToolCall("toolu_0113xQa4VtccyoXcHaukkzom", "multiply", '{"a": 2, "b": 3}'),
    )
    assert updates[-1] == Finish(FinishReason.TOOL_CALLS, Usage(502, 137))


def test_recorded_thinking_then_tool_use_keeps_the_block_the_second_round_sent_back() -> None:
    name = "anthropic/thinking-then-tool_use"
    message = message_of(decode([recorded(f"{name}.sse")]))
    assert message is not None
    accepted = recorded_json(f"{name}.turn2.request.json")
    sent = accepted["messages"][1]
    assert sent["role"] == "assistant"
    assert message.provider_data[THINKING_BLOCKS] == [sent["content"][0]]
    assert message.reasoning == sent["content"][0]["thinking"]
    [call] = message.tool_calls or ()
    assert (call.id, call.name, json.loads(call.arguments)) == (
        sent["content"][1]["id"],
        sent["content"][1]["name"],
        sent["content"][1]["input"],
    )


def test_recorded_redacted_thinking_with_pings() -> None:
    updates = decode([recorded("anthropic/redacted_thinking-then-text.sse")])
    message = message_of(updates)
    assert message is not None
    blocks = message.provider_data[THINKING_BLOCKS]
    assert [b["type"] for b in blocks] == ["redacted_thinking", "redacted_thinking"]
    assert blocks[1]["data"].startswith("EtgBCkYIBxgCKkDQfGkwzflEJP5asG3o")
    assert message.reasoning is None
    assert message.text.startswith("I notice that you've sent what appears to be")
    assert updates[-1] == Finish(FinishReason.STOP, Usage(92, 189))


def test_recorded_compaction_with_cache_reads() -> None:
    decoder = AnthropicDecoder()
    updates = decode([recorded("anthropic/compaction-cache_read-then-text.sse")], decoder)
    assert [u for u in updates if isinstance(u, TextDelta)] == [
        TextDelta("Hello!"),
        TextDelta(" "),
        TextDelta("👋"),
    ]
    assert updates[-1] == Finish(
        FinishReason.STOP, Usage(100 + 55096 + 181, 83 + 8, cache_read_input_tokens=55096)
    )
    compaction, text = decoder.blocks
    assert compaction["type"] == "compaction"
    assert compaction["content"].startswith("The user provided a very long context")
    assert compaction["content"].endswith("Next step: Say hello to the user.")
    assert text == {"type": "text", "text": "Hello! 👋"}


def test_recorded_max_tokens_inside_a_tool_call() -> None:
    updates = decode([recorded("anthropic/max_tokens-inside-tool_use.sse")])
    assert updates[-1] == Finish(FinishReason.TOOL_CALLS, Usage(450, 124))
    message = message_of(updates)
    assert message is not None
    [call] = message.tool_calls or ()
    assert call.name == "make_file"
    assert call.arguments.endswith('\n"Filing taxes')  # cut short: the loop answers it as an error


def test_recorded_second_rounds() -> None:
    for name in ("parallel-tool_use-after-text", "thinking-then-tool_use"):
        updates = decode([recorded(f"anthropic/{name}.turn2.sse")])
        assert isinstance(updates[-1], Finish)
        assert updates[-1].finish_reason is FinishReason.STOP
        assert not any(isinstance(u, ToolCallStart) for u in updates)


# -- a response cut short keeps no thinking block the API would refuse -------------------------


def _so_far(raw: bytes) -> ChatMessage | None:
    """The assistant message the loop keeps of a response whose reading stopped after ``raw``
    (a cancelled run): what the updates so far accumulate to, the completed calls only."""
    parser, decoder, accumulator = SSEParser(), AnthropicDecoder(), ToolCallAccumulator()
    for one in parser.feed(raw):
        for update in decoder.event(one):
            accumulator.add(update)
    return accumulator.message(accumulator.completed())


def _unsigned(message: ChatMessage | None) -> list[Any]:
    blocks = message.provider_data.get(THINKING_BLOCKS, []) if message is not None else []
    return [b for b in blocks if b["type"] == "thinking" and not b.get("signature")]


@pytest.mark.parametrize(
    "name", ["anthropic/thinking-then-tool_use.sse", "anthropic/redacted_thinking-then-text.sse"]
)
def test_a_response_cut_anywhere_keeps_only_whole_signed_thinking_blocks(name: str) -> None:
    # The API checks the signature of every thinking block of the conversation, earlier turns
    # included: one with a missing or partial signature makes every later request a 400.
    raw = recorded(name)
    for cut in range(len(raw) + 1):
        message = _so_far(raw[:cut])
        assert _unsigned(message) == [], cut
        _, wire = wire_conversation(
            [ChatMessage.user("hi"), *([message] if message else []), ChatMessage.user("go on")]
        )
        sent = [b for m in wire for b in m["content"] if b["type"] == "thinking"]
        assert all(b["signature"] for b in sent), cut


def test_a_thinking_block_the_stream_never_finished_is_reasoning_only() -> None:
    # max_tokens inside the thinking: no signature_delta and no content_block_stop came.
    block = {"type": "thinking", "thinking": "", "signature": ""}
    raw = (
        message_start()
        + event("content_block_start", index=0, content_block=block)
        + event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Hm"})
        + message_end("max_tokens")
    )
    updates = decode([raw])
    assert updates[-1] == Finish(FinishReason.LENGTH, Usage(25, 40))
    message = message_of(updates)
    assert message is not None
    assert message.reasoning == "Hm"
    assert THINKING_BLOCKS not in message.provider_data


THINKING_START = {"type": "thinking", "thinking": "", "signature": ""}


def test_working_while_a_thinking_or_tool_block_is_open_or_a_server_tool_runs() -> None:
    # What the read timeout counts pings as progress in: the work the stream does not show.
    parser, decoder = SSEParser(), AnthropicDecoder()
    seen: list[bool] = []
    for piece in (
        message_start(),
        event("content_block_start", index=0, content_block=THINKING_START),
        event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "S"}),
        event("content_block_stop", index=0),
        event("content_block_start", index=1, content_block=SEARCH),
        event("content_block_stop", index=1),
        event("content_block_start", index=2, content_block=RESULTS),
        event("content_block_stop", index=2),
        redacted_block(3),
        tool_block(4, "toolu_1", "f", "{}"),
        message_end(),
    ):
        for one in parser.feed(piece):
            decoder.event(one)
        seen.append(decoder.working)
    assert seen == [False, True, True, False, True, True, False, False, False, False, False]
    parser, decoder = SSEParser(), AnthropicDecoder()
    seen = []
    for piece in (message_start(), tool_block(0, "toolu_1", "f", stop=False), message_end()):
        for one in parser.feed(piece):
            decoder.event(one)
        seen.append(decoder.working)
    assert seen == [False, True, False]


def test_a_continued_responses_thinking_is_placed_after_what_the_paused_one_kept() -> None:
    paused = AnthropicDecoder()
    raw = message_start() + thinking_block(0, "a", signature="S0") + text_block(1, "Searching.")
    first = decode([raw + message_end("pause_turn")], paused)
    more = AnthropicDecoder(key_prefix="1.", after=paused)
    rest = decode([message_start() + thinking_block(0, "b", signature="S1") + message_end()], more)
    message = message_of([*first, *rest])
    assert message is not None
    assert message.provider_data["thinking_places"] == [
        {"block": 1, "after_calls": 0, "after_text": True, "text_at": 10}
    ]
    _, wire = wire_conversation([ChatMessage.user("?"), message])
    assert [b["type"] for b in wire[1]["content"]] == ["thinking", "text", "thinking"]


def test_a_call_that_text_came_after_keeps_its_place_in_the_text() -> None:
    # The message keeps the turn's text as one string: a call that text came after says how
    # much of it came before the call; the last call, after all of it, needs no place.
    message = message_of(decode([TEXT_BETWEEN_CALLS]))
    assert message is not None
    assert message.text == "Checking. And the time."
    assert message.provider_data["tool_places"] == [{"id": "toolu_a", "text_at": 9}]
    only_before = message_of(decode([PARALLEL]))
    assert only_before is not None
    assert "tool_places" not in only_before.provider_data
