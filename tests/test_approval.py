"""Approval on resume (``trio_invoke._approval``), tested as plain code: which calls are
pending, whether the trailing tool messages are a valid partial answer, and whether the answers
match the calls waiting for approval (ids, digests, replacement arguments)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ApprovalError,
    ChatMessage,
    ConversationError,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
)
from trio_invoke._approval import arguments_text, call_digest, match_approvals, pending_calls

CALLS = tuple(ToolCall(f"c{i}", "tool", f'{{"i": {i}}}') for i in range(4))
USER = ChatMessage.user("go")
ASSISTANT = ChatMessage.assistant("", CALLS)


def answer(call: ToolCall) -> ChatMessage:
    return ChatMessage.tool_result(call, "done")


# -- pending_calls --------------------------------------------------------------------------------


def test_no_trailing_assistant_calls_means_nothing_pending() -> None:
    assert pending_calls([]) == []
    assert pending_calls([USER]) == []
    assert pending_calls([USER, ChatMessage.assistant("hi")]) == []
    assert pending_calls([USER, ASSISTANT, *map(answer, CALLS), ChatMessage.assistant("x")]) == []


@given(st.lists(st.booleans(), min_size=4, max_size=4))
def test_answered_first_calls_leave_the_rest_pending(answered: list[bool]) -> None:
    # Answers of the first calls, in call order, leave the rest pending; an answer after a call
    # still pending is refused, naming that call: the pending call's answer, added on resume,
    # would come after it, out of call order.
    tail = [answer(call) for call, done in zip(CALLS, answered, strict=True) if done]
    first_pending = answered.index(False) if False in answered else len(answered)
    if any(answered[first_pending:]):
        with pytest.raises(
            ConversationError, match=rf"'{CALLS[first_pending].id}', an earlier call .* no answer"
        ):
            pending_calls([USER, ASSISTANT, *tail])
    else:
        pending = pending_calls([USER, ASSISTANT, *tail])
        assert pending == list(CALLS[first_pending:])


@pytest.mark.parametrize(
    ("tail", "match"),
    [
        ([answer(CALLS[1]), answer(CALLS[0])], r"messages\[2\] answers tool call 'c1', but 'c0'"),
        ([answer(CALLS[0]), answer(CALLS[0])], r"messages\[3\] answers tool call 'c0' a second"),
        (
            [answer(ToolCall("zz", "tool", "{}"))],
            r"'zz', which the assistant message before it did",
        ),
        ([answer(CALLS[0]), answer(ToolCall("c9", "t", "{}"))], r"messages\[3\] answers .*'c9'"),
        ([answer(CALLS[3]), answer(CALLS[1])], r"'c3', but 'c0', an earlier call .* call order"),
        ([answer(CALLS[1])], r"messages\[2\] answers tool call 'c1', but 'c0', an earlier"),
        ([answer(CALLS[0]), answer(CALLS[2])], r"'c2', but 'c1', an earlier call of messages\[1\]"),
    ],
)
def test_a_tail_that_is_not_a_partial_answer_is_refused(
    tail: list[ChatMessage], match: str
) -> None:
    with pytest.raises(ConversationError, match=match):
        pending_calls([USER, ASSISTANT, *tail])


@pytest.mark.parametrize(
    ("ids", "twice"), [(["a", "a"], "a"), (["a", "b", "a"], "a"), (["x", "y", "y", "x"], "x")]
)
@pytest.mark.parametrize("answered", [0, 1])
def test_an_assistant_message_that_repeats_a_call_id_is_refused(
    ids: list[str], twice: str, answered: int
) -> None:
    """Two calls with one id cannot each get their own tool message: refused before anything
    runs, whether or not some calls were answered already."""
    calls = tuple(ToolCall(i, "tool", f'{{"i": {n}}}') for n, i in enumerate(ids))
    tail = [answer(call) for call in calls[:answered]]
    with pytest.raises(ConversationError, match=rf"messages\[1\] makes tool call '{twice}' twice"):
        pending_calls([USER, ChatMessage.assistant("", calls), *tail])


@pytest.mark.parametrize(
    "conversation",
    [
        [answer(CALLS[0])],
        [USER, answer(CALLS[0])],
        [USER, ChatMessage.assistant("text only"), answer(CALLS[0])],
    ],
)
def test_tool_messages_with_no_calls_before_them_are_refused(
    conversation: list[ChatMessage],
) -> None:
    with pytest.raises(ConversationError, match="tool message"):
        pending_calls(conversation)


def test_a_conversation_error_is_a_value_error() -> None:
    assert issubclass(ConversationError, ValueError)


# -- match_approvals ------------------------------------------------------------------------------


def needs_approval(call: ToolCall) -> bool:
    return call.id in ("c1", "c2")


def test_every_call_waiting_for_approval_needs_one_answer() -> None:
    requests = [ToolApprovalRequest(CALLS[1]), ToolApprovalRequest(CALLS[2])]
    answers = [requests[0].approve(), requests[1].reject("no")]
    matched = match_approvals(CALLS, needs_approval, answers)
    assert set(matched) == {"c1", "c2"}
    assert matched["c2"].reason == "no"
    with pytest.raises(ApprovalError, match=r"have no approval response: 'c2' \(tool\)"):
        match_approvals(CALLS, needs_approval, answers[:1])
    with pytest.raises(ApprovalError, match="two approval responses for tool call 'c1'"):
        match_approvals(CALLS, needs_approval, [answers[0], answers[0], answers[1]])
    with pytest.raises(ApprovalError, match="'c0', which is not waiting for approval"):
        match_approvals(CALLS, needs_approval, [*answers, ToolApprovalResponse("c0", True)])
    with pytest.raises(ApprovalError, match="does not end with tool calls waiting"):
        match_approvals([], needs_approval, answers)


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: ToolCall(c.id, c.name, '{"i": 99}'),
        lambda c: ToolCall(c.id, "other", c.arguments),
        lambda c: ToolCall(c.id, c.name, c.arguments + " "),
    ],
)
def test_a_call_edited_after_its_request_no_longer_matches(edit: object) -> None:
    answers = [ToolApprovalRequest(CALLS[1]).approve(), ToolApprovalRequest(CALLS[2]).approve()]
    edited = (CALLS[0], edit(CALLS[1]), CALLS[2], CALLS[3])  # type: ignore[operator]
    with pytest.raises(ApprovalError, match="changed after the approval request was made"):
        match_approvals(edited, needs_approval, answers)


def test_a_hand_built_answer_skips_the_digest_check() -> None:
    answers = [ToolApprovalResponse("c1", True), ToolApprovalResponse("c2", False)]
    edited = (CALLS[0], ToolCall("c1", "tool", '{"i": 7}'), CALLS[2])
    assert set(match_approvals(edited, needs_approval, answers)) == {"c1", "c2"}


def test_replacement_arguments_are_normalised_to_json_text_or_refused() -> None:
    request = ToolApprovalRequest(CALLS[1])
    answers = [request.approve(arguments={"i": 5}), ToolApprovalResponse("c2", True)]
    matched = match_approvals(CALLS, needs_approval, answers)
    assert matched["c1"].arguments == '{"i":5}'
    bad = [request.approve(arguments={"i": {1, 2}}), ToolApprovalResponse("c2", True)]
    with pytest.raises(ApprovalError, match="'c1' are not JSON-serialisable"):
        match_approvals(CALLS, needs_approval, bad)
    assert arguments_text('{"raw": true}') == '{"raw": true}'


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"i": math.inf}, "field 'i' is inf"),
        ({"i": -math.inf}, "field 'i' is -inf"),
        ({"i": math.nan}, "field 'i' is nan"),
        ({"i": 1, "more": {"deep": [0.5, math.inf]}}, "field 'more.deep[1]' is inf"),
    ],
)
def test_replacement_arguments_with_a_non_finite_number_are_refused_naming_where(
    arguments: dict[str, object], where: str
) -> None:
    # JSON has no NaN or infinity: such arguments are not JSON text, and no tool gets them.
    with pytest.raises(ValueError, match=rf"^{re.escape(where)}, not a JSON number$"):
        arguments_text(arguments)
    answers = [ToolApprovalRequest(CALLS[1]).approve(arguments=arguments)]
    answers.append(ToolApprovalResponse("c2", True))
    message = rf"'c1' are not JSON-serialisable: {re.escape(where)}, not a JSON number"
    with pytest.raises(ApprovalError, match=message):
        match_approvals(CALLS, needs_approval, answers)


def test_a_mapping_that_contains_itself_is_refused_as_it_was() -> None:
    arguments: dict[str, object] = {}
    arguments["me"] = arguments
    with pytest.raises(ValueError, match="Circular reference"):
        arguments_text(arguments)


@given(st.text(), st.text(), st.text(), st.text())
def test_the_digest_tells_calls_apart(a: str, b: str, c: str, d: str) -> None:
    one, other = ToolCall("id", a, b), ToolCall("id", c, d)
    assert (call_digest(one) == call_digest(other)) == ((a, b) == (c, d))
    assert len(call_digest(one)) == 64
