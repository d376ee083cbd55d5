"""Folding a streamed response into its assistant message (sans-IO: no Trio here).

Models stream a tool call as ``ToolCallStart(id, name)``, any number of ``ToolCallArgs(id, piece)``
and ``ToolCallEnd(id)``; several calls may be open at once, their pieces interleaved. A call's
provider data is its start's, with what its end carries set over it. The
accumulator keys everything by call id and refuses updates that contradict each other instead of
guessing: a piece for an id that never started is a :class:`StreamProtocolError`, not a merge.

Besides text and calls it keeps what the assistant message must carry back to the provider:
the reasoning (``ReasoningDelta`` pieces, joined, and the wire field they came in) and the
provider-opaque data (``ProviderDataDelta`` pieces, merged per field and key into lists of JSON
objects). :meth:`ToolCallAccumulator.message` builds the round's assistant message from all of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._content import json_copy, merged
from ._exceptions import StreamProtocolError
from ._messages import REASONING_FIELDS, ChatMessage, MessageRole, ToolCall
from ._updates import (
    AgentResponseUpdate,
    ProviderDataDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = ["AccumulatedToolCall", "ToolCallAccumulator"]


def _not_text(update: AgentResponseUpdate, field: str, value: object) -> str:
    return f"{type(update).__name__}.{field} must be a str, got {value!r:.80}"


def _call_id(update: ToolCallStart | ToolCallArgs | ToolCallEnd) -> str:
    """The update's call id, checked: a str (a buggy client's ``None`` is no key to merge on).
    Where an id is looked up among the open calls, found is enough (their ids were checked at
    their start), and this runs only when it is not found."""
    if not isinstance(update.id, str):
        raise StreamProtocolError(_not_text(update, "id", update.id))
    return update.id


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

    __slots__ = (
        "_data",
        "_done",
        "_open",
        "_positions",
        "_reasoning",
        "_reasoning_field",
        "_text",
    )

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_field: str | None = None  # the wire field of the first piece that said
        self._data: dict[str, dict[str, dict[str, Any]]] = {}  # field -> key -> item
        self._positions: dict[str, int] = {}  # every started call's id -> its place, in order
        # id -> (name, argument pieces, the call's provider data)
        self._open: dict[str, tuple[str, list[str], Mapping[str, Any]]] = {}
        self._done: dict[str, ToolCall] = {}  # id -> the call, once ended (ToolCall is frozen)

    def add(self, update: AgentResponseUpdate) -> ToolCall | None:
        """Take one update; return the finished call when ``update`` ends one.

        Raises:
            StreamProtocolError: ``update`` contradicts what came before, or a text, name, id or
                arguments piece of it is not a ``str``; the message names the call id (or the
                field) and the problem.
        """
        if isinstance(update, TextDelta):
            if not isinstance(update.text, str):
                raise StreamProtocolError(_not_text(update, "text", update.text))
            self._text.append(update.text)
        elif isinstance(update, ToolCallArgs):
            if not isinstance(update.args_delta, str):
                raise StreamProtocolError(_not_text(update, "args_delta", update.args_delta))
            try:
                open_call = self._open.get(update.id)  # (the keys are str: _start checks them)
            except TypeError:  # unhashable: no str
                open_call = None
            if open_call is None:
                raise StreamProtocolError(self._not_open(_call_id(update), "ToolCallArgs"))
            open_call[1].append(update.args_delta)
        elif isinstance(update, ToolCallStart):
            self._start(update)
        elif isinstance(update, ToolCallEnd):
            return self._end(update)
        elif isinstance(update, ReasoningDelta):
            if not isinstance(update.text, str):
                raise StreamProtocolError(_not_text(update, "text", update.text))
            self._reasoning.append(update.text)
            if self._reasoning_field is None:
                self._reasoning_field = update.field
        elif isinstance(update, ProviderDataDelta):
            self._merge(update)
        return None

    def _merge(self, update: ProviderDataDelta) -> None:
        items = self._data.setdefault(update.field, {})
        item = items.get(update.key)
        if item is None:
            item = items[update.key] = {}
        for name, value in update.update.items():
            if (value is not None and value != "") or name not in item:  # keep what came
                item[name] = json_copy(value, update.field)
        for name, text in update.extend.items():
            before = item.get(name)
            item[name] = text if not isinstance(before, str) else before + text

    def _start(self, update: ToolCallStart) -> None:
        _call_id(update)
        if not isinstance(update.name, str):
            raise StreamProtocolError(_not_text(update, "name", update.name))
        positions = self._positions
        if update.id in positions:
            state = "still open" if update.id in self._open else "already ended"
            raise StreamProtocolError(
                f"second ToolCallStart for tool call id {update.id!r}, which is {state}"
            )
        positions[update.id] = len(positions)
        self._open[update.id] = (update.name, [], update.provider_data)

    def _end(self, update: ToolCallEnd) -> ToolCall:
        call_id = update.id
        try:
            open_call = self._open.pop(call_id, None)  # (the keys are str: _start checks them)
        except TypeError:  # unhashable: no str
            open_call = None
        if open_call is None:
            raise StreamProtocolError(self._not_open(_call_id(update), "ToolCallEnd"))
        name, pieces, data = open_call
        if update.provider_data:  # the call's keys that came after its start
            data = merged(data, update.provider_data)
        # As AccumulatedToolCall.to_tool_call: empty arguments stand for ``{}``.
        done = self._done[call_id] = ToolCall(
            call_id, name, "".join(pieces) or "{}", provider_data=data
        )
        return done

    def _not_open(self, call_id: str, what: str) -> str:
        if call_id in self._positions:
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
    def reasoning(self) -> str | None:
        """The reasoning received so far, ``None`` if none came."""
        return "".join(self._reasoning) if self._reasoning else None

    @property
    def provider_data(self) -> dict[str, list[dict[str, Any]]]:
        """The provider-opaque data received so far: per field, its items (a copy)."""
        return {
            field: [json_copy(item, field) for item in items.values()]
            for field, items in self._data.items()
        }

    def message(self, calls: Sequence[ToolCall] | None = None) -> ChatMessage | None:
        """The assistant message of what was received: text, ``calls`` (default: the completed
        ones), reasoning and provider data; ``None`` if the response held none of them.

        Raises:
            ValueError: provider data under a name the message models itself (``content``,
                ``tool_calls``, ...).
        """
        if calls is None:
            calls = self.completed()
        text, reasoning = self.text, self.reasoning
        if not (text or calls or reasoning is not None or self._data):
            return None
        field = self._reasoning_field or REASONING_FIELDS[0]
        return ChatMessage(
            MessageRole.ASSISTANT,
            text,
            tuple(calls) or None,
            reasoning=reasoning,
            reasoning_field=field,
            provider_data=self.provider_data if self._data else None,
        )

    @property
    def open_ids(self) -> tuple[str, ...]:
        """Ids of calls that started and have not ended."""
        return tuple(self._open)

    def completed(self) -> list[ToolCall]:
        """The calls that have ended, in call order (order of their ``ToolCallStart``)."""
        done = self._done
        if not self._open:
            return [done[call_id] for call_id in self._positions]
        return [done[call_id] for call_id in self._positions if call_id not in self._open]

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
