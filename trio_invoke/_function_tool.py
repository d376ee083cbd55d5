"""``@tool``: a plain or async Python function as a :class:`~trio_invoke.Tool`."""

from __future__ import annotations

import functools
import inspect
import re
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, overload

import attrs
import trio

from ._checks import check_flag, check_seconds
from ._exceptions import ToolDefinitionError
from ._process import ProcessTarget, import_trio_parallel
from ._schema import describe_function
from ._threads import tool_thread_limiter
from ._validate import compile_validator

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._schema import Converter

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

_ISOLATIONS = ("thread", "process")
"""Where a sync function may run: in a worker thread (the default) or in a worker process."""

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What OpenAI-compatible APIs (and Anthropic's) accept as a function name."""


def _is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    # A plain decorator's wrapper (``functools.wraps``) of an ``async def``: calling it gives the
    # coroutine to await (in a worker thread it would be a coroutine nobody awaits).
    if inspect.iscoroutinefunction(inspect.unwrap(func)):
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
    thread, no process. ``__wrapped__`` is the function, so :func:`inspect.signature` shows its
    signature.

    Tools compare and hash by identity.

    Args:
        func: The function to wrap.
        name: The name the model calls it by; the function's ``__name__`` by default. It must
            match ``^[a-zA-Z0-9_-]{1,64}$``, as OpenAI-compatible APIs require.
        description: What it does, for the model; the docstring's summary by default.
        requires_approval: Whether every call needs a human's approval first.
        timeout: Seconds each call may run (overrides the client's ``tool_timeout``): a number
            above 0 (``math.inf``: no limit), or ``None``.
        isolation: Where a sync function runs: ``"thread"`` (a worker thread) or ``"process"``
            (a worker process; needs the extra ``trio_invoke[process]``). See :func:`tool`.
        limiter: Caps how many calls of this tool run at once in threads (or in worker
            processes); ``None``: the client's ``max_tool_threads``, else
            :func:`current_default_tool_thread_limiter` (for processes, trio-parallel's default
            limiter, one token per CPU).

    Raises:
        ToolDefinitionError: The function cannot be described (the message names the function
            and the parameter), the name is not a valid tool name, ``isolation`` or ``limiter``
            does not fit the function, or a process tool's function cannot be sent to a
            worker process (the message says why).
        ConfigurationError: ``requires_approval`` is not ``True`` or ``False``, or ``timeout``
            is NaN, 0, negative or not a number; the message names the value.
        ImportError: ``isolation="process"`` without trio-parallel installed; the message
            names the extra, ``trio_invoke[process]``.
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
    worker thread or process)."""
    isolation: Literal["thread", "process"]
    """Where a plain function runs: ``"thread"`` or ``"process"``."""
    limiter: trio.CapacityLimiter | None
    """This tool's own cap on calls running at once in threads or processes, if it has one."""
    _converters: Mapping[str, Converter]
    _process: ProcessTarget | None

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool = False,
        timeout: float | None = None,
        isolation: Literal["thread", "process"] = "thread",
        limiter: trio.CapacityLimiter | None = None,
    ) -> None:
        is_async = _is_async(func)
        process: ProcessTarget | None = None
        if isolation not in _ISOLATIONS:
            raise ToolDefinitionError(f"isolation must be 'thread' or 'process', got {isolation!r}")
        if limiter is not None and not isinstance(limiter, trio.CapacityLimiter):
            raise ToolDefinitionError(f"limiter must be a trio.CapacityLimiter, got {limiter!r}")
        if is_async and (isolation == "process" or limiter is not None):
            option = "isolation='process'" if isolation == "process" else "limiter=..."
            what = getattr(func, "__qualname__", None) or repr(func)
            raise ToolDefinitionError(
                f"@tool({option}) is for sync functions, and {what!r} is async: it runs in the "
                "calling task, in no thread or process; make it a plain def"
            )
        check_seconds("tool timeout", timeout)
        if name is not None and not isinstance(name, str):
            raise ToolDefinitionError(f"tool name must be a str or None, got {name!r:.80}")
        if description is not None and not isinstance(description, str):
            raise ToolDefinitionError(
                f"tool description must be a str or None, got {description!r:.80}"
            )
        check_flag("tool requires_approval", requires_approval)
        if isolation == "process":
            import_trio_parallel()  # here, not at the first call: a missing extra is found early
            process = ProcessTarget.of(func)
        described = describe_function(func)
        if process is not None:
            process.check_parameters()
        if name is None:
            name = getattr(func, "__name__", None)
            if not isinstance(name, str):
                raise ToolDefinitionError(f"{func!r} has no __name__; pass @tool(name=...)")
        if not _NAME_RE.fullmatch(name):
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
            is_async,
            isolation,
            limiter,
            described.converters,
            process,
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
        (or an integer ``Literal``) parameter becomes an ``int``. ``arguments`` itself is not
        changed.

        An async function is awaited in the calling task. A plain function runs in a worker
        thread (:func:`trio.to_thread.run_sync`) under the tool's ``limiter``, else the one the
        running client installed (``max_tool_threads``), else
        :func:`current_default_tool_thread_limiter` -- never Trio's default thread limiter -- so
        it never blocks the event loop. With ``isolation="process"`` it runs in a worker process
        (``trio_parallel.run_sync``) under ``limiter``, else trio-parallel's default.

        Cancellation: an async function is cancelled like any Trio code. For a plain function
        in a thread, the thread cannot be interrupted: ``execute`` stops waiting for it at once
        (the thread is abandoned) and raises :class:`trio.Cancelled`, while the thread runs on to
        its end, holding its limiter's token, and its result or exception is discarded. In a
        process, the worker process is killed, and reaped, before :class:`trio.Cancelled`
        propagates: nothing keeps running. Either way, whatever the function did until then
        stays done.

        Args:
            arguments: The call's arguments, already validated against ``parameters``.

        Returns:
            Whatever the function returns.

        Raises:
            ToolProcessError: (process tools) the worker process died, or the arguments, the
                result or the exception raised do not pickle.
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
        if self._process is not None:
            return await self._process.run(self.name, arguments, self.limiter)
        return await trio.to_thread.run_sync(
            functools.partial(func, **arguments),
            thread_name=f"trio_invoke tool {self.name}",
            abandon_on_cancel=True,
            limiter=self.limiter if self.limiter is not None else tool_thread_limiter(),
        )

    def __repr__(self) -> str:
        func = self.func
        qualname = getattr(func, "__qualname__", None) or repr(func)
        module = getattr(func, "__module__", None)
        where = f"{module}.{qualname}" if module else qualname
        approval = ", requires_approval=True" if self.requires_approval else ""
        process = ", isolation='process'" if self.isolation == "process" else ""
        return f"<FunctionTool {self.name!r} for {where}{approval}{process}>"


@overload
def tool(func: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    isolation: Literal["thread", "process"] = "thread",
    limiter: trio.CapacityLimiter | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    isolation: Literal["thread", "process"] = "thread",
    limiter: trio.CapacityLimiter | None = None,
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

        @tool(isolation="process", timeout=30)
        def render(scene: str) -> str:
            \"""Render a scene (CPU-bound, in a worker process).\"""

    **Threads.** A plain function runs in a worker thread, so it never blocks the event loop.
    A thread cannot be stopped: when a call times out or is cancelled, the call gets its result
    at once, and the thread is abandoned and runs on to its end, holding its limiter's token.
    Tool threads have their own limiter (``limiter=``, else the client's ``max_tool_threads``,
    else :func:`current_default_tool_thread_limiter`, 40 tokens), never Trio's default one, so
    hung tools can starve only other tool threads, not the rest of the program.

    **Processes.** With ``isolation="process"`` (the extra ``trio_invoke[process]``) a plain
    function runs in a worker process of trio-parallel: CPU-bound calls run in parallel, free of
    the GIL, and a call that times out or is cancelled kills its worker, so nothing keeps
    running; a worker that dies (``os._exit``, a segfault) fails only its call, and the next
    call gets a fresh worker. The function goes to the worker by reference, so it must be
    defined with ``def`` at the top level of an importable module (a script needs the
    ``if __name__ == "__main__":`` guard): the worker imports that module. Arguments, the result
    and exceptions cross by ``pickle``. A call costs some 50-300 µs more than in a thread;
    the first call in a new worker pays for starting it (a Python interpreter importing the
    module: 0.2-0.4 s on a 2-core machine, counted in the call's ``timeout``).

    Args:
        func: The function (when used as ``@tool`` without parentheses).
        name: The tool's name; the function's ``__name__`` by default.
        description: The tool's description; the docstring's summary by default.
        requires_approval: Whether every call needs a human's approval first.
        timeout: Seconds each call may run (overrides the client's ``tool_timeout``); see
            :class:`FunctionTool`.
        isolation: For a sync function: ``"thread"`` (the default) or ``"process"``.
        limiter: For a sync function: this tool's own ``trio.CapacityLimiter`` on calls running
            at once (threads, or worker processes); ``None``: the defaults above (for
            processes, trio-parallel's default limiter, one token per CPU).

    Returns:
        A :class:`FunctionTool` (or, with keyword arguments only, a decorator that makes one).

    Raises:
        ToolDefinitionError: The function cannot be described; the message names the function
            and the parameter (``"@tool cannot describe parameter 'x' of function 'f':
            unsupported annotation <class 'bytes'>"``). Also: ``isolation="process"`` or
            ``limiter=`` on an async function, and, for a process tool, a function that cannot
            be sent to a worker process (a lambda, a function defined inside another one, a
            callable that does not pickle, an Enum parameter type that does not pickle).
        ConfigurationError: ``timeout`` is not a number above 0 or ``None``, or
            ``requires_approval`` is not ``True`` or ``False``.
        ImportError: ``isolation="process"`` without trio-parallel, raised at decoration (so a
            missing extra shows when the module is imported, not as a failed call the model
            reads); the message names the extra, ``trio_invoke[process]``.
    """

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            f,
            name=name,
            description=description,
            requires_approval=requires_approval,
            timeout=timeout,
            isolation=isolation,
            limiter=limiter,
        )

    if func is not None:
        return decorate(func)
    return decorate
