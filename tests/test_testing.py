"""trio_invoke.testing: the helpers users' test suites get."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import trio_invoke.testing
from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    ToolCall,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from trio_invoke.testing import assert_transcript_valid, tool_call_updates, tool_calls_response

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


@pytest.mark.parametrize("length", range(13))
@pytest.mark.parametrize("pieces", [1, 2, 3, 4, 6, 7, 12])
def test_tool_call_updates_gives_the_pieces_asked_for(length: int, pieces: int) -> None:
    # Fewer only when the arguments have fewer characters; sizes differ by one at most.
    arguments = "0123456789ab"[:length]
    cut = [u.args_delta for u in tool_call_updates("c", "f", arguments, pieces=pieces)[1:-1]]
    assert "".join(cut) == arguments
    assert len(cut) == min(pieces, length)
    assert len(set(map(len, cut))) <= 2
    assert not cut or max(map(len, cut)) - min(map(len, cut)) <= 1


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


def test_tool_calls_response() -> None:
    a, b = ToolCall("a", "f", '{"x": 1}'), ToolCall("b", "g", "")
    assert tool_calls_response(a, b, usage=Usage(3, 4)) == [
        *tool_call_updates("a", "f", '{"x": 1}'),
        *tool_call_updates("b", "g", ""),
        Finish(FinishReason.TOOL_CALLS, Usage(3, 4)),
    ]
    assert tool_calls_response() == [Finish(FinishReason.TOOL_CALLS)]


C = ToolCall("c", "h", "{}")
PAUSED = [ChatMessage.user("u"), ChatMessage.assistant("", [A, B, C])]


@pytest.mark.parametrize("answered", [[], [A], [B], [A, C], [A, B, C]])
def test_a_transcript_paused_for_approval(answered: list[ToolCall]) -> None:
    paused = [*PAUSED, *(ChatMessage.tool_result(call, "ok") for call in answered)]
    assert_transcript_valid(paused, allow_pending_approval=True)
    if len(answered) < 3:
        with pytest.raises(AssertionError, match=r"has no tool message|call order expects"):
            assert_transcript_valid(paused)


@pytest.mark.parametrize(
    ("answered", "match"),
    [
        ([B, A], r"message 3 answers 'a', but the calls of message 1 still open .* \['c'\]"),
        ([A, A], r"message 3 answers 'a', but .* are \['b', 'c'\]"),
        ([ToolCall("z", "f", "")], r"message 2 answers 'z'"),
    ],
)
def test_a_paused_batch_still_answers_in_call_order(answered: list[ToolCall], match: str) -> None:
    paused = [*PAUSED, *(ChatMessage.tool_result(call, "ok") for call in answered)]
    with pytest.raises(AssertionError, match=match):
        assert_transcript_valid(paused, allow_pending_approval=True)


def test_only_the_last_batch_may_be_pending() -> None:
    earlier = [ChatMessage.assistant("", [A, B]), ChatMessage.tool_result(A, "1")]
    with pytest.raises(AssertionError, match="'b' \\(g\\) of message 0 has no tool message"):
        assert_transcript_valid([*earlier, *PAUSED], allow_pending_approval=True)
    with pytest.raises(AssertionError, match="'a' \\(f\\) of message 1"):
        assert_transcript_valid([*PAUSED, ChatMessage.user("?")], allow_pending_approval=True)


def test_strategies_are_imported_on_first_use() -> None:
    public = set(trio_invoke.testing.__all__)
    assert list(trio_invoke.testing.__all__) == sorted(public)
    assert public <= set(dir(trio_invoke.testing))
    for name in public:
        obj = getattr(trio_invoke.testing, name)
        if callable(obj) and name[0].islower():
            assert obj.__module__ == "trio_invoke.testing", name
    assert not hasattr(trio_invoke, "FunctionChatClient")  # a test double: testing only
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        trio_invoke.testing.nope  # noqa: B018


def test_a_strategy_without_hypothesis_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # import hypothesis -> ImportError
    monkeypatch.delitem(sys.modules, "trio_invoke.testing._strategies", raising=False)
    monkeypatch.delattr(trio_invoke.testing, "tool_arguments", raising=False)
    with pytest.raises(
        ImportError,
        match=r'tool_arguments needs .* "trio_invoke\[testing\]" '
        r'\(from a checkout: pip install "\.\[testing\]"\)$',
    ):
        from trio_invoke.testing import tool_arguments  # noqa: F401


WITHOUT_HYPOTHESIS = """
    import importlib.abc, sys

    class NoHypothesis(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "hypothesis":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, NoHypothesis())

    import trio
    from trio_invoke.testing import FunctionChatClient, assert_transcript_valid, run_to_completion

    result = trio.run(run_to_completion, FunctionChatClient(lambda m, o: "hi"), [])
    assert_transcript_valid(result.messages)
    try:
        from trio_invoke.testing import json_values
    except ImportError as exc:
        print(exc)
    assert "hypothesis" not in sys.modules
"""


def test_the_kit_works_without_hypothesis_and_strategies_name_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WITHOUT_HYPOTHESIS)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "trio_invoke.testing.json_values needs Hypothesis, which is not installed: "
        'pip install "trio_invoke[testing]" (from a checkout: pip install ".[testing]")\n'
    )
