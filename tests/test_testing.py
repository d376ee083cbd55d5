"""trio_invoke.testing: the helpers users' test suites get."""

from __future__ import annotations

import pytest

from trio_invoke import ChatMessage, ToolCall, ToolCallArgs, ToolCallEnd, ToolCallStart
from trio_invoke.testing import assert_transcript_valid, tool_call_updates

A = ToolCall("a", "f", "{}")
B = ToolCall("b", "g", "{}")


def test_tool_call_updates_in_pieces() -> None:
    assert tool_call_updates("c", "f", '{"x": 1}', pieces=3) == [
        ToolCallStart("c", "f"),
        ToolCallArgs("c", '{"x'),
        ToolCallArgs("c", '": '),
        ToolCallArgs("c", "1}"),
        ToolCallEnd("c"),
    ]
    assert tool_call_updates("c", "f", "") == [ToolCallStart("c", "f"), ToolCallEnd("c")]


def test_valid_transcripts_pass() -> None:
    assert_transcript_valid(
        [
            ChatMessage.user("u"),
            ChatMessage.assistant("", [A, B]),
            ChatMessage.tool_result(A, "1"),
            ChatMessage.tool_result(B, "2"),
            ChatMessage.assistant("done"),
        ]
    )


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([ChatMessage.assistant("", [A, B]), ChatMessage.tool_result(A, "1")], "'b' \\(g\\)"),
        ([ChatMessage.assistant("", [A]), ChatMessage.user("?")], "'a' \\(f\\) of message 0"),
        (
            [
                ChatMessage.assistant("", [A, B]),
                *(ChatMessage.tool_result(c, "") for c in [B, A]),
            ],
            "message 1 answers 'b', but call order expects 'a'",
        ),
        ([ChatMessage.user("u"), ChatMessage.tool_result(A, "1")], "message 1 is a tool message"),
        ([ChatMessage.assistant("", [A, A])], "repeats a tool call id"),
    ],
)
def test_broken_transcripts_are_named(messages: list[ChatMessage], match: str) -> None:
    with pytest.raises(AssertionError, match=match):
        assert_transcript_valid(messages)
