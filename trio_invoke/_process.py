"""Process tools: a sync function run in a worker process (``@tool(isolation="process")``).

The worker processes are trio-parallel's (the extra ``trio_invoke[process]``): cached, reused,
started with the ``spawn`` method, and killed when a call is cancelled or times out
(``kill_on_cancel=True``), so nothing of a cancelled call keeps running. Everything that crosses
between the processes is pickled with the standard :mod:`pickle`:

* the function, **by reference** for a plain function, a class or a decorator's wrapper that
  pickles by its name such as ``functools.cache``'s (its module and qualified name: the worker
  imports the module, which may run ``@tool`` again there, and takes the function out of the
  ``FunctionTool`` it finds), or a decorator's object that holds the function and so does not
  pickle by value under ``@tool`` (``functools.update_wrapper``), else **by value** (a bound
  method, a
  ``functools.partial``, a callable object), pickled on every call;
* the arguments (JSON values, and members of the Enum types the parameters name);
* the result, or the exception the function raised (pickled in the worker, and unpickled by
  the caller, which can tell a failure to unpickle from what the function did).

What can be known not to cross -- a lambda, a function defined inside another function, a
callable that does not pickle, an Enum parameter type that does not -- is a
:class:`ToolDefinitionError` when the tool is built. What cannot be known until a call (the
arguments, the result, the exception, a worker that dies) is a :class:`ToolProcessError` raised
by that call, which the loop turns into the call's error result.

The worker side (:func:`run_in_worker`) is plain synchronous code with no Trio in it.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pickle
import signal
import sys
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from ._exceptions import StopLoop, ToolDefinitionError, ToolError, ToolProcessError
from ._schema import _hints_source, parameter_hints

__all__ = [
    "ProcessTarget",
    "Reference",
    "import_trio_parallel",
    "run_in_worker",
    "unpickle_outcome",
]

_PROTOCOL = pickle.HIGHEST_PROTOCOL
_MISSING_EXTRA = (
    '@tool(isolation="process") needs trio-parallel, which is not installed: '
    'pip install "trio-invoke[process] @ git+https://github.com/trio-invoke/trio_invoke" '
    '(from a checkout: pip install ".[process]")'
)


def import_trio_parallel() -> types.ModuleType:
    """``trio_parallel``, or an ``ImportError`` naming the extra to install."""
    try:
        return importlib.import_module("trio_parallel")
    except ImportError as exc:
        raise ImportError(_MISSING_EXTRA) from exc


# -- where the function is: checked when the tool is built ---------------------------------------


@attrs.frozen
class Reference:
    """A plain function (or class) by its importable name."""

    module: str
    qualname: str

    def resolve(self) -> Callable[..., Any]:
        """Import the module and find the function in it, through the ``FunctionTool`` (or any
        decorator that sets ``__wrapped__``, or a wrapper tool that holds it as ``tool``, such
        as ``f = ApprovalRequiredTool(f)``) that the name is bound to by now.

        Raises:
            ImportError, AttributeError: the module or the name is not there.
            LookupError: the name is bound to something that does not wrap the function.
        """
        module = importlib.import_module(self.module)
        # A script's functions live in __main__, which a spawned worker imports as __mp_main__.
        module_name = module.__name__
        found: Any = module
        for part in self.qualname.split("."):
            found = getattr(found, part)
        obj = found
        for _ in range(100):  # a decorator chain, never a cycle
            if self._is_the_function(obj, module_name):
                function: Callable[..., Any] = obj
                return function
            inner = getattr(obj, "__wrapped__", None)
            obj = inner if inner is not None else getattr(obj, "tool", None)
            if obj is None:
                break
        raise LookupError(f"{self.module}.{self.qualname} is {found!r}, not the tool's function")

    def _is_the_function(self, obj: object, module_name: str) -> bool:
        # Any callable with the name: a function, a class, a decorator's wrapper such as
        # functools.cache's (a tool itself has no __qualname__, so it is looked through).
        return (
            callable(obj)
            and getattr(obj, "__module__", None) in (self.module, module_name)
            and getattr(obj, "__qualname__", None) == self.qualname
        )


def _cannot_send(func: Callable[..., Any], why: str) -> ToolDefinitionError:
    what = getattr(func, "__qualname__", None) or repr(func)
    return ToolDefinitionError(
        f"@tool(isolation='process') cannot send {what!r} to a worker process: {why}"
    )


def _reference(func: Callable[..., Any]) -> Reference:
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise _cannot_send(func, "it has no module and qualified name to be imported by")
    if "<lambda>" in qualname:
        raise _cannot_send(
            func,
            "a lambda cannot be pickled (it has no name to be imported by); "
            "define it with def at the top level of a module",
        )
    if "<locals>" in qualname:
        raise _cannot_send(
            func,
            "a function defined inside another function (a closure or local function) cannot "
            "be pickled; define it at the top level of a module",
        )
    loaded = sys.modules.get(module)
    if loaded is None:
        raise _cannot_send(
            func,
            f"its module {module!r} is not an imported module, so it cannot be pickled by "
            "reference; define it in a module a worker process can import",
        )
    main_file = getattr(loaded, "__file__", None)
    # No file (a REPL, python -c) or a pseudo-file such as "<stdin>" (python - < script.py).
    if module == "__main__" and (not isinstance(main_file, str) or main_file[:1] in ("", "<")):
        where = f" (its __file__ is {main_file!r})" if main_file else ""
        raise _cannot_send(
            func,
            f"it is defined in an interactive session (or python -c, or a program read from "
            f"standard input){where}, whose __main__ a worker process cannot import, so it "
            "cannot be pickled; define it in a module file",
        )
    return Reference(module, qualname)


def _by_name(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is a decorator's wrapper that pickles by its qualified name (as
    ``functools.cache``'s does): under ``@tool`` that name is bound to the tool, not to the
    wrapper, so it must go by reference, as a plain function does."""
    if not hasattr(func, "__wrapped__"):
        return False
    try:
        reduced = func.__reduce_ex__(_PROTOCOL)
    except Exception:
        return False
    return isinstance(reduced, str)


def _check_pickles(func: Callable[..., Any]) -> None:
    try:
        pickle.loads(pickle.dumps(func, _PROTOCOL))
    except Exception as exc:  # PicklingError, TypeError, AttributeError, RecursionError...
        raise _cannot_send(func, f"it does not pickle ({type(exc).__name__}: {exc})") from exc


def _enum_types(annotation: object) -> list[type]:
    if isinstance(annotation, type):
        return [annotation] if issubclass(annotation, enum.Enum) else []
    return [found for arg in typing.get_args(annotation) for found in _enum_types(arg)]


def _check_enum_parameters(func: Callable[..., Any]) -> None:
    """Members of the Enum types of the parameters are pickled by reference to their class."""
    hints = parameter_hints(_hints_source(func))
    for name, annotation in hints.items():
        if name == "return":
            continue
        for enum_type in _enum_types(annotation):
            try:
                pickle.dumps(enum_type, _PROTOCOL)
            except Exception as exc:
                raise _cannot_send(
                    func,
                    f"its parameter {name!r} takes members of {enum_type.__qualname__!r}, an "
                    f"Enum that does not pickle ({type(exc).__name__}: {exc}); define the "
                    "Enum at the top level of a module",
                ) from exc


# -- the parent side: one call -------------------------------------------------------------------


def _death(tool_name: str, exc: BaseException) -> str:
    process = exc.args[-1] if exc.args else None
    code = getattr(process, "exitcode", None)
    if isinstance(code, int) and code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    elif isinstance(code, int):
        how = f"exit code {code}"
    else:
        how = str(exc)
    return (
        f"the worker process running tool {tool_name!r} died ({how}); "
        "the next call starts a fresh one"
    )


@attrs.frozen(eq=False)
class ProcessTarget:
    """How one tool's function reaches a worker process, and one call of it there."""

    function: Callable[..., Any]
    reference: Reference | None
    """Set for a plain function or a class (sent by name); ``None``: sent by value."""
    _pickled_reference: bytes | None

    @classmethod
    def of(cls, function: Callable[..., Any]) -> ProcessTarget:
        """Check that ``function`` itself can be sent to a worker process.

        Raises:
            ToolDefinitionError: it cannot (a lambda, a local function, an unpicklable
                callable); the message says why.
        """
        if inspect.isfunction(function) or isinstance(function, type) or _by_name(function):
            return cls._by_reference(function)
        try:
            _check_pickles(function)
        except ToolDefinitionError:
            # A decorator's object holding the function (functools.update_wrapper), whose name
            # is bound to the tool, not to the function: it goes by its own (copied) name.
            copied = getattr(function, "__dict__", {})
            if not hasattr(function, "__wrapped__") or "__qualname__" not in copied:
                raise
            return cls._by_reference(function)
        return cls(function, None, None)

    @classmethod
    def _by_reference(cls, function: Callable[..., Any]) -> ProcessTarget:
        reference = _reference(function)
        return cls(function, reference, pickle.dumps(reference, _PROTOCOL))

    def check_parameters(self) -> None:
        """Check that what the arguments turn into can be sent: members of the Enum types the
        parameters name pickle by reference to their class. Call it once the function's
        signature is known to describe.

        Raises:
            ToolDefinitionError: an Enum type that does not pickle (a local one).
        """
        _check_enum_parameters(self.function)

    def _function_bytes(self, tool_name: str) -> bytes:
        if self._pickled_reference is not None:
            return self._pickled_reference
        try:
            return pickle.dumps(self.function, _PROTOCOL)
        except Exception as exc:
            raise ToolProcessError(
                f"the function of tool {tool_name!r} no longer pickles, so it cannot be "
                f"sent to a worker process ({type(exc).__name__}: {exc})"
            ) from exc

    async def run(
        self, tool_name: str, arguments: dict[str, Any], limiter: trio.CapacityLimiter | None
    ) -> Any:
        """Call the function with ``arguments`` in a worker process; return its result.

        ``tool_name`` is for the messages.

        ``limiter`` caps the worker processes (``None``: trio-parallel's default limiter, one
        token per CPU).

        Raises:
            ToolProcessError: the arguments or the result do not pickle, the exception the
                function raised does not, or the worker process died.
            Exception: what the function raised, unchanged (with the worker's traceback).

        Cancellation: the worker process is killed (and reaped) before ``Cancelled`` propagates;
        nothing of the call keeps running. Whatever the function did until then stays done.
        """
        trio_parallel = import_trio_parallel()
        function = self._function_bytes(tool_name)
        try:
            payload = pickle.dumps(arguments, _PROTOCOL)
        except Exception as exc:
            raise ToolProcessError(
                f"the arguments of tool {tool_name!r} cannot be sent to a worker process: "
                f"they do not pickle ({type(exc).__name__}: {exc})"
            ) from exc
        run_sync: Callable[..., Awaitable[tuple[str | None, bytes]]] = trio_parallel.run_sync
        try:
            raised, pickled = await run_sync(
                run_in_worker,
                tool_name,
                function,
                payload,
                kill_on_cancel=True,
                limiter=limiter,
            )
        except trio_parallel.BrokenWorkerError as exc:
            raise ToolProcessError(_death(tool_name, exc)) from exc
        return unpickle_outcome(tool_name, raised, pickled)


def unpickle_outcome(tool_name: str, raised: str | None, pickled: bytes) -> Any:
    """What :func:`run_in_worker` sent back, here: the result, or the exception raised again.

    Raises:
        ToolProcessError: it does not unpickle in this process (a class that only the worker
            can import, say).
        Exception: the function's exception, unpickled.
    """
    try:
        value = pickle.loads(pickled)
    except Exception as exc:
        if raised is None:
            what = f"the result of tool {tool_name!r}"
        else:
            what = f"tool {tool_name!r} raised {raised}, which"
        raise ToolProcessError(
            f"{what} came back from its worker process but does not unpickle "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    if raised is None:
        return value
    exception: BaseException = value
    raise exception  # outside any except block: its own __context__ stays


# -- the worker side -----------------------------------------------------------------------------

_RESOLVED: dict[Reference, Callable[..., Any]] = {}
"""In a worker process: the functions found by reference so far."""


def _pickled_exception(exc: BaseException) -> bytes | str:
    """``exc`` pickled to go back to the parent process, or why it cannot go.

    It is pickled with tblib's pickling support (tracebacks, causes and contexts included, and
    exception classes whose ``__init__`` takes other arguments than ``args``), as trio-parallel
    sends exceptions, and unpickled once here to check.
    """
    try:
        tblib_pickling: Any = importlib.import_module("tblib.pickling_support")
    except ImportError:  # pragma: no cover - trio-parallel depends on tblib
        pass
    else:
        tblib_pickling.install(exc)
    try:
        pickled = pickle.dumps(exc, _PROTOCOL)
        pickle.loads(pickled)
    except Exception as problem:  # PicklingError, TypeError, AttributeError...
        return f"{type(problem).__name__}: {problem}"
    return pickled


_TOO_DEEP = (
    "(its traceback in the worker process was too deep to send back, so it comes without "
    "the worker's frames)"
)
_NO_CHAIN = (
    "(its cause and context in the worker process did not pickle, so it comes without them "
    "and without the worker's frames)"
)


def _drop_tracebacks(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of every exception chained to it (a traceback
    hundreds of frames deep does not pickle: tblib pickles it frame by frame, one level of
    recursion each)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        one.__traceback__ = None
        todo += [chained for chained in (one.__cause__, one.__context__) if chained is not None]
        if isinstance(one, BaseExceptionGroup):
            todo += one.exceptions


def _make_sendable(exc: Exception) -> bytes | str:
    """``exc`` pickled, if it can be without changing what it means, with a note; else why it
    cannot be sent even so.

    First without the worker's tracebacks; then, for a ``ToolError`` (its message is the
    call's result) or a ``StopLoop`` (it stops the loop), also without its cause and context.
    """
    _drop_tracebacks(exc)
    pickled = _noted(exc, _TOO_DEEP)
    if isinstance(pickled, str) and isinstance(exc, ToolError | StopLoop):
        exc.__cause__ = exc.__context__ = None
        pickled = _noted(exc, _NO_CHAIN)
    return pickled


def _noted(exc: Exception, note: str) -> bytes | str:
    """``exc`` pickled with ``note`` added, or why it cannot be (the note is taken back)."""
    exc.add_note(note)
    pickled = _pickled_exception(exc)
    if isinstance(pickled, str):
        exc.__notes__.remove(note)
    return pickled


def _load(
    tool_name: str, function: bytes, arguments: bytes
) -> tuple[Callable[..., Any], dict[str, Any]] | ToolProcessError:
    """The function and its arguments, or the error to raise (made here, raised by the caller
    outside any ``except`` block)."""
    try:
        target = pickle.loads(function)
        if isinstance(target, Reference):
            found = _RESOLVED.get(target)
            if found is None:
                found = _RESOLVED[target] = target.resolve()
            target = found
    except Exception as exc:
        return ToolProcessError(
            f"a worker process cannot load the function of tool {tool_name!r} "
            f"({type(exc).__name__}: {exc})"
        )
    try:
        kwargs = pickle.loads(arguments)
    except Exception as exc:
        return ToolProcessError(
            f"a worker process cannot unpickle the arguments of tool {tool_name!r} "
            f"({type(exc).__name__}: {exc})"
        )
    function_found: Callable[..., Any] = target
    return function_found, kwargs


def run_in_worker(tool_name: str, function: bytes, arguments: bytes) -> tuple[str | None, bytes]:
    """In the worker process: call the function with the arguments; ``(None, the pickled
    result)``, or ``(the exception's type name, the pickled exception)`` when it raised one
    (read back by :func:`unpickle_outcome`, so that one which does not unpickle in the parent
    is a :class:`ToolProcessError` too).

    Every failure that would not cross back intact becomes a :class:`ToolProcessError`, raised:
    an exception that does not pickle, a ``BaseException`` such as ``SystemExit`` (it would
    end the parent's run), a result that does not pickle. Exceptions that pickle are sent as
    they are (without the worker's frames when only their traceback is too deep to pickle; a
    ``ToolError`` or ``StopLoop`` also without a cause or context that does not pickle; a note
    says so). Each ``ToolProcessError`` is raised outside the ``except`` block that made it,
    so that no unpicklable ``__context__`` rides along.
    """
    loaded = _load(tool_name, function, arguments)
    if isinstance(loaded, ToolProcessError):
        raise loaded
    func, kwargs = loaded
    failure: ToolProcessError | None = None
    try:
        result = func(**kwargs)
    except Exception as exc:
        pickled = _pickled_exception(exc)
        if isinstance(pickled, str):
            pickled = _make_sendable(exc)  # or why it cannot be sent without tracebacks either
        if isinstance(pickled, bytes):
            return type(exc).__qualname__, pickled
        failure = ToolProcessError(
            f"tool {tool_name!r} raised {type(exc).__qualname__}, which cannot be sent back "
            f"from its worker process: it (or its cause or context) does not pickle ({pickled})"
        )
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit
        exit_code = exc.code if isinstance(exc, SystemExit) else None
        code = f" (code {exit_code})" if isinstance(exit_code, int) else ""
        failure = ToolProcessError(
            f"tool {tool_name!r} raised {type(exc).__name__}{code} in its worker process"
        )
    if failure is not None:
        raise failure
    try:
        return None, pickle.dumps(result, _PROTOCOL)
    except Exception as exc:
        failure = ToolProcessError(
            f"tool {tool_name!r} returned a {type(result).__qualname__}, which cannot be sent "
            f"back from its worker process: it does not pickle ({type(exc).__name__}: {exc})"
        )
    raise failure
