"""Each round's two channels (``_loop._channels.channel_pair``): what ``trio.open_memory_channel``
makes, built without its typing call -- the same ends in the same state, behaving alike -- and
``trio.open_memory_channel`` itself where that shortcut does not apply."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import trio
import trio.testing

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    tool,
)
from trio_invoke._loop import _channels, _stream
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
