"""What the tests of stray cancellations need: a ``trio.Cancelled`` that nothing is cancelling."""

from __future__ import annotations

import trio


async def stray_cancelled() -> trio.Cancelled:
    """A Cancelled of a scope that is over: raised later, nothing around it is cancelling."""
    with trio.CancelScope() as inner:
        inner.cancel()
        try:
            await trio.sleep(1)
        except trio.Cancelled as exc:
            caught = exc
    return caught
