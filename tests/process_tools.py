"""Process tools for the tests: defined at the top level, so worker processes can import them.

Kept apart from the test modules so that a worker imports only this (and trio_invoke), not
pytest and the rest of a test module. Nothing here runs forever: every loop has a deadline.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import importlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

import trio

from trio_invoke import ApprovalRequiredTool, ImagePart, StopLoop, TextPart, ToolError, tool

DEADLINE = 60.0
"""Seconds after which a tool that should have been killed gives up by itself."""

PAIR = trio.CapacityLimiter(2)
"""Two worker processes at once, whatever the CPU count (trio-parallel's default limiter has one
token per CPU)."""


def burn(seconds: float) -> int:
    """Busy-loop (CPU-bound) for ``seconds`` of wall time; the iterations done."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


@tool(isolation="process")
def pid() -> int:
    """The worker's process id."""
    return os.getpid()


@tool(isolation="process")
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@tool(isolation="process")
def chart(label: str) -> list[Any]:
    """A chart of ``label``: its caption and the image, as content parts."""
    return [TextPart(label), ImagePart.from_bytes(b"\x89PNG\r\n\x1a\n", "image/png")]


@tool(isolation="process")
def spin_forever(pid_file: str) -> str:
    """Write the worker's pid to ``pid_file``, then burn CPU until killed."""
    Path(pid_file).write_text(str(os.getpid()), encoding="utf-8")
    burn(DEADLINE)
    return "not killed"


spin_forever_timed = tool(isolation="process", timeout=2.0, name="spin_forever_timed")(
    spin_forever.func
)


@tool(isolation="process", limiter=PAIR)
def rendezvous(me: str, other: str, directory: str, work: float = 0.2) -> dict[str, Any]:
    """Mark ``me`` started, burn CPU until ``other`` has started too (or the deadline), then
    burn ``work`` seconds more; report the pid, the monotonic start and end, and whether
    ``other`` was seen running."""
    start = time.monotonic()
    Path(directory, me).touch()
    met = False
    while time.monotonic() < start + DEADLINE:
        burn(0.001)
        if Path(directory, other).exists():
            met = True
            break
    burn(work)
    return {"pid": os.getpid(), "start": start, "end": time.monotonic(), "met": met}


@tool(isolation="process")
def die(
    how: Literal["exit", "exit0", "segfault", "sigkill", "sigterm", "abort"], pid_file: str
) -> str:
    """Write the worker's pid to ``pid_file``, then end the worker process abruptly."""
    Path(pid_file).write_text(str(os.getpid()), encoding="utf-8")
    if how == "exit":
        os._exit(3)
    if how == "exit0":
        os._exit(0)
    if how == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if how == "abort":
        os.abort()
    os.kill(os.getpid(), signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
    time.sleep(DEADLINE)
    return "survived"


class WithLock:
    """An object that does not pickle (it holds a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


class LockedError(Exception):
    """An exception that does not pickle."""

    def __init__(self) -> None:
        super().__init__("locked")
        self.lock = threading.Lock()


class TwoArgumentError(Exception):
    """An exception whose __init__ does not take its ``args`` (tblib sends it anyway)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status}: {text}")
        self.status = status


class _Unloadable:
    """Pickles, but fails to unpickle."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_refuse, ())


def _refuse() -> None:
    raise RuntimeError("this object refuses to be unpickled")


@tool(isolation="process")
def give(kind: str) -> Any:
    """Return a value of ``kind``; most of them do not pickle."""

    class Local:
        pass

    values: dict[str, Any] = {
        "json": {"a": [1, 2.5, None, "é"]},
        "lambda": lambda: 1,
        "lock": threading.Lock(),
        "generator": (i for i in range(3)),
        "local": Local(),
        "with_lock": WithLock(),
        "unloadable": _Unloadable(),
    }
    return values[kind]


@tool(isolation="process")
def fail(kind: str) -> None:
    """Raise an exception of ``kind``."""

    class LocalError(Exception):
        pass

    if kind == "value":
        raise ValueError("bad value 42")
    if kind == "two_arguments":
        raise TwoArgumentError(404, "not found")
    if kind == "locked":
        raise LockedError
    if kind == "local":
        raise LocalError("from a local class")
    if kind == "locked_cause":
        try:
            raise LockedError
        except LockedError as exc:
            raise ValueError("with an unpicklable cause") from exc
    if kind == "tool_error_locked_cause":
        try:
            raise LockedError
        except LockedError as exc:
            raise ToolError("lookup failed: try another key") from exc
    if kind == "stop_locked_context":
        try:
            raise LockedError
        except LockedError:
            raise StopLoop("gave up") from None
    if kind == "stop_locked_result":
        raise StopLoop(threading.Lock())
    if kind == "exit":
        raise SystemExit(4)
    if kind == "interrupt":
        raise KeyboardInterrupt
    raise AssertionError(kind)


def _descend(depth: int, locked: bool = False) -> int:
    """Recurse ``depth`` frames down, then raise (a negative depth: until RecursionError)."""
    if depth == 0 and locked:
        try:
            raise LockedError
        except LockedError:
            raise ValueError("raised deep down, handling a LockedError") from None
    if depth == 0:
        raise ValueError("raised deep down")
    return _descend(depth - 1, locked)


@tool(isolation="process")
def raise_deep(depth: int, group: bool = False, locked: bool = False) -> int:
    """Raise from ``depth`` frames down: a traceback too deep to pickle whole (``group``: that
    exception twice in an ExceptionGroup; ``locked``: while handling a ``LockedError``, which
    does not pickle, so that its context does not pickle either)."""
    if not group:
        return _descend(depth, locked)
    try:
        _descend(depth)
    except ValueError as exc:
        raise ExceptionGroup("twice", [exc, exc]) from None
    raise AssertionError("not raised")


@tool(isolation="process")
def run_plugin(directory: str, module: str, function: str) -> Any:
    """Import ``module`` from ``directory``, which only the worker puts on its path (the parent
    process cannot import it), and return what its ``function`` returns."""
    if directory not in sys.path:
        sys.path.insert(0, directory)
    return getattr(importlib.import_module(module), function)()


@tool(isolation="process")
def echo(value: Any) -> Any:
    """Return ``value`` as it came."""
    return value


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@tool(isolation="process")
def colour_name(colour: Colour, more: list[Colour] | None = None) -> str:
    """The Enum members arrive as members."""
    assert isinstance(colour, Colour)
    return "+".join(c.name for c in [colour, *(more or [])])


def scale(x: int, factor: int) -> int:
    """Multiply; undecorated, for partials and references."""
    return x * factor


class Multiplier:
    """Picklable state with a method used as a tool."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def times(self, x: int) -> dict[str, int]:
        """Multiply by the factor, in the worker."""
        return {"product": x * self.factor, "pid": os.getpid()}

    @staticmethod
    def static_double(x: int) -> int:
        """Double, by reference through the class."""
        return 2 * x


def decorated(func: Any) -> Any:
    """A decorator that keeps the name (functools.wraps), under @tool."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return ("wrapped", func(*args, **kwargs))

    return wrapper


@tool(isolation="process")
@decorated
def wrapped_square(x: int) -> int:
    """Square, under another decorator."""
    return x * x


class Counted:
    """A decorator written as a class (``functools.update_wrapper``, as joblib's
    ``Memory.cache`` is): the object it makes holds the function, under @tool."""

    def __init__(self, func: Any) -> None:
        functools.update_wrapper(self, func)
        self.func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return ("counted", self.func(*args, **kwargs))


@tool(isolation="process")
@Counted
def counted_square(x: int) -> int:
    """Square, under a decorator object."""
    return x * x


@tool(isolation="process")
def guarded_double(x: int) -> int:
    """Double; its module-level name is rebound to the approval-requiring wrapper below."""
    return 2 * x


guarded_double = ApprovalRequiredTool(guarded_double)  # type: ignore[assignment]


@tool(isolation="process")
def cpu_work(n: int) -> int:
    """A fixed amount of CPU-bound work: ``n`` iterations of arithmetic."""
    total = 0
    for i in range(n):
        total = (total + i * i) % 1_000_003
    return total


@tool
def cpu_work_in_thread(n: int) -> int:
    """The same work, in a worker thread."""
    return cpu_work.func(n)


def triple(x: int) -> Unresolved:  # type: ignore[name-defined]  # noqa: F821 -- on purpose
    """Triple a number; the return annotation names nothing (as one imported under
    TYPE_CHECKING)."""
    return 3 * x
