"""ToolCallAccumulator: folding streamed updates into text and calls (sans-IO)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    AccumulatedToolCall,
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
