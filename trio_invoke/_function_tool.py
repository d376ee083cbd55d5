"""``@tool``: a plain or async Python function as a :class:`~trio_invoke.Tool`."""

from __future__ import annotations

import functools
import inspect
import re
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

import attrs
import trio

from ._checks import check_seconds
from ._exceptions import ToolDefinitionError
from ._schema import describe_function
from ._validate import compile_validator

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._schema import Converter

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What OpenAI-compatible APIs (and Anthropic's) accept as a function name."""


def _is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    # An object whose __call__ is ``async def`` (for a function, type(func).__call__ is not).
    return inspect.iscoroutinefunction(type(func).__call__)


@attrs.frozen(init=False, eq=False, repr=False)
class FunctionTool(Generic[P, R]):
    """A Python function as a :class:`~trio_invoke.Tool`; built by :func:`tool`.

    The schema comes from the function's type hints, the description from its docstring (see
    :func:`tool`). Arguments are validated by the loop before :meth:`execute` runs; ``validate``
    is the compiled validator, built when the tool is, so a schema that cannot work fails at
    decoration time rather than on the first call.

    A ``FunctionTool`` stays callable like the function it wraps (``add(1, 2)`` still works,
    typed as the original), so decorating a function does not break its direct callers or
    unit tests. Calling it that way runs the function directly: no validation, no conversion, no
    thread. ``__wrapped__`` is the function, so :func:`inspect.signature` shows its signature.

    Tools compare and hash by identity.

    Args:
        func: The function to wrap.
        name: The name the model calls it by; the function's ``__name__`` by default. It must
            match ``^[a-zA-Z0-9_-]{1,64}$``, as OpenAI-compatible APIs require.
        description: What it does, for the model; the docstring's summary by default.
        requires_approval: Whether every call needs a human's approval first.
        timeout: Seconds each call may run (overrides the client's ``tool_timeout``): a number
            above 0 (``math.inf``: no limit), or ``None``.

    Raises:
        ToolDefinitionError: The function cannot be described (the message names the function
            and the parameter), or the name is not a valid tool name.
        ConfigurationError: ``timeout`` is NaN, 0, negative or not a number; the message names
            the value.
    """

    func: Callable[P, R]
    """The wrapped function, unchanged."""
    name: str
    """The name the model calls it by."""
    description: str
    """What it does, for the model."""
    parameters: dict[str, Any]
    """The JSON Schema of the function's parameters. Treat it as read-only: ``validate`` was
    compiled from it when the tool was built and does not follow later changes."""
    requires_approval: bool
    """Whether every call needs a human's approval first."""
    timeout: float | None
    """Seconds a call may run before the loop gives it a time-out error result; ``None`` leaves
    it to the client's ``tool_timeout``."""
    validate: Callable[[Any], None]
    """The compiled validator of ``parameters`` (see :func:`compile_validator`): raises
    :class:`ArgumentsError` naming each problem."""
    is_async: bool
    """Whether ``func`` is a coroutine function (awaited) rather than a plain one (run in a
    worker thread)."""
    _converters: Mapping[str, Converter]

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        timeout: float | None = None,
    ) -> None:
        check_seconds("tool timeout", timeout)
        described = describe_function(func)
        if name is None:
            name = getattr(func, "__name__", None)
            if not isinstance(name, str):
                raise ToolDefinitionError(f"{func!r} has no __name__; pass @tool(name=...)")
        if not _NAME_RE.match(name):
            raise ToolDefinitionError(
                f"tool name {name!r} must match {_NAME_RE.pattern}; pass @tool(name=...)"
            )
        self.__attrs_init__(
            func,
            name,
            described.description if description is None else description,
            described.parameters,
            requires_approval,
            timeout,
            compile_validator(described.parameters),
            _is_async(func),
            described.converters,
        )

    @property
    def __wrapped__(self) -> Callable[P, R]:
        return self.func

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the wrapped function directly, exactly as without ``@tool``."""
        return self.func(*args, **kwargs)

    async def execute(self, arguments: dict[str, Any]) -> Any:
        """Call the function with validated arguments (keyword arguments, by name).

        Arguments of Enum-typed parameters (also ``Optional[...]``, ``list[...]``,
        ``dict[str, ...]`` of an Enum) become members; an integral float for an ``int``
        parameter becomes an ``int``. ``arguments`` itself is not changed.

        An async function is awaited in the calling task. A plain function runs in a worker
        thread (:func:`trio.to_thread.run_sync`, under Trio's default thread limiter), so it never
        blocks the event loop.

        Cancellation: an async function is cancelled like any Trio code. For a plain function
        the thread cannot be interrupted: ``execute`` stops waiting for it at once (the thread is
        abandoned) and raises :class:`trio.Cancelled`, while the thread runs on to its end and
        its result or exception is discarded. Whatever the function does until then still
        happens.

        Args:
            arguments: The call's arguments, already validated against ``parameters``.

        Returns:
            Whatever the function returns.

        Raises:
            Exception: Whatever the function raises, unchanged.
        """
        if self._converters:
            arguments = {
                key: converter(value) if (converter := self._converters.get(key)) else value
                for key, value in arguments.items()
            }
        func: Callable[..., Any] = self.func
        if self.is_async:
            return await func(**arguments)
        return await trio.to_thread.run_sync(
            functools.partial(func, **arguments),
            thread_name=f"trio_invoke tool {self.name}",
            abandon_on_cancel=True,
        )

    def __repr__(self) -> str:
        func = self.func
        qualname = getattr(func, "__qualname__", None) or repr(func)
        module = getattr(func, "__module__", None)
        where = f"{module}.{qualname}" if module else qualname
        approval = ", requires_approval=True" if self.requires_approval else ""
        return f"<FunctionTool {self.name!r} for {where}{approval}>"


@overload
def tool(func: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Turn a plain or async function into a tool: ``@tool`` or ``@tool(...)``.

    The parameters' JSON Schema comes from the type hints: ``str``, ``int``, ``float``, ``bool``,
    ``None``, ``list[...]``, ``dict[str, ...]``, ``Optional``/``Union``/``X | Y``, ``Literal``,
    Enum subclasses, ``typing.Any``, and ``Annotated[X, "description"]``. A parameter with a
    default is optional. The tool's description is the docstring's text before its first section
    (``Args:``, ``Returns:``...); each parameter's description comes from ``Annotated`` or else
    the docstring's ``Args:`` section.

    Example::

        @tool
        async def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
            \"""Current weather in a city.

            Args:
                city: The city's name, e.g. "Paris".
            \"""

        @tool(requires_approval=True)
        def delete_file(path: str) -> None:
            \"""Delete a file.\"""

    Args:
        func: The function (when used as ``@tool`` without parentheses).
        name: The tool's name; the function's ``__name__`` by default.
        description: The tool's description; the docstring's summary by default.
        requires_approval: Whether every call needs a human's approval first.
        timeout: Seconds each call may run (overrides the client's ``tool_timeout``); see
            :class:`FunctionTool`.

    Returns:
        A :class:`FunctionTool` (or, with keyword arguments only, a decorator that makes one).

    Raises:
        ToolDefinitionError: The function cannot be described; the message names the function
            and the parameter (``"@tool cannot describe parameter 'x' of function 'f':
            unsupported annotation <class 'bytes'>"``).
        ConfigurationError: ``timeout`` is not a number above 0 or ``None``.
    """

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            f,
            name=name,
            description=description,
            requires_approval=requires_approval,
            timeout=timeout,
        )

    if func is not None:
        return decorate(func)
    return decorate
