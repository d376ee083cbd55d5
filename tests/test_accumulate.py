"""ToolCallAccumulator: folding streamed updates into text and calls (sans-IO)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    AccumulatedToolCall,
    ChatMessage,
    MessageRole,
    ProviderDataDelta,
    ReasoningDelta,
    StreamProtocolError,
    TextDelta,
    ToolCall,
    ToolCallAccumulator,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from trio_invoke.testing import json_values, tool_call_streams

ids = st.text(min_size=1, max_size=6)
calls = st.lists(
    st.builds(
        ToolCall,
        id=ids,
        name=st.sampled_from(["search", "add", "read_file"]),
        arguments=json_values().map(json.dumps),
    ),
    max_size=5,
    unique_by=lambda c: c.id,
)


@given(calls.flatmap(lambda cs: st.tuples(st.just(cs), tool_call_streams(cs))))
def test_any_split_and_interleaving_accumulates_to_the_original_calls(
    case: tuple[list[ToolCall], list[Any]],
) -> None:
    originals, stream = case
    accumulator = ToolCallAccumulator()
    for update in stream:
        accumulator.add(update)
    accumulated = accumulator.finish()
    start_order = [u.id for u in stream if isinstance(u, ToolCallStart)]
    assert [c.id for c in accumulated] == start_order  # call order: order of the starts
    by_id = {c.id: c for c in originals}
    for call in accumulated:
        original = by_id[call.id]
        assert call == (original if original.arguments else ToolCall(call.id, call.name, "{}"))
        assert json.loads(call.arguments) == json.loads(original.arguments or "{}")


def test_the_seed_example() -> None:
    accumulator = ToolCallAccumulator()
    for update in [
        ToolCallStart("call_1", "read_file"),
        ToolCallArgs("call_1", '{"path": "'),
        ToolCallArgs("call_1", '/etc/hosts"}'),
    ]:
        assert accumulator.add(update) is None
    finished = accumulator.add(ToolCallEnd("call_1"))
    assert finished == ToolCall("call_1", "read_file", '{"path": "/etc/hosts"}')
    assert accumulator.finish() == [finished]


def test_text_is_collected_and_empty_arguments_mean_an_empty_object() -> None:
    accumulator = ToolCallAccumulator()
    for update in [TextDelta("a"), ToolCallStart("c", "now"), TextDelta("b"), ToolCallEnd("c")]:
        accumulator.add(update)
    assert accumulator.text == "ab"
    assert accumulator.finish() == [ToolCall("c", "now", "{}")]
    assert AccumulatedToolCall("c", "now").to_tool_call().arguments == "{}"


def test_completed_leaves_out_open_calls() -> None:
    accumulator = ToolCallAccumulator()
    for update in [ToolCallStart("a", "x"), ToolCallStart("b", "y"), ToolCallEnd("b")]:
        accumulator.add(update)
    assert [c.id for c in accumulator.completed()] == ["b"]
    assert accumulator.open_ids == ("a",)
    with pytest.raises(StreamProtocolError, match="'a' still open"):
        accumulator.finish()


@pytest.mark.parametrize(
    ("updates", "match"),
    [
        ([ToolCallArgs("x", "{")], "ToolCallArgs for tool call id 'x', which never started"),
        ([ToolCallEnd("x")], "ToolCallEnd for tool call id 'x', which never started"),
        ([ToolCallStart("x", "f"), ToolCallStart("x", "f")], "'x', which is still open"),
        (
            [ToolCallStart("x", "f"), ToolCallEnd("x"), ToolCallStart("x", "f")],
            "'x', which is already ended",
        ),
        ([ToolCallStart("x", "f"), ToolCallEnd("x"), ToolCallEnd("x")], "after its ToolCallEnd"),
    ],
)
def test_contradictions_are_protocol_errors_never_merges(updates: list[Any], match: str) -> None:
    accumulator = ToolCallAccumulator()
    with pytest.raises(StreamProtocolError, match=match):
        for update in updates:
            accumulator.add(update)


def test_accumulator_is_sans_io() -> None:
    import ast
    from pathlib import Path

    import trio_invoke._accumulate as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "trio" not in imported


# -- reasoning and provider-opaque data: the round's assistant message ------------------------


def test_the_assistant_message_keeps_reasoning_text_and_calls() -> None:
    accumulator = ToolCallAccumulator()
    assert accumulator.message() is None  # nothing received: no message
    for update in [
        ReasoningDelta("Two calls", field="reasoning"),
        ReasoningDelta(" are needed."),
        TextDelta("On it."),
        ToolCallStart("c1", "add"),
        ReasoningDelta(" Then a third."),  # between calls, as interleaved thinking does
        ToolCallArgs("c1", "{}"),
        ToolCallEnd("c1"),
    ]:
        accumulator.add(update)
    assert accumulator.reasoning == "Two calls are needed. Then a third."
    message = accumulator.message()
    assert message == ChatMessage(
        MessageRole.ASSISTANT,
        "On it.",
        (ToolCall("c1", "add", "{}"),),
        reasoning="Two calls are needed. Then a third.",
        reasoning_field="reasoning",  # the field of the first piece that named one
    )


def test_reasoning_alone_is_a_message() -> None:
    accumulator = ToolCallAccumulator()
    accumulator.add(ReasoningDelta("thinking..."))
    assert accumulator.message() == ChatMessage.assistant("", reasoning="thinking...")


def test_provider_data_merges_per_field_and_key_in_first_seen_order() -> None:
    accumulator = ToolCallAccumulator()
    pieces = [
        ProviderDataDelta(
            "reasoning_details",
            "text#0",
            update={"type": "reasoning.text", "index": 0, "signature": ""},
            extend={"text": ""},
        ),
        ProviderDataDelta(
            "reasoning_details", "text#0", update={"index": 0}, extend={"text": "Let"}
        ),
        ProviderDataDelta(
            "reasoning_details",
            "enc#0",
            update={"type": "reasoning.encrypted"},
            extend={"data": "eyJ"},
        ),
        ProviderDataDelta("reasoning_details", "text#0", extend={"text": " me see"}),
        ProviderDataDelta("reasoning_details", "text#0", update={"signature": "Eq0E", "id": None}),
        ProviderDataDelta("reasoning_details", "text#0", update={"signature": ""}),  # kept
        ProviderDataDelta(
            "thinking_blocks", "0", update={"type": "redacted_thinking", "data": "opaque"}
        ),
    ]
    for piece in pieces:
        accumulator.add(piece)
    message = accumulator.message()
    assert message is not None
    assert message.provider_data == {
        "reasoning_details": [
            {
                "type": "reasoning.text",
                "index": 0,
                "signature": "Eq0E",
                "text": "Let me see",
                "id": None,
            },
            {"type": "reasoning.encrypted", "data": "eyJ"},
        ],
        "thinking_blocks": [{"type": "redacted_thinking", "data": "opaque"}],
    }
    assert ChatMessage.from_dict(message.to_dict()).provider_data == {
        # a null inside an item is kept: only top-level nulls read as absent
        **message.provider_data
    }


def test_a_calls_provider_data_is_its_starts_with_its_ends_set_over_it() -> None:
    # A provider that sends some of a call's keys on a later piece (Gemini's thought signature)
    # has them on the call's ToolCallEnd, the start having gone out already.
    accumulator = ToolCallAccumulator()
    accumulator.add(
        ToolCallStart("c1", "f", provider_data={"extra_content": {"a": 1}, "function": {"x": 1}})
    )
    accumulator.add(ToolCallArgs("c1", "{}"))
    late = {"extra_content": {"google": {"thought_signature": "s"}}, "function": {"x": 2}}
    done = accumulator.add(ToolCallEnd("c1", provider_data=late))
    assert done == ToolCall(
        "c1",
        "f",
        "{}",
        provider_data={
            "extra_content": {"a": 1, "google": {"thought_signature": "s"}},
            "function": {"x": 2},
        },
    )
    accumulator.add(ToolCallStart("c2", "g"))
    done = accumulator.add(ToolCallEnd("c2", provider_data={"k": [1]}))
    assert done == ToolCall("c2", "g", "{}", provider_data={"k": [1]})
    assert repr(ToolCallEnd("c2", provider_data={"k": [1]})) == (
        "ToolCallEnd(id='c2', provider_data={'k': [1]})"
    )
    assert repr(ToolCallEnd("c2")) == "ToolCallEnd(id='c2')"
    with pytest.raises(ValueError, match=r"ToolCallEnd.provider_data may not set 'id'"):
        ToolCallEnd("c3", provider_data={"id": "other"})


def test_provider_data_under_a_modelled_name_is_refused() -> None:
    accumulator = ToolCallAccumulator()
    accumulator.add(ProviderDataDelta("content", "0", update={"x": 1}))
    with pytest.raises(ValueError, match="may not set 'content'"):
        accumulator.message()


def test_delta_values_must_be_json() -> None:
    with pytest.raises(ValueError, match="JSON values only"):
        ProviderDataDelta("f", "k", update={"when": object()})
    with pytest.raises(ValueError, match="must be a str"):
        ProviderDataDelta("f", "k", extend={"text": 3})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="ReasoningDelta field"):
        ReasoningDelta("x", field="thinking")


@pytest.mark.parametrize(
    ("update", "match"),
    [
        (TextDelta(None), r"TextDelta\.text must be a str, got None"),  # type: ignore[arg-type]
        (ReasoningDelta(b"x"), r"ReasoningDelta\.text must be a str, got b'x'"),  # type: ignore[arg-type]
        (ToolCallStart(None, "f"), r"ToolCallStart\.id must be a str, got None"),  # type: ignore[arg-type]
        (ToolCallStart(["a"], "f"), r"ToolCallStart\.id must be a str, got \['a'\]"),  # type: ignore[arg-type]
        (ToolCallStart("a", 3), r"ToolCallStart\.name must be a str, got 3"),  # type: ignore[arg-type]
        (ToolCallArgs("a", None), r"ToolCallArgs\.args_delta must be a str, got None"),  # type: ignore[arg-type]
        (ToolCallArgs("a", b"{}"), r"ToolCallArgs\.args_delta must be a str, got b'{}'"),  # type: ignore[arg-type]
        (ToolCallArgs(1, "{}"), r"ToolCallArgs\.id must be a str, got 1"),  # type: ignore[arg-type]
        (ToolCallEnd(None), r"ToolCallEnd\.id must be a str, got None"),  # type: ignore[arg-type]
        (ToolCallArgs(["a"], "{}"), r"ToolCallArgs\.id must be a str, got \['a'\]"),  # type: ignore[arg-type]
        (ToolCallEnd({"a": 1}), r"ToolCallEnd\.id must be a str, got \{'a': 1\}"),  # type: ignore[arg-type]
    ],
)
def test_an_update_holding_the_wrong_type_is_a_protocol_error(update: Any, match: str) -> None:
    accumulator = ToolCallAccumulator()
    accumulator.add(TextDelta("kept "))
    accumulator.add(ToolCallStart("a", "f"))
    accumulator.add(ToolCallArgs("a", "{}"))
    with pytest.raises(StreamProtocolError, match=match):
        accumulator.add(update)
    # What came before is intact: the open call ends, and the text is what was valid.
    assert accumulator.add(ToolCallEnd("a")) == ToolCall("a", "f", "{}")
    assert accumulator.finish() == [ToolCall("a", "f", "{}")]
    assert accumulator.text == "kept "
