"""One tool call, start to result: find the tool, parse and validate, run it under its limits.

:func:`invoke` never raises for anything a tool, a middleware or a model can do wrong: every
outcome becomes a :class:`ToolCalled` whose ``result`` is what the model reads next. Only
``trio.Cancelled`` (and other ``BaseException``\\ s) propagate; the loop answers a cancelled call
itself. Under the call's concurrency slot and time limit runs the middleware chain, if there is
one, and at its end the tool.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from .._approval import arguments_text
from .._content import TextPart, tool_result_content
from .._exceptions import ArgumentsError, StopLoop, ToolError, ToolTimeoutError
from .._messages import ChatMessage, ToolCall
from .._middleware import CallNext, ToolContext, ToolMiddleware
from .._options import ToolApprovalResponse
from .._tools import Tool
from .._updates import ToolCalled
from .._validate import compile_validator, parse_arguments
from ._channels import primary
from ._hooks import RunObservation, running

__all__ = [
    "CallOrder",
    "Entry",
    "Limits",
    "Site",
    "answered",
    "invoke",
    "not_run",
    "ready",
    "really_cancelled",
]


@attrs.define(eq=False)
class Entry:
    """A tool as one run sees it: the tool, its compiled validator and its time limit."""

    tool: Tool
    validate: Callable[[Any], None]
    timeout: float | None
    parameters: Mapping[str, Any] | None = None
    """The schema ``validate`` was compiled from (the tool's ``parameters`` object then)."""

    @classmethod
    def of(cls, tool: Tool) -> Entry:
        timeout = getattr(tool, "timeout", None)
        parameters = tool.parameters
        return cls(tool, compile_validator(parameters), timeout, parameters)

    def stale(self) -> bool:
        """Whether the tool's schema or time limit was replaced since this entry was made."""
        tool = self.tool
        return tool.parameters is not self.parameters or getattr(tool, "timeout", None) != (
            self.timeout
        )


@attrs.frozen
class Limits:
    """How calls of one run execute."""

    timeout: float | None = None
    """Seconds a call may run unless its tool sets its own ``timeout``; ``None``: no limit."""
    limiter: trio.CapacityLimiter | None = None
    """Caps how many calls execute at once; ``None``: no cap."""
    detailed_errors: bool = False
    """Send the message of a tool's exception to the model, not only its type."""
    middleware: tuple[ToolMiddleware, ...] = ()
    """The chain each call that runs goes through, outermost first."""


@attrs.define(eq=False)
class CallOrder:
    """Under a concurrency limiter: the round's calls take their slots in call order.

    Trio starts a round's call tasks in an order of its own, and the limiter serves its waiters
    in the order they came. So a call waits for its turn before it asks for a slot: its turn
    comes once each call before it in call order has its slot, or has passed its turn without
    one (it was answered without running, it was cancelled, or it does not run in this round).
    One call of a round at a time waits in the limiter's queue, so rounds that share a limiter
    take its slots by turns. (A call whose ``ToolCallEnd`` never comes would hold up the calls
    after it, but then the response fails the round.)
    """

    place: Callable[[str], int]
    """Call id -> its place in the round's call order."""
    _next: int = attrs.field(default=0, init=False)
    """The first place whose turn has not passed."""
    _passed: set[int] = attrs.field(factory=set, init=False)
    """Places after ``_next`` whose turn has passed."""
    _waiting: dict[int, trio.Event] = attrs.field(factory=dict, init=False)
    """Place -> the event that the call there waits on for its turn."""

    def passed(self, call_id: str) -> None:
        """The call's turn has passed (it has its slot, or will never take one)."""
        place = self.place(call_id)
        if place < self._next:
            return
        self._passed.add(place)
        while self._next in self._passed:
            self._passed.remove(self._next)
            self._next += 1
        waiting = self._waiting.pop(self._next, None)
        if waiting is not None:
            waiting.set()

    async def acquire(self, call_id: str, limiter: trio.CapacityLimiter) -> None:
        """Take a slot of ``limiter`` for the current task in the call's turn; release it with
        ``limiter.release()``.

        Cancellation: no slot is taken; the call's turn passes all the same.
        """
        place = self.place(call_id)
        try:
            if self._next < place:
                waiting = self._waiting[place] = trio.Event()
                await waiting.wait()
            # A free slot is taken at once: the next call may take its own in this batch. (Not
            # in a cancelled scope: a call cut short before it has its slot never runs.)
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                limiter.acquire_nowait()
            except trio.WouldBlock:
                await limiter.acquire()
        finally:
            self._waiting.pop(place, None)
            self.passed(call_id)


@attrs.frozen
class Site:
    """Where a call is made: what its middleware and its observer are told, and the order in
    which the round's calls take their concurrency slots."""

    round: int = 1
    """The round of the run, counting from 1."""
    messages: Sequence[ChatMessage] = ()
    """The conversation the model saw."""
    observation: RunObservation | None = None
    """The run's observer, if there is one."""
    order: CallOrder | None = None
    """Under a concurrency limiter: the order in which the round's calls take their slots."""


def to_text(value: Any) -> str:
    """A tool's return value as the model reads it: a ``str`` as it is, else compact JSON."""
    if isinstance(value, str):
        return str.__str__(value)  # a plain str: a subclass's own __str__ may raise
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _message(exc: BaseException) -> str:
    """``str(exc)``, or a note saying it could not be had (its ``__str__`` raised)."""
    try:
        return str(exc)
    except Exception as error:  # a broken __str__ must not break the call's result
        return f"<the exception's message could not be read: {type(error).__name__}>"


def _a(name: str) -> str:
    """``name`` with its indefinite article: "a set", "an object"."""
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


def not_run(call: ToolCall, why: str) -> ToolCalled:
    """The error result of a call that was not run, saying ``why``."""
    return ToolCalled(call, f"Error: not run: {why}", is_error=True)


def answered(called: ToolCalled, site: Site) -> Awaitable[ToolCalled]:
    """``called``, the answer of a call that does not run, as an awaitable answer; under a
    concurrency limiter the calls after it do not wait for it."""
    if site.order is not None:
        site.order.passed(called.call.id)
    return ready(called)


def _replacement(call: ToolCall, decision: ToolApprovalResponse | None) -> ToolCall:
    if decision is None or decision.arguments is None:
        return call
    return ToolCall(call.id, call.name, arguments_text(decision.arguments))


def really_cancelled() -> bool:
    """Whether a scope around the current task is cancelled (else a ``Cancelled`` is stray)."""
    return trio.current_effective_deadline() == -math.inf


def _group_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a group with a ``Cancelled`` or an interrupt in it, let out of a tool (or a
    middleware) by a nursery of its own, means for the call: raised here when it must go on --
    an interrupt, or the ``Cancelled`` of a scope of the run that is cancelling the call (the
    errors the tool's tasks raised while being cancelled go with it: the call's result says it
    was cancelled, or timed out) -- else returned: the error the call's result reports (a
    ``Cancelled`` that nothing around the call made, or beside the tool's own errors)."""
    if not isinstance(primary(group), Exception | trio.Cancelled):
        raise group  # an interrupt is in it: it reaches the caller (the loop takes it out)
    cancelled, rest = group.split(trio.Cancelled)
    if cancelled is not None and really_cancelled():
        raise primary(cancelled) from None  # a bare Cancelled, as the cancelling scope sent it
    return rest if rest is not None else group


def invoke(
    call: ToolCall,
    tools: Mapping[str, Entry],
    limits: Limits,
    decision: ToolApprovalResponse | None = None,
    site: Site = Site(),
    *,
    began: Callable[[str, float], None] | None = None,
) -> Awaitable[ToolCalled]:
    """Run ``call``: await what this returns for its result, which never raises except
    ``Cancelled`` and BaseExceptions.

    ``decision`` is the user's answer when the call waited for approval: a rejection becomes
    the result, replacement arguments replace the model's (and the result says so). Calls that
    are rejected, name no tool or have invalid arguments never reach the middleware. (The checks
    run at once, without a coroutine; a call with nothing around its tool is the tool's own
    coroutine and its result, one coroutine in all.)

    ``began(call.id, when)`` is called when the tool (or its middleware) begins to run: at once,
    or once the call has its concurrency slot under a limiter (a call cut short before then
    never ran; with ``site.order``, the slot is taken in the call's turn). Calls answered
    without running (rejected, unknown tool, invalid arguments) do not begin, and pass their
    turn at once.

    Cancellation: the tool (and the middleware around it) is cancelled wherever it was (a sync
    tool's thread is abandoned and may still finish); no result is returned, the caller answers
    the call.
    """
    started = trio.current_time()
    edited, note = call, ""
    if decision is not None:
        if not decision.approved:
            reason = f": {decision.reason}" if decision.reason else ""
            return answered(
                ToolCalled(call, f"Error: the user rejected this call{reason}", is_error=True),
                site,
            )
        edited = _replacement(call, decision)
        if edited is not call:
            note = f"[arguments replaced by the user: {edited.arguments}] "
    entry = tools.get(call.name)
    if entry is None:
        available = ", ".join(tools) or "none"
        return answered(
            ToolCalled(
                call,
                f"Error: unknown tool {call.name!r}. Available tools: {available}",
                is_error=True,
            ),
            site,
        )
    try:
        arguments = parse_arguments(edited.arguments)
        entry.validate(arguments)
    except ArgumentsError as exc:
        text = f"{note}Error: invalid arguments for tool {call.name!r}: {exc}"
        return answered(ToolCalled(edited, text, is_error=True, exception=exc), site)
    timeout = entry.timeout if entry.timeout is not None else limits.timeout
    if began is not None and limits.limiter is None:
        began(call.id, started)
    if (
        not note
        and timeout is None
        and limits.limiter is None
        and site.observation is None
        and not limits.middleware
    ):  # nothing around the tool, nothing to add to its result
        return _call_tool(entry.tool, edited, arguments, limits.detailed_errors, started)
    return _around(
        entry,
        edited,
        arguments,
        note=note,
        seconds=timeout,
        limits=limits,
        site=site,
        started=started,
        began=began,
    )


async def ready(called: ToolCalled) -> ToolCalled:
    """``called``, as an awaitable answer."""
    return called


async def _around(
    entry: Entry,
    call: ToolCall,
    arguments: dict[str, Any],
    *,
    note: str,
    seconds: float | None,
    limits: Limits,
    site: Site,
    started: float,
    began: Callable[[str, float], None] | None = None,
) -> ToolCalled:
    """The call with what is around its tool: its limiter, time limit, observer, middleware,
    and the note of arguments the user replaced."""
    timed = _timed if site.observation is None else _observed
    if limits.limiter is None:
        called = await timed(
            entry, call, arguments, seconds=seconds, limits=limits, site=site, started=started
        )
    else:
        limiter = limits.limiter
        if site.order is None:
            await limiter.acquire()
        else:  # the round's calls take their slots in call order
            await site.order.acquire(call.id, limiter)
        try:  # queueing for the limiter does not count as run time
            started = trio.current_time()  # (nor in the call's duration)
            if began is not None:
                began(call.id, started)
            called = await timed(
                entry, call, arguments, seconds=seconds, limits=limits, site=site, started=started
            )
        finally:
            limiter.release()
    if note or limits.middleware:
        parts = called.parts
        if parts and limits.middleware and called.result != tool_result_content(parts)[0]:
            parts = ()  # a middleware changed the result's text: that text is the answer
        parts = (TextPart(note), *parts) if note and parts else parts
        called = attrs.evolve(
            called,
            result=note + called.result,
            parts=parts,
            duration=trio.current_time() - started,
        )
    return called


async def _observed(
    entry: Entry,
    call: ToolCall,
    arguments: dict[str, Any],
    *,
    seconds: float | None,
    limits: Limits,
    site: Site,
    started: float,
) -> ToolCalled:
    """The call under its time limit, observed: the observation starts before it and ends
    after it, whatever ends it, and the call runs inside what the observation gives to run it
    in (``running()``, if it has one: Telemetry's makes the call's span the current one)."""
    assert site.observation is not None
    observed = site.observation.tool(call, entry.tool, arguments)
    try:
        with running(observed):  # entered and left in this task
            called = await _timed(
                entry,
                call,
                arguments,
                seconds=seconds,
                limits=limits,
                site=site,
                started=started,
                replaced=getattr(observed, "replaced", None),  # (optional, as running() is)
            )
    except BaseException as exc:  # cancelled, or interrupted (KeyboardInterrupt, SystemExit)
        cause = primary(exc)  # (an interrupt in a group from the tool's own nursery)
        observed.end(
            None, "cancelled" if isinstance(cause, trio.Cancelled) else type(cause).__name__
        )
        raise
    observed.end(called, _error_type(called))
    return called


async def _timed(
    entry: Entry,
    call: ToolCall,
    arguments: dict[str, Any],
    *,
    seconds: float | None,
    limits: Limits,
    site: Site,
    started: float,
    replaced: Callable[[Tool], object] | None = None,
) -> ToolCalled:
    """The call under its time limit: the middleware chain, if there is one, and the tool
    (``replaced(tool)`` is told of a tool a middleware put in place of the call's, as it
    runs)."""
    run: Awaitable[ToolCalled]
    if not limits.middleware:
        run = _call_tool(entry.tool, call, arguments, limits.detailed_errors, started)
    else:
        context = ToolContext(call, arguments, entry.tool, site.round, site.messages)
        run = _chain(entry, context, limits, replaced)(context)
    if seconds is None:  # no cancel scope to enter and leave on every call
        return await run
    finished: ToolCalled | None = None
    with trio.move_on_after(seconds):
        finished = await run
    if finished is None:
        error = ToolTimeoutError(f"tool {call.name!r} timed out after {seconds:g} s")
        finished = ToolCalled(
            call,
            f"Error: {error}",
            True,
            duration=trio.current_time() - started,
            exception=error,
        )
    return finished


async def _cancellation_stands() -> None:
    """Called where a tool (or a middleware) raised: if the call is being cancelled or timed
    out, the error came of that (a ``finally`` that failed, a connection torn down), so the
    cancellation is what happened -- raised here (the error is its ``__context__``), and the
    call gets what a cancelled or timed-out call gets. Else nothing."""
    if really_cancelled():
        await trio.lowlevel.checkpoint()  # in a cancelled scope: raises its Cancelled


def _error_type(called: ToolCalled) -> str | None:
    if not called.is_error:
        return None
    if isinstance(called.exception, ToolTimeoutError):
        return "timeout"
    return type(called.exception).__name__ if called.exception is not None else "_OTHER"


@trio.lowlevel.disable_ki_protection  # the tool's own code: Ctrl-C interrupts it at once
async def _call_tool(
    tool: Tool, call: ToolCall, arguments: dict[str, Any], detailed: bool, started: float
) -> ToolCalled:
    """``tool.execute(arguments)`` and what it came to, as the call's result."""
    try:
        value = await tool.execute(arguments)
    except StopLoop as stop:
        return _stopped(call, stop, started)
    except ToolError as exc:  # the tool's own words for the model
        await _cancellation_stands()
        text = f"Error: {_message(exc) or type(exc).__name__}"
        return ToolCalled(call, text, True, duration=trio.current_time() - started, exception=exc)
    except Exception as exc:
        await _cancellation_stands()
        return _raised(call, f"tool {call.name!r}", exc, detailed, started)
    except trio.Cancelled as cancelled:
        if really_cancelled():
            raise  # the run, the round, the caller or the time limit is cancelling this call
        # No scope of the run was cancelled: the tool let out a Cancelled of its own making.
        text = f"Error: tool {call.name!r} raised trio.Cancelled, but nothing cancelled it"
        return ToolCalled(
            call, text, True, duration=trio.current_time() - started, exception=cancelled
        )
    except BaseExceptionGroup as group:  # the tool's own nursery, with a Cancelled in it
        error = _group_error(group)
        await _cancellation_stands()
        return _raised(call, f"tool {call.name!r}", error, detailed, started)
    try:
        result, parts = tool_result_content(value)  # text, or parts when it holds images
    except Exception as exc:  # not JSON: TypeError, ValueError, RecursionError, ...
        text = (
            f"Error: tool {call.name!r} returned {_a(type(value).__name__)}, which is not "
            "JSON-serialisable"
        )
        return ToolCalled(call, text, True, duration=trio.current_time() - started, exception=exc)
    return ToolCalled(call, result, False, duration=trio.current_time() - started, parts=parts)


def _stopped(call: ToolCall, stop: StopLoop, started: float) -> ToolCalled:
    """A ``StopLoop``'s result: the loop stops after the batch, whatever the result is."""
    duration = trio.current_time() - started
    try:
        return ToolCalled(call, to_text(stop.result), False, duration=duration, exception=stop)
    except Exception:  # not JSON: the stop stands all the same
        text = (
            f"Error: tool {call.name!r} stopped the loop with {_a(type(stop.result).__name__)}, "
            "which is not JSON-serialisable"
        )
        return ToolCalled(call, text, True, duration=duration, exception=stop)


def _raised(
    call: ToolCall, who: str, exc: BaseException, detailed: bool, started: float
) -> ToolCalled:
    message = _message(exc) if detailed else ""
    detail = f": {message}" if message else ""  # (an exception without a message: no colon)
    text = f"Error: {who} raised {type(exc).__name__}{detail}"
    return ToolCalled(call, text, True, duration=trio.current_time() - started, exception=exc)


# -- the middleware chain ---------------------------------------------------------------------


def _chain(
    entry: Entry,
    first: ToolContext,
    limits: Limits,
    replaced: Callable[[Tool], object] | None = None,
) -> CallNext:
    """The middleware around the tool, outermost first, for one call; ``replaced(tool)`` is
    told of the tool that runs in place of the call's, when a middleware replaced it."""

    def invalid(call: ToolCall, tool: Tool, exc: Exception) -> ToolCalled:
        text = f"Error: invalid arguments for tool {tool.name!r} from middleware: {exc}"
        return ToolCalled(call, text, True, exception=exc)

    async def tool(context: ToolContext) -> ToolCalled:
        call, arguments = context.call, context.arguments
        if arguments is first.arguments and call.arguments != first.call.arguments:
            # The call's text was changed, not its arguments: what runs is what the text says
            # (and what its result says was run).
            try:
                arguments = parse_arguments(call.arguments)
            except ArgumentsError as exc:
                return invalid(call, context.tool, exc)
        if context.tool is not first.tool or arguments is not first.arguments:
            # A middleware changed what runs: validate it like the model's arguments.
            validate = entry.validate
            if context.tool is not first.tool:
                validate = compile_validator(context.tool.parameters)
            try:  # JSON first, as the model's text is parsed first: no NaN, no infinity
                arguments = dict(arguments)
                text = arguments_text(arguments)
                validate(arguments)
            except (ArgumentsError, TypeError, ValueError) as exc:
                return invalid(call, context.tool, exc)
            call = ToolCall(call.id, context.tool.name, text)
            if replaced is not None and context.tool is not first.tool:
                replaced(context.tool)  # (the observer: the call's span names the tool that ran)
        # The tool gets arguments of its own, parsed from the text that was validated (the
        # call's, which its result carries): a middleware's change in place to a nested value
        # of ``context.arguments`` (a list appended to), which nothing validated, never reaches
        # it. (The model's arguments text parsed once already, so it parses again.)
        fresh = parse_arguments(call.arguments)
        return await _call_tool(
            context.tool, call, fresh, limits.detailed_errors, trio.current_time()
        )

    call_next: CallNext = tool
    for middleware in reversed(limits.middleware):
        call_next = _layer(middleware, call_next, limits.detailed_errors)
    return call_next


def _layer(middleware: ToolMiddleware, call_next: CallNext, detailed: bool) -> CallNext:
    name = getattr(middleware, "__qualname__", None) or type(middleware).__qualname__
    who = f"middleware {name!r}"

    @trio.lowlevel.disable_ki_protection  # the middleware's own code, as a tool's
    async def layer(context: ToolContext) -> ToolCalled:
        started = trio.current_time()
        try:
            called: object = await middleware(context, call_next)
        except StopLoop as stop:
            return _stopped(context.call, stop, started)
        except Exception as exc:
            await _cancellation_stands()
            return _raised(context.call, who, exc, detailed, started)
        except trio.Cancelled as cancelled:
            if really_cancelled():
                raise
            text = f"Error: {who} raised trio.Cancelled, but nothing cancelled it"
            return ToolCalled(context.call, text, True, exception=cancelled)
        except BaseExceptionGroup as group:  # its own nursery, with a Cancelled in it
            error = _group_error(group)
            await _cancellation_stands()
            return _raised(context.call, who, error, detailed, started)
        if not isinstance(called, ToolCalled):
            text = f"Error: {who} returned {_a(type(called).__name__)}, not a ToolCalled"
            return ToolCalled(context.call, text, True)
        wrong = _wrong_field(called)
        if wrong is not None:
            text = f"Error: {who} returned a ToolCalled whose {wrong}"
            return ToolCalled(context.call, text, True)
        if called.call.id != context.call.id:
            text = (
                f"Error: {who} returned the result of call {called.call.id!r}, not of "
                f"{context.call.id!r}"
            )
            return ToolCalled(context.call, text, True)
        return called

    return layer


def _wrong_field(called: ToolCalled) -> str | None:
    """What is wrong with a middleware's ``ToolCalled`` (its ``call`` is not a ``ToolCall``, its
    ``result`` not text, its ``is_error`` not a bool), or ``None``: attrs does not check the
    types it is given."""
    call: object = called.call
    result: object = called.result
    is_error: object = called.is_error
    if not isinstance(call, ToolCall):
        return f"call is {_a(type(call).__name__)}, not a ToolCall"
    if not isinstance(result, str):
        return f"result is {_a(type(result).__name__)}, not text"
    if not isinstance(is_error, bool):
        return f"is_error is {_a(type(is_error).__name__)}, not a bool"
    return None
