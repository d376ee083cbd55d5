"""Loop control: timeouts, concurrency, budgets, the round cap's answer mode, error detail,
stopping from a tool, approval integrity and eager start."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_invoke import (
    ApprovalError,
    ApprovalRequiredTool,
    CallNext,
    ChatClientError,
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCallArgs,
    ToolCalled,
    ToolCallEnd,
    ToolCallStart,
    ToolContext,
    ToolTimeoutError,
    tool,
)
from trio_invoke.testing import (
    FunctionChatClient,
    assert_transcript_valid,
    run_to_completion,
    tool_call_updates,
    tool_calls_response,
)

USER = [ChatMessage.user("go")]


def called(result: Any) -> dict[str, ToolCalled]:
    return {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}


@tool
async def nap(seconds: float) -> str:
    """Sleep for a while."""
    await trio.sleep(seconds)
    return f"slept {seconds:g}"


@tool
async def broken() -> str:
    """Always fails, with a secret in the message."""
    raise PermissionError("token=hunter2")


# -- per-call timeout ---------------------------------------------------------------------------


async def test_a_call_that_runs_out_gets_an_error_naming_the_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("slow", "nap", '{"seconds": 10}'),
                ToolCall("fast", "nap", '{"seconds": 1}'),
            ),
            "ok",
        ]
    )
    client = FunctionInvokingChatClient(model, [nap], tool_timeout=2)
    with trio.fail_after(100):
        result = await run_to_completion(client, USER)
    results = called(result)
    assert results["slow"].is_error
    assert results["slow"].result == "Error: tool 'nap' timed out after 2 s"
    assert isinstance(results["slow"].exception, ToolTimeoutError)
    assert isinstance(results["slow"].exception, TimeoutError)
    assert results["fast"].result == "slept 1"  # the sibling went on
    assert result.updates[-1] == Finish(FinishReason.STOP)


async def test_timeouts_per_tool_and_per_run(autojump_clock: trio.testing.MockClock) -> None:
    @tool(timeout=0.5)
    async def quick(seconds: float) -> str:
        """Must be quick."""
        await trio.sleep(seconds)
        return "done"

    script = [
        tool_calls_response(
            ToolCall("a", "quick", '{"seconds": 1}'), ToolCall("b", "nap", '{"seconds": 3}')
        ),
        "ok",
    ]
    client = FunctionInvokingChatClient(ScriptedChatClient(script), [quick, nap], tool_timeout=5)
    results = called(await run_to_completion(client, USER))
    assert results["a"].result == "Error: tool 'quick' timed out after 0.5 s"  # its own limit
    assert results["b"].result == "slept 3"

    client = FunctionInvokingChatClient(ScriptedChatClient(script), [quick, nap], tool_timeout=5)
    results = called(await run_to_completion(client, USER, RunOptions(tool_timeout=2)))
    assert results["b"].result == "Error: tool 'nap' timed out after 2 s"  # the run's override


@tool
async def hangs_up() -> str:
    """Waits on a connection whose teardown fails when the wait is cut short."""
    try:
        await trio.sleep(3600)
    finally:
        raise trio.BrokenResourceError("connection torn down")


def tearing_middleware() -> Any:
    async def tearing(context: Any, call_next: Any) -> ToolCalled:
        try:
            result: ToolCalled = await call_next(context)
        finally:
            raise RuntimeError("cleanup failed")
        return result  # pragma: no cover

    return tearing


@pytest.mark.parametrize("where", ["tool", "middleware"])
async def test_an_error_raised_while_timing_out_is_the_timeout(
    where: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A tool (or a middleware) whose cleanup raises as its call runs out of time still gets
    the result naming the limit, not that of the error the cut-short cleanup raised."""
    middleware = [tearing_middleware()] if where == "middleware" else []
    target = "hangs_up" if where == "tool" else "nap"
    arguments = "{}" if where == "tool" else '{"seconds": 3600}'
    model = ScriptedChatClient([tool_calls_response(ToolCall("c", target, arguments)), "ok"])
    client = FunctionInvokingChatClient(
        model, [hangs_up, nap], tool_timeout=2, middleware=middleware
    )
    with trio.fail_after(100):
        result = await run_to_completion(client, USER)
    (done,) = called(result).values()
    assert done.result == f"Error: tool {target!r} timed out after 2 s"
    assert isinstance(done.exception, ToolTimeoutError)
    assert done.duration == pytest.approx(2)


async def test_an_error_raised_while_cancelled_is_the_cancellation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedChatClient([tool_calls_response(ToolCall("c", "hangs_up", "{}"))])
    client = FunctionInvokingChatClient(model, [hangs_up])
    scope = trio.CancelScope(deadline=trio.current_time() + 2)
    with trio.fail_after(100):
        result = await run_to_completion(client, USER, RunOptions(cancel_scope=scope))
    assert called(result)["c"].result == "Error: cancelled"
    assert_transcript_valid(result.messages)


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
        ScriptedChatClient([tool_calls_response(ToolCall("s", "slow", "{}")), "ok"]), [guarded]
    )
    paused = await run_to_completion(client, USER)
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    options = RunOptions(tool_approval_responses=[request.approve()])
    with trio.fail_after(60):
        resumed = await run_to_completion(client, [*USER, *paused.messages], options)
    assert resumed.messages[0].content == "Error: tool 'slow' timed out after 1 s"


# -- concurrency --------------------------------------------------------------------------------


def counting_tool() -> tuple[Any, list[int], list[str]]:
    live = [0, 0]  # now, peak
    order: list[str] = []

    @tool
    async def work(name: str) -> str:
        """Work for a second."""
        live[0] += 1
        live[1] = max(live)
        order.append(name)
        await trio.sleep(1)
        live[0] -= 1
        return name

    return work, live, order


def six_calls() -> list[Any]:
    return tool_calls_response(
        *(ToolCall(f"c{i}", "work", f'{{"name": "c{i}"}}') for i in range(6))
    )


async def test_max_concurrency_caps_calls_in_flight(autojump_clock: trio.testing.MockClock) -> None:
    work, live, _ = counting_tool()
    client = FunctionInvokingChatClient(
        ScriptedChatClient([six_calls(), "ok"]), [work], max_concurrency=2, tool_timeout=1.5
    )
    start = trio.current_time()
    result = await run_to_completion(client, USER)
    assert live[1] == 2
    assert trio.current_time() - start == pytest.approx(3)
    assert not any(c.is_error for c in called(result).values())  # queueing is not run time


@pytest.mark.parametrize("shared", [False, True])
async def test_a_calls_duration_starts_when_it_gets_its_slot(
    shared: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """Queueing for the limiter is neither run time nor in the duration, also for a call that
    then times out."""
    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("a", "nap", '{"seconds": 3}'),
                ToolCall("b", "nap", '{"seconds": 3}'),
                ToolCall("c", "nap", '{"seconds": 9}'),
            ),
            "ok",
        ]
    )
    limit = trio.CapacityLimiter(1) if shared else 1
    client = FunctionInvokingChatClient(model, [nap], max_concurrency=limit, tool_timeout=4)
    with trio.fail_after(100):
        result = await run_to_completion(client, USER)
    results = called(result)
    assert {k: c.duration for k, c in results.items()} == {"a": 3, "b": 3, "c": 4}
    assert results["c"].result == "Error: tool 'nap' timed out after 4 s"


async def test_a_shared_limiter_caps_several_clients(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work, live, _ = counting_tool()
    limiter = trio.CapacityLimiter(3)
    clients = [
        FunctionInvokingChatClient(
            ScriptedChatClient([six_calls(), "ok"]), [work], max_concurrency=limiter
        )
        for _ in range(2)
    ]
    async with trio.open_nursery() as nursery:
        for client in clients:
            nursery.start_soon(run_to_completion, client, USER)
    assert live[1] == 3


# -- queued calls start in call order -----------------------------------------------------------


def start_recorder() -> tuple[Any, list[tuple[str, float]]]:
    """A tool that records which call began when, then works for ``seconds``."""
    starts: list[tuple[str, float]] = []

    @tool
    async def work(name: str, seconds: float = 1) -> str:
        """Work for a while."""
        starts.append((name, trio.current_time()))
        await trio.sleep(seconds)
        return name

    return work, starts


def expected_starts(durations: list[float], slots: int) -> list[float]:
    """When each call begins if the calls take ``slots`` slots first come, first served, in
    call order (relative to the first start)."""
    free = [0.0] * slots
    starts = []
    for duration in durations:
        free.sort()
        begins = free.pop(0)
        starts.append(begins)
        free.append(begins + duration)
    return starts


def work_calls(durations: list[float], prefix: str = "c") -> list[ToolCall]:
    return [
        ToolCall(f"{prefix}{i}", "work", json.dumps({"name": f"{prefix}{i}", "seconds": d}))
        for i, d in enumerate(durations)
    ]


@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("slots", [1, 3])
async def test_calls_queued_for_a_slot_start_in_call_order(
    slots: int, shared: bool, eager: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """Trio starts a round's call tasks in an order of its own: the calls still take their
    slots, and begin, in call order (repeated: a wrong order shows only some of the time)."""
    work, starts = start_recorder()
    calls = work_calls([1] * 8)
    for _ in range(12):
        starts.clear()
        limit = trio.CapacityLimiter(slots) if shared else slots
        model = ScriptedChatClient([tool_calls_response(*calls), "ok"])
        client = FunctionInvokingChatClient(model, [work], max_concurrency=limit, eager_tools=eager)
        begin = trio.current_time()
        with trio.fail_after(100):
            result = await run_to_completion(client, USER)
        assert [name for name, _ in starts] == [call.id for call in calls]
        assert [when - begin for _, when in starts] == [i // slots for i in range(8)]
        tool_messages = [m.tool_call_id for m in result.messages if m.role is MessageRole.TOOL]
        assert tool_messages == [call.id for call in calls]


@settings(max_examples=60, deadline=None)
@given(
    durations=st.lists(st.integers(1, 4), min_size=1, max_size=10),
    slots=st.integers(1, 4),
    shared=st.booleans(),
    eager=st.booleans(),
    middleware=st.booleans(),
    scheduling=st.random_module(),  # Trio's scheduler draws from the random Hypothesis seeds
)
def test_queued_calls_begin_in_call_order_for_any_cap(
    *,
    durations: list[int],
    slots: int,
    shared: bool,
    eager: bool,
    middleware: bool,
    scheduling: Any,
) -> None:
    work, starts = start_recorder()

    async def passes(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return await call_next(context)

    async def main() -> None:
        limit = trio.CapacityLimiter(slots) if shared else slots
        calls = work_calls([float(d) for d in durations])
        client = FunctionInvokingChatClient(
            ScriptedChatClient([tool_calls_response(*calls), "ok"]),
            [work],
            max_concurrency=limit,
            eager_tools=eager,
            middleware=[passes] if middleware else (),
        )
        begin = trio.current_time()
        with trio.fail_after(1000):
            await run_to_completion(client, USER)
        assert [name for name, _ in starts] == [call.id for call in calls]
        wanted = expected_starts([float(d) for d in durations], slots)
        assert [when - begin for _, when in starts] == wanted

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("limit", ["none", "int", "shared"])
async def test_an_eager_call_whose_round_fails_before_it_starts_never_runs(limit: str) -> None:
    """A call started early whose round the model's failure cancels before its task has run
    (under a limiter: takes no slot) never begins its tool, and its result says "not run"."""
    began: list[str] = []

    @tool
    async def work() -> str:
        """Work."""
        began.append("work")
        await trio.sleep(1)
        return "done"

    def model(messages: Any, options: Any) -> Any:
        yield from tool_call_updates("c1", "work", "{}")
        raise ValueError("the model went away")

    cap = {"none": None, "int": 1, "shared": trio.CapacityLimiter(1)}[limit]
    client = FunctionInvokingChatClient(
        FunctionChatClient(model), [work], max_concurrency=cap, eager_tools=True
    )
    results: dict[str, ToolCalled] = {}
    with trio.fail_after(10), pytest.raises(ChatClientError):
        async with client.run(USER) as stream:
            async for update in stream:
                if isinstance(update, ToolCalled):
                    results[update.call.id] = update
    assert began == []
    assert results["c1"].result == "Error: not run: the chat client failed (ChatClientError)"
    if isinstance(cap, trio.CapacityLimiter):
        assert cap.borrowed_tokens == 0


async def test_runs_sharing_a_limiter_each_keep_their_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two runs at once on one limiter: each run's calls begin in its call order, the runs
    take the slots by turns (one call of each run waits in the limiter's queue at a time, so
    neither waits for all of the other's calls), and both end."""
    work, starts = start_recorder()
    limiter = trio.CapacityLimiter(2)
    runs = {prefix: work_calls([1] * 6, prefix) for prefix in "ab"}
    begin = trio.current_time()
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            for calls in runs.values():
                client = FunctionInvokingChatClient(
                    ScriptedChatClient([tool_calls_response(*calls), "ok"]),
                    [work],
                    max_concurrency=limiter,
                )
                nursery.start_soon(run_to_completion, client, USER)
    assert trio.current_time() - begin == 6  # 12 calls of 1 s, 2 at a time: no slot idle
    for prefix, calls in runs.items():
        assert [name for name, _ in starts if name[0] == prefix] == [c.id for c in calls]
        assert [when - begin for name, when in starts if name[0] == prefix] == [0, 1, 2, 3, 4, 5]


async def test_calls_that_never_run_do_not_hold_up_the_calls_after_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work, starts = start_recorder()
    calls = [
        *work_calls([1, 1]),
        ToolCall("bad", "work", '{"name": 5}'),
        ToolCall("unknown", "nowhere", "{}"),
        ToolCall("broken", "work", "{not json"),
        *work_calls([1, 1], "d"),
    ]
    for _ in range(8):
        starts.clear()
        client = FunctionInvokingChatClient(
            ScriptedChatClient([tool_calls_response(*calls), "ok"]), [work], max_concurrency=1
        )
        begin = trio.current_time()
        with trio.fail_after(100):
            result = await run_to_completion(client, USER)
        assert starts == [(name, begin + i) for i, name in enumerate(["c0", "c1", "d0", "d1"])]
        errors = {key: c.is_error for key, c in called(result).items()}
        assert errors == {call.id: call.name != "work" or call.id[0] == "b" for call in calls}


async def test_rejected_calls_do_not_hold_up_the_calls_after_them_on_resume(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work, starts = start_recorder()
    calls = work_calls([1] * 6)
    client = FunctionInvokingChatClient(
        ScriptedChatClient([tool_calls_response(*calls), "ok"]),
        [ApprovalRequiredTool(work)],
        max_concurrency=1,
    )
    paused = await run_to_completion(client, USER)
    requests = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    answers = [r.approve() if i % 2 else r.reject("no") for i, r in enumerate(requests)]
    begin = trio.current_time()
    with trio.fail_after(100):
        resumed = await run_to_completion(
            client,
            [*USER, *paused.messages],
            RunOptions(tool_approval_responses=answers),
        )
    assert starts == [("c1", begin), ("c3", begin + 1), ("c5", begin + 2)]
    assert_transcript_valid([*USER, *paused.messages, *resumed.messages])


async def test_an_eager_call_waits_for_the_calls_before_it_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Call order is the order of the calls' ``ToolCallStart``: under a cap, a call whose
    arguments end first still takes its slot after the calls that started before it."""
    work, starts = start_recorder()
    updates = [
        ToolCallStart("a", "work"),
        ToolCallStart("b", "work"),
        ToolCallArgs("b", '{"name": "b"}'),
        ToolCallEnd("b"),
        ToolCallArgs("a", '{"name": "a"}'),
        ToolCallEnd("a"),
        Finish(FinishReason.TOOL_CALLS),
    ]
    client = FunctionInvokingChatClient(
        ScriptedChatClient([updates, "ok"], delay=1), [work], eager_tools=True, max_concurrency=1
    )
    begin = trio.current_time()
    result = await run_to_completion(client, USER)
    assert [(name, when - begin) for name, when in starts] == [("a", 6), ("b", 7)]
    assert [m.tool_call_id for m in result.messages if m.role is MessageRole.TOOL] == ["a", "b"]


@pytest.mark.parametrize("eager", [False, True])
async def test_calls_after_one_waiting_for_approval_do_not_wait_for_it(
    eager: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """Per-call approval: a call that waits for approval does not run in this round, so the
    calls after it take their slots without it (eager: as their arguments end)."""
    work, starts = start_recorder()

    @tool(requires_approval=True)
    async def guarded_work(name: str) -> str:
        """Needs approval."""
        return name

    updates = [
        *tool_call_updates("a", "guarded_work", '{"name": "a"}'),
        *tool_call_updates("b", "work", '{"name": "b", "seconds": 10}'),
        *tool_call_updates("c", "work", '{"name": "c", "seconds": 10}'),
        TextDelta("..."),
        Finish(FinishReason.TOOL_CALLS),
    ]
    client = FunctionInvokingChatClient(
        ScriptedChatClient([updates, "ok"], delay=1),
        [work, guarded_work],
        eager_tools=eager,
        max_concurrency=1,
        approval="per_call",
    )
    begin = trio.current_time()
    with trio.fail_after(100):
        result = await run_to_completion(client, USER)
    first = 6 if eager else 11  # b's ToolCallEnd, or the end of the response
    assert [(name, when - begin) for name, when in starts] == [("b", first), ("c", first + 10)]
    assert result.updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL


@pytest.mark.parametrize("shared", [False, True])
async def test_calls_cancelled_while_queued_in_call_order_never_ran(
    shared: bool, autojump_clock: trio.testing.MockClock
) -> None:
    work, starts = start_recorder()
    calls = work_calls([1] * 8)
    for _ in range(6):
        starts.clear()
        limit = trio.CapacityLimiter(1) if shared else 1
        model = ScriptedChatClient([tool_calls_response(*calls)])
        client = FunctionInvokingChatClient(model, [work], max_concurrency=limit)
        scope = trio.CancelScope(deadline=trio.current_time() + 2.5)
        with trio.fail_after(100):
            result = await run_to_completion(client, USER, RunOptions(cancel_scope=scope))
        assert [name for name, _ in starts] == ["c0", "c1", "c2"]
        durations = [c.duration for c in called(result).values()]
        assert durations == [1, 1, 0.5, 0, 0, 0, 0, 0]
        assert_transcript_valid([*USER, *result.messages])
        assert [m.tool_call_id for m in result.messages[1:]] == [c.id for c in calls]


async def test_sequential_runs_calls_one_by_one_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work, live, order = counting_tool()
    client = FunctionInvokingChatClient(
        ScriptedChatClient([six_calls(), "ok"]), [work], sequential=True
    )
    start = trio.current_time()
    await run_to_completion(client, USER)
    assert live[1] == 1
    assert order == [f"c{i}" for i in range(6)]
    assert trio.current_time() - start == pytest.approx(6)


# -- budgets ------------------------------------------------------------------------------------


async def test_max_tool_calls_counts_across_rounds_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work, _, order = counting_tool()
    script = [
        tool_calls_response(
            ToolCall("a", "work", '{"name": "a"}'), ToolCall("b", "work", '{"name": "b"}')
        ),
        tool_calls_response(
            ToolCall("c", "work", '{"name": "c"}'), ToolCall("d", "work", '{"name": "d"}')
        ),
        "ok",
    ]
    client = FunctionInvokingChatClient(ScriptedChatClient(script), [work], max_tool_calls=3)
    result = await run_to_completion(client, USER)
    assert sorted(order) == ["a", "b", "c"]
    assert called(result)["d"].result == "Error: not run: this run's budget of tool calls is spent"
    assert_transcript_valid([*USER, *result.messages])

    client = FunctionInvokingChatClient(ScriptedChatClient(script), [work], max_tool_calls=3)
    result = await run_to_completion(client, USER, RunOptions(max_tool_calls=1))
    assert {i: c.is_error for i, c in called(result).items()} == {
        "a": False,
        "b": True,
        "c": True,
        "d": True,
    }


@pytest.mark.parametrize(
    ("first", "failed"),
    [
        (("broken", "{}"), "Error: tool 'broken' raised PermissionError"),
        (("nope", "{}"), "Error: unknown tool 'nope'. Available tools: work, broken"),
        (
            ("work", '{"name": 1}'),
            "Error: invalid arguments for tool 'work': field 'name': expected string, got integer",
        ),
    ],
    ids=["the tool raised", "unknown tool", "invalid arguments"],
)
async def test_the_budget_counts_calls_that_failed(
    first: tuple[str, str], failed: str, autojump_clock: trio.testing.MockClock
) -> None:
    work, _, order = counting_tool()
    script = [
        tool_calls_response(ToolCall("a", *first), ToolCall("b", "work", '{"name": "b"}')),
        tool_calls_response(
            ToolCall("c", "work", '{"name": "c"}'), ToolCall("d", "work", '{"name": "d"}')
        ),
        "ok",
    ]
    client = FunctionInvokingChatClient(
        ScriptedChatClient(script), [work, broken], max_tool_calls=3
    )
    result = await run_to_completion(client, USER)
    results = called(result)
    assert results["a"].result == failed
    assert sorted(order) == ["b", "c"]  # the failed call spent one of the three
    assert results["d"].result == "Error: not run: this run's budget of tool calls is spent"
    assert_transcript_valid([*USER, *result.messages])


async def test_the_budget_counts_calls_the_user_rejected(
    autojump_clock: trio.testing.MockClock,
) -> None:
    work, _, order = counting_tool()
    guarded = ApprovalRequiredTool(broken)
    script = [
        tool_calls_response(ToolCall("a", "broken", "{}"), ToolCall("b", "work", '{"name": "b"}')),
        tool_calls_response(
            ToolCall("c", "work", '{"name": "c"}'), ToolCall("d", "work", '{"name": "d"}')
        ),
        "ok",
    ]
    client = FunctionInvokingChatClient(ScriptedChatClient(script), [work, guarded])
    paused = await run_to_completion(client, USER)
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    conversation = [*USER, *paused.messages]
    options = RunOptions(tool_approval_responses=[request.reject("no")], max_tool_calls=3)
    result = await run_to_completion(client, conversation, options)
    results = called(result)
    assert results["a"].result == "Error: the user rejected this call: no"
    assert sorted(order) == ["b", "c"]  # the rejected call spent one of the three
    assert results["d"].result == "Error: not run: this run's budget of tool calls is spent"
    assert_transcript_valid([*conversation, *result.messages])


async def test_consecutive_failed_rounds_withhold_the_tools() -> None:
    script = [
        tool_calls_response(ToolCall("c1", "broken", "{}")),
        tool_calls_response(ToolCall("c2", "broken", "{}")),
        tool_calls_response(ToolCall("c3", "broken", "{}")),
        # the model calls again although the tools are withheld
        tool_calls_response(ToolCall("x", "broken", "{}")),
    ]
    model = ScriptedChatClient(script)
    client = FunctionInvokingChatClient(model, [broken], max_consecutive_errors=3)
    result = await run_to_completion(client, USER)
    assert [call.options.tool_choice for call in model.calls] == [None, None, None, "none"]
    assert called(result)["x"].result == (
        "Error: not run: tools are disabled after 3 rounds in a row in which every call failed"
    )
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert_transcript_valid([*USER, *result.messages])


FAILS = ToolCall("f", "broken", "{}")
WORKS = ToolCall("w", "nap", '{"seconds": 0}')


@pytest.mark.parametrize(
    "middle",
    [(WORKS,), (FAILS, WORKS), (WORKS, FAILS)],
    ids=["a success", "a failure and a success", "a success and a failure"],
)
async def test_a_success_resets_the_error_streak(middle: tuple[ToolCall, ...]) -> None:
    """A round in which any call succeeded resets the streak to zero: the tools are withheld
    only after two more failed rounds (a withheld round still lists the tools, so look at
    ``tool_choice``)."""

    def round_of(n: int, *calls: ToolCall) -> list[Any]:
        return tool_calls_response(*(ToolCall(f"{c.id}{n}", c.name, c.arguments) for c in calls))

    script = [
        round_of(1, FAILS),
        round_of(2, *middle),
        round_of(3, FAILS),
        round_of(4, FAILS),
        "done",
    ]
    model = ScriptedChatClient(script)
    client = FunctionInvokingChatClient(model, [broken, nap], max_consecutive_errors=2)
    result = await run_to_completion(client, USER)
    assert [call.options.tool_choice for call in model.calls] == [None, None, None, None, "none"]
    assert all(len(call.options.tools) == 2 for call in model.calls)
    results = called(result)
    assert results["w2"].result == "slept 0"
    for call_id in ("f1", "f3", "f4"):
        assert results[call_id].result == "Error: tool 'broken' raised PermissionError"
    assert result.messages[-1] == ChatMessage.assistant("done")
    assert result.updates[-1] == Finish(FinishReason.STOP)


# -- the round cap's answer mode ----------------------------------------------------------------


@pytest.mark.parametrize("last", ["Here is what I found.", None])
async def test_answer_mode_makes_one_last_call_without_tools(last: str | None) -> None:
    rounds = [tool_calls_response(ToolCall(f"c{i}", "nap", '{"seconds": 0}')) for i in range(2)]
    final = (
        last if last is not None else tool_calls_response(ToolCall("late", "nap", '{"seconds": 0}'))
    )
    model = ScriptedChatClient([*rounds, final])
    client = FunctionInvokingChatClient(model, [nap], max_rounds=2, on_max_rounds="answer")
    result = await run_to_completion(client, USER)
    assert len(model.calls) == 3
    assert len(model.calls[2].options.tools) == 1  # still listed: the history refers to it
    assert model.calls[2].options.tool_choice == "none"
    assert result.updates[-1].finish_reason is FinishReason.MAX_ROUNDS
    assert_transcript_valid([*USER, *result.messages])
    if last is not None:
        assert result.messages[-1] == ChatMessage.assistant(last)
    else:
        late = called(result)["late"]
        assert late.result == "Error: not run: the round limit is reached"


# -- error detail -------------------------------------------------------------------------------


@pytest.mark.parametrize("detailed", [False, True])
async def test_error_detail_is_opt_in(detailed: bool) -> None:
    script = [
        tool_calls_response(
            ToolCall("a", "broken", "{}"), ToolCall("b", "nap", '{"seconds": "x"}')
        ),
        "ok",
    ]
    client = FunctionInvokingChatClient(
        ScriptedChatClient(script), [broken, nap], include_detailed_errors=detailed
    )
    results = called(await run_to_completion(client, USER))
    assert isinstance(results["a"].exception, PermissionError)  # the caller always gets it
    assert results["a"].result == "Error: tool 'broken' raised PermissionError" + (
        ": token=hunter2" if detailed else ""
    )
    assert results["b"].result == (  # argument errors always go in full
        "Error: invalid arguments for tool 'nap': field 'seconds': expected number, got string"
    )


async def test_detail_of_an_exception_without_a_message_adds_nothing() -> None:
    @tool
    async def empty() -> str:
        """Fails without a message."""
        raise MemoryError

    script = [tool_calls_response(ToolCall("a", "empty", "{}")), "ok"]
    client = FunctionInvokingChatClient(
        ScriptedChatClient(script), [empty], include_detailed_errors=True
    )
    assert called(await run_to_completion(client, USER))["a"].result == (
        "Error: tool 'empty' raised MemoryError"  # no ": " with nothing after it
    )


async def test_successful_calls_carry_no_exception() -> None:
    client = FunctionInvokingChatClient(
        ScriptedChatClient([tool_calls_response(ToolCall("a", "nap", '{"seconds": 0}')), "ok"]),
        [nap],
    )
    assert called(await run_to_completion(client, USER))["a"].exception is None


# -- stopping from a tool -----------------------------------------------------------------------


async def test_stop_loop_ends_the_run_after_the_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool
    async def submit(answer: str) -> str:
        """Submit the final answer."""
        raise StopLoop(f"submitted {answer}")

    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("s", "submit", '{"answer": "42"}'), ToolCall("n", "nap", '{"seconds": 5}')
            )
        ]
    )
    result = await run_to_completion(FunctionInvokingChatClient(model, [submit, nap]), USER)
    results = called(result)
    assert results["s"] == ToolCalled(results["s"].call, "submitted 42", is_error=False)
    assert isinstance(results["s"].exception, StopLoop)
    assert results["n"].result == "slept 5"  # the batch finished
    assert len(model.calls) == 1  # the model was not called again
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert_transcript_valid([*USER, *result.messages])


# -- approval integrity -------------------------------------------------------------------------


def approval_setup() -> tuple[FunctionInvokingChatClient, list[dict[str, Any]]]:
    done: list[dict[str, Any]] = []

    @tool(requires_approval=True)
    async def transfer(amount: int, to: str) -> str:
        """Transfer money."""
        done.append({"amount": amount, "to": to})
        return f"sent {amount} to {to}"

    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("t", "transfer", '{"amount": 10, "to": "bob"}')), "ok", "ok"]
    )
    return FunctionInvokingChatClient(model, [transfer]), done


async def paused(client: FunctionInvokingChatClient) -> tuple[list[ChatMessage], Any]:
    result = await run_to_completion(client, USER)
    (request,) = [u for u in result.updates if isinstance(u, ToolApprovalRequest)]
    return [*USER, *result.messages], request


async def test_approve_and_reject_carry_the_digest() -> None:
    client, done = approval_setup()
    conversation, request = await paused(client)
    assert len(request.digest) == 64
    response = request.approve()
    assert (response.call_id, response.approved, response.digest) == ("t", True, request.digest)
    result = await run_to_completion(
        client, conversation, RunOptions(tool_approval_responses=[response])
    )
    assert done == [{"amount": 10, "to": "bob"}]
    assert result.messages[0].content == "sent 10 to bob"
    rejection = request.reject("too much")
    assert (rejection.approved, rejection.reason, rejection.digest) == (
        False,
        "too much",
        request.digest,
    )


async def test_an_edited_call_does_not_run_on_an_old_approval() -> None:
    client, done = approval_setup()
    conversation, request = await paused(client)
    assistant = conversation[-1]
    assert assistant.tool_calls is not None
    forged = ToolCall("t", "transfer", '{"amount": 10000, "to": "mallory"}')
    conversation[-1] = ChatMessage.assistant(assistant.content, [forged])
    options = RunOptions(tool_approval_responses=[request.approve()])
    with pytest.raises(ApprovalError, match=r"'t' does not match the call.*changed"):
        await run_to_completion(client, conversation, options)
    assert done == []


async def test_approval_with_replacement_arguments() -> None:
    client, done = approval_setup()
    conversation, request = await paused(client)
    options = RunOptions(
        tool_approval_responses=[request.approve(arguments={"amount": 5, "to": "bob"})]
    )
    result = await run_to_completion(client, conversation, options)
    assert done == [{"amount": 5, "to": "bob"}]
    (answer,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert answer.call.arguments == '{"amount":5,"to":"bob"}'
    assert result.messages[0].content == (
        '[arguments replaced by the user: {"amount":5,"to":"bob"}] sent 5 to bob'
    )
    assert result.messages[0].tool_call_id == "t"
    assert_transcript_valid([*conversation, *result.messages])


async def test_invalid_replacement_arguments_are_an_error_result() -> None:
    client, done = approval_setup()
    conversation, request = await paused(client)
    options = RunOptions(tool_approval_responses=[request.approve(arguments='{"amount": "lots"}')])
    result = await run_to_completion(client, conversation, options)
    assert done == []
    assert result.messages[0].content == (
        '[arguments replaced by the user: {"amount": "lots"}] '
        "Error: invalid arguments for tool 'transfer': missing required field 'to'; "
        "field 'amount': expected integer, got string"
    )


async def test_unserialisable_replacement_arguments_fail_before_anything_runs() -> None:
    done: list[Any] = []

    @tool(requires_approval=True)
    async def book(day: str) -> str:
        """Book a day."""
        done.append(day)
        return "booked"

    client = FunctionInvokingChatClient(
        ScriptedChatClient([tool_calls_response(ToolCall("b", "book", '{"day": "mon"}')), "ok"]),
        [book],
    )
    paused = await run_to_completion(client, USER)
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    answer = request.approve(arguments={"day": datetime.date(2026, 1, 1)})
    with pytest.raises(ApprovalError, match="'b' are not JSON-serialisable"):
        await run_to_completion(
            client, [*USER, *paused.messages], RunOptions(tool_approval_responses=[answer])
        )
    assert done == []


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
async def test_non_finite_replacement_arguments_never_reach_the_tool(bad: float) -> None:
    # As a mapping, they are not JSON: refused before anything runs, naming the field. As
    # text, they are not JSON either: an error result, as the model's would be.
    client, done = approval_setup()
    conversation, request = await paused(client)
    answer = request.approve(arguments={"amount": bad, "to": "bob"})
    with pytest.raises(
        ApprovalError, match=f"'t' are not JSON-serialisable: field 'amount' is {bad!r}, not a"
    ):
        await run_to_completion(client, conversation, RunOptions(tool_approval_responses=[answer]))
    text = json.dumps({"amount": bad, "to": "bob"})  # Python's non-JSON: Infinity, NaN
    options = RunOptions(tool_approval_responses=[request.approve(arguments=text)])
    result = await run_to_completion(client, conversation, options)
    assert "Error: invalid arguments for tool 'transfer': invalid JSON" in result.messages[0].text
    assert done == []


# -- eager start --------------------------------------------------------------------------------


async def test_eager_calls_start_while_the_model_streams(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: dict[str, float] = {}

    @tool
    async def fetch(name: str) -> str:
        """Fetch a thing."""
        started[name] = trio.current_time()
        await trio.sleep(1)
        return name

    updates = [
        *tool_call_updates("a", "fetch", '{"name": "a"}'),
        TextDelta("thinking more..."),
        *tool_call_updates("b", "fetch", '{"name": "b"}'),
        Finish(FinishReason.TOOL_CALLS),
    ]
    timings = {}
    for eager in (False, True):
        started.clear()
        model = ScriptedChatClient([updates, "ok"], delay=0.5)
        client = FunctionInvokingChatClient(model, [fetch], eager_tools=eager)
        begin = trio.current_time()
        result = await run_to_completion(client, USER)
        timings[eager] = trio.current_time() - begin
        tool_messages = [m.tool_call_id for m in result.messages if m.role is MessageRole.TOOL]
        assert tool_messages == ["a", "b"]  # call order, whatever the start order
        if eager:
            assert started["a"] - begin == pytest.approx(1.5)  # right after a's ToolCallEnd
    assert timings[True] < timings[False]


async def test_eager_start_stops_at_the_first_call_needing_approval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []

    @tool
    async def look(name: str) -> str:
        """Look."""
        ran.append(name)
        return name

    @tool(requires_approval=True)
    async def change(name: str) -> str:
        """Change."""
        ran.append(f"change {name}")
        return "changed"

    updates = [
        *tool_call_updates("a", "look", '{"name": "a"}'),
        *tool_call_updates("b", "change", '{"name": "b"}'),
        *tool_call_updates("c", "look", '{"name": "c"}'),
        Finish(FinishReason.TOOL_CALLS),
    ]
    client = FunctionInvokingChatClient(
        ScriptedChatClient([updates, "ok"]), [look, change], eager_tools=True
    )
    result = await run_to_completion(client, USER)
    assert ran == ["a"]  # c comes after a call that waits for approval
    assert result.updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL
    assert [m.tool_call_id for m in result.messages[1:]] == ["a"]
    conversation = [*USER, *result.messages]
    (request,) = [u for u in result.updates if isinstance(u, ToolApprovalRequest)]
    resumed = await run_to_completion(
        client, conversation, RunOptions(tool_approval_responses=[request.approve()])
    )
    assert ran[0] == "a"
    assert sorted(ran[1:]) == ["c", "change b"]  # resumed concurrently
    assert_transcript_valid([*conversation, *resumed.messages])


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


async def test_calls_queued_for_a_slot_when_the_stream_fails_were_not_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedChatClient(
        [
            [
                *tool_call_updates("a", "nap", '{"seconds": 10}'),
                *tool_call_updates("b", "nap", '{"seconds": 10}'),
                OSError("reset"),
            ]
        ],
        delay=1,
    )
    client = FunctionInvokingChatClient(model, [nap], eager_tools=True, max_concurrency=1)
    seen: list[Any] = []
    with pytest.raises(ChatClientError), trio.fail_after(100):
        async with client.run(USER) as stream:
            async for update in stream:
                seen.append(update)
    results = {u.call.id: (u.result, u.duration) for u in seen if isinstance(u, ToolCalled)}
    assert results["a"][0] == "Error: cancelled: the chat client failed (ChatClientError)"
    assert results["a"][1] > 0
    assert results["b"] == ("Error: not run: the chat client failed (ChatClientError)", 0)
    assert_transcript_valid([*USER, *stream.messages])


async def test_a_call_cancelled_while_queued_for_a_slot_never_ran(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("a", "nap", '{"seconds": 10}'), ToolCall("b", "nap", '{"seconds": 10}')
            )
        ]
    )
    client = FunctionInvokingChatClient(model, [nap], max_concurrency=trio.CapacityLimiter(1))
    scope = trio.CancelScope(deadline=trio.current_time() + 3)
    with trio.fail_after(100):
        result = await run_to_completion(client, USER, RunOptions(cancel_scope=scope))
    durations = {c.call.id: (c.result, c.duration) for c in called(result).values()}
    assert durations == {"a": ("Error: cancelled", 3), "b": ("Error: cancelled", 0)}


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"tool_timeout": 0}, "tool_timeout must be a number > 0"),
        ({"tool_timeout": "1"}, "tool_timeout must be a number"),
        ({"max_concurrency": 0}, "max_concurrency must be an integer >= 1"),
        ({"max_concurrency": 1.5}, "max_concurrency must be an integer"),
        ({"max_tool_calls": -1}, "max_tool_calls must be an integer >= 0"),
        ({"max_consecutive_errors": 0}, "max_consecutive_errors must be an integer >= 1"),
        ({"on_max_rounds": "retry"}, "on_max_rounds must be 'finish' or 'answer'"),
        ({"sequential": "no"}, "sequential must be True or False, got 'no'"),
        ({"sequential": 1}, "sequential must be True or False, got 1"),
        ({"eager_tools": "false"}, "eager_tools must be True or False, got 'false'"),
        ({"eager_tools": None}, "eager_tools must be True or False, got None"),
        (
            {"include_detailed_errors": "false"},
            "include_detailed_errors must be True or False, got 'false'",
        ),
        ({"include_detailed_errors": 0}, "include_detailed_errors must be True or False, got 0"),
    ],
)
def test_bad_options_are_value_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        FunctionInvokingChatClient(ScriptedChatClient([]), **options)


def test_bad_tool_timeout_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="tool timeout must be a number of seconds > 0"):

        @tool(timeout=-1)
        async def f() -> None:
            """Nothing."""
