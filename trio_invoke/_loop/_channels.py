"""Small Trio helpers of the loop: each round's channel pair, hand-off and taking without a
schedule point, the cancellation point of each update, and unwrapping the exception groups of
our own nurseries."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar

import trio

__all__ = [
    "EMPTY",
    "ENDED",
    "PEEKS",
    "channel_pair",
    "must_checkpoint",
    "offer",
    "poll",
    "primary",
    "reraise_single",
    "send",
]

Pair = tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]
T = TypeVar("T")


def channel_pair(size: int) -> Pair:
    """``trio.open_memory_channel(size)``, as the loop opens it: twice per round (events and
    messages), once per run (the caller's stream).

    Built as trio builds it -- one channel state, each end made the way ``clone()`` makes one
    -- but without the two ``MemorySendChannel[T]`` subscripts ``open_memory_channel`` runs on
    every call, which go through ``typing``'s generic alias and a failed attribute lookup: about
    5 of its 7-10 µs, a twentieth of a round on the ``rounds`` benchmark. The ends are the same
    classes in the same state (``tests/test_channels.py`` compares them). Where trio's internals
    are not what this expects, or ``trio.open_memory_channel`` was replaced (a test's spy, an
    instrumenting wrapper), this is ``trio.open_memory_channel(size)`` itself.
    """
    if _build is None or trio.open_memory_channel is not _PUBLIC:
        return trio.open_memory_channel(size)  # [T](n) would cost a typing call more
    return _build(size)


_PUBLIC = trio.open_memory_channel


def _private_builder() -> Callable[[int], Pair] | None:
    """Trio's own construction of a memory channel, if it is the one this module knows (trio
    0.28 to 0.35 build ``MemoryChannelState(size)`` and each end with ``Class._create(state)``);
    ``None`` otherwise."""
    try:
        from trio._channel import MemoryChannelState  # noqa: PLC0415  (private: guarded)

        create_send = trio.MemorySendChannel._create
        create_receive = trio.MemoryReceiveChannel._create
    except (ImportError, AttributeError):
        return None

    def build(size: int) -> Pair:
        state: Any = MemoryChannelState(size)
        return create_send(state), create_receive(state)

    try:  # the ends must be what open_memory_channel makes, in the same state
        (send, receive), (their_send, their_receive) = build(1), trio.open_memory_channel(1)
        same = (
            type(send) is type(their_send)
            and type(receive) is type(their_receive)
            and send.statistics() == their_send.statistics()
            and receive.statistics() == their_receive.statistics()
        )
        send.send_nowait(None)
        same = same and receive.receive_nowait() is None
        for end in (send, receive, their_send, their_receive):
            end.close()
    except Exception:
        return None
    return build if same else None


_build = _private_builder()


class Polled(enum.Enum):
    """What :func:`poll` found instead of an item."""

    EMPTY = "empty"
    """Nothing to take, and a send end is open (``receive_nowait`` raises ``WouldBlock``)."""
    ENDED = "ended"
    """Nothing to take, and every send end is closed (``EndOfChannel``)."""


EMPTY: Final = Polled.EMPTY
ENDED: Final = Polled.ENDED


def _poll_public(channel: trio.MemoryReceiveChannel[T]) -> T | Polled:
    try:
        return channel.receive_nowait()
    except trio.WouldBlock:
        return EMPTY
    except trio.EndOfChannel:
        return ENDED


def _private_poll() -> Callable[[trio.MemoryReceiveChannel[Any]], Any] | None:
    """A :func:`poll` that looks at the channel's state before it asks, if trio's memory
    channels hold the state this expects (trio 0.28 to 0.35: ``_closed``, and ``_state`` with
    ``data``, ``send_tasks`` and ``open_send_channels``, as ``receive_nowait`` reads them);
    ``None`` otherwise."""
    receive_type = trio.MemoryReceiveChannel

    def poll(channel: trio.MemoryReceiveChannel[Any]) -> Any:
        if type(channel) is not receive_type:
            return _poll_public(channel)
        state = channel._state  # (private: checked below)
        if state.data or state.send_tasks or channel._closed:
            return channel.receive_nowait()  # an item, or ClosedResourceError
        return EMPTY if state.open_send_channels else ENDED

    try:  # the same answers as receive_nowait's, in every state it can be in without a task
        send, receive = trio.open_memory_channel[object](1)
        if type(receive) is not receive_type:  # (a replaced open_memory_channel: not trio's)
            return None
        same = poll(receive) is EMPTY is _poll_public(receive)
        send.send_nowait("item")
        same = same and poll(receive) == "item" and _poll_public(receive) is EMPTY
        send.send_nowait("last")
        send.close()
        same = same and poll(receive) == "last" and poll(receive) is ENDED
        same = same and _poll_public(receive) is ENDED
        receive.close()
        try:
            poll(receive)
            same = False
        except trio.ClosedResourceError:
            pass
    except Exception:
        return None
    return poll if same else None


_peeking = _private_poll()
PEEKS: Final = _peeking is not None
"""Whether :func:`poll` looks at the channel's state (trio's memory channels hold the state it
expects): then a caller may look at ``channel._state.data`` itself, as :func:`poll` does."""
poll: Callable[[trio.MemoryReceiveChannel[Any]], Any] = _peeking or _poll_public
"""``channel.receive_nowait()``, with :data:`EMPTY` for its ``WouldBlock`` and :data:`ENDED` for
its ``EndOfChannel``: raising and catching one costs about a microsecond, and the caller's stream
meets both about once per round. Where trio's channel state is not what this expects, it is
``receive_nowait`` in a ``try``. (Typed ``Any``: the result is an item or a :class:`Polled`.)"""


_PUBLIC_CHECK = trio.lowlevel.checkpoint_if_cancelled
_CHECK_READS = frozenset(
    {
        "current_task",
        "_cancel_status",
        "effectively_cancelled",
        "_runner",
        "main_task",
        "ki_pending",
        "_core",
        "checkpoint",
        "AssertionError",
        "_cancel_points",
    }
)
"""What ``trio.lowlevel.checkpoint_if_cancelled`` reads in trio 0.28 to 0.35, all it reads."""


def _always(task: trio.lowlevel.Task) -> bool:
    return True


def _private_check() -> Callable[[trio.lowlevel.Task], bool] | None:
    """:func:`must_checkpoint` reading the task's state itself, if trio's
    ``checkpoint_if_cancelled`` reads what this expects and nothing else; ``None`` otherwise."""
    code = getattr(_PUBLIC_CHECK, "__code__", None)
    if code is None or frozenset(code.co_names) != _CHECK_READS:
        return None
    lowlevel = trio.lowlevel

    def must_checkpoint(task: Any) -> bool:
        if lowlevel.checkpoint_if_cancelled is not _PUBLIC_CHECK:
            return True  # replaced (a test's spy, an instrumenting wrapper): let it run
        if task._cancel_status.effectively_cancelled or (
            task is task._runner.main_task and task._runner.ki_pending
        ):
            return True
        task._cancel_points += 1  # (as trio counts one: ``trio.testing.assert_checkpoints``)
        return False

    return must_checkpoint


must_checkpoint: Callable[[trio.lowlevel.Task], bool] = _private_check() or _always
"""Whether ``await trio.lowlevel.checkpoint_if_cancelled()`` would do anything in ``task``, the
running task (``trio.lowlevel.current_task()``; a caller that already holds it passes it): its
scope is cancelled, or a Ctrl-C waits for the main task. If not, it has counted the
cancellation point, as ``checkpoint_if_cancelled`` does, and there is nothing to await. The loop
checks once per update on each side of a round's channel (the consumer, which knows its task,
and the caller's stream), where awaiting that coroutine took 0.28 µs a call and this 0.14 µs
given the task, 0.22 µs asking trio for it (2-core EPYC, Python 3.11). Where trio's function
reads anything else, or was replaced, this is always ``True``: then every call site awaits
``checkpoint_if_cancelled`` itself, as it would without it::

    if must_checkpoint(trio.lowlevel.current_task()):
        await trio.lowlevel.checkpoint_if_cancelled()  # raises Cancelled, or the Ctrl-C
"""


def offer(channel: trio.MemorySendChannel[Any], item: Any) -> bool:
    """Put ``item`` in ``channel`` if it has room, without a schedule point; ``False`` if full.

    ``await channel.send(x)`` yields to the scheduler even when the buffer has room: on a stream
    of small updates that round trip is most of the cost. Callers offer first and ``await
    send`` only when the channel is full, so backpressure is unchanged and a producer still
    yields at least once per buffer-full. (Sync on purpose: the ``WouldBlock`` raised here does
    not pin the caller's frame while it then waits in ``send``.)
    """
    try:
        channel.send_nowait(item)
    except trio.WouldBlock:
        return False
    return True


async def send(channel: trio.MemorySendChannel[Any], item: Any) -> None:
    """``await channel.send(item)``, without the schedule point while there is room.

    Cancellation: the item was sent, or (when cancelled while waiting for room) it was not.
    """
    if not offer(channel, item):
        await channel.send(item)


def primary(exc: BaseException) -> BaseException:
    """What an exception out of one of our own nurseries stands for: never a group.

    An interrupt -- a ``BaseException`` that is neither an ``Exception`` nor ``Cancelled``, such
    as ``KeyboardInterrupt`` or ``SystemExit`` -- wins, however deep in groups it is. Otherwise
    the group's first exception that is not ``Cancelled`` (one level only: a user's own group
    inside stays whole), else its first ``Cancelled``. An exception that is not a group is itself.
    """
    interrupt = _interrupt(exc)
    if interrupt is not None:
        return interrupt
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    cancelled, rest = exc.split(trio.Cancelled)
    if rest is not None:
        return rest.exceptions[0]
    assert cancelled is not None
    return primary(cancelled.exceptions[0])


def _interrupt(exc: BaseException) -> BaseException | None:
    if isinstance(exc, BaseExceptionGroup):
        for leaf in exc.exceptions:
            found = _interrupt(leaf)
            if found is not None:
                return found
        return None
    return None if isinstance(exc, Exception | trio.Cancelled) else exc


def reraise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise :func:`primary` of ``group`` bare, keeping its own context."""
    exc = primary(group)
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, group
