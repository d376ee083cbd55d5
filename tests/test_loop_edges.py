"""Edge cases found in review: what must not crash, leak, unwrap or lose track."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import trio
import trio.testing

from trio_invoke import (
    ApprovalError,
    ApprovalRequiredTool,
    ChatClientError,
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    TextDelta,
    ToolApprovalRequest,
    ToolCalled,
    Usage,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_call_updates

USER = [ChatMessage.user("go")]


def calls_round(*calls: tuple[str, str, str], usage: Usage | None = None) -> list[Any]:
    updates: list[Any] = []
    for call_id, name, arguments in calls:
        updates += tool_call_updates(call_id, name, arguments)
    return [*updates, Finish(FinishReason.TOOL_CALLS, usage)]


@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await trio.sleep(seconds)
    return "rested"


async def test_a_result_too_deep_for_json_is_an_error_result_not_a_crash() -> None:
    @tool
    async def deep() -> Any:
        """A very nested value."""
        value: list[Any] = []
        for _ in range(100_000):
            value = [value]
        return value

    model = ScriptedChatClient([calls_round(("a", "deep", "{}")), "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [deep]), USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert called.is_error
    assert "not JSON-serialisable" in called.result
    assert result.updates[-1] == Finish(FinishReason.STOP)


async def test_unserialisable_replacement_arguments_fail_before_anything_runs() -> None:
    done: list[Any] = []

    @tool(requires_approval=True)
    async def book(day: str) -> str:
        """Book a day."""
        done.append(day)
        return "booked"

    client = FunctionInvokingChatClient(
        ScriptedChatClient([calls_round(("b", "book", '{"day": "mon"}')), "ok"]), [book]
    )
    paused = await run_to_completion(client, USER)
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    answer = request.approve(arguments={"day": datetime.date(2026, 1, 1)})
    with pytest.raises(ApprovalError, match="'b' are not JSON-serialisable"):
        await run_to_completion(
            client, [*USER, *paused.messages], RunOptions(tool_approval_responses=[answer])
        )
    assert done == []


async def test_an_outer_cancellation_leaves_as_a_bare_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    caught: list[type[BaseException]] = []
    model = ScriptedChatClient([calls_round(("a", "nap", '{"seconds": 100}'))])
    with trio.move_on_after(5):
        try:
            async with FunctionInvokingChatClient(model, [nap]).run(USER) as stream:
                async for _ in stream:
                    pass
        except trio.Cancelled as exc:
            caught.append(type(exc))
            raise
    assert caught == [trio.Cancelled]
    assert_transcript_valid([*USER, *stream.messages])


async def test_a_users_own_exception_group_stays_whole() -> None:
    group = ExceptionGroup("mine", [KeyError("k")])
    client = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    with pytest.raises(ExceptionGroup) as info:
        async with client.run(USER) as stream:
            async for _ in stream:
                raise group
    assert info.value.message == "mine"  # not unwrapped to the bare KeyError
    assert [type(e) for e in info.value.exceptions] == [KeyError]


async def test_approval_wrapper_keeps_the_tools_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool(timeout=1)
    async def slow() -> str:
        """Slow."""
        await trio.sleep(3600)
        return "never"

    guarded = ApprovalRequiredTool(slow)
    assert guarded.timeout == 1
    client = FunctionInvokingChatClient(
        ScriptedChatClient([calls_round(("s", "slow", "{}")), "ok"]), [guarded]
    )
    paused = await run_to_completion(client, USER)
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    options = RunOptions(tool_approval_responses=[request.approve()])
    with trio.fail_after(60):
        resumed = await run_to_completion(client, [*USER, *paused.messages], options)
    assert "timed out after 1 s" in resumed.messages[0].content


async def test_usage_counts_even_when_the_run_is_cancelled_during_the_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scope = trio.CancelScope()
    scope.deadline = trio.current_time() + 5
    model = ScriptedChatClient(
        [calls_round(("a", "nap", '{"seconds": 100}'), usage=Usage(100, 50))]
    )
    async with FunctionInvokingChatClient(model, [nap]).run(
        USER, RunOptions(cancel_scope=scope)
    ) as stream:
        async for _ in stream:
            pass
    assert stream.usage == Usage(100, 50)


def test_a_loop_inside_a_loop_is_refused() -> None:
    inner = FunctionInvokingChatClient(ScriptedChatClient([]))
    with pytest.raises(ConfigurationError, match="run its tool calls again"):
        FunctionInvokingChatClient(inner)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "nap"}}])
async def test_a_forcing_tool_choice_applies_to_the_first_round_only(choice: Any) -> None:
    model = ScriptedChatClient([calls_round(("a", "nap", '{"seconds": 0}')), "done"])
    client = FunctionInvokingChatClient(model, [nap])
    result = await run_to_completion(client, USER, RunOptions(tool_choice=choice))
    assert model.calls[0].options.tool_choice == choice
    assert model.calls[1].options.tool_choice is None
    assert result.messages[-1] == ChatMessage.assistant("done")


async def test_the_inner_client_gets_a_snapshot_of_the_conversation() -> None:
    model = ScriptedChatClient([calls_round(("a", "nap", '{"seconds": 0}')), "done"])
    await run_to_completion(FunctionInvokingChatClient(model, [nap]), USER)
    assert [len(call.messages) for call in model.calls] == [1, 3]


async def test_eager_calls_cut_by_a_failing_stream_say_so(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedChatClient(
        [[*tool_call_updates("a", "nap", '{"seconds": 10}'), TextDelta("..."), OSError("reset")]],
        delay=1,
    )
    seen: list[Any] = []
    client = FunctionInvokingChatClient(model, [nap], eager_tools=True)
    with pytest.raises(ChatClientError):
        async with client.run(USER) as stream:
            async for update in stream:
                seen.append(update)
    (called,) = [u for u in seen if isinstance(u, ToolCalled)]
    assert called.result == "Error: cancelled: the chat client failed (ChatClientError)"
    assert_transcript_valid([*USER, *stream.messages])
