"""One round of the loop: the seed's Streaming state.

A round opens a nursery and two memory channels, standing in for the seed's mpsc pair:
``events`` (256) and ``messages`` (1).

* The **consumer** task (:meth:`Round._consume`, the seed's spawned task) first hands the
  caller's stream the receive end of ``events`` (through the run's channel), then streams the
  model, puts every update into ``events``, accumulates the calls by id and holds back the model's
  ``Finish``. When the response is over it sends the round's :class:`Turn` -- the assistant
  message, its calls and the round's reason -- once into ``messages``, and starts each call as a
  sibling task in the round's nursery; the first call not yet started it runs itself (its work
  is done, so it becomes that call's task: one task fewer per round).
* Each **call** task holds its own ``clone()`` of the ``events`` send channel and closes it once
  its ``ToolCalled`` is in. So the receiver's ``EndOfChannel`` means that every task of the round
  is done: the round ends by structure, not by counting.
* The caller's stream receives from ``events`` directly, with no task in between, as the seed's
  stream polls its receiver. The **loop side** (:meth:`Round.play`, in the task that owns the
  run) waits for the nursery's exit, then takes the turn from ``messages`` (it is there: the
  consumer sends it before it runs a call, and a consumer that failed fails the nursery).

Each piece of state has one writer: the consumer feeds the accumulator and claims calls
(``_started``); each call task records when its tool began to run (``_began``) and its own
result once it is in ``events`` (``_results``); the loop side takes the turn. Under a
concurrency limiter the calls take their slots in call order (``_invoke.CallOrder``): each call
task passes its own turn, the consumer those of the calls that do not run in the round. When a
round is cut short, :meth:`Round.settle` closes it synchronously once its nursery is gone.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Awaitable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs
import trio

from .._accumulate import ToolCallAccumulator
from .._exceptions import ChatClientError, StopLoop, StreamProtocolError, TrioInvokeError
from .._messages import (
    ChatMessage,
    FinishReason,
    MessageRole,
    ToolCall,
    Usage,
    _loop_tool_result,
    _stops_loop,
)
from .._options import ToolApprovalResponse
from .._updates import (
    MODEL_UPDATES,
    AgentResponseUpdate,
    Finish,
    ToolApprovalRequest,
    ToolCalled,
    ToolCallStart,
)
from ._channels import channel_pair, must_checkpoint, offer, primary, send
from ._hooks import ChatObservation, running
from ._invoke import CallOrder, Site, answered, invoke, not_run, really_cancelled
from ._policy import BUDGET_SPENT, RoundOutcome, RoundPlan, turn_reason

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["EVENT_BUFFER", "Round", "Turn"]

EVENT_BUFFER = 256
"""Capacity of each round's event channel (the seed's ``mpsc::channel(256)``)."""
_MODEL_TYPES = frozenset(MODEL_UPDATES)
Events: TypeAlias = "trio.MemorySendChannel[AgentResponseUpdate]"
_NONE: Mapping[str, Any] = MappingProxyType({})
"""No decisions, no positions: a model round's (one, shared, read-only)."""


@attrs.define
class Turn:
    """What the model's response came to: sent once, by the consumer, into ``messages``; read,
    never changed. (Not ``frozen``: a frozen class's ``__init__`` takes twice as long, and a
    round makes one.)"""

    message: ChatMessage | None
    """The assistant message (its text and calls); ``None`` on resume or for an empty answer."""
    calls: tuple[ToolCall, ...]
    """The calls to answer, in call order."""
    reason: FinishReason
    """The round's reason (``_policy.turn_reason``)."""


@attrs.define(eq=False)
class Round:
    """One round: a model call and the calls it makes, or the calls a conversation ends with."""

    run: Run
    plan: RoundPlan
    accumulator: ToolCallAccumulator | None
    """The response being streamed; ``None`` for a resume, whose calls are known."""
    pending: tuple[ToolCall, ...] = ()
    """On resume: the calls the conversation ends with, in call order."""
    decisions: Mapping[str, ToolApprovalResponse] = _NONE
    """On resume: the user's answers, by call id."""
    stopped_before: bool = False
    """On resume: a call of the batch raised ``StopLoop`` before the pause (its tool message
    says so), so the run ends once the batch is answered."""
    # -- written by the consumer ----------------------------------------------------------------
    _started: set[str] = attrs.field(factory=set, init=False)
    """Ids of the calls handed to a task."""
    _approval_at: float = attrs.field(default=math.inf, init=False)
    """Call-order position of the first call seen that needs approval: eager start stops there."""
    # -- written by each call task, for its own call --------------------------------------------
    _results: dict[str, ToolCalled] = attrs.field(factory=dict, init=False)
    """Call id -> the result put into ``events`` (so the caller gets it)."""
    _began: dict[str, float] = attrs.field(factory=dict, init=False)
    """Call id -> when its tool began to run (under a concurrency limiter: when it got its
    slot); see ``_invoke.invoke``."""
    _positions: Mapping[str, int] = attrs.field(default=_NONE, init=False)
    """On resume: call id -> place in call order (set by :meth:`resume`)."""
    _site: Site = attrs.field(default=Site(), init=False)
    """What each call's middleware and observer are told: set before the first call starts."""
    # -- written by the loop side ---------------------------------------------------------------
    _turns: trio.MemoryReceiveChannel[Turn] | None = attrs.field(default=None, init=False)
    _turn: Turn | None = attrs.field(default=None, init=False)

    @classmethod
    def resume(
        cls, run: Run, calls: Sequence[ToolCall], decisions: Mapping[str, ToolApprovalResponse]
    ) -> Round:
        trailing = itertools.takewhile(
            lambda message: message.role is MessageRole.TOOL, reversed(run.messages)
        )  # the results of the batch's calls that ran before the pause
        stopped = any(_stops_loop(message) for message in trailing)
        round_ = cls(run, RoundPlan(), None, tuple(calls), decisions, stopped)
        round_._positions = {call.id: index for index, call in enumerate(round_.pending)}
        return round_

    @classmethod
    def model(cls, run: Run, plan: RoundPlan) -> Round:
        return cls(run, plan, ToolCallAccumulator())

    # -- the loop side ----------------------------------------------------------------------------

    async def play(self) -> RoundOutcome:
        """Run the round to its end: every task of it is done when this returns.

        Cancellation: the round's tasks are cancelled; :meth:`settle` then closes it.
        """
        events: trio.MemorySendChannel[AgentResponseUpdate]
        receive: trio.MemoryReceiveChannel[AgentResponseUpdate]
        turns: trio.MemorySendChannel[Turn]
        events, receive = channel_pair(EVENT_BUFFER)  # trio.open_memory_channel, made faster
        turns, self._turns = channel_pair(1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._consume, events, receive, turns, nursery)
        # Every task of the round is done (had one failed, the nursery would have raised): the
        # turn is in ``messages``, sent once, and taken here without a wait (the seed's msg_rx).
        turn = self._turn = self._turns.receive_nowait()
        failed = stopped = 0
        for called in self._results.values():
            failed += called.is_error
            stopped += isinstance(called.exception, StopLoop)
        results = len(self._results)
        stopped += self.stopped_before
        return RoundOutcome(turn.reason, len(turn.calls), 0 < results == failed, stopped > 0)

    def messages(self) -> list[ChatMessage]:
        """The round's messages: the assistant message (unless resuming), then one tool message
        per answered call, in call order, marked ``is_error`` where its text does not say it
        (``_messages._loop_tool_result``)."""
        turn = self._turn
        assert turn is not None
        out = [turn.message] if turn.message is not None else []
        paused = turn.reason is FinishReason.AWAITING_APPROVAL
        for call in turn.calls:
            called = self._results.get(call.id)
            if called is not None:
                stops = paused and isinstance(called.exception, StopLoop)  # kept for the resume
                out.append(
                    _loop_tool_result(call, called.content, is_error=called.is_error, stops=stops)
                )
        return out

    def settle(self, *, not_started: str, started: str) -> list[AgentResponseUpdate]:
        """Close a round that was cut short, once its nursery is gone; return the results still
        owed to the caller (who gets them after what is still buffered in ``events``).

        Calls that ended get a result -- ``started`` for those that were running,
        ``not_started`` for those that never ran; calls whose ``ToolCallEnd`` never arrived are
        dropped; the text so far is kept.
        """
        if self._turn is None and self._turns is not None:
            with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                self._turn = self._turns.receive_nowait()  # sent, not yet taken
        if self._turn is None:
            calls: tuple[ToolCall, ...] = self.pending
            message = None
            if self.accumulator is not None:
                calls = tuple(self.accumulator.completed())
                message = self.accumulator.message(calls)
            self._turn = Turn(message, calls, FinishReason.TOOL_CALLS)
        owed: list[AgentResponseUpdate] = []
        now = trio.current_time()
        for call in self._turn.calls:
            if call.id not in self._results:
                began = self._began.get(call.id)
                if began is not None:
                    why, took = started, now - began
                else:  # never handed to a task, its task cut short before it began, or
                    # still queued for a slot: it never ran
                    why, took = not_started, 0.0
                called = ToolCalled(call, f"Error: {why}", is_error=True, duration=took)
                self._results[call.id] = called
                owed.append(called)
        return owed

    # -- the consumer: the seed's spawned task ----------------------------------------------------

    @trio.lowlevel.enable_ki_protection
    async def _consume(
        self,
        events: Events,
        receive: trio.MemoryReceiveChannel[AgentResponseUpdate],
        turns: trio.MemorySendChannel[Turn],
        nursery: trio.Nursery,
    ) -> None:
        with events, turns:
            # The caller's stream reads this round from here on. Sent by this task, before its
            # first update, rather than by the loop side before it starts this task: else the
            # caller could run first, find the round empty, and wait once more.
            if not offer(self.run.send, receive):
                await self.run.send.send(receive)
            if self.accumulator is None:  # a resume: its round is counted once it plays
                message, calls, reason = None, self.pending, FinishReason.TOOL_CALLS
                self._site = self._ordered(self.run.site(tuple(self.run.messages)))
            else:
                model_reason = await self._stream(events, nursery)
                calls = tuple(self.accumulator.finish())
                message = self.accumulator.message(calls)
                reason = turn_reason(
                    model_reason,
                    calls,
                    withheld=self.plan.withheld is not None,
                    needs_approval=self.run.needs_approval,
                )
            run_now = calls
            if reason is FinishReason.AWAITING_APPROVAL:
                waiting = [call for call in calls if self.run.needs_approval(call.name)]
                run_now = ()
                if self.run.per_call_approval:
                    # The calls that need no approval run now, and the assistant message lists
                    # them first, so that their tool messages and, on resume, those of the
                    # waiting calls follow it in call order.
                    run_now = tuple(call for call in calls if call not in waiting)
                    calls = (*run_now, *waiting)
                    assert message is not None
                    message = attrs.evolve(message, tool_calls=calls)
                # Else nothing more of this batch runs: eager calls already running finish
                # first; their results come before the pending calls' in call order.
                for call in waiting:
                    await send(events, ToolApprovalRequest(call))
            turns.send_nowait(Turn(message, calls, reason))  # capacity 1, sent once
            if (
                reason is not FinishReason.TOOL_CALLS
                and reason is not FinishReason.AWAITING_APPROVAL
            ):
                run_now = ()
            order = self._site.order
            if order is not None:  # the calls that do not run hold up none that do
                runs = {call.id for call in run_now}
                for call in calls:
                    if call.id not in runs and call.id not in self._started:
                        order.passed(call.id)
            if not run_now:
                return
            calls = run_now
            if self.run.sequential:
                for call in calls:
                    self._started.add(call.id)
                    await self._answer_into(call, events)
                return
            waiting = [call for call in calls if call.id not in self._started]
            if not waiting:
                return
            for call in waiting[1:]:
                self._start(call, events, nursery)
            # The consumer's work is done: it becomes the first waiting call's task (one task
            # fewer per round), a sibling of the others, its result put into its own ``events``.
            first = waiting[0]
            self._started.add(first.id)
            await self._answer_into(first, events)

    async def _stream(self, events: Events, nursery: trio.Nursery) -> FinishReason:
        """Put the inner client's updates into ``events``, accumulating calls; hold back its
        ``Finish`` (its usage counts at once, whatever happens to the round later)."""
        accumulator = self.accumulator
        assert accumulator is not None
        run = self.run
        options = run.inner_options
        if self.plan.withheld is not None:  # offered, but the model must not call them
            options = options.evolve(tool_choice="none", parallel_tool_calls=None)
        eager = run.eager and self.plan.withheld is None
        seen = tuple(run.messages)
        if run.limits.middleware or run.observation is not None:
            self._site = run.site(seen)  # only middleware and observers are told where
        self._site = self._ordered(self._site)  # before any call starts (eager start)
        observed: ChatObservation | None = (
            None if run.observation is None else run.observation.chat(run.inner, seen, options)
        )
        finish: Finish | None = None
        add, cancel_point, task = accumulator.add, must_checkpoint, trio.lowlevel.current_task()
        put, full = events.send_nowait, trio.WouldBlock
        try:
            with running(observed):  # entered and left in this task
                async with run.inner.run(seen, options) as updates:
                    async for update in updates:
                        if type(update) not in _MODEL_TYPES:
                            raise StreamProtocolError(_not_a_model_update(run, update))
                        if finish is not None:
                            raise StreamProtocolError(
                                f"{type(update).__name__} after the response's Finish"
                            )
                        if type(update) is Finish:
                            _check_finish(update)
                            finish = update
                            run.count_usage(update.usage)
                            continue
                        # A cancellation point per update, as ``send`` is: the inner stream may
                        # never yield (a scripted one does not).
                        if cancel_point(task):  # (its check, without a coroutine, in this task)
                            await trio.lowlevel.checkpoint_if_cancelled()
                        try:  # as ``offer``, without its call on the path of every update
                            put(update)
                            waits = False
                        except full:
                            waits = True
                        if waits:  # (awaited outside the ``except``: no exception pinned meanwhile)
                            await events.send(update)
                        ended = add(update)  # after the send: the transcript holds
                        if eager:  # only what goes to the caller
                            self._start_early(update, ended, events, nursery)
        except BaseException as exc:
            failure = _failure(run, exc)
            if observed is not None:  # (the group of the client's own nursery: what it holds)
                observed.end(finish, accumulator.message(), primary(failure))
            if failure is exc:
                raise
            raise failure from failure.__cause__
        if observed is not None:
            observed.end(finish, accumulator.message(), None)
        return FinishReason.STOP if finish is None else finish.finish_reason

    def _start_early(
        self,
        update: AgentResponseUpdate,
        ended: ToolCall | None,
        events: Events,
        nursery: trio.Nursery,
    ) -> None:
        """Start a call as soon as its arguments are complete, unless it, or a call before it
        in call order, needs approval: those wait for the end of the response, so that results
        keep call order in the transcript when the batch pauses for approval. With per-call
        approval only the calls that need approval wait (the pause lists them last)."""
        assert self.accumulator is not None
        if type(update) is ToolCallStart:
            if not self.run.needs_approval(update.name):
                return
            if not self.run.per_call_approval:
                self._approval_at = min(self._approval_at, self.accumulator.position(update.id))
            elif self._site.order is not None:
                self._site.order.passed(update.id)  # it waits for approval: not in this round
        elif (
            ended is not None
            and self.accumulator.position(ended.id) < self._approval_at
            and not self.run.needs_approval(ended.name)
        ):
            self._start(ended, events, nursery)

    def _start(self, call: ToolCall, events: Events, nursery: trio.Nursery) -> None:
        self._started.add(call.id)
        nursery.start_soon(self._call, call, events.clone())

    # -- one call ---------------------------------------------------------------------------------

    @trio.lowlevel.enable_ki_protection
    async def _call(self, call: ToolCall, events: Events) -> None:
        """A call task: its one result goes into its own clone of ``events``, then the clone is
        closed -- the last one closed ends the round."""
        with events:
            # A task started in a round already cut short (the model failed meanwhile) does
            # not begin its call: what a tool does before its first await would run otherwise.
            await trio.lowlevel.checkpoint_if_cancelled()
            called = await self._answer(call)
            if not offer(events, called):  # as _answer_into, one coroutine fewer per call
                await events.send(called)
            self._results[called.call.id] = called

    async def _answer_into(self, call: ToolCall, events: Events) -> None:
        """Answer ``call`` and put its result into ``events``; once it is in, it is the call's
        result."""
        called = await self._answer(call)
        if not offer(events, called):
            await events.send(called)
        self._results[called.call.id] = called

    def _answer(self, call: ToolCall) -> Awaitable[ToolCalled]:
        """The call's answer, to await: its result, or why it is not run (a coroutine of its
        own only for a call that runs)."""
        if self.plan.withheld is not None:
            return answered(not_run(call, self.plan.withheld), self._site)
        if not self.run.policy.allows(self._position(call)):
            return answered(not_run(call, BUDGET_SPENT), self._site)
        run = self.run
        return invoke(
            call,
            run.tools,
            run.limits,
            self.decisions.get(call.id),
            self._site,
            began=self._began.__setitem__,
        )

    def _position(self, call: ToolCall) -> int:
        if self.accumulator is not None:
            return self.accumulator.position(call.id)
        return self._positions[call.id]

    def _ordered(self, site: Site) -> Site:
        """``site``, with the round's :class:`CallOrder` under a concurrency limiter."""
        if self.run.limits.limiter is None:
            return site
        place = self._positions.__getitem__
        if self.accumulator is not None:
            place = self.accumulator.position
        return attrs.evolve(site, order=CallOrder(place))


def _failure(run: Run, exc: BaseException) -> BaseException:
    """What the inner client's exception means for the run: library errors as they are, any
    other exception a ``ChatClientError`` (the original is its cause); interrupts and
    cancellations as they are. A ``Cancelled`` that no scope around the round is cancelling
    (the client's own, alone or in a group) is the client's failure too: let out as it is, the
    round's nursery would swallow it. A group of several errors the client raised itself (its
    own nursery, two of whose tasks failed) is the cause whole, less any ``Cancelled``; a group
    of one error stands for that error."""
    if isinstance(exc, TrioInvokeError):
        return exc
    cause = primary(exc)
    if isinstance(exc, BaseExceptionGroup) and isinstance(cause, Exception):
        cancelled, errors = exc.split(trio.Cancelled)
        if errors is not None and len(errors.exceptions) > 1:
            cause = exc if cancelled is None else errors
    client = type(run.inner).__name__
    if isinstance(cause, trio.Cancelled):
        if really_cancelled():
            return exc
        error = ChatClientError(
            f"the chat client {client} raised trio.Cancelled, but nothing cancelled it"
        )
    elif not isinstance(cause, Exception):
        return exc  # an interrupt
    elif isinstance(cause, TrioInvokeError):
        return cause
    else:
        error = ChatClientError(f"the chat client {client} failed: {type(cause).__name__}: {cause}")
    error.__cause__ = cause
    return error


def _check_finish(finish: Finish) -> None:
    """A model's ``Finish`` holds a ``FinishReason`` and a ``Usage`` or ``None`` (attrs does not
    check the types it is given: a ``"length"`` would otherwise read as ``STOP``)."""
    reason: object = finish.finish_reason
    usage: object = finish.usage
    if type(reason) is not FinishReason:
        raise StreamProtocolError(
            f"Finish.finish_reason must be a FinishReason, got {reason!r:.80}"
        )
    if usage is not None and not isinstance(usage, Usage):
        raise StreamProtocolError(f"Finish.usage must be a Usage or None, got {usage!r:.80}")


def _not_a_model_update(run: Run, update: object) -> str:
    client, what = type(run.inner).__name__, type(update).__name__
    if isinstance(update, ToolCalled | ToolApprovalRequest):
        return (
            f"the chat client {client} yielded a {what}, which only the loop sends "
            "(is it a tool-calling loop itself?)"
        )
    return (
        f"the chat client {client} yielded {update!r:.80} (a {what}), which is not a model "
        "update (TextDelta, ToolCallStart, ToolCallArgs, ToolCallEnd or Finish)"
    )
