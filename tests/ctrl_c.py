"""What the tests of Ctrl-C on any line need: a tracer that calls Trio's SIGINT handler at the
n-th line run in the files under some folders, as a real Ctrl-C arriving there would."""

from __future__ import annotations

import contextlib
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any


def ctrl_c_at(
    at: int | None, state: dict[str, Any], roots: tuple[str, ...], *, strip: str = ""
) -> Callable[..., Any]:
    """A tracer (for ``sys.settrace``) that notes each line run in a file under ``roots`` in
    ``state["lines"]`` (as ``path:line``, ``strip`` taken off the path) and at the ``at``-th
    (``None``: never) calls Trio's SIGINT handler there, noting where in ``state["where"]``;
    then it traces no more."""
    lines: list[str] = state["lines"]

    def local(frame: types.FrameType, event: str, arg: object) -> Callable[..., Any] | None:
        if event == "line" and state["where"] is None:
            code = frame.f_code
            lines.append(f"{code.co_filename.removeprefix(strip)}:{frame.f_lineno}")
            if len(lines) == at:
                state["where"] = lines[-1]
                signal.getsignal(signal.SIGINT)(signal.SIGINT, frame)  # type: ignore[operator]
        return local

    def tracer(frame: types.FrameType, event: str, arg: object) -> Callable[..., Any] | None:
        if state["where"] is None and frame.f_code.co_filename.startswith(roots):
            return local
        return None

    return tracer


@contextlib.contextmanager
def tracing(tracer: Callable[..., Any]) -> Iterator[None]:
    """``sys.settrace(tracer)`` for the block, then the tracer before it again (coverage's,
    under coverage)."""
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)
