"""The tool-calling loop: ``FunctionInvokingChatClient``.

The loop is the seed's state machine, ``Looping -> Streaming -> Looping -> ... -> Done``, mapped
onto Trio's structured concurrency:

* **Looping** (:meth:`FunctionInvokingChatClient._loop`): resume the calls a conversation ends
  with, check the round cap and the error streak, start the next round.
* **Streaming** (:meth:`FunctionInvokingChatClient._round`): each round opens a nursery with
  two memory channels, ``events`` (256) and ``messages`` (1). A consumer task streams the inner
  client, forwards every update, accumulates tool calls by id, holds back the inner ``Finish``,
  runs the calls as sibling tasks, then sends the round's messages and its ``Finish``. The loop
  side forwards events to the caller; on ``Finish(TOOL_CALLS)`` it takes the messages and goes
  back to Looping.
* **Done**: a final ``Finish`` (``STOP``, ``LENGTH``, ``CONTENT_FILTER``, ``AWAITING_APPROVAL`` or
  ``MAX_ROUNDS``), ``Error("cancelled")``, or the inner client's exception.

The whole run lives in a nursery owned by the caller's ``async with``. Whatever ends the run --
the end of the script, the caller's cancel scope, an exception, the caller leaving the block --
:meth:`RunState.settle` (in ``_state``) closes the transcript synchronously: every tool call in
``.messages`` has exactly one tool message, and every tool message one ``ToolCalled``. The
module's own code is the state machine; the shared state lives in ``_state``, what the caller
holds in ``_stream``, one call's execution in ``_invoke``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Literal

import trio

from .._accumulate import ToolCallAccumulator
from .._approval import match_approvals, pending_calls
from .._client import ChatClient
from .._exceptions import (
    ChatClientError,
    ConfigurationError,
    StopLoop,
    StreamProtocolError,
    TrioInvokeError,
)
from .._messages import ChatMessage, FinishReason, MessageRole, ToolCall
from .._options import RunOptions, ToolApprovalResponse
from .._threads import ToolThreads
from .._tools import Tool, ToolDefinition
from .._updates import (
    AgentResponseUpdate,
    Error,
    Finish,
    ToolApprovalRequest,
    ToolCallStart,
)
from ._channels import offer, reraise_single, send, single_exception
from ._invoke import Entry, Limits, invoke, not_run
from ._state import RoundState, RunState
from ._stream import ChatResponse, InvocationStream

__all__ = ["FunctionInvokingChatClient"]

EVENT_BUFFER = 256
"""Capacity of each round's event channel (the seed's ``mpsc::channel(256)``)."""
CANCELLED = "cancelled"


def _merge_tools(static: Mapping[str, Entry], provider: Iterable[Tool]) -> dict[str, Entry]:
    """Static tools plus provider tools: new names add; an existing name is replaced only by a
    version that requires approval (the seed's rule)."""
    merged = dict(static)
    for tool in provider:
        if tool.name not in merged or tool.requires_approval:
            merged[tool.name] = Entry.of(tool)
    return merged


def _check(name: str, value: float | None, minimum: int, *, integer: bool = True) -> None:
    """``value`` must be ``None`` or a number (an int if ``integer``) of at least ``minimum``
    (above it, for a float)."""
    if value is None:
        return
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
        raise ConfigurationError(
            f"{name} must be {'an integer' if integer else 'a number'} >= {minimum} or None, "
            f"got {value!r}"
        )
    if not integer and value <= minimum:
        raise ConfigurationError(f"{name} must be a number > {minimum} or None, got {value!r}")


class FunctionInvokingChatClient:
    """Wraps a :class:`ChatClient` and runs the tools its model calls, round after round.

    Itself a :class:`ChatClient`, so decorators stack. See the module docstring for the loop.

    Args:
        inner: The chat client that talks to the model.
        tools: The tools the model may call; names must be unique.
        max_rounds: The most model calls one run makes with tools offered (default 10).
        on_max_rounds: At the round cap, ``"finish"`` (default) ends with ``Finish(MAX_ROUNDS)``;
            ``"answer"`` first makes one more model call with the tools withheld (still listed,
            with ``tool_choice="none"``) so the user gets an answer (calls the model still makes
            get a "not run" result), then ends with ``Finish(MAX_ROUNDS)``.
        tool_timeout: Seconds each call may run (a tool's own ``timeout`` attribute wins;
            ``RunOptions.tool_timeout`` overrides per run). A call that runs out gets an error
            result naming the limit; its siblings go on. ``None``: no limit. A sync tool's
            thread cannot be interrupted: it is abandoned and runs to its end in the
            background, holding a token of its tool-thread limiter (``max_tool_threads``)
            until then; a process tool's worker is killed.
        max_concurrency: The most calls that execute at once: an int (per run) or a
            ``trio.CapacityLimiter`` to share one cap between runs and clients. ``None``: no cap.
        sequential: Run each round's calls one by one in call order instead of concurrently.
        max_tool_calls: The most calls one run answers, counted across rounds in call order
            (every call the model makes counts, rejected and invalid ones too); calls over the
            budget are not run and get an error result saying so
            (``RunOptions.max_tool_calls`` overrides per run). ``None``: no budget.
        max_consecutive_errors: After this many rounds in a row in which every call failed,
            the next model call is made with the tools withheld, and the run ends after it.
            ``None``: never.
        include_detailed_errors: Send the model the message of a tool's exception, not only its
            type (messages can hold secrets, so off by default). Argument errors always go to
            the model in full; the caller always gets the exception on ``ToolCalled.exception``.
        eager_tools: Start each call as soon as its ``ToolCallEnd`` arrives, while the model
            still streams the rest. Calls from the first one that needs approval on wait for the
            end of the response; results keep call order in the transcript. Ignored when
            ``sequential``.
        max_tool_threads: The most worker threads the sync tools of this client's runs use at
            once (``@tool`` on a plain function without its own ``limiter``): an int (one
            limiter per client and Trio run) or a ``trio.CapacityLimiter`` to share. ``None``:
            :func:`current_default_tool_thread_limiter` (40 per Trio run). Tool threads never
            take Trio's own thread slots, so abandoned ones (timed out or cancelled, still
            running) can hold up other sync tools, never the rest of the program.

    Raises:
        ConfigurationError: an option is out of range, two tools share a name, or ``inner`` is
            itself a ``FunctionInvokingChatClient`` (its calls would run twice) -- a
            ``ValueError``. Other decorators (logging, retries, caching) stack freely.
    """

    def __init__(
        self,
        inner: ChatClient,
        tools: Iterable[Tool] = (),
        *,
        max_rounds: int = 10,
        on_max_rounds: Literal["finish", "answer"] = "finish",
        tool_timeout: float | None = None,
        max_concurrency: int | trio.CapacityLimiter | None = None,
        sequential: bool = False,
        max_tool_calls: int | None = None,
        max_consecutive_errors: int | None = 3,
        include_detailed_errors: bool = False,
        eager_tools: bool = False,
        max_tool_threads: int | trio.CapacityLimiter | None = None,
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ConfigurationError(f"max_rounds must be an integer >= 1, got {max_rounds!r}")
        if isinstance(inner, FunctionInvokingChatClient):
            raise ConfigurationError(
                "the inner client is itself a FunctionInvokingChatClient: the outer loop would "
                "run its tool calls again; give all the tools to one loop"
            )
        if on_max_rounds not in ("finish", "answer"):
            raise ConfigurationError(
                f"on_max_rounds must be 'finish' or 'answer', got {on_max_rounds!r}"
            )
        _check("tool_timeout", tool_timeout, 0, integer=False)
        if not isinstance(max_concurrency, trio.CapacityLimiter):
            _check("max_concurrency", max_concurrency, 1)
        _check("max_tool_calls", max_tool_calls, 0)
        _check("max_consecutive_errors", max_consecutive_errors, 1)
        self.inner = inner
        self.max_rounds = max_rounds
        self.on_max_rounds = on_max_rounds
        self.tool_timeout = tool_timeout
        self.max_concurrency = max_concurrency
        self.sequential = sequential
        self.max_tool_calls = max_tool_calls
        self.max_consecutive_errors = max_consecutive_errors
        self.include_detailed_errors = include_detailed_errors
        self.eager_tools = eager_tools and not sequential
        self.max_tool_threads = max_tool_threads
        self._tool_threads = ToolThreads.of(max_tool_threads)
        self._tools: dict[str, Entry] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ConfigurationError(f"two tools are named {tool.name!r}; names must be unique")
            self._tools[tool.name] = Entry.of(tool)

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
        pending = pending_calls(messages)
        decisions = match_approvals(
            pending,
            lambda call: call.name in tools and tools[call.name].tool.requires_approval,
            options.tool_approval_responses,
        )
        inner_options = options.evolve(
            tools=tuple(ToolDefinition.of(entry.tool) for entry in tools.values()),
            tool_approval_responses=(),
            provider_tools=(),
            cancel_scope=None,
        )
        send: trio.MemorySendChannel[AgentResponseUpdate]
        receive: trio.MemoryReceiveChannel[AgentResponseUpdate]
        send, receive = trio.open_memory_channel(EVENT_BUFFER)  # [T](n) costs a typing call
        run = RunState(list(messages), [], tools, inner_options, send, *self._limits(options))
        stream = InvocationStream(receive, run)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._drive, run, options.cancel_scope, pending, decisions)
                yield stream
                nursery.cancel_scope.cancel()  # left early: stop whatever still runs
        except BaseExceptionGroup as group:
            reraise_single(group)

    def _limits(self, options: RunOptions) -> tuple[Limits, float]:
        limiter = self.max_concurrency
        if isinstance(limiter, int):
            limiter = trio.CapacityLimiter(limiter)
        timeout = options.tool_timeout if options.tool_timeout is not None else self.tool_timeout
        budget = (
            options.max_tool_calls if options.max_tool_calls is not None else self.max_tool_calls
        )
        limits = Limits(timeout, limiter, self.include_detailed_errors)
        return limits, math.inf if budget is None else budget

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
        run: RunState,
        cancel_scope: trio.CancelScope | None,
        pending: list[ToolCall],
        decisions: dict[str, ToolApprovalResponse],
    ) -> None:
        scope = cancel_scope if cancel_scope is not None else trio.CancelScope()
        self._tool_threads.install()  # for this task and the run's tasks, which it starts
        not_started = started = CANCELLED
        async with run.send:
            try:
                with scope:
                    await self._loop(run, pending, decisions)
            except Exception as exc:
                # The consumer recorded what failed; anything else is a bug of ours, raised as is.
                run.error = run.error or exc
                failed = f"the chat client failed ({type(run.error).__name__})"
                not_started, started = f"not run: {failed}", f"cancelled: {failed}"
            finally:
                owed = run.settle(not_started, started)
            for update in owed:
                await run.send.send(update)
            if scope.cancelled_caught:
                await run.send.send(Error(CANCELLED))

    # -- Looping -------------------------------------------------------------------------------

    async def _loop(
        self, run: RunState, pending: list[ToolCall], decisions: dict[str, ToolApprovalResponse]
    ) -> None:
        round_no, failed_streak = 0, 0
        if pending:  # resume: run (or reject) the calls the conversation ends with, then round + 1
            resume = RoundState(None, calls=pending, decisions=decisions)
            await self._round(run, resume)
            if resume.stop:
                await run.send.send(Finish(FinishReason.STOP, run.usage))
                return
            round_no, failed_streak = 1, int(resume.all_failed)
        while True:
            withheld: str | None = None
            final: FinishReason | None = None  # the reason to end with after a withheld round
            if round_no >= self.max_rounds:
                if self.on_max_rounds == "finish":
                    await run.send.send(Finish(FinishReason.MAX_ROUNDS, run.usage))
                    return
                withheld, final = "the round limit is reached", FinishReason.MAX_ROUNDS
            elif self.max_consecutive_errors and failed_streak >= self.max_consecutive_errors:
                withheld = (
                    f"tools are disabled after {failed_streak} rounds in a row in which every "
                    "call failed"
                )
            round_ = RoundState(ToolCallAccumulator(), withheld=withheld)
            reason = await self._round(run, round_)
            if reason is FinishReason.TOOL_CALLS and withheld is None and not round_.stop:
                round_no += 1
                failed_streak = failed_streak + 1 if round_.all_failed else 0
                continue
            if final is None:
                final = FinishReason.STOP if reason is FinishReason.TOOL_CALLS else reason
            await run.send.send(Finish(final, run.usage))
            return

    # -- Streaming -----------------------------------------------------------------------------

    async def _round(self, run: RunState, round_: RoundState) -> FinishReason:
        """One round; returns the consumer's finish reason (``TOOL_CALLS`` to go on)."""
        events_send: trio.MemorySendChannel[AgentResponseUpdate]
        events: trio.MemoryReceiveChannel[AgentResponseUpdate]
        messages_send: trio.MemorySendChannel[list[ChatMessage]]
        messages: trio.MemoryReceiveChannel[list[ChatMessage]]
        events_send, events = trio.open_memory_channel(EVENT_BUFFER)
        messages_send, messages = trio.open_memory_channel(1)
        round_.events = events
        run.current = round_
        finish: Finish | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._consume, run, round_, events_send, messages_send, nursery)
            # Forward what is buffered without a schedule point per update; wait (a checkpoint)
            # only when ``events`` is empty or the caller's channel is full.
            send = run.send
            while True:
                try:
                    update: AgentResponseUpdate | None = events.receive_nowait()
                except trio.WouldBlock:
                    update = None
                except trio.EndOfChannel:
                    break
                if update is None:
                    try:
                        update = await events.receive()
                    except trio.EndOfChannel:
                        break
                if isinstance(update, Finish):
                    finish = update
                elif not offer(send, update):
                    round_.in_flight = update
                    await send.send(update)
                    round_.in_flight = None
        assert finish is not None, "the consumer always ends a round with a Finish"
        run.commit(messages.receive_nowait())
        run.budget = max(0, run.budget - len(round_.results))
        return finish.finish_reason

    async def _consume(
        self,
        run: RunState,
        round_: RoundState,
        events: trio.MemorySendChannel[AgentResponseUpdate],
        messages: trio.MemorySendChannel[list[ChatMessage]],
        nursery: trio.Nursery,
    ) -> None:
        """The seed's spawned task: stream the model and start every call as a sibling task in
        the round's ``nursery``. Whoever finishes last -- this task or a call -- sends the
        round's messages and its Finish (``_close_round``): no task waits for the calls."""
        try:
            reason = await self._answer(run, round_, events, nursery)
        except BaseException as exc:
            if isinstance(exc, Exception):
                run.error = exc  # the run's failure, before a nursery wraps it in a group
            events.close()
            messages.close()
            raise
        round_.reason, round_.messages_out = reason, messages
        if not round_.running:  # else the last call to finish closes the round
            await self._close_round(round_, events)

    @staticmethod
    async def _close_round(
        round_: RoundState, events: trio.MemorySendChannel[AgentResponseUpdate]
    ) -> None:
        """Send the round's messages and its Finish, and close both channels: done by the
        consumer, or by the last call to finish when calls outlive the response."""
        assert round_.messages_out is not None
        assert round_.reason is not None
        with events, round_.messages_out:
            round_.messages_out.send_nowait(round_.messages())  # capacity 1, sent once
            await send(events, Finish(round_.reason))

    async def _answer(
        self,
        run: RunState,
        round_: RoundState,
        events: trio.MemorySendChannel[AgentResponseUpdate],
        nursery: trio.Nursery,
    ) -> FinishReason:
        reason = FinishReason.TOOL_CALLS
        if round_.accumulator is not None:
            reason = await self._stream_model(run, round_, events, nursery)
            round_.calls = round_.accumulator.finish()
            if not round_.calls:
                if reason not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
                    reason = FinishReason.STOP
            elif round_.withheld is None and any(
                run.needs_approval(call.name) for call in round_.calls
            ):
                # Pause: nothing more of this batch runs. Eager calls already running finish
                # first; their results come before the pending calls' in call order.
                reason = FinishReason.AWAITING_APPROVAL
                for call in round_.calls:
                    if run.needs_approval(call.name):
                        await send(events, ToolApprovalRequest(call))
            else:
                reason = FinishReason.TOOL_CALLS
        if reason is FinishReason.TOOL_CALLS and self.sequential:
            for call in round_.calls:
                self._claim(round_, call)
                await self._call(run, round_, call, events)
        elif reason is FinishReason.TOOL_CALLS:
            for call in round_.calls:
                if call.id not in round_.started:
                    self._start(run, round_, call, events, nursery)
        round_.closing = True
        return reason

    def _start(
        self,
        run: RunState,
        round_: RoundState,
        call: ToolCall,
        events: trio.MemorySendChannel[AgentResponseUpdate],
        nursery: trio.Nursery,
    ) -> None:
        self._claim(round_, call)
        nursery.start_soon(self._call, run, round_, call, events)

    @staticmethod
    def _claim(round_: RoundState, call: ToolCall) -> None:
        """``call`` is handed to a task now: it is not started again, and the round waits for it."""
        round_.started.add(call.id)
        round_.running += 1

    async def _stream_model(
        self,
        run: RunState,
        round_: RoundState,
        events: trio.MemorySendChannel[AgentResponseUpdate],
        nursery: trio.Nursery,
    ) -> FinishReason:
        """Forward the inner client's updates, accumulating calls; hold back its ``Finish``
        (its usage counts at once, whatever happens to the round later)."""
        accumulator = round_.accumulator
        assert accumulator is not None
        options = run.inner_options
        if round_.withheld is not None:  # offered, but the model must not call them
            options = options.evolve(tool_choice="none", parallel_tool_calls=None)
        eager = self.eager_tools and round_.withheld is None
        finish: Finish | None = None
        try:
            async with self.inner.run(tuple(run.messages), options) as updates:
                async for update in updates:
                    if finish is not None:
                        raise StreamProtocolError(
                            f"{type(update).__name__} after the response's Finish"
                        )
                    if isinstance(update, Finish):
                        finish = update
                        run.add_usage(update.usage)
                        continue
                    # A cancellation point per update, as ``send`` is: the inner stream may
                    # never yield (a scripted one does not).
                    await trio.lowlevel.checkpoint_if_cancelled()
                    if not offer(events, update):
                        await events.send(update)
                    ended = accumulator.add(update)  # after the send: the transcript holds
                    if eager:  # only what the caller was sent
                        self._start_eagerly(
                            run, round_, update, ended, events=events, nursery=nursery
                        )
        except TrioInvokeError:
            raise
        except Exception as exc:
            cause = single_exception(exc) if isinstance(exc, BaseExceptionGroup) else exc
            if isinstance(cause, TrioInvokeError):
                raise cause from None
            raise ChatClientError(
                f"the chat client {type(self.inner).__name__} failed: "
                f"{type(cause).__name__}: {cause}"
            ) from cause
        run.inner_options = self._after_first_round(run.inner_options)
        return FinishReason.STOP if finish is None else finish.finish_reason

    @staticmethod
    def _after_first_round(options: RunOptions) -> RunOptions:
        """A ``tool_choice`` that forces a call ("required", or one named tool) applies to the
        first model call only; later rounds leave the choice to the model, so it can answer."""
        if options.tool_choice is None or options.tool_choice in ("auto", "none"):
            return options
        return options.evolve(tool_choice=None)

    def _start_eagerly(
        self,
        run: RunState,
        round_: RoundState,
        update: AgentResponseUpdate,
        ended: ToolCall | None,
        *,
        events: trio.MemorySendChannel[AgentResponseUpdate],
        nursery: trio.Nursery,
    ) -> None:
        """Start a call as soon as its arguments are complete, unless it, or a call before it
        in call order, needs approval: those wait for the end of the response, so that results
        keep call order in the transcript when the batch pauses for approval."""
        if isinstance(update, ToolCallStart) and run.needs_approval(update.name):
            round_.approval_at = min(round_.approval_at, round_.position(update.id))
        elif ended is not None and round_.position(ended.id) < round_.approval_at:
            self._start(run, round_, ended, events, nursery)

    # -- one tool call -------------------------------------------------------------------------

    async def _call(
        self,
        run: RunState,
        round_: RoundState,
        call: ToolCall,
        events: trio.MemorySendChannel[AgentResponseUpdate],
    ) -> None:
        """Give ``call`` its one result (see ``_invoke.invoke``) and report it; the last call
        to finish after the response closes the round."""
        try:
            await self._answer_call(run, round_, call, events)
        finally:
            round_.running -= 1
        if round_.closing and not round_.running:
            await self._close_round(round_, events)

    async def _answer_call(
        self,
        run: RunState,
        round_: RoundState,
        call: ToolCall,
        events: trio.MemorySendChannel[AgentResponseUpdate],
    ) -> None:
        if round_.withheld is not None:
            called = not_run(call, round_.withheld)
        elif round_.position(call.id) >= run.budget:
            called = not_run(call, "this run's budget of tool calls is spent")
        else:
            called = await invoke(call, run.tools, run.limits, round_.decisions.get(call.id))
            round_.stop = round_.stop or isinstance(called.exception, StopLoop)
        round_.results[call.id] = called
        if not offer(events, called):
            await events.send(called)
        round_.reported.add(call.id)
