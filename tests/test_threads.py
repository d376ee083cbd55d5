"""Tool threads: their own ``CapacityLimiter``, so abandoned ones cannot starve the program.

These tests block real threads on ``threading.Event``s, so they run on the real clock (a
virtual clock would jump to the next deadline whenever every task waits for a thread); every
wait is bounded with ``trio.fail_after``, and every thread is released before the test ends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from trio_invoke import (
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    ToolCalled,
    ToolDefinitionError,
    current_default_tool_thread_limiter,
    tool,
)
from trio_invoke._threads import DEFAULT_TOOL_THREADS, tool_thread_limiter
from trio_invoke.testing import tool_call_updates

USER = [ChatMessage.user("go")]
WAIT = 10.0
"""Seconds any one wait may take before the test fails."""


class Gate:
    """Sync tools that block their thread until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Semaphore(0)
        self.finished = threading.Semaphore(0)

    def block(self, i: int = 0) -> str:
        self.entered.release()
        self.opened.wait(WAIT * 3)
        self.finished.release()
        return f"late {i}"

    async def wait_entered(self, count: int) -> None:
        await self._take(self.entered, count, "entered")

    async def wait_finished(self, count: int) -> None:
        await self._take(self.finished, count, "finished")

    @staticmethod
    async def _take(semaphore: threading.Semaphore, count: int, what: str) -> None:
        for index in range(count):
            if not await trio.to_thread.run_sync(semaphore.acquire, True, WAIT):
                raise AssertionError(f"only {index} of {count} threads {what} in {WAIT} s")


@pytest.fixture
def gate() -> Iterator[Gate]:
    made = Gate()
    yield made
    made.opened.set()  # never leave a thread blocked


def calls(name: str, count: int) -> list[Any]:
    updates: list[Any] = []
    for index in range(count):
        updates += tool_call_updates(f"call_{index}", name, json.dumps({"i": index}))
    return [[*updates, Finish(FinishReason.TOOL_CALLS)], "done"]


async def results(client: FunctionInvokingChatClient) -> list[str]:
    async with client.run(USER) as stream:
        return [u.result async for u in stream if isinstance(u, ToolCalled)]


async def test_the_default_limiter_is_one_per_run_and_not_trios() -> None:
    limiter = current_default_tool_thread_limiter()
    assert limiter is current_default_tool_thread_limiter()
    assert limiter is not trio.to_thread.current_default_thread_limiter()
    assert limiter.total_tokens == DEFAULT_TOOL_THREADS == 40
    assert tool_thread_limiter() is limiter


def test_each_trio_run_has_its_own_default() -> None:
    async def get() -> trio.CapacityLimiter:
        return current_default_tool_thread_limiter()

    assert trio.run(get) is not trio.run(get)
    with pytest.raises(RuntimeError):
        current_default_tool_thread_limiter()  # outside a run


async def test_a_sync_tool_holds_a_tool_thread_token_not_one_of_trios(gate: Gate) -> None:
    blocker = tool(name="block")(gate.block)
    limiter = current_default_tool_thread_limiter()
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocker.execute, {})
            await gate.wait_entered(1)
            assert limiter.borrowed_tokens == 1
            # gate.wait_entered itself used one of Trio's threads, and returned it.
            assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
            gate.opened.set()
        assert limiter.borrowed_tokens == 0


async def test_abandoned_thread_tools_do_not_starve_other_thread_work(gate: Gate) -> None:
    blocker = tool(name="block")(gate.block)

    @tool
    def quick(i: int) -> str:
        return f"quick {i}"

    shared = FunctionInvokingChatClient(
        ScriptedChatClient([*calls("block", 2), *calls("quick", 1)]),
        [blocker, quick],
        tool_timeout=0.05,
        max_tool_threads=2,
    )
    with trio.fail_after(WAIT):
        # Two calls time out; their threads are abandoned, still blocked, holding both tokens.
        assert await results(shared) == ["Error: tool 'block' timed out after 0.05 s"] * 2
        await gate.wait_entered(2)
        assert not gate.opened.is_set()
        # The rest of the program's thread work runs at once: Trio's limiter is untouched ...
        assert await trio.to_thread.run_sync(lambda: "free") == "free"
        assert trio.to_thread.current_default_thread_limiter().borrowed_tokens == 0
        # ... and so do sync tools under another limiter (another client, the default).
        other = FunctionInvokingChatClient(ScriptedChatClient(calls("quick", 3)), [quick])
        assert sorted(await results(other)) == ["quick 0", "quick 1", "quick 2"]
    # The same client's next sync call waits for a token (and times out, waiting).
    with trio.fail_after(WAIT):
        assert await results(shared) == ["Error: tool 'quick' timed out after 0.05 s"]
        gate.opened.set()
        await gate.wait_finished(2)  # the abandoned threads end, and give their tokens back


async def test_a_client_limiter_caps_its_tool_threads(gate: Gate) -> None:
    limiter = trio.CapacityLimiter(3)
    blocker = tool(name="block")(gate.block)
    client = FunctionInvokingChatClient(
        ScriptedChatClient(calls("block", 5)), [blocker], max_tool_threads=limiter
    )
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            got: list[list[str]] = []

            async def run() -> None:
                got.append(sorted(await results(client)))

            nursery.start_soon(run)
            await gate.wait_entered(3)
            await trio.sleep(0.05)
            assert limiter.borrowed_tokens == 3
            assert limiter.statistics().tasks_waiting == 2  # the other two calls queue
            assert current_default_tool_thread_limiter().borrowed_tokens == 0
            gate.opened.set()
        assert got == [[f"late {i}" for i in range(5)]]
    assert tool_thread_limiter() is current_default_tool_thread_limiter()  # not leaked here


async def test_an_int_is_one_limiter_per_client_and_run(gate: Gate) -> None:
    blocker = tool(name="block")(gate.block)
    client = FunctionInvokingChatClient(
        # Two runs at once: each takes one round of calls from the script, then one answer.
        ScriptedChatClient([calls("block", 1)[0]] * 2 + ["done"] * 2),
        [blocker],
        max_tool_threads=1,
    )
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(results, client)
            nursery.start_soon(results, client)  # a second run of the same client
            await gate.wait_entered(1)
            await trio.sleep(0.05)
            limiter = client._tool_threads.limiter()
            assert limiter is not None
            assert limiter.total_tokens == 1
            assert limiter.borrowed_tokens == 1
            assert limiter.statistics().tasks_waiting == 1  # the other run's call
            gate.opened.set()


async def test_max_tool_threads_assigned_later_takes_effect() -> None:
    seen: list[trio.CapacityLimiter] = []

    @tool
    async def which(i: int) -> str:
        """The limiter the run's sync tools use."""
        seen.append(tool_thread_limiter())
        return "ok"

    limiter = trio.CapacityLimiter(2)
    client = FunctionInvokingChatClient(ScriptedChatClient(calls("which", 1) * 2), [which])
    client.max_tool_threads = limiter
    with trio.fail_after(WAIT):
        assert await results(client) == ["ok"]
    assert seen == [limiter]
    with pytest.raises(ConfigurationError, match="max_tool_threads"):
        client.max_tool_threads = 0
    assert client.max_tool_threads is limiter
    client.max_tool_threads = None
    with trio.fail_after(WAIT):
        assert await results(client) == ["ok"]
    assert seen[1] is current_default_tool_thread_limiter()


async def test_a_tools_own_limiter_wins(gate: Gate) -> None:
    own = trio.CapacityLimiter(1)
    client_limiter = trio.CapacityLimiter(5)
    blocker = tool(name="block", limiter=own)(gate.block)
    assert blocker.limiter is own
    client = FunctionInvokingChatClient(
        ScriptedChatClient(calls("block", 2)), [blocker], max_tool_threads=client_limiter
    )
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(results, client)
            await gate.wait_entered(1)
            await trio.sleep(0.05)
            assert own.borrowed_tokens == 1
            assert own.statistics().tasks_waiting == 1
            assert client_limiter.borrowed_tokens == 0
            gate.opened.set()


async def test_nested_runs_inherit_the_outer_limiter(gate: Gate) -> None:
    """A tool that runs another agent: the inner client without max_tool_threads uses the
    outer run's limiter."""
    outer_limiter = trio.CapacityLimiter(4)
    blocker = tool(name="block")(gate.block)
    inner = FunctionInvokingChatClient(ScriptedChatClient(calls("block", 1)), [blocker])

    @tool
    async def delegate(i: int) -> list[str]:
        return await results(inner)

    outer = FunctionInvokingChatClient(
        ScriptedChatClient(calls("delegate", 1)), [delegate], max_tool_threads=outer_limiter
    )
    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(results, outer)
            await gate.wait_entered(1)
            assert outer_limiter.borrowed_tokens == 1
            gate.opened.set()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2", object()])
def test_max_tool_threads_must_be_a_positive_int_a_limiter_or_none(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_tool_threads must be an integer >= 1"):
        FunctionInvokingChatClient(ScriptedChatClient([]), max_tool_threads=bad)


def test_a_tool_limiter_must_be_a_capacity_limiter() -> None:
    for bad in (3, "x", threading.Semaphore(1)):
        with pytest.raises(ToolDefinitionError, match=r"limiter must be a trio\.CapacityLimiter"):
            tool(limiter=bad)(_nothing)  # type: ignore[call-overload]


def _nothing() -> None:
    pass
