"""One tool call, start to result: find the tool, parse and validate, run it under its limits.

:func:`invoke` never raises for anything a tool or a model can do wrong: every outcome becomes a
:class:`ToolCalled` whose ``result`` is what the model reads next. Only ``trio.Cancelled`` (and
other ``BaseException``\\ s) propagate; the loop answers a cancelled call itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from .._approval import arguments_text
from .._exceptions import ArgumentsError, StopLoop, ToolProcessError, ToolTimeoutError
from .._messages import ToolCall
from .._options import ToolApprovalResponse
from .._tools import Tool
from .._updates import ToolCalled
from .._validate import compile_validator, parse_arguments

__all__ = ["Entry", "Limits", "invoke", "not_run"]


@attrs.define(eq=False)
class Entry:
    """A tool as one run sees it: the tool, its compiled validator and its time limit."""

    tool: Tool
    validate: Callable[[Any], None]
    timeout: float | None

    @classmethod
    def of(cls, tool: Tool) -> Entry:
        timeout = getattr(tool, "timeout", None)
        return cls(tool, compile_validator(tool.parameters), timeout)


@attrs.frozen
class Limits:
    """How calls of one run execute."""

    timeout: float | None = None
    """Seconds a call may run unless its tool sets its own ``timeout``; ``None``: no limit."""
    limiter: trio.CapacityLimiter | None = None
    """Caps how many calls execute at once; ``None``: no cap."""
    detailed_errors: bool = False
    """Send the message of a tool's exception to the model, not only its type."""


def to_text(value: Any) -> str:
    """A tool's return value as the model reads it: a ``str`` as it is, else compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_TIMED_OUT: Any = object()


async def _execute(tool: Tool, arguments: dict[str, Any], limit: float | None) -> Any:
    """``tool.execute(arguments)``, or ``_TIMED_OUT`` if it ran longer than ``limit`` seconds."""
    if limit is None:  # no cancel scope to enter and leave on every call
        return await tool.execute(arguments)
    with trio.move_on_after(limit):
        return await tool.execute(arguments)
    return _TIMED_OUT


def _message(exc: BaseException) -> str:
    """``str(exc)``, or a note saying it could not be had (its ``__str__`` raised)."""
    try:
        return str(exc)
    except Exception as error:  # a broken __str__ must not break the call's result
        return f"<the exception's message could not be read: {type(error).__name__}>"


def not_run(call: ToolCall, why: str) -> ToolCalled:
    """The error result of a call that was not run, saying ``why``."""
    return ToolCalled(call, f"Error: not run: {why}", is_error=True)


def _replacement(call: ToolCall, decision: ToolApprovalResponse | None) -> ToolCall:
    if decision is None or decision.arguments is None:
        return call
    return ToolCall(call.id, call.name, arguments_text(decision.arguments))


async def invoke(
    call: ToolCall,
    tools: Mapping[str, Entry],
    limits: Limits,
    decision: ToolApprovalResponse | None = None,
) -> ToolCalled:
    """Run ``call`` and return its result; never raises except ``Cancelled`` and BaseExceptions.

    ``decision`` is the user's answer when the call waited for approval: a rejection becomes
    the result, replacement arguments replace the model's (and the result says so).

    Cancellation: the tool is cancelled wherever it was (a sync tool's thread is abandoned and
    may still finish); no result is returned, the caller answers the call.
    """
    started = trio.current_time()
    if decision is not None and not decision.approved:
        reason = f": {decision.reason}" if decision.reason else ""
        return ToolCalled(call, f"Error: the user rejected this call{reason}", is_error=True)
    entry = tools.get(call.name)
    if entry is None:
        available = ", ".join(tools) or "none"
        return ToolCalled(
            call, f"Error: unknown tool {call.name!r}. Available tools: {available}", is_error=True
        )
    edited = _replacement(call, decision)
    note = "" if edited is call else f"[arguments replaced by the user: {edited.arguments}] "
    try:
        arguments = parse_arguments(edited.arguments)
        entry.validate(arguments)
    except ArgumentsError as exc:
        text = f"{note}Error: invalid arguments for tool {call.name!r}: {exc}"
        return ToolCalled(edited, text, is_error=True, exception=exc)
    timeout = entry.timeout if entry.timeout is not None else limits.timeout
    exception: BaseException | None = None
    try:
        if limits.limiter is None:
            value = await _execute(entry.tool, arguments, timeout)
        else:
            async with limits.limiter:  # queueing for the limiter does not count as run time
                value = await _execute(entry.tool, arguments, timeout)
    except StopLoop as stop:
        exception, value = stop, stop.result
    except Exception as exc:
        # A ToolProcessError's message is the library's own (types, exit codes), never secret.
        shown = limits.detailed_errors or isinstance(exc, ToolProcessError)
        detail = f": {_message(exc)}" if shown else ""
        exception, value = exc, None
        result, is_error = f"Error: tool {call.name!r} raised {type(exc).__name__}{detail}", True
    except trio.Cancelled as cancelled:
        if trio.current_effective_deadline() == -math.inf:
            raise  # the run, the round or the caller is cancelling this call
        # No scope of the run was cancelled: the tool let out a Cancelled of its own making.
        exception, value = cancelled, None
        result, is_error = (
            f"Error: tool {call.name!r} raised trio.Cancelled, but nothing cancelled it",
            True,
        )
    if value is _TIMED_OUT:
        exception = ToolTimeoutError(f"tool {call.name!r} timed out after {timeout:g} s")
        result, is_error = f"Error: {exception}", True
    elif exception is None or isinstance(exception, StopLoop):
        try:
            result, is_error = to_text(value), False
        except Exception as exc:  # not JSON: TypeError, ValueError, RecursionError, ...
            exception = exception or exc  # a StopLoop still stops the loop
            verb = "stopped the loop with" if isinstance(exception, StopLoop) else "returned"
            result, is_error = (
                (
                    f"Error: tool {call.name!r} {verb} a {type(value).__name__}, "
                    "which is not JSON-serialisable"
                ),
                True,
            )
    return ToolCalled(
        edited,
        note + result,
        is_error,
        duration=trio.current_time() - started,
        exception=exception,
    )
