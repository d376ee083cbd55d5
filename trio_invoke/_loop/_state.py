"""The state one run of the loop shares between its tasks, and how a cut-short round is closed.

``RunState`` is the conversation so far and what the run added; ``RoundState`` is what one round
(or one resume) has produced: the streamed response, its calls and their results. Both are the
source of the transcript: :meth:`RunState.settle` closes a round synchronously, whatever ended
it, so that every call in ``.messages`` has exactly one tool message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import trio

from .._accumulate import ToolCallAccumulator
from .._messages import ChatMessage, FinishReason, ToolCall, Usage
from .._options import RunOptions, ToolApprovalResponse
from .._updates import AgentResponseUpdate, Finish, ToolCalled
from ._invoke import Entry, Limits

__all__ = ["RoundState", "RunState"]


@attrs.define(eq=False)
class RoundState:
    """What one round (or one resume) has produced so far: the source of its messages."""

    accumulator: ToolCallAccumulator | None
    """The streamed response; ``None`` for a resume round, whose calls are already recorded."""
    calls: list[ToolCall] = attrs.field(factory=list)
    """The calls to answer, in call order, once known."""
    decisions: Mapping[str, ToolApprovalResponse] = attrs.field(factory=dict)
    """On resume: the user's answers, by call id."""
    withheld: str | None = None
    """Why this round's calls are not run (tools were withheld from the model), if they are not."""
    results: dict[str, ToolCalled] = attrs.field(factory=dict)
    """Call id -> its result, as calls finish."""
    started: set[str] = attrs.field(factory=set)
    """Ids of calls handed to a task (eagerly or at the end of the stream)."""
    reported: set[str] = attrs.field(factory=set)
    """Ids whose ``ToolCalled`` has gone into the event channel."""
    events: trio.MemoryReceiveChannel[AgentResponseUpdate] | None = None
    in_flight: AgentResponseUpdate | None = None
    """An update taken from ``events`` and not yet handed to the caller."""
    approval_at: float = math.inf
    """Call-order position of the first call seen that needs approval (eager start stops there)."""
    stop: bool = False
    """A tool raised ``StopLoop``: the run ends after this round."""
    reason: FinishReason | None = None
    """The round's finish reason, once the model's response is over."""
    messages_out: trio.MemorySendChannel[list[ChatMessage]] | None = None
    """Where the round's messages go, held by whoever closes the round (see ``_close_round``)."""
    running: int = 0
    """Call tasks started and not yet finished."""
    closing: bool = False
    """Every call of the round has been started (or the batch paused): the last of the consumer
    and the running calls to finish closes the round."""
    _positions: dict[str, int] | None = None

    def position(self, call_id: str) -> int:
        """The call's place in call order."""
        if self.accumulator is not None:
            return self.accumulator.position(call_id)
        if self._positions is None:
            self._positions = {call.id: i for i, call in enumerate(self.calls)}
        return self._positions[call_id]

    @property
    def all_failed(self) -> bool:
        return bool(self.results) and all(r.is_error for r in self.results.values())

    def messages(self) -> list[ChatMessage]:
        """The round's messages: the assistant message (unless resuming), then one tool
        message per answered call in call order. See ``RunState.settle`` for unanswered calls."""
        out: list[ChatMessage] = []
        if self.accumulator is not None:
            assistant = self.accumulator.message(self.calls)  # text, calls, reasoning, data
            if assistant is not None:
                out.append(assistant)
        for call in self.calls:
            called = self.results.get(call.id)
            if called is not None:
                out.append(ChatMessage.tool_result(call, called.content))
        return out


@attrs.define(eq=False)
class RunState:
    """The state of one run, shared by the loop side and the round's tasks."""

    messages: list[ChatMessage]
    """The conversation as the model sees it next round."""
    added: list[ChatMessage]
    """What this run added (``stream.messages``)."""
    tools: dict[str, Entry]
    inner_options: RunOptions
    send: trio.MemorySendChannel[AgentResponseUpdate]
    limits: Limits
    budget: float
    """Tool calls this run may still make (``math.inf``: no budget)."""
    usage: Usage | None = None
    current: RoundState | None = None
    error: BaseException | None = None
    """What ended the run with an exception, for the stream to raise."""

    def add_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage

    def needs_approval(self, name: str) -> bool:
        entry = self.tools.get(name)
        return entry is not None and entry.tool.requires_approval

    def commit(self, messages: list[ChatMessage]) -> None:
        """Append a finished round's messages; the round is over."""
        self.messages.extend(messages)
        self.added.extend(messages)
        self.current = None

    def settle(self, not_started: str, started: str) -> list[AgentResponseUpdate]:
        """Close the current round synchronously; return the updates still owed to the caller.

        Calls that ended get a result: ``started`` for those that were running, ``not_started``
        for those that never ran; calls whose ``ToolCallEnd`` never arrived are dropped; the
        text so far is kept.
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
                reason = started if call.id in round_.started else not_started
                round_.results[call.id] = ToolCalled(call, f"Error: {reason}", is_error=True)
            if call.id not in round_.reported:
                owed.append(round_.results[call.id])
                round_.reported.add(call.id)
        self.commit(round_.messages())
        return owed
