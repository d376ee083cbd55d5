"""Small Trio helpers of the loop: hand-off without a schedule point, and unwrapping the
exception groups of our own nurseries."""

from __future__ import annotations

from typing import Any, NoReturn

import trio

__all__ = ["offer", "reraise_single", "send", "single_exception"]


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


def single_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a group from one of our own nurseries stands for: its one exception that is not
    ``Cancelled``, or its first ``Cancelled`` if that is all it holds, or the group itself when
    several exceptions really happened. One level only: a user's own group stays whole."""
    others = [e for e in group.exceptions if not isinstance(e, trio.Cancelled)]
    if len(others) == 1:
        return others[0]
    return group.exceptions[0] if not others else group


def reraise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise :func:`_single_exception` of ``group`` bare, keeping its own context."""
    exc = single_exception(group)
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, group
