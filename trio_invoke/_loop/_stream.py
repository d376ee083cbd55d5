"""What a run of the loop gives its caller: the stream of updates, or the whole response."""

from __future__ import annotations

from typing import NoReturn

import attrs
import trio

from .._messages import ChatMessage, FinishReason, MessageRole, Usage
from .._updates import AgentResponseUpdate, ToolApprovalRequest
from ._channels import EMPTY, ENDED, PEEKS, must_checkpoint, poll
from ._run import Delivery, Run

__all__ = ["ChatResponse", "InvocationStream"]


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
    reasoning: str | None = attrs.field(kw_only=True)
    """The reasoning behind :attr:`text`: that of the run's last assistant message (``None`` if
    it has none). The reasoning of earlier rounds is on their messages."""

    @reasoning.default
    def _last_reasoning(self) -> str | None:
        return next(
            (m.reasoning for m in reversed(self.messages) if m.role is MessageRole.ASSISTANT), None
        )


@attrs.define(eq=False)
class InvocationStream:
    """The stream of one run of :class:`FunctionInvokingChatClient`: iterate it for updates.

    Once exhausted, :attr:`messages` holds exactly what the run added to the conversation. If the
    inner chat client failed, iterating raises that failure after the updates produced before it.
    """

    _receive: trio.MemoryReceiveChannel[Delivery]
    """The run's channel: each round's events channel in turn, then the run's last updates."""
    _run: Run
    _round: trio.MemoryReceiveChannel[AgentResponseUpdate] | None = None
    """The events channel of the round being read, if one is."""
    _ended: bool = attrs.field(default=False, init=False)
    """The run's channel is exhausted: the run's driver is done (it holds the channel's only
    send end to its last line), and with it every task of the run."""
    _left: bool = attrs.field(default=False, init=False)
    """The run's ``async with`` was left before the stream was exhausted."""

    def __aiter__(self) -> InvocationStream:
        return self

    @trio.lowlevel.enable_ki_protection
    async def __anext__(self) -> AgentResponseUpdate:
        """The next update.

        Raises:
            StopAsyncIteration: the run is over.
            TrioInvokeError: the run failed (the inner chat client's failure, once).
            trio.ClosedResourceError: the run's ``async with`` was left before the stream was
                exhausted (the updates it still held went with the run).

        Cancellation: nothing is lost: an update is taken from the run only when it is returned,
        and the run goes on until the ``async with`` ends or its cancel scope is cancelled.
        """
        # What is buffered is handed over without a schedule point (the producer yields at least
        # once per buffer-full), but every call stays a cancellation point: there is no public
        # "cancel point without a yield", hence trio.lowlevel (its check without its coroutine
        # while nothing is cancelled: ``must_checkpoint``).
        if must_checkpoint(trio.lowlevel.current_task()):
            await trio.lowlevel.checkpoint_if_cancelled()
        events = self._round
        if events is not None:  # the common case: the round has an update ready
            if PEEKS and events._state.data:  # (what ``poll`` would look at, without its call)
                return events.receive_nowait()
            item = poll(events)
            if item is not EMPTY and item is not ENDED:
                return item  # type: ignore[no-any-return]
            if item is ENDED:
                self._round = events = None  # every task of the round is done
        return await self._next(events)  # ``events``: known empty, not asked again

    @trio.lowlevel.enable_ki_protection
    async def _next(
        self, empty: trio.MemoryReceiveChannel[AgentResponseUpdate] | None = None
    ) -> AgentResponseUpdate:
        """The next update, waiting for it if need be; ``empty`` is the round's channel when
        it was just found empty (not asked again: ``receive`` asks it once more itself)."""
        if self._ended:
            raise StopAsyncIteration
        if self._left:
            raise trio.ClosedResourceError(
                "this run's stream was closed: its async with was left before the end"
            )
        while True:
            source = self._round if self._round is not None else self._receive
            item: object = EMPTY if source is empty else poll(source)
            empty = None
            if item is EMPTY:
                try:
                    item = await source.receive()
                except trio.EndOfChannel:
                    item = ENDED
            if item is ENDED:  # the round is over (every task of it), or the run is
                if source is self._receive:
                    self._end()
                self._round = None
            elif type(item) is trio.MemoryReceiveChannel:
                self._round = item
            else:
                return item  # type: ignore[return-value]

    def _leave(self) -> None:
        """The run's ``async with`` is over: what the stream still holds is not handed out."""
        if not self._ended:
            self._left = True
            self._round = None

    def _end(self) -> NoReturn:
        self._ended = True
        failure, self._run.failure = self._run.failure, None
        if failure is not None:
            raise failure from failure.__cause__  # keep its cause, drop EndOfChannel
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
