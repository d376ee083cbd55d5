"""The worker threads sync tools run in: a ``trio.CapacityLimiter`` of their own.

A sync tool runs in ``trio.to_thread.run_sync``, and a thread cannot be stopped: when its call
times out or is cancelled, the thread is abandoned and runs on to its end, holding its limiter's
token until then. Under Trio's default limiter (40 tokens, shared with ``trio.to_thread`` users
everywhere: Trio's own DNS lookups and file I/O among them) a few hung tools would starve the
whole program. So tool threads draw on their own limiter, chosen in this order:

1. the tool's own, ``@tool(limiter=...)``;
2. the client's, ``FunctionInvokingChatClient(max_tool_threads=...)``, which the loop installs
   for the tasks of its runs (a context variable: it reaches the run's tasks and no others);
3. the default, :func:`current_default_tool_thread_limiter`: one per Trio run.

Abandoned tool threads can then starve only other tool threads under the same limiter.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import attrs
import trio

from ._exceptions import ConfigurationError

__all__ = [
    "DEFAULT_TOOL_THREADS",
    "ToolThreads",
    "current_default_tool_thread_limiter",
    "tool_thread_limiter",
]

DEFAULT_TOOL_THREADS = 40
"""Tokens of the default tool-thread limiter: the same number as Trio's own default."""

_DEFAULT: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar(
    "trio_invoke.tool_threads"
)
_INSTALLED: ContextVar[trio.CapacityLimiter | None] = ContextVar(
    "trio_invoke.tool_thread_limiter", default=None
)


def current_default_tool_thread_limiter() -> trio.CapacityLimiter:
    """The limiter sync tools run under when neither the tool nor the client names one.

    One per Trio run, with 40 tokens (``DEFAULT_TOOL_THREADS``); set its ``total_tokens`` to
    resize it, as with Trio's own ``trio.to_thread.current_default_thread_limiter()``.
    It is not Trio's default limiter: abandoned tool threads (a timed-out or cancelled call
    cannot stop its thread) hold tokens of this one, so they never starve the program's other
    ``trio.to_thread`` work.

    Raises:
        RuntimeError: called outside a Trio run.
    """
    try:
        return _DEFAULT.get()
    except LookupError:
        limiter = trio.CapacityLimiter(DEFAULT_TOOL_THREADS)
        _DEFAULT.set(limiter)
        return limiter


def tool_thread_limiter() -> trio.CapacityLimiter:
    """The limiter a sync tool without its own runs under, here: the client's, else the default."""
    installed = _INSTALLED.get()
    return installed if installed is not None else current_default_tool_thread_limiter()


@attrs.frozen
class ToolThreads:
    """A client's ``max_tool_threads`` option, checked, and the limiter it stands for."""

    value: int | trio.CapacityLimiter | None
    _per_run: trio.lowlevel.RunVar[trio.CapacityLimiter] = attrs.field(
        factory=lambda: trio.lowlevel.RunVar("trio_invoke.client_tool_threads"), repr=False
    )

    @classmethod
    def of(cls, value: int | trio.CapacityLimiter | None) -> ToolThreads:
        """Check ``max_tool_threads``.

        Raises:
            ConfigurationError: not an int >= 1, a ``trio.CapacityLimiter`` or ``None``.
        """
        if (
            value is not None
            and not isinstance(value, trio.CapacityLimiter)
            and (isinstance(value, bool) or not isinstance(value, int) or value < 1)
        ):
            raise ConfigurationError(
                "max_tool_threads must be an integer >= 1, a trio.CapacityLimiter or None, "
                f"got {value!r}"
            )
        return cls(value)

    def limiter(self) -> trio.CapacityLimiter | None:
        """The limiter: the one given; for an int, one per client and Trio run, as Trio's own
        default is (a thread still running when its Trio run ends never gives its token back);
        ``None`` for the default."""
        if self.value is None or isinstance(self.value, trio.CapacityLimiter):
            return self.value
        try:
            return self._per_run.get()
        except LookupError:
            limiter = trio.CapacityLimiter(self.value)
            self._per_run.set(limiter)
            return limiter

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Make this the limiter of sync tools in the tasks started inside the block.

        A context variable: a task copies it when it starts, and the current task gets its own
        value back when the block ends, so it reaches a run's tasks and nothing else. ``None``
        leaves the limiter in effect (an enclosing run's, else the default).
        """
        limiter = self.limiter()
        if limiter is None:
            yield
            return
        token = _INSTALLED.set(limiter)
        try:
            yield
        finally:
            _INSTALLED.reset(token)
