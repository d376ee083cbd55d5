"""Each round's two channels (``_loop._channels.channel_pair``): what ``trio.open_memory_channel``
makes, built without its typing call -- the same ends in the same state, behaving alike -- and
``trio.open_memory_channel`` itself where that shortcut does not apply; and ``must_checkpoint``,
the check of each update's cancellation point without ``checkpoint_if_cancelled``'s coroutine."""

from __future__ import annotations

import signal
import sys
import types
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio import _core
from trio.lowlevel import current_task

from trio_invoke import (
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    TextDelta,
    tool,
)
from trio_invoke._loop import _channels, _round, _stream
from trio_invoke._loop._channels import channel_pair
from trio_invoke.testing import tool_call_updates

USER = [ChatMessage.user("hi")]


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


def _script(rounds: int, calls: int) -> list[Any]:
    script: list[Any] = []
    for r in range(rounds):
        updates: list[Any] = []
        for c in range(calls):
            updates += tool_call_updates(f"c{r}_{c}", "echo", '{"text": "x"}')
        script.append([*updates, Finish(FinishReason.TOOL_CALLS)])
    return [*script, "done"]


def test_the_shortcut_applies_on_this_trio() -> None:
    # Else every round pays open_memory_channel's typing call (benchmarks/ would show it).
    assert _channels._build is not None


@pytest.mark.parametrize("size", [0, 1, 2, 256])
def test_the_ends_are_those_open_memory_channel_makes(size: int) -> None:
    ours, theirs = channel_pair(size), trio.open_memory_channel[Any](size)
    for mine, public in zip(ours, theirs, strict=True):
        assert type(mine) is type(public)
        assert mine.statistics() == public.statistics()
        assert mine.statistics().max_buffer_size == size
    for end in (*ours, *theirs):
        end.close()


async def test_they_behave_as_open_memory_channel_s() -> None:
    """Fill, overflow, clone, close, drain: both pairs answer each step alike."""

    def steps(send: Any, receive: Any) -> list[object]:
        seen: list[object] = []

        def attempt(action: Any) -> None:
            try:
                seen.append(action())
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError) as exc:
                seen.append(type(exc).__name__)
            seen.append(send.statistics() if not send._closed else receive.statistics())

        attempt(receive.receive_nowait)  # empty
        attempt(lambda: send.send_nowait(1))
        attempt(lambda: send.send_nowait(2))
        attempt(lambda: send.send_nowait(3))  # full at 2
        clone = send.clone()
        attempt(lambda: clone.send_nowait(4))
        attempt(receive.receive_nowait)
        attempt(lambda: clone.send_nowait(5))
        send.close()
        attempt(receive.receive_nowait)
        clone.close()
        attempt(receive.receive_nowait)
        attempt(receive.receive_nowait)  # closed and drained
        attempt(lambda: send.send_nowait(6))
        receive.close()
        return seen

    assert steps(*channel_pair(2)) == steps(*trio.open_memory_channel[int](2))


async def test_a_waiting_receiver_is_woken_by_a_send() -> None:
    send, receive = channel_pair(0)
    got: list[int] = []
    async with trio.open_nursery() as nursery:

        async def take() -> None:
            got.append(await receive.receive())

        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()
        assert receive.statistics().tasks_waiting_receive == 1
        await send.send(7)
    assert got == [7]


async def test_each_round_opens_an_events_channel_of_256_and_a_messages_channel_of_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replaced ``trio.open_memory_channel`` (here a spy) is the one the rounds call."""
    sizes: list[float] = []
    public = trio.open_memory_channel

    def spy(size: float) -> Any:
        sizes.append(size)
        return public(size)

    monkeypatch.setattr(trio, "open_memory_channel", spy)
    client = FunctionInvokingChatClient(ScriptedChatClient(_script(3, 2)), [echo])
    with trio.fail_after(5):
        response = await client.get_response(USER)
    assert response.finish_reason is FinishReason.STOP
    assert sizes == [256] + [256, 1] * 4  # the run's channel, then 3 tool rounds and the answer


@pytest.mark.parametrize("why", ["no private builder", "trio's internals differ"])
async def test_without_the_shortcut_the_loop_is_the_same(
    monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    if why == "no private builder":
        monkeypatch.setattr(_channels, "_build", None)
    else:  # a trio without the channel state the shortcut knows
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, "trio._channel", types.ModuleType("trio._channel"))
            assert _channels._private_builder() is None
        monkeypatch.setattr(_channels, "_build", None)
    client = FunctionInvokingChatClient(ScriptedChatClient(_script(2, 3)), [echo])
    with trio.fail_after(5):
        response = await client.get_response(USER)
    assert response.finish_reason is FinishReason.STOP
    assert [m.role.value for m in response.messages].count("tool") == 6
    assert channel_pair(256)[0].statistics().max_buffer_size == 256


def test_a_builder_whose_ends_differ_from_trio_s_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trio whose ``open_memory_channel`` no longer builds its ends that way."""
    public = trio.open_memory_channel
    monkeypatch.setattr(trio, "open_memory_channel", lambda size: public(size + 1))
    assert _channels._private_builder() is None
    monkeypatch.undo()
    assert _channels._private_builder() is not None


# -- poll: receive_nowait, with its two exceptions as values ------------------------------------


def test_poll_looks_at_the_state_on_this_trio() -> None:
    # Else the caller's stream raises and catches an exception about once per round.
    assert _channels.poll is not _channels._poll_public
    assert _channels.PEEKS


@pytest.mark.parametrize("poll", ["private", "public"])
def test_poll_answers_as_receive_nowait_does(poll: str) -> None:
    """Empty, items, a clone still open, every send end closed, the receive end closed: at each
    step ``poll`` gives what ``receive_nowait`` gives (its exceptions as EMPTY and ENDED)."""
    polled = _channels.poll if poll == "private" else _channels._poll_public

    def asked(receive: Any) -> object:
        try:
            return receive.receive_nowait()
        except trio.WouldBlock:
            return _channels.EMPTY
        except trio.EndOfChannel:
            return _channels.ENDED

    def steps(take: Any) -> list[object]:
        send, receive = trio.open_memory_channel[int](2)
        seen: list[object] = [take(receive)]
        send.send_nowait(1)
        send.send_nowait(2)
        clone = send.clone()
        seen += [take(receive), take(receive), take(receive)]
        clone.send_nowait(3)
        send.close()
        seen += [take(receive), take(receive)]  # a clone still open: empty, not ended
        clone.send_nowait(4)
        clone.close()
        seen += [take(receive), take(receive), take(receive)]
        receive.close()
        try:
            take(receive)
        except trio.ClosedResourceError:
            seen.append("ClosedResourceError")
        return seen

    expected = [_channels.EMPTY, 1, 2, _channels.EMPTY, 3, _channels.EMPTY]
    expected += [4, _channels.ENDED, _channels.ENDED, "ClosedResourceError"]
    assert steps(asked) == expected
    assert steps(polled) == expected


@pytest.mark.parametrize("poll", ["private", "public"])
async def test_poll_takes_a_waiting_sender_s_item_and_wakes_it(poll: str) -> None:
    polled = _channels.poll if poll == "private" else _channels._poll_public
    send, receive = trio.open_memory_channel[str](0)  # nothing buffered: the sender waits
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send.send, "waited")
        await trio.testing.wait_all_tasks_blocked()
        assert polled(receive) == "waited"  # (its task is rescheduled, the nursery ends)
        assert polled(receive) is _channels.EMPTY
    send.close()
    assert polled(receive) is _channels.ENDED


def test_a_channel_state_unlike_trio_s_is_not_polled_privately(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trio whose memory channels no longer hold the state ``poll`` reads."""
    public = trio.open_memory_channel

    class Unlike:  # the state, less the waiting senders receive_nowait reads
        def __init__(self, state: Any) -> None:
            self.data, self.open_send_channels = state.data, state.open_send_channels

    def unlike(size: int) -> Any:
        send, receive = public(size)
        receive._state = Unlike(receive._state)
        return send, receive

    monkeypatch.setattr(trio, "open_memory_channel", unlike)
    assert _channels._private_poll() is None
    monkeypatch.undo()
    assert _channels._private_poll() is not None


def test_a_replaced_open_memory_channel_is_not_taken_for_trio_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Channels that are not trio's own (a wrapper in ``open_memory_channel``'s place at
    import) tell nothing of trio's state: ``poll`` does not look at it."""
    public = trio.open_memory_channel

    class Wrapped:
        def __init__(self, receive: Any) -> None:
            self._receive = receive

        def receive_nowait(self) -> Any:
            return self._receive.receive_nowait()

    def wrapping(size: int) -> Any:
        send, receive = public(size)
        return send, Wrapped(receive)

    monkeypatch.setattr(trio, "open_memory_channel", wrapping)
    assert _channels._private_poll() is None


async def test_the_stream_with_public_poll_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stream, "poll", _channels._poll_public)
    monkeypatch.setattr(_stream, "PEEKS", False)  # as on a trio whose channel state differs
    client = FunctionInvokingChatClient(ScriptedChatClient(_script(3, 2)), [echo])
    with trio.fail_after(5):
        async with client.run(USER) as stream:
            kinds = [type(update).__name__ async for update in stream]
    assert kinds.count("ToolCalled") == 6
    assert kinds[-1] == "Finish"
    assert [m.role.value for m in stream.messages].count("tool") == 6


# -- must_checkpoint: checkpoint_if_cancelled's check, without its coroutine ----------------------


def test_the_cancellation_check_reads_the_task_on_this_trio() -> None:
    assert _channels.must_checkpoint is not _channels._always


async def test_must_checkpoint_answers_as_checkpoint_if_cancelled_acts() -> None:
    """Where nothing is cancelled it is ``False`` and counts a cancellation point (as
    ``trio.testing.assert_checkpoints`` reads them); in a cancelled scope it is ``True`` and
    the checkpoint raises; a shield hides the cancellation from both."""
    task: Any = trio.lowlevel.current_task()

    def must() -> bool:
        return _channels.must_checkpoint(task)

    before = task._cancel_points
    assert must() is False
    assert task._cancel_points == before + 1
    with trio.CancelScope() as scope:
        scope.cancel()
        with trio.CancelScope(shield=True):
            assert must() is False
            await trio.lowlevel.checkpoint_if_cancelled()  # nothing: as must() said
        assert must() is True
        await trio.lowlevel.checkpoint_if_cancelled()
        pytest.fail("not cancelled")  # pragma: no cover
    assert scope.cancelled_caught
    with trio.move_on_at(trio.current_time() - 1) as late:  # a deadline already past
        assert must() is True
        await trio.lowlevel.checkpoint_if_cancelled()
    assert late.cancelled_caught


def test_a_pending_ctrl_c_is_a_checkpoint_in_the_main_task_only() -> None:
    """A Ctrl-C that landed in protected code waits for the main task's next checkpoint:
    ``must_checkpoint`` says so there, and not in another task, which it does not reach."""
    seen: dict[str, bool] = {}

    @trio.lowlevel.enable_ki_protection
    def press_ctrl_c() -> None:  # protected: trio holds the interrupt as pending
        signal.raise_signal(signal.SIGINT)

    async def main() -> None:
        press_ctrl_c()
        seen["main"] = _channels.must_checkpoint(current_task())
        await trio.lowlevel.checkpoint_if_cancelled()  # delivers it
        pytest.fail("no KeyboardInterrupt")  # pragma: no cover

    async def other() -> None:
        press_ctrl_c()
        seen["other"] = _channels.must_checkpoint(current_task())

    async def parent() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
        pytest.fail("no KeyboardInterrupt")  # pragma: no cover

    for run in (main, parent):  # (the main task takes the interrupt at its next checkpoint)
        with pytest.raises(KeyboardInterrupt):
            trio.run(run)
    assert seen == {"main": True, "other": False}


def test_a_checkpoint_if_cancelled_that_reads_other_names_is_not_read_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trio whose ``checkpoint_if_cancelled`` reads anything else -- more, less (no Ctrl-C
    clause), or other names: every call site awaits the function itself."""

    async def reads_more() -> None:
        task = current_task()
        if task._cancel_status.effectively_cancelled or (
            task is task._runner.main_task and task._runner.ki_pending
        ):
            await _core.checkpoint()
            raise AssertionError
        task._cancel_points += 1
        task._schedule_points += 1  # (one name more)

    async def reads_less() -> None:
        task = current_task()
        if task._cancel_status.effectively_cancelled:  # (no Ctrl-C clause)
            await _core.checkpoint()
            raise AssertionError
        task._cancel_points += 1

    async def reads_other() -> None:
        task = trio.lowlevel.current_task()
        if task._cancel_status.effectively_cancelled or task.context.get(None):
            await trio.lowlevel.checkpoint()

    expected = _channels._CHECK_READS
    assert set(reads_more.__code__.co_names) > expected  # all it reads, and one more
    assert set(reads_less.__code__.co_names) < expected
    for other in (reads_more, reads_less, reads_other, len):  # (len: not even Python code)
        monkeypatch.setattr(_channels, "_PUBLIC_CHECK", other)
        assert _channels._private_check() is None, other
    monkeypatch.undo()
    assert _channels._private_check() is not None


async def test_a_replaced_checkpoint_if_cancelled_is_awaited_on_every_update(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A spy in ``checkpoint_if_cancelled``'s place (after import) is what every update's
    cancellation point awaits, on both sides of the round's channel: the caller's stream once
    per update it takes (and once at its end), the consumer once per model update."""
    public = trio.lowlevel.checkpoint_if_cancelled
    sites: dict[str, int] = {}
    stream_code = _stream.InvocationStream.__anext__.__code__
    consumer_code = _round.Round._stream.__code__

    async def spy() -> None:
        code = sys._getframe(1).f_code
        site = {stream_code: "stream", consumer_code: "consumer"}.get(code, "other")
        sites[site] = sites.get(site, 0) + 1
        await public()

    monkeypatch.setattr(trio.lowlevel, "checkpoint_if_cancelled", spy)
    client = FunctionInvokingChatClient(ScriptedChatClient(_script(1, 3)), [echo])
    with trio.fail_after(5):
        async with client.run(USER) as stream:
            updates = [update async for update in stream]
    assert sites["stream"] == len(updates) + 1  # (the last call ends the iteration)
    # Round 1: three calls, each Start, Args, End; round 2: the answer's text (no Finish)
    assert sites["consumer"] == 3 * 3 + 1


def test_a_ctrl_c_reaches_the_caller_at_its_next_update_with_updates_buffered() -> None:
    """A Ctrl-C that lands in protected code while the caller reads is raised by the stream's
    next ``__anext__``, although the updates after it are already buffered."""
    taken: list[object] = []

    @trio.lowlevel.enable_ki_protection
    def press_ctrl_c() -> None:
        signal.raise_signal(signal.SIGINT)

    async def main() -> None:
        script = [[TextDelta("a")] * 100 + [Finish(FinishReason.STOP)]]
        agent = FunctionInvokingChatClient(ScriptedChatClient(script), [echo])
        async with agent.run(USER) as stream:
            async for update in stream:
                taken.append(update)
                if len(taken) == 50:
                    press_ctrl_c()

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    assert len(taken) == 50


@pytest.mark.parametrize("check", ["private", "always"])
async def test_a_cancellation_reaches_the_run_between_any_two_updates(
    check: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling the run's scope after the caller took its k-th update ends the run with
    ``Error("cancelled")`` and a valid transcript, whether the check reads the task or always
    awaits ``checkpoint_if_cancelled``; the scripted model never yields, so only the checks
    can stop it. (Up to 300: the model runs at most a buffer-full, 256, ahead of the caller, so
    it has not finished yet.)"""
    if check == "always":
        for module in (_round, _stream):
            monkeypatch.setattr(module, "must_checkpoint", _channels._always)
    script = [[TextDelta("a")] * 600 + [Finish(FinishReason.STOP)]]
    for k in (1, 2, 255, 256, 257, 300):
        scope = trio.CancelScope()
        agent = FunctionInvokingChatClient(ScriptedChatClient(script), [echo])
        taken = []
        with trio.fail_after(5):
            async with agent.run(USER, RunOptions(cancel_scope=scope)) as stream:
                async for update in stream:
                    taken.append(update)
                    if len(taken) == k:
                        scope.cancel()
        assert isinstance(taken[-1], Error), (k, taken[-1])
        assert taken[-1].message == "cancelled"
        assert len(taken) - 1 < 600  # the model stream was cut short
        assert all(type(u) is TextDelta for u in taken[:-1])


async def test_the_consumer_stops_at_the_update_after_a_cancellation() -> None:
    """A model stream that never yields, and cancels the run's scope itself after its 10th
    update (as code run by the stream might): the consumer's next check stops it, rather than
    the channel filling up first (256 updates)."""
    scope = trio.CancelScope()

    class Cancelling:
        @asynccontextmanager
        async def run(self, messages: Any, options: Any = None) -> Any:
            async def updates() -> Any:
                for n in range(1, 601):
                    yield TextDelta("a")
                    if n == 10:
                        scope.cancel()

            yield updates()

    agent = FunctionInvokingChatClient(Cancelling(), [echo])
    with trio.fail_after(5):
        async with agent.run(USER, RunOptions(cancel_scope=scope)) as stream:
            taken = [update async for update in stream]
    assert isinstance(taken[-1], Error)
    assert [type(u) for u in taken[:-1]] == [TextDelta] * 10
