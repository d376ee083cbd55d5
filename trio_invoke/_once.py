"""A call's context manager that can be entered once, and says so the second time.

``@asynccontextmanager`` gives a one-shot context manager whose second ``async with`` fails
with an ``AttributeError`` from inside ``contextlib``. Every chat client's ``run()`` returns
one of these instead: a second entry is a ``RuntimeError`` that says what to do.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Concatenate, Generic, NoReturn, ParamSpec, TypeVar

import trio

__all__ = ["Once", "entered_once"]

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")


class Once(AbstractAsyncContextManager[T], Generic[T]):
    """``manager``, entered at most once: a second time is a ``RuntimeError`` naming ``call``,
    the call that made it, and ``what`` it is (a "run" of the loop, a model "call").

    Iterated, awaited or entered with a plain ``with`` -- what other agent loops' ``run`` takes
    -- it is a ``TypeError`` that shows the ``async with`` to write.

    Entering and leaving are protected from ``KeyboardInterrupt`` as Trio protects its own
    nursery's: a Ctrl-C that lands there is raised at the next checkpoint instead, so it never
    leaves a nursery inside half entered or half closed (only the caller's body takes it where
    it is).
    """

    __slots__ = ("_call", "_entered", "_manager", "_what")

    def __init__(
        self, manager: AbstractAsyncContextManager[T], call: str, what: str = "run"
    ) -> None:
        self._manager = manager
        self._call = call
        self._what = what
        self._entered = False

    def _misused(self, how: str) -> TypeError:
        return TypeError(
            f"{self._call} returns an async context manager, which {how}: write "
            f"`async with {self._call} as stream:`, then `async for update in stream:`"
        )

    def __aiter__(self) -> NoReturn:
        raise self._misused("is not iterated itself")

    def __await__(self) -> NoReturn:
        raise self._misused("is not awaited")

    def __enter__(self) -> NoReturn:
        raise self._misused("takes `async with`, not `with`")

    def __exit__(self, *exc_info: object) -> None:  # (``with`` looks for both first)
        return None

    @trio.lowlevel.enable_ki_protection
    async def __aenter__(self) -> T:
        if self._entered:
            what = self._what
            raise RuntimeError(
                f"this {what} was already entered: each value {self._call} returns is one "
                f"{what}, entered once; call {self._call} again for another"
            )
        self._entered = True
        return await self._manager.__aenter__()

    @trio.lowlevel.enable_ki_protection
    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._manager.__aexit__(kind, value, traceback)


def entered_once(
    method: Callable[Concatenate[S, P], AbstractAsyncContextManager[T]],
) -> Callable[Concatenate[S, P], AbstractAsyncContextManager[T]]:
    """A chat client's ``run`` (an ``@asynccontextmanager`` method), its value entered once:
    a second entry is a ``RuntimeError`` that says each value is one model call."""

    @functools.wraps(method)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> AbstractAsyncContextManager[T]:
        return Once(method(self, *args, **kwargs), "client.run(...)", "model call")

    return run
