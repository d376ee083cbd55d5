"""The loop hands updates on without a schedule point per update: these guard what that must
not cost -- backpressure, cancellation with updates buffered, fairness, big fan-outs."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel
import trio.testing

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    TextDelta,
)

USER = [ChatMessage.user("hi")]


class CountingScript:
    """A scripted model that counts how far its stream has been pulled."""

    def __init__(self, deltas: int) -> None:
        self.pulled = 0
        self.deltas = deltas
        self.inner = ScriptedChatClient(
            [[*(TextDelta("x") for _ in range(deltas)), Finish(FinishReason.STOP)]]
        )

    def run(self, messages: Any, options: Any = None) -> Any:
        outer = self

        class _CM:
            async def __aenter__(self) -> Any:
                self.cm = outer.inner.run(messages, options)
                stream = await self.cm.__aenter__()

                class _Counting:
                    def __aiter__(self) -> Any:
                        return self

                    async def __anext__(self) -> Any:
                        update = await stream.__anext__()
                        outer.pulled += 1
                        return update

                return _Counting()

            async def __aexit__(self, *exc: Any) -> Any:
                return await self.cm.__aexit__(*exc)

        return _CM()


async def test_backpressure_bounds_what_is_pulled_from_the_model() -> None:
    model = CountingScript(5_000)
    client = FunctionInvokingChatClient(model)
    async with client.run(USER) as stream:
        first = await stream.__anext__()
        assert first == TextDelta("x")
        await trio.testing.wait_all_tasks_blocked()
        # two channels of 256 (events, caller), plus at most one update in hand per task
        assert model.pulled <= 2 * 256 + 4, model.pulled
        count = 1 + len([u async for u in stream])
    assert count == 5_001


async def test_cancelled_caller_gets_cancelled_even_with_updates_buffered() -> None:
    model = ScriptedChatClient(
        [[*(TextDelta("x") for _ in range(1_000)), Finish(FinishReason.STOP)]]
    )
    client = FunctionInvokingChatClient(model)
    seen = 0
    with trio.CancelScope() as scope:
        async with client.run(USER) as stream:
            async for _ in stream:
                seen += 1
                if seen == 10:
                    scope.cancel()
    assert scope.cancelled_caught
    assert seen == 10  # the next __anext__ raised Cancelled although updates were buffered


async def test_a_long_stream_lets_other_tasks_run() -> None:
    model = ScriptedChatClient(
        [[*(TextDelta("x") for _ in range(10_000)), Finish(FinishReason.STOP)]]
    )
    client = FunctionInvokingChatClient(model)
    ticks = 0
    longest = 0
    since = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await trio.lowlevel.checkpoint()
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        async with client.run(USER) as stream:
            async for _ in stream:
                since += 1
                if ticks:
                    longest, since, ticks = max(longest, since), 0, 0
        nursery.cancel_scope.cancel()
    assert longest <= 2 * 256 + 2, longest  # the caller yields at least once per buffer-full


async def test_cancel_scope_stops_a_stream_that_never_yields() -> None:
    scope = trio.CancelScope()
    model = ScriptedChatClient(
        [[*(TextDelta("x") for _ in range(10_000)), Finish(FinishReason.STOP)]]
    )
    client = FunctionInvokingChatClient(model)
    seen: list[Any] = []
    async with client.run(USER, RunOptions(cancel_scope=scope)) as stream:
        async for update in stream:
            seen.append(update)
            if len(seen) == 3:
                scope.cancel()
    assert len(seen) < 3 + 2 * 256 + 3, len(seen)  # what was buffered, then Error("cancelled")
    assert seen[-1].__class__.__name__ == "Error"
    assert stream.messages[-1].content == "x" * (len(stream.messages[-1].content))


async def test_a_fan_out_wider_than_both_channels_answers_every_call() -> None:
    from trio_invoke import ToolCalled, tool
    from trio_invoke.testing import assert_transcript_valid, tool_call_updates

    @tool
    async def noop(i: int) -> str:
        """Nothing."""
        return "ok"

    updates: list[Any] = []
    for i in range(1_000):
        updates += tool_call_updates(f"c{i}", "noop", f'{{"i": {i}}}')
    model = ScriptedChatClient([[*updates, Finish(FinishReason.TOOL_CALLS)], "done"])
    client = FunctionInvokingChatClient(model, [noop])
    seen: list[Any] = []
    async with client.run(USER) as stream:
        async for update in stream:
            seen.append(update)
            if len(seen) % 100 == 0:
                await trio.lowlevel.checkpoint()  # a caller that does some work now and then
    assert sum(isinstance(u, ToolCalled) for u in seen) == 1_000
    assert_transcript_valid([*USER, *stream.messages])
    assert len(stream.messages) == 1 + 1_000 + 1


async def test_more_approval_requests_than_the_channel_holds() -> None:
    from trio_invoke import ToolApprovalRequest, tool
    from trio_invoke.testing import tool_call_updates

    @tool(requires_approval=True)
    async def guarded(i: int) -> str:
        """Needs a human."""
        return "ok"

    updates: list[Any] = []
    for i in range(300):
        updates += tool_call_updates(f"c{i}", "guarded", f'{{"i": {i}}}')
    model = ScriptedChatClient([[*updates, Finish(FinishReason.TOOL_CALLS)]])
    client = FunctionInvokingChatClient(model, [guarded])
    async with client.run(USER) as stream:
        seen = [u async for u in stream]
    assert sum(isinstance(u, ToolApprovalRequest) for u in seen) == 300
    assert seen[-1] == Finish(FinishReason.AWAITING_APPROVAL)


async def test_cancel_while_the_caller_lags_keeps_what_it_was_sent() -> None:
    scope = trio.CancelScope()
    model = ScriptedChatClient(
        [[*(TextDelta(f"{i},") for i in range(2_000)), Finish(FinishReason.STOP)]]
    )
    client = FunctionInvokingChatClient(model)
    texts: list[str] = []
    async with client.run(USER, RunOptions(cancel_scope=scope)) as stream:
        async for update in stream:
            if isinstance(update, TextDelta):
                texts.append(update.text)
            if len(texts) == 1:
                await trio.testing.wait_all_tasks_blocked()  # both channels fill up
                scope.cancel()
    assert update.__class__.__name__ == "Error"
    assert 1 < len(texts) < 2_000
    assert stream.messages[-1].content == "".join(texts)  # what the caller saw, exactly
