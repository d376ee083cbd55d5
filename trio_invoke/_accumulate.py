"""Folding a streamed response into its text and its tool calls (sans-IO: no Trio here).

Models stream a tool call as ``ToolCallStart(id, name)``, any number of ``ToolCallArgs(id, piece)``
and ``ToolCallEnd(id)``; several calls may be open at once, their pieces interleaved. The
accumulator keys everything by call id and refuses updates that contradict each other instead of
guessing: a piece for an id that never started is a :class:`StreamProtocolError`, not a merge.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._exceptions import StreamProtocolError
from ._messages import ChatMessage, MessageRole, ToolCall
from ._updates import AgentResponseUpdate, TextDelta, ToolCallArgs, ToolCallEnd, ToolCallStart

__all__ = ["AccumulatedToolCall", "ToolCallAccumulator"]


@attrs.define
class AccumulatedToolCall:
    """A tool call as the stream has delivered it so far."""

    id: str
    name: str
    arguments: str = ""
    """The JSON arguments; complete once the call has ended."""

    def to_tool_call(self) -> ToolCall:
        """The finished call. Empty arguments stand for ``{}``."""
        return ToolCall(self.id, self.name, self.arguments or "{}")


class ToolCallAccumulator:
    """Folds one response's updates into its text and its completed tool calls.

    Feed every update with :meth:`add`; read :attr:`text` and :meth:`completed` at any time (for
    example after a cancellation), or :meth:`finish` at the end of the stream.
    """

    __slots__ = ("_calls", "_ended", "_open", "_positions", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[str, AccumulatedToolCall] = {}  # every started call, in call order
        self._open: dict[str, list[str]] = {}  # id -> argument pieces of calls still open
        self._positions: dict[str, int] = {}  # id -> place in call order
        self._ended = 0

    def add(self, update: AgentResponseUpdate) -> ToolCall | None:
        """Take one update; return the finished call when ``update`` ends one.

        Raises:
            StreamProtocolError: ``update`` contradicts what came before; the message names the
                call id and the problem.
        """
        if isinstance(update, TextDelta):
            self._text.append(update.text)
        elif isinstance(update, ToolCallArgs):
            pieces = self._open.get(update.id)
            if pieces is None:
                raise StreamProtocolError(self._not_open(update.id, "ToolCallArgs"))
            pieces.append(update.args_delta)
        elif isinstance(update, ToolCallStart):
            self._start(update)
        elif isinstance(update, ToolCallEnd):
            return self._end(update.id)
        return None

    def _start(self, update: ToolCallStart) -> None:
        if update.id in self._calls:
            state = "still open" if update.id in self._open else "already ended"
            raise StreamProtocolError(
                f"second ToolCallStart for tool call id {update.id!r}, which is {state}"
            )
        self._positions[update.id] = len(self._calls)
        self._calls[update.id] = AccumulatedToolCall(update.id, update.name)
        self._open[update.id] = []

    def _end(self, call_id: str) -> ToolCall:
        pieces = self._open.pop(call_id, None)
        if pieces is None:
            raise StreamProtocolError(self._not_open(call_id, "ToolCallEnd"))
        call = self._calls[call_id]
        call.arguments = "".join(pieces)
        self._ended += 1
        return call.to_tool_call()

    def _not_open(self, call_id: str, what: str) -> str:
        if call_id in self._calls:
            return f"{what} for tool call id {call_id!r} after its ToolCallEnd"
        return f"{what} for tool call id {call_id!r}, which never started (no ToolCallStart)"

    def position(self, call_id: str) -> int:
        """The place of a started call in call order (0 for the first ``ToolCallStart``)."""
        return self._positions[call_id]

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._text)

    @property
    def open_ids(self) -> tuple[str, ...]:
        """Ids of calls that started and have not ended."""
        return tuple(self._open)

    def completed(self) -> list[ToolCall]:
        """The calls that have ended, in call order (order of their ``ToolCallStart``)."""
        if self._ended == len(self._calls):
            return [call.to_tool_call() for call in self._calls.values()]
        return [c.to_tool_call() for c in self._calls.values() if c.id not in self._open]

    def message(self, calls: Sequence[ToolCall] | None = None) -> ChatMessage | None:
        """The assistant message of the response so far: its text and its calls (``calls``, as
        :meth:`finish` or :meth:`completed` gave them, else the completed ones), or ``None``
        when it has neither."""
        text = self.text
        if calls is None:
            calls = self.completed()
        if not text and not calls:
            return None
        return ChatMessage(MessageRole.ASSISTANT, text, tuple(calls) or None)

    def finish(self) -> list[ToolCall]:
        """The response is over: its calls, in call order.

        Raises:
            StreamProtocolError: a call started and never ended.
        """
        if self._open:
            ids = ", ".join(repr(i) for i in self._open)
            raise StreamProtocolError(
                f"the response ended with tool call ids {ids} still open "
                "(ToolCallStart without ToolCallEnd)"
            )
        return self.completed()
