"""trio_invoke.testing: the helpers users' test suites get."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from typing import Any, Literal

import pytest
import trio
from hypothesis import assume, given
from hypothesis import strategies as st

import trio_invoke.testing
from trio_invoke import (
    ChatMessage,
    ConversationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from trio_invoke.testing import (
    FunctionChatClient,
    assert_transcript_valid,
    run_to_completion,
    tool_call_updates,
    tool_calls_response,
)

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


@pytest.mark.parametrize("pieces", [0, -1])
def test_tool_call_updates_in_no_pieces_is_an_error(pieces: int) -> None:
    # Not one piece in silence: ``pieces`` is how many ToolCallArgs there are.
    with pytest.raises(ValueError, match=f"pieces >= 1, got {pieces}"):
        tool_call_updates("c", "f", '{"x": 1}', pieces=pieces)


@pytest.mark.parametrize(
    ("pieces", "says"),
    [(2.5, "got a float (2.5)"), ("2", "got a str ('2')"), (True, "got a bool (True)")],
)
def test_tool_call_updates_take_an_int_of_pieces(pieces: object, says: str) -> None:
    # 2.5 was a bare "'float' object cannot be interpreted as an integer"; True one piece.
    with pytest.raises(TypeError, match=re.escape(f"takes an int for pieces, {says}")):
        tool_call_updates("c", "f", '{"x": 1}', pieces=pieces)  # type: ignore[arg-type]


@pytest.mark.parametrize("arguments", [None, {"x": 1}])
def test_tool_call_updates_take_arguments_as_json_text(arguments: object) -> None:
    with pytest.raises(TypeError, match=r"arguments as JSON text \(a str; json.dumps them\)"):
        tool_call_updates("c", "f", arguments)  # type: ignore[arg-type]


def test_tool_calls_response_takes_tool_calls_and_says_to_unpack_a_list() -> None:
    with pytest.raises(TypeError, match=r"call 0 is a list .*tool_calls_response\(\*calls\)"):
        tool_calls_response([A, B])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"call 1 is a tuple \(\('b', 'g', '\{\}'\)\)$"):
        tool_calls_response(A, ("b", "g", "{}"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "says"),
    [
        (None, "takes a sequence of ChatMessages, not None"),
        ("hello", "takes a sequence of ChatMessages, not a str"),
        (
            [ChatMessage.user("hi"), {"role": "assistant", "content": "x"}],
            "message 1 is a dict ({'role': 'assistant', 'content': 'x'}) "
            "(ChatMessage.from_dict reads a dict)",
        ),
    ],
)
def test_assert_transcript_valid_names_what_is_no_message(messages: object, says: str) -> None:
    # A dict (the OpenAI format) was an AttributeError on .role; None a len() error.
    with pytest.raises(TypeError, match=re.escape(says)):
        assert_transcript_valid(messages)  # type: ignore[arg-type]


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


def test_tool_calls_response_keeps_a_calls_provider_data() -> None:
    # A scripted Gemini call with its thought signature: the loop's transcript must carry it.
    signed = ToolCall("a", "f", "{}", provider_data={"extra_content": {"google": {"s": "x"}}})
    start = tool_calls_response(signed)[0]
    assert start == ToolCallStart("a", "f", provider_data=signed.provider_data)


C = ToolCall("c", "h", "{}")
PAUSED = [ChatMessage.user("u"), ChatMessage.assistant("", [A, B, C])]


@pytest.mark.parametrize("answered", [[], [A], [A, B], [A, B, C]])
def test_a_transcript_paused_for_approval(answered: list[ToolCall]) -> None:
    paused = [*PAUSED, *(ChatMessage.tool_result(call, "ok") for call in answered)]
    assert_transcript_valid(paused, allow_pending_approval=True)
    if len(answered) < 3:
        with pytest.raises(AssertionError, match=r"has no tool message|call order expects"):
            assert_transcript_valid(paused)


@pytest.mark.parametrize(
    ("answered", "match"),
    [
        ([B, A], r"message 2 answers 'b', but call order expects 'a' \(of message 1\) first"),
        ([A, A], r"message 3 answers 'a', but .* are \['b', 'c'\]"),
        ([ToolCall("z", "f", "")], r"message 2 answers 'z'"),
        # The loop appends the pending calls' answers on resume: after these, out of order.
        ([B], r"message 2 answers 'b', but call order expects 'a' \(of message 1\) first"),
        ([A, C], r"message 3 answers 'c', but call order expects 'b' \(of message 1\) first"),
        ([C], r"message 2 answers 'c', but call order expects 'a'"),
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


@pytest.mark.parametrize(
    ("client", "says"),
    [
        (None, r"not None$"),
        (ScriptedChatClient, r"not a type \(.*: pass an instance, ScriptedChatClient\(\.\.\.\)$"),
        (
            FunctionChatClient(lambda m, o: "hi").run,
            ": pass the client itself, not its run method$",
        ),
        ("model", r"not a str \('model'\)$"),
    ],
    ids=["none", "class", "run-method", "str"],
)
async def test_run_to_completion_names_what_is_no_client(client: Any, says: str) -> None:
    with pytest.raises(TypeError, match="^run_to_completion takes a chat client .*" + says):
        await run_to_completion(client, [ChatMessage.user("hi")])


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
    # not delattr: reading the attribute first would import the strategies, without Hypothesis
    monkeypatch.delitem(vars(trio_invoke.testing), "tool_arguments", raising=False)
    with pytest.raises(
        ImportError,
        match=r'tool_arguments needs .* "trio-invoke\[testing\] @ git\+https://\S+" '
        r'\(from a checkout: pip install "\.\[testing\]"\)$',
    ):
        from trio_invoke.testing import tool_arguments  # noqa: F401


NO_HYPOTHESIS = """
    import importlib.abc, sys

    class NoHypothesis(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "hypothesis":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, NoHypothesis())
"""
"""An interpreter's first lines that make Hypothesis impossible to import."""

WITHOUT_HYPOTHESIS = (
    NO_HYPOTHESIS
    + """
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
)


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
        'pip install "trio-invoke[testing] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[testing]")\n'
    )


STAR_WITHOUT_HYPOTHESIS = (
    NO_HYPOTHESIS
    + """
    namespace = {}
    exec("from trio_invoke.testing import *", namespace)
    print(sorted(name for name in namespace if name != "__builtins__"))
"""
)


def test_star_import_works_without_hypothesis_and_leaves_the_strategies_out() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(STAR_WITHOUT_HYPOTHESIS)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    strategies = {"json_values", "schemas_with_arguments", "scripted_rounds"}
    strategies |= {"tool_arguments", "tool_call_streams"}
    kit = sorted(set(trio_invoke.testing.__all__) - strategies)
    assert done.stdout == f"{kit}\n"


def test_star_import_with_hypothesis_has_the_strategies() -> None:
    namespace: dict[str, object] = {}
    exec("from trio_invoke.testing import *", namespace)
    assert set(trio_invoke.testing.__all__) <= set(namespace)
    assert "tool_call_streams" in namespace


# -- assert_transcript_valid against every transcript of a kind, valid or broken ---------------


@st.composite
def transcripts(draw: st.DrawFn, *, paused: bool = False) -> list[ChatMessage]:
    """A valid conversation: batches of calls (ids unique throughout), each answered in call
    order, with user and assistant messages between; ``paused``: the last batch answers only
    its first calls."""
    messages = [ChatMessage.user("u")]
    batches = draw(st.integers(1 if paused else 0, 3))
    made = 0
    for batch in range(batches):
        calls = [ToolCall(f"c{made + i}", "f", "{}") for i in range(draw(st.integers(1, 3)))]
        made += len(calls)
        if draw(st.booleans()):
            messages.append(ChatMessage.user("more"))
        messages.append(ChatMessage.assistant(draw(st.sampled_from(["", "text"])), calls))
        last = paused and batch == batches - 1
        answered = calls[: draw(st.integers(0, len(calls)))] if last else calls
        messages += [ChatMessage.tool_result(call, "r") for call in answered]
        if not last and draw(st.booleans()):
            messages.append(ChatMessage.assistant("answer"))
    return messages


@given(transcripts(), st.booleans())
def test_every_valid_transcript_passes(messages: list[ChatMessage], pending: bool) -> None:
    assert_transcript_valid(messages, allow_pending_approval=pending)


@given(transcripts(paused=True))
def test_every_paused_transcript_passes_when_pending_is_allowed(
    messages: list[ChatMessage],
) -> None:
    assert_transcript_valid(messages, allow_pending_approval=True)


def _tool_indexes(messages: list[ChatMessage]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role is MessageRole.TOOL]


@st.composite
def broken_transcripts(draw: st.DrawFn, *, paused: bool = False) -> list[ChatMessage]:
    """A :func:`transcripts` example broken one way: a tool message missing (not the paused
    batch's last), duplicated, swapped with the next, moved past a later message, answering
    nothing, or left without its assistant message."""
    messages = draw(transcripts(paused=paused))
    kind = draw(st.sampled_from(["missing", "duplicate", "swapped", "moved", "orphan", "lone"]))
    tools = _tool_indexes(messages)
    if kind == "orphan":
        at = draw(st.integers(0, len(messages)))
        messages.insert(at, ChatMessage.tool_result(ToolCall("nobody", "f", ""), "r"))
        return messages
    if kind == "lone":  # delete an assistant message whose calls are answered
        answered = [i for i, m in enumerate(messages) if m.tool_calls and i + 1 in tools]
        assume(answered)
        del messages[draw(st.sampled_from(answered))]
        return messages
    assume(tools)
    at = draw(st.sampled_from(tools))
    if kind == "missing":
        # In a paused batch, a missing last answer is a pending call: drop one before another.
        assume(not paused or at + 1 in tools)
        del messages[at]
    elif kind == "duplicate":
        messages.insert(at + 1, messages[at])
    elif kind == "swapped":
        assume(at + 1 in tools)
        messages[at], messages[at + 1] = messages[at + 1], messages[at]
    else:
        to = draw(st.integers(at + 1, len(messages)))
        assume(any(m.role is not MessageRole.TOOL for m in messages[at + 1 : to]))
        messages.insert(to - 1, messages.pop(at))
    return messages


@given(broken_transcripts())
def test_every_broken_transcript_fails(messages: list[ChatMessage]) -> None:
    with pytest.raises(AssertionError):
        assert_transcript_valid(messages)


@given(broken_transcripts(paused=True))
def test_every_broken_paused_transcript_fails(messages: list[ChatMessage]) -> None:
    with pytest.raises(AssertionError):
        assert_transcript_valid(messages, allow_pending_approval=True)


# -- what the checker accepts paused, the loop resumes into a valid transcript -----------------


class _Echo:
    """A tool that answers with its name; ``requires_approval`` as given."""

    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def __init__(self, name: str, *, requires_approval: bool) -> None:
        self.name = name
        self.description = name
        self.requires_approval = requires_approval

    async def execute(self, arguments: dict[str, Any]) -> str:
        return self.name


ECHOES = [_Echo("free", requires_approval=False), _Echo("guarded", requires_approval=True)]


@given(
    names=st.lists(st.sampled_from(["free", "guarded"]), min_size=1, max_size=4),
    eager=st.booleans(),
    approval=st.sampled_from(["batch", "per_call"]),
)
def test_a_paused_run_resumes_into_a_valid_transcript(
    names: list[str], eager: bool, approval: Literal["batch", "per_call"]
) -> None:
    assume("guarded" in names)
    calls = [ToolCall(f"c{i}", name, "{}") for i, name in enumerate(names)]
    model = ScriptedChatClient([tool_calls_response(*calls), "done"])
    agent = FunctionInvokingChatClient(model, ECHOES, eager_tools=eager, approval=approval)

    async def main() -> list[ChatMessage]:
        conversation = [ChatMessage.user("go")]
        paused = await run_to_completion(agent, conversation)
        conversation += paused.messages
        assert_transcript_valid(conversation, allow_pending_approval=True)
        approve = [
            ToolApprovalResponse(u.call.id, approved=True)
            for u in paused.updates
            if isinstance(u, ToolApprovalRequest)
        ]
        resumed = await run_to_completion(
            agent, conversation, RunOptions(tool_approval_responses=approve)
        )
        return [*conversation, *resumed.messages]

    assert_transcript_valid(trio.run(main))


def test_a_paused_batch_answered_out_of_call_order_cannot_resume_validly() -> None:
    # What the checker refuses paused: the loop appends the pending call's answer after them.
    calls = [ToolCall("a", "free", "{}"), ToolCall("b", "guarded", "{}"), ToolCall("c", "free", "")]
    paused = [
        ChatMessage.user("go"),
        ChatMessage.assistant("", calls),
        ChatMessage.tool_result(calls[0], "free"),
        ChatMessage.tool_result(calls[2], "free"),
    ]
    with pytest.raises(AssertionError, match="answers 'c', but call order expects 'b'"):
        assert_transcript_valid(paused, allow_pending_approval=True)
    # ... and the loop refuses to resume it, before anything runs (b's answer would follow c's).
    model = ScriptedChatClient(["done"])
    agent = FunctionInvokingChatClient(model, ECHOES)
    approve = RunOptions(tool_approval_responses=[ToolApprovalResponse("b", approved=True)])
    with pytest.raises(ConversationError, match=r"'c', but 'b', an earlier call"):
        trio.run(run_to_completion, agent, paused, approve)
    assert model.calls == []
