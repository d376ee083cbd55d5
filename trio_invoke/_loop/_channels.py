"""Small Trio helpers of the loop: hand-off without a schedule point, and unwrapping the
exception groups of our own nurseries."""

from __future__ import annotations

from typing import Any, NoReturn

import trio

__all__ = ["offer", "primary", "reraise_single", "send"]


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
