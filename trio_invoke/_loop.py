"""The tool-calling loop: ``FunctionInvokingChatClient``.

The loop is the seed's state machine, ``Looping -> Streaming -> Looping -> ... -> Done``, mapped
onto Trio's structured concurrency:

* **Looping** (:meth:`FunctionInvokingChatClient._loop`): resume approved calls if the
  conversation ends with pending ones, check the round cap, start the next round.
* **Streaming** (:meth:`FunctionInvokingChatClient._round`): each round opens a nursery with
  two memory channels, ``events`` (256) and ``messages`` (1). A consumer task streams the inner
  client, forwards every update, accumulates tool calls by id, holds back the inner ``Finish``,
  then runs the calls as sibling tasks and sends the round's messages and ``Finish(TOOL_CALLS)``.
  The loop side forwards events to the caller; on ``Finish(TOOL_CALLS)`` it takes the messages
  and goes back to Looping.
* **Done**: a final ``Finish`` (``STOP``, ``LENGTH``, ``CONTENT_FILTER``, ``AWAITING_APPROVAL`` or
  ``MAX_ROUNDS``), ``Error("cancelled")``, or the inner client's exception.

The whole run lives in a nursery owned by the caller's ``async with``. Whatever ends the run --
the end of the script, the caller's cancel scope, an exception, the caller leaving the block --
:meth:`_Run.settle` closes the transcript synchronously: every tool call in ``.messages`` has
exactly one tool message, and every tool message one ``ToolCalled``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import attrs
import trio

from ._accumulate import ToolCallAccumulator
from ._client import ChatClient
from ._exceptions import (
    ApprovalError,
    ArgumentsError,
    ChatClientError,
    ConfigurationError,
    StreamProtocolError,
    TrioInvokeError,
)
from ._messages import ChatMessage, FinishReason, MessageRole, ToolCall, Usage
from ._options import RunOptions, ToolApprovalResponse
from ._tools import Tool, ToolDefinition
from ._updates import AgentResponseUpdate, Error, Finish, ToolApprovalRequest, ToolCalled
from ._validate import compile_validator, parse_arguments

__all__ = ["ChatResponse", "FunctionInvokingChatClient", "InvocationStream"]

EVENT_BUFFER = 256
"""Capacity of each round's event channel (the seed's ``mpsc::channel(256)``)."""
CANCELLED = "cancelled"


@attrs.frozen
class ChatResponse:
    """A whole run of the loop, collected by :meth:`FunctionInvokingChatClient.get_response`."""

    messages: tuple[ChatMessage, ...]
    """The messages the run added, ready to append to the conversation."""
    text: str
    """The text of the run's last assistant message (``""`` if there is none)."""
    finish_reason: FinishReason | None
    """Why the run ended; ``None`` when it was cancelled (then :attr:`error` says so)."""
    usage: Usage | None
    """Tokens used over all model calls; ``None`` when no call reported usage."""
    approval_requests: tuple[ToolApprovalRequest, ...] = ()
    """The calls waiting for approval when ``finish_reason`` is ``AWAITING_APPROVAL``."""
    error: str | None = None
    """The in-band error that ended the run, such as ``"cancelled"``."""


@attrs.define(eq=False)
class _Entry:
    """A tool as one run sees it: the tool and its compiled validator."""

    tool: Tool
    validate: Any  # Callable[[Any], None], from compile_validator (cached per schema)


def _merge_tools(static: Mapping[str, _Entry], provider: Iterable[Tool]) -> dict[str, _Entry]:
    """Static tools plus provider tools: new names add; an existing name is replaced only by a
    version that requires approval (the seed's rule)."""
    merged = dict(static)
    for tool in provider:
        if tool.name not in merged or tool.requires_approval:
            merged[tool.name] = _Entry(tool, compile_validator(tool.parameters))
    return merged


def _pending_calls(messages: Sequence[ChatMessage]) -> list[ToolCall]:
    """The calls of the trailing assistant message that have no tool message yet."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role is MessageRole.TOOL:
            if message.tool_call_id is not None:
                answered.add(message.tool_call_id)
            continue
        if message.role is MessageRole.ASSISTANT and message.tool_calls:
            return [call for call in message.tool_calls if call.id not in answered]
        break
    return []


def _check_approvals(
    pending: Sequence[ToolCall],
    tools: Mapping[str, _Entry],
    responses: Sequence[ToolApprovalResponse],
) -> dict[str, ToolApprovalResponse]:
    """Match approval responses to pending calls, or raise ``ApprovalError`` naming the mismatch."""
    needing = {c.id: c for c in pending if c.name in tools and tools[c.name].tool.requires_approval}
    by_id: dict[str, ToolApprovalResponse] = {}
    for response in responses:
        if response.call_id in by_id:
            raise ApprovalError(f"two approval responses for tool call {response.call_id!r}")
        if response.call_id not in needing:
            waiting = ", ".join(repr(i) for i in needing) or "none"
            raise ApprovalError(
                f"approval response names tool call {response.call_id!r}, which is not waiting "
                f"for approval (calls waiting for approval: {waiting})"
            )
        by_id[response.call_id] = response
    missing = [c for c in needing.values() if c.id not in by_id]
    if missing:
        names = ", ".join(f"{c.id!r} ({c.name})" for c in missing)
        raise ApprovalError(f"tool calls waiting for approval have no approval response: {names}")
    return by_id


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _single_exception(exc: BaseException) -> BaseException:
    """The one exception inside (nested) single-exception groups from our own nurseries."""
    while isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        if len(leaves) != 1:
            return exc
        exc = leaves[0]
    return exc


def _reraise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the single exception inside ``group`` bare, keeping its own context."""
    exc = _single_exception(group)
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, group


@attrs.define(eq=False)
class _Round:
    """What one round (or one resume) has produced so far: the source of its messages."""

    accumulator: ToolCallAccumulator | None
    """The streamed response; ``None`` for a resume round, whose calls are already recorded."""
    calls: list[ToolCall] = attrs.field(factory=list)
    """The calls to answer, in call order, once known."""
    results: dict[str, ToolCalled] = attrs.field(factory=dict)
    """Call id -> its result, as calls finish."""
    reported: set[str] = attrs.field(factory=set)
    """Ids whose ``ToolCalled`` has gone into the event channel."""
    events: trio.MemoryReceiveChannel[AgentResponseUpdate] | None = None
    in_flight: AgentResponseUpdate | None = None
    """An update taken from ``events`` and not yet handed to the caller."""

    def messages(self) -> list[ChatMessage]:
        """The round's messages: the assistant message (unless resuming), then one tool
        message per call in call order. Calls without a result get none here; see ``settle``."""
        out: list[ChatMessage] = []
        if self.accumulator is not None:
            text, calls = self.accumulator.text, self.calls
            if text or calls:
                out.append(ChatMessage(MessageRole.ASSISTANT, text, calls or None))
        for call in self.calls:
            called = self.results.get(call.id)
            if called is not None:
                out.append(ChatMessage.tool_result(call, called.result))
        return out


@attrs.define(eq=False)
class _Run:
    """The state of one run, shared by the loop side and the round's tasks."""

    messages: list[ChatMessage]
    """The conversation as the model sees it next round."""
    added: list[ChatMessage]
    """What this run added (``stream.messages``)."""
    tools: dict[str, _Entry]
    inner_options: RunOptions
    send: trio.MemorySendChannel[AgentResponseUpdate]
    usage: Usage | None = None
    current: _Round | None = None
    error: BaseException | None = None

    async def emit(self, update: AgentResponseUpdate) -> None:
        await self.send.send(update)

    def commit(self, round_: _Round) -> None:
        messages = round_.messages()
        self.messages.extend(messages)
        self.added.extend(messages)
        self.current = None

    def settle(self, reason: str) -> list[AgentResponseUpdate]:
        """Close the current round synchronously; return the updates still owed to the caller.

        Calls that ended get a result (``reason`` for those that never finished); calls whose
        ``ToolCallEnd`` never arrived are dropped; the text so far is kept.
        """
        round_ = self.current
        if round_ is None:
            return []
        owed: list[AgentResponseUpdate] = []
        if round_.in_flight is not None:
            owed.append(round_.in_flight)
        if round_.events is not None:
            while True:
                try:
                    owed.append(round_.events.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
        owed = [u for u in owed if not isinstance(u, Finish)]
        if round_.accumulator is not None and not round_.calls:
            round_.calls = round_.accumulator.completed()
        for call in round_.calls:
            if call.id not in round_.results:
                round_.results[call.id] = ToolCalled(call, f"Error: {reason}", is_error=True)
            if call.id not in round_.reported:
                owed.append(round_.results[call.id])
                round_.reported.add(call.id)
        self.commit(round_)
        return owed


@attrs.define(eq=False)
class InvocationStream:
    """The stream of one run of :class:`FunctionInvokingChatClient`: iterate it for updates.

    Once exhausted, :attr:`messages` holds exactly what the run added to the conversation. If the
    inner chat client failed, iterating raises that failure after the updates produced before it.
    """

    _receive: trio.MemoryReceiveChannel[AgentResponseUpdate]
    _run: _Run

    def __aiter__(self) -> InvocationStream:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            error, self._run.error = self._run.error, None
            if error is not None:
                raise error from error.__cause__  # keep its cause, drop EndOfChannel
            raise StopAsyncIteration from None

    @property
    def messages(self) -> list[ChatMessage]:
        """The messages this run added: assistant messages with their tool calls, the tool
        results (one per call, in call order) and the final assistant text. Complete once the
        stream is exhausted or the run ended; always a valid transcript then."""
        return list(self._run.added)

    @property
    def usage(self) -> Usage | None:
        """Tokens used so far, summed over the run's model calls; ``None`` if none reported."""
        return self._run.usage


class FunctionInvokingChatClient:
    """Wraps a :class:`ChatClient` and runs the tools its model calls, round after round.

    Itself a :class:`ChatClient`, so decorators stack. See the module docstring for the loop.

    Args:
        inner: The chat client that talks to the model.
        tools: The tools the model may call; names must be unique.
        max_rounds: The most model calls one run makes (default 10).

    Raises:
        ConfigurationError: ``max_rounds < 1`` or two tools share a name (a ``ValueError``).
    """

    def __init__(
        self, inner: ChatClient, tools: Iterable[Tool] = (), *, max_rounds: int = 10
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ConfigurationError(f"max_rounds must be an integer >= 1, got {max_rounds!r}")
        self.inner = inner
        self.max_rounds = max_rounds
        self._tools: dict[str, _Entry] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ConfigurationError(f"two tools are named {tool.name!r}; names must be unique")
            self._tools[tool.name] = _Entry(tool, compile_validator(tool.parameters))

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The static tools, in the order given."""
        return tuple(entry.tool for entry in self._tools.values())

    def __repr__(self) -> str:
        return (
            f"FunctionInvokingChatClient({self.inner!r}, tools=[{', '.join(self._tools)}], "
            f"max_rounds={self.max_rounds})"
        )

    # -- the public surface --------------------------------------------------------------------

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[InvocationStream]:
        """Run the loop on ``messages``; the value is an :class:`InvocationStream` of updates.

        Raises:
            ApprovalError: the conversation ends with calls waiting for approval and the
                approval responses do not match them (raised on entry; nothing has run).

        Cancellation: cancelling ``options.cancel_scope`` stops the model stream and the tools
        promptly; the stream then ends with ``Error("cancelled")``, after a ``ToolCalled`` for
        each call it cut short. Leaving the ``async with`` early (``break``, an exception, an
        outer cancellation) cancels everything the run started before the block exits. Either
        way :attr:`InvocationStream.messages` is a valid transcript: the text received so far,
        the calls that were complete (each answered, ``"Error: cancelled"`` if it never
        finished), nothing of calls the model had not finished sending.
        """
        options = options or RunOptions()
        tools = _merge_tools(self._tools, options.provider_tools)
        pending = _pending_calls(messages)
        decisions = _check_approvals(pending, tools, options.tool_approval_responses)
        if options.tool_approval_responses and not pending:
            raise ApprovalError(
                "approval responses were given, but the conversation does not end with tool calls "
                "waiting for approval"
            )
        inner_options = options.evolve(
            tools=tuple(ToolDefinition.of(entry.tool) for entry in tools.values()),
            tool_approval_responses=(),
            provider_tools=(),
            cancel_scope=None,
        )
        send, receive = trio.open_memory_channel[AgentResponseUpdate](EVENT_BUFFER)
        run = _Run(list(messages), [], tools, inner_options, send)
        stream = InvocationStream(receive, run)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._drive, run, options.cancel_scope, pending, decisions)
                yield stream
                nursery.cancel_scope.cancel()  # left early: stop whatever still runs
        except BaseExceptionGroup as group:
            _reraise_single(group)

    async def get_response(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> ChatResponse:
        """Run the loop to its end and collect it into a :class:`ChatResponse`.

        Raises:
            ApprovalError: as for :meth:`run`.
            TrioInvokeError: the inner chat client failed (``ChatClientError`` or its own).

        Cancellation: through ``options.cancel_scope`` the response comes back with
        ``error="cancelled"`` and a valid transcript; an outer cancellation propagates and the
        run's partial result is lost.
        """
        requests: list[ToolApprovalRequest] = []
        finish: Finish | None = None
        error: str | None = None
        async with self.run(messages, options) as stream:
            async for update in stream:
                if isinstance(update, ToolApprovalRequest):
                    requests.append(update)
                elif isinstance(update, Finish):
                    finish = update
                elif isinstance(update, Error):
                    error = update.message
        added = stream.messages
        text = next((m.content for m in reversed(added) if m.role is MessageRole.ASSISTANT), "")
        return ChatResponse(
            tuple(added),
            text,
            finish.finish_reason if finish else None,
            finish.usage if finish else stream.usage,
            tuple(requests),
            error,
        )

    # -- Done: the driver that owns the run's cancel scope -------------------------------------

    async def _drive(
        self,
        run: _Run,
        cancel_scope: trio.CancelScope | None,
        pending: list[ToolCall],
        decisions: dict[str, ToolApprovalResponse],
    ) -> None:
        scope = cancel_scope if cancel_scope is not None else trio.CancelScope()
        reason = CANCELLED
        async with run.send:
            try:
                with scope:
                    await self._loop(run, pending, decisions)
            except Exception as exc:
                run.error = _single_exception(exc)
                reason = f"not run: the chat client failed ({type(run.error).__name__})"
            finally:
                owed = run.settle(reason)
            for update in owed:
                await run.emit(update)
            if scope.cancelled_caught:
                await run.emit(Error(CANCELLED))

    # -- Looping -------------------------------------------------------------------------------

    async def _loop(
        self, run: _Run, pending: list[ToolCall], decisions: dict[str, ToolApprovalResponse]
    ) -> None:
        round_no = 0
        if pending:  # approval resume: run or reject the pending calls, then round + 1
            await self._round(run, _Round(None, calls=pending), decisions)
            round_no = 1
        while True:
            if round_no >= self.max_rounds:
                await run.emit(Finish(FinishReason.MAX_ROUNDS, run.usage))
                return
            if not await self._round(run, _Round(ToolCallAccumulator()), None):
                return
            round_no += 1

    # -- Streaming -----------------------------------------------------------------------------

    async def _round(
        self, run: _Run, round_: _Round, decisions: dict[str, ToolApprovalResponse] | None
    ) -> bool:
        """One round: returns ``True`` to loop again, ``False`` when the run is done."""
        events_send, events = trio.open_memory_channel[AgentResponseUpdate](EVENT_BUFFER)
        messages_send, messages = trio.open_memory_channel[list[ChatMessage]](1)
        round_.events = events
        run.current = round_
        finish: Finish | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._consume, run, round_, decisions, events_send, messages_send)
            async for update in events:
                if isinstance(update, Finish):
                    finish = update
                    continue
                round_.in_flight = update
                await run.emit(update)
                round_.in_flight = None
        assert finish is not None, "the consumer always ends a round with a Finish"
        round_messages = messages.receive_nowait()
        run.messages.extend(round_messages)
        run.added.extend(round_messages)
        run.current = None
        if finish.usage is not None:
            run.usage = finish.usage if run.usage is None else run.usage + finish.usage
        if finish.finish_reason is FinishReason.TOOL_CALLS:
            return True
        await run.emit(Finish(finish.finish_reason, run.usage))
        return False

    async def _consume(
        self,
        run: _Run,
        round_: _Round,
        decisions: dict[str, ToolApprovalResponse] | None,
        events: trio.MemorySendChannel[AgentResponseUpdate],
        messages: trio.MemorySendChannel[list[ChatMessage]],
    ) -> None:
        """The seed's spawned task: stream the model, then answer every call."""
        async with events, messages:
            reason, usage = FinishReason.TOOL_CALLS, None
            if round_.accumulator is not None:
                reason, usage = await self._stream_model(run, round_.accumulator, events)
                round_.calls = round_.accumulator.finish()
                if not round_.calls:
                    if reason not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
                        reason = FinishReason.STOP
                    await messages.send(round_.messages())
                    await events.send(Finish(reason, usage))
                    return
                reason = FinishReason.TOOL_CALLS
                needing = [c for c in round_.calls if self._needs_approval(run, c)]
                if needing:
                    for call in needing:
                        await events.send(ToolApprovalRequest(call))
                    await messages.send(round_.messages())
                    await events.send(Finish(FinishReason.AWAITING_APPROVAL, usage))
                    return
            async with trio.open_nursery() as tools:  # the round's calls, as sibling tasks
                for call in round_.calls:
                    tools.start_soon(self._call, run, round_, call, decisions, events)
            await messages.send(round_.messages())
            await events.send(Finish(reason, usage))

    async def _stream_model(
        self,
        run: _Run,
        accumulator: ToolCallAccumulator,
        events: trio.MemorySendChannel[AgentResponseUpdate],
    ) -> tuple[FinishReason, Usage | None]:
        """Forward the inner client's updates, accumulating calls; hold back its ``Finish``."""
        finish: Finish | None = None
        try:
            async with self.inner.run(run.messages, run.inner_options) as updates:
                async for update in updates:
                    if finish is not None:
                        raise StreamProtocolError(
                            f"{type(update).__name__} after the response's Finish"
                        )
                    if isinstance(update, Finish):
                        finish = update
                        continue
                    await events.send(update)
                    accumulator.add(update)  # after the send: the transcript holds what was sent
        except TrioInvokeError:
            raise
        except Exception as exc:
            cause = _single_exception(exc)
            if isinstance(cause, TrioInvokeError):
                raise cause from None
            raise ChatClientError(
                f"the chat client {type(self.inner).__name__} failed: "
                f"{type(cause).__name__}: {cause}"
            ) from cause
        if finish is None:
            return FinishReason.STOP, None
        return finish.finish_reason, finish.usage

    def _needs_approval(self, run: _Run, call: ToolCall) -> bool:
        entry = run.tools.get(call.name)
        return entry is not None and entry.tool.requires_approval

    # -- one tool call -------------------------------------------------------------------------

    async def _call(
        self,
        run: _Run,
        round_: _Round,
        call: ToolCall,
        decisions: dict[str, ToolApprovalResponse] | None,
        events: trio.MemorySendChannel[AgentResponseUpdate],
    ) -> None:
        """Give ``call`` its one result. Never raises, except ``Cancelled`` (and BaseExceptions)."""
        started = trio.current_time()
        decision = decisions.get(call.id) if decisions else None
        exception: BaseException | None = None
        is_error = True
        entry = run.tools.get(call.name)
        if decision is not None and not decision.approved:
            result = "Error: the user rejected this call" + (
                f": {decision.reason}" if decision.reason else ""
            )
        elif entry is None:
            available = ", ".join(run.tools) or "none"
            result = f"Error: unknown tool {call.name!r}. Available tools: {available}"
        else:
            try:
                arguments = parse_arguments(call.arguments)
                entry.validate(arguments)
            except ArgumentsError as exc:
                exception = exc
                result = f"Error: invalid arguments for tool {call.name!r}: {exc}"
            else:
                try:
                    value = await entry.tool.execute(arguments)
                except Exception as exc:
                    exception = exc
                    result = f"Error: tool {call.name!r} raised {type(exc).__name__}: {exc}"
                else:
                    try:
                        result, is_error = _to_text(value), False
                    except (TypeError, ValueError) as exc:
                        exception = exc
                        result = (
                            f"Error: tool {call.name!r} returned a {type(value).__name__}, "
                            "which is not JSON-serialisable"
                        )
        called = ToolCalled(
            call, result, is_error, duration=trio.current_time() - started, exception=exception
        )
        round_.results[call.id] = called
        await events.send(called)
        round_.reported.add(call.id)
