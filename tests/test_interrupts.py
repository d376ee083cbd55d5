"""Interrupts are never lost: a ``BaseException`` that is not ``trio.Cancelled`` -- Ctrl-C's
``KeyboardInterrupt``, ``SystemExit``, one of the user's own -- raised in a tool (async, or sync
in its worker thread) or in the inner client comes out of the ``async for`` / ``async with``
bare: never swallowed, never inside a group, and after the ``ToolCalled`` owed for each call.

Whether the interrupt or a sibling's result comes first depends on scheduling, so every case
runs many times with the timing varied (sibling delays, consumer speed, eager start).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from trio_invoke import (
    AgentResponseUpdate,
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    TextDelta,
    ToolCall,
    ToolCalled,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, tool_call_updates, tool_calls_response

USER = [ChatMessage.user("go")]


class CustomInterrupt(BaseException):
    """A user's own BaseException: it must travel like KeyboardInterrupt does."""


INTERRUPTS: list[Callable[[], BaseException]] = [
    KeyboardInterrupt,
    lambda: SystemExit(3),
    CustomInterrupt,
    GeneratorExit,
]
RUNS = 30


def make_tools(interrupt: BaseException, delay: float) -> list[Any]:
    @tool
    async def slow(i: int) -> str:
        """Takes its time."""
        await trio.sleep(delay * (i + 1))
        return f"slow {i}"

    @tool
    async def crash() -> str:
        """Raises the interrupt."""
        await trio.sleep(delay)
        raise interrupt

    @tool
    def sync_crash() -> str:
        """Raises the interrupt in its worker thread."""
        raise interrupt

    @tool
    def sync_exit() -> str:
        """Calls sys.exit() in its worker thread."""
        sys.exit(7)

    return [slow, crash, sync_crash, sync_exit]


def batch(crasher: str, siblings: int) -> list[Any]:
    calls = [ToolCall(f"s{i}", "slow", f'{{"i": {i}}}') for i in range(siblings)]
    calls.insert(siblings // 2, ToolCall("x", crasher, "{}"))
    return tool_calls_response(*calls)


async def run_and_collect(
    agent: FunctionInvokingChatClient, *, pause: float = 0.0
) -> tuple[list[AgentResponseUpdate], BaseException | None, list[ChatMessage]]:
    updates: list[AgentResponseUpdate] = []
    caught: BaseException | None = None
    stream = None
    try:
        with trio.fail_after(60):
            async with agent.run(USER) as stream:
                async for update in stream:
                    updates.append(update)
                    if pause:
                        await trio.sleep(pause)
    except BaseException as exc:
        caught = exc
    assert stream is not None
    return updates, caught, stream.messages


@pytest.mark.parametrize("make", INTERRUPTS, ids=lambda m: type(m()).__name__)
@pytest.mark.parametrize("crasher", ["crash", "sync_crash"])
async def test_an_interrupt_from_a_tool_comes_out_bare_after_the_owed_results(
    make: Callable[[], BaseException], crasher: str, request: pytest.FixtureRequest
) -> None:
    if crasher == "crash":  # a worker thread needs real time: the autojump clock would race it
        request.getfixturevalue("autojump_clock")
    for run in range(RUNS):
        interrupt = make()
        tools = make_tools(interrupt, delay=(run % 3) * 0.002)
        script = [batch(crasher, siblings=run % 4), "never reached"]
        agent = FunctionInvokingChatClient(
            ScriptedChatClient(script), tools, eager_tools=bool(run % 2)
        )
        updates, caught, messages = await run_and_collect(agent, pause=(run % 5) * 0.001)
        assert caught is interrupt, (run, caught)  # the very object, bare: no group around it
        called = [u for u in updates if isinstance(u, ToolCalled)]
        assert sorted(c.call.id for c in called) == sorted(c.id for c in messages[0].tool_calls)
        crashed = next(c for c in called if c.call.id == "x")
        assert crashed.result == f"Error: cancelled: interrupted ({type(interrupt).__name__})"
        assert not any(isinstance(u, Finish | Error) for u in updates)
        assert_transcript_valid([*USER, *messages])


async def test_sys_exit_in_a_sync_tool_keeps_its_code() -> None:
    for run in range(RUNS):  # real time (a worker thread), a few ms per run
        tools = make_tools(KeyboardInterrupt(), delay=(run % 3) * 0.002)
        agent = FunctionInvokingChatClient(
            ScriptedChatClient([batch("sync_exit", siblings=run % 3)]), tools
        )
        _, caught, messages = await run_and_collect(agent)
        assert isinstance(caught, SystemExit)
        assert caught.code == 7
        assert_transcript_valid([*USER, *messages])


class InterruptingClient:
    """A chat client that streams ``before``, then raises ``interrupt`` (at ``where``)."""

    def __init__(self, interrupt: BaseException, where: str, before: Sequence[Any]) -> None:
        self.interrupt, self.where, self.before = interrupt, where, before

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        if self.where == "run":
            raise self.interrupt
        yield self._updates()

    async def _updates(self) -> AsyncIterator[AgentResponseUpdate]:
        for update in self.before:
            await trio.sleep(0.001)
            yield update
        raise self.interrupt


@pytest.mark.parametrize("make", INTERRUPTS, ids=lambda m: type(m()).__name__)
@pytest.mark.parametrize("where", ["run", "stream"])
async def test_an_interrupt_from_the_inner_client_comes_out_bare(
    make: Callable[[], BaseException], where: str, autojump_clock: trio.testing.MockClock
) -> None:
    @tool
    async def wait(i: int) -> str:
        """Waits."""
        await trio.sleep(1)
        return "waited"

    for run in range(RUNS):
        interrupt = make()
        before = [TextDelta("thinking "), *tool_call_updates("e1", "wait", '{"i": 1}')]
        client = InterruptingClient(interrupt, where, before[: run % (len(before) + 1)])
        agent = FunctionInvokingChatClient(client, [wait], eager_tools=True)
        updates, caught, messages = await run_and_collect(agent, pause=(run % 4) * 0.002)
        assert caught is interrupt, (run, caught)
        assert_transcript_valid([*USER, *messages])
        for update in updates:
            if isinstance(update, ToolCalled):  # the eager call, whose task the interrupt
                # that came right after its ToolCallEnd cut short before it began its tool
                assert update.result == (
                    f"Error: not run: interrupted ({type(interrupt).__name__})"
                )


async def test_an_interrupt_reaches_a_caller_that_stopped_reading(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The caller leaves the ``async for`` (or never reads) while a tool raises: the interrupt
    comes out of the ``async with`` instead."""
    for run in range(RUNS):
        interrupt = KeyboardInterrupt()
        tools = make_tools(interrupt, delay=0.01)
        agent = FunctionInvokingChatClient(ScriptedChatClient([batch("crash", 2)]), tools)
        with pytest.raises(KeyboardInterrupt) as raised, trio.fail_after(10):
            async with agent.run(USER) as stream:
                if run % 2:
                    async for _ in stream:
                        break  # left early, before the interrupt
                await trio.sleep(1)  # the tool raises meanwhile; the caller does not read
        assert raised.value is interrupt


async def test_get_response_lets_an_interrupt_out_bare(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for make in INTERRUPTS:
        interrupt = make()
        agent = FunctionInvokingChatClient(
            ScriptedChatClient([batch("crash", 2)]), make_tools(interrupt, 0.01)
        )
        with pytest.raises(BaseException) as raised:  # noqa: PT011 -- identity checked below
            await agent.get_response(USER)
        assert raised.value is interrupt


async def test_an_interrupt_in_the_callers_block_is_not_wrapped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch("crash", 3)]), make_tools(RuntimeError(), 10)
    )
    with pytest.raises(KeyboardInterrupt):
        async with agent.run(USER) as stream:
            async for update in stream:
                if isinstance(update, TextDelta | FinishReason):
                    continue
                raise KeyboardInterrupt
