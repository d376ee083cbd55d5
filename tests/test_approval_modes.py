"""Per-call approval: with ``approval="per_call"`` the calls of a batch that need no approval run
and are answered before the pause; only the others wait; resume answers them. The assistant
message lists the waiting calls last, so the transcript stays in call order."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ApprovalRequiredTool,
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    ToolApprovalRequest,
    ToolCall,
    ToolCalled,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

USER = [ChatMessage.user("go")]
ran: list[str] = []


@tool
async def read(name: str) -> str:
    """Read something harmless."""
    await trio.sleep(0.1)
    ran.append(name)
    return f"read {name}"


@tool(requires_approval=True)
async def delete(name: str) -> str:
    """Delete something."""
    ran.append(f"deleted {name}")
    return f"deleted {name}"


def batch(kinds: str) -> list[ToolCall]:
    """``"rdr"`` -> read, delete, read calls with ids c0, c1, c2."""
    names = {"r": "read", "d": "delete"}
    return [ToolCall(f"c{i}", names[k], json.dumps({"name": f"n{i}"})) for i, k in enumerate(kinds)]


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


MODES = [{}, {"eager_tools": True}, {"sequential": True}]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kinds", ["rdr", "drr", "rrd", "dd", "rdrd"])
async def test_calls_that_need_no_approval_run_before_the_pause(
    kinds: str, mode: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    calls = batch(kinds)
    model = ScriptedChatClient([tool_calls_response(*calls), "all done"])
    agent = FunctionInvokingChatClient(model, [read, delete], approval="per_call", **mode)
    paused = await run_to_completion(agent, USER)
    free = [c for c in calls if c.name == "read"]
    waiting = [c for c in calls if c.name == "delete"]
    assert sorted(ran) == sorted(f"n{c.id[1:]}" for c in free)
    assert paused.updates[-1] == Finish(FinishReason.AWAITING_APPROVAL)
    requests = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    assert [r.call for r in requests] == waiting
    assistant = paused.messages[0]
    assert list(assistant.tool_calls or ()) == [*free, *waiting]  # the waiting ones last
    assert [m.tool_call_id for m in paused.messages[1:]] == [c.id for c in free]
    conversation = [*USER, *paused.messages]
    assert_transcript_valid(conversation, allow_pending_approval=True)
    answers = [r.approve() if i % 2 == 0 else r.reject("no") for i, r in enumerate(requests)]
    resumed = await run_to_completion(
        agent, conversation, RunOptions(tool_approval_responses=answers)
    )
    assert [m.tool_call_id for m in resumed.messages if m.tool_call_id] == [c.id for c in waiting]
    assert resumed.messages[-1].content == "all done"
    assert_transcript_valid([*conversation, *resumed.messages])
    assert len(model.calls) == 2


async def test_batch_mode_runs_nothing_before_the_pause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = batch("rdr")
    model = ScriptedChatClient([tool_calls_response(*calls), "done"])
    paused = await run_to_completion(FunctionInvokingChatClient(model, [read, delete]), USER)
    assert ran == []
    assert list(paused.messages[0].tool_calls or ()) == calls  # as the model sent them
    assert len(paused.messages) == 1


async def test_run_options_choose_the_mode_per_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = batch("rd")
    for client_mode, run_mode, expected in [
        ("batch", "per_call", ["n0"]),
        ("per_call", "batch", []),
        ("per_call", None, ["n0"]),
    ]:
        ran.clear()
        model = ScriptedChatClient([tool_calls_response(*calls)])
        agent = FunctionInvokingChatClient(model, [read, delete], approval=client_mode)  # type: ignore[arg-type]
        await run_to_completion(agent, USER, RunOptions(approval=run_mode))  # type: ignore[arg-type]
        assert ran == expected, (client_mode, run_mode)


def test_an_unknown_mode_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="approval must be 'batch' or 'per_call'"):
        FunctionInvokingChatClient(ScriptedChatClient([]), approval="some")  # type: ignore[arg-type]


@given(st.text("rd", min_size=1, max_size=6), st.booleans(), st.booleans())
def test_any_batch_pauses_with_a_transcript_in_call_order(
    kinds: str, eager: bool, approve: bool
) -> None:
    async def main() -> None:
        calls = batch(kinds)
        model = ScriptedChatClient([tool_calls_response(*calls), "done", "done"])
        tools = [read, ApprovalRequiredTool(delete)]
        agent = FunctionInvokingChatClient(model, tools, approval="per_call", eager_tools=eager)
        conversation = list(USER)
        result = await run_to_completion(agent, conversation)
        conversation += result.messages
        requests = [u for u in result.updates if isinstance(u, ToolApprovalRequest)]
        if requests:
            assert_transcript_valid(conversation, allow_pending_approval=True)
            answers = [r.approve() if approve else r.reject() for r in requests]
            result = await run_to_completion(
                agent, conversation, RunOptions(tool_approval_responses=answers)
            )
            conversation += result.messages
        assert_transcript_valid(conversation)
        answered = [u for u in result.updates if isinstance(u, ToolCalled)]
        assert len({c.call.id for c in answered}) == len(answered)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@tool
async def finish(name: str) -> str:
    """End the run after this batch."""
    ran.append(f"stopped {name}")
    raise StopLoop(f"finished {name}")


@pytest.mark.parametrize(
    ("mode", "kinds"),
    [
        ({"approval": "per_call"}, "sd"),
        ({"approval": "per_call"}, "dsr"),
        ({"approval": "per_call", "sequential": True}, "rsd"),
        ({"approval": "per_call", "eager_tools": True}, "ds"),
        ({"eager_tools": True}, "sd"),  # batch mode: the eager call ran before the pause
        ({"eager_tools": True}, "rsdr"),
    ],
)
@pytest.mark.parametrize("approve", [True, False])
async def test_a_stop_loop_before_the_pause_ends_the_run_after_the_resume(
    mode: dict[str, Any], kinds: str, approve: bool, autojump_clock: trio.testing.MockClock
) -> None:
    names = {"r": "read", "d": "delete", "s": "finish"}
    calls = [
        ToolCall(f"c{i}", names[k], json.dumps({"name": f"n{i}"})) for i, k in enumerate(kinds)
    ]
    model = ScriptedChatClient([tool_calls_response(*calls), "the model again"])
    agent = FunctionInvokingChatClient(model, [read, delete, finish], **mode)
    paused = await run_to_completion(agent, USER)
    assert paused.updates[-1] == Finish(FinishReason.AWAITING_APPROVAL)
    stop_id = calls[kinds.index("s")].id
    assert f"stopped n{stop_id[1:]}" in ran  # it ran before the pause
    # The conversation is stored as JSON and read back (another process).
    stored = json.dumps([m.to_dict() for m in [*USER, *paused.messages]])
    conversation = [ChatMessage.from_dict(d) for d in json.loads(stored)]
    requests = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    answers = [r.approve() if approve else r.reject() for r in requests]
    resumed = await run_to_completion(
        agent, conversation, RunOptions(tool_approval_responses=answers)
    )
    assert resumed.updates[-1] == Finish(FinishReason.STOP)
    assert len(model.calls) == 1  # the model is not called again
    before = {m.tool_call_id for m in paused.messages}
    assert [m.tool_call_id for m in resumed.messages] == [
        c.id for c in paused.messages[0].tool_calls or () if c.id not in before
    ]
    assert_transcript_valid([*conversation, *resumed.messages])


async def test_a_stop_loop_mark_of_an_earlier_batch_does_not_stop_a_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    first = [ToolCall("a", "finish", '{"name": "x"}'), ToolCall("b", "delete", '{"name": "y"}')]
    second = [ToolCall("c", "delete", '{"name": "z"}')]
    model = ScriptedChatClient([tool_calls_response(*first), tool_calls_response(*second), "end"])
    agent = FunctionInvokingChatClient(model, [read, delete, finish], approval="per_call")
    paused = await run_to_completion(agent, USER)
    conversation = [*USER, *paused.messages]
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    resumed = await run_to_completion(
        agent, conversation, RunOptions(tool_approval_responses=[request.approve()])
    )
    assert resumed.updates[-1] == Finish(FinishReason.STOP)
    # A new question after the stop: the model answers with a batch that pauses; its resume
    # goes on to the model (the mark is on the earlier batch's message).
    conversation += [*resumed.messages, ChatMessage.user("again")]
    paused = await run_to_completion(agent, conversation)
    assert paused.updates[-1] == Finish(FinishReason.AWAITING_APPROVAL)
    conversation += paused.messages
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    resumed = await run_to_completion(
        agent, conversation, RunOptions(tool_approval_responses=[request.approve()])
    )
    assert resumed.messages[-1].content == "end"
    assert len(model.calls) == 3


async def test_a_stop_loop_that_pauses_nothing_leaves_no_mark() -> None:
    model = ScriptedChatClient([tool_calls_response(ToolCall("a", "finish", '{"name": "x"}'))])
    result = await run_to_completion(FunctionInvokingChatClient(model, [finish]), USER)
    (message,) = [m for m in result.messages if m.tool_call_id == "a"]
    assert message == ChatMessage.tool_result(
        ToolCall("a", "finish", '{"name": "x"}'), "finished x"
    )


@pytest.mark.parametrize("mode", [{"approval": "per_call"}, {"eager_tools": True}])
async def test_leaving_at_the_first_request_while_calls_run_answers_every_call(
    mode: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    # As the README says: the requests come while other calls of the batch still run, and
    # leaving then cancels the run, whose transcript answers every call (nothing to resume).
    calls = batch("rdr")
    model = ScriptedChatClient([tool_calls_response(*calls), "done"])
    agent = FunctionInvokingChatClient(model, [read, delete], **mode)
    async with agent.run(USER) as stream:
        async for update in stream:
            if isinstance(update, ToolApprovalRequest):
                break
    conversation = [*USER, *stream.messages]
    assert_transcript_valid(conversation)  # no call is left pending
    results = {m.tool_call_id: m.content for m in stream.messages[1:]}
    assert set(results) == {c.id for c in calls}
    assert results["c1"] == "Error: cancelled"  # the waiting call
    assert ran == []  # the reads were cut short
