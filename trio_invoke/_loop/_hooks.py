"""What the loop tells an observer (``trio_invoke.otel.Telemetry`` is one): the start and end of
a run, of each model call and of each tool call that runs.

The loop calls these in the task where each thing happens and ends every observation it starts,
whatever ends it (a result, an error, a cancellation). With no observer the loop does nothing
of this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, Protocol

from .._messages import ChatMessage, FinishReason, ToolCall, Usage
from .._options import RunOptions
from .._tools import Tool
from .._updates import Finish, ToolCalled

__all__ = [
    "ChatObservation",
    "Observer",
    "RunObservation",
    "ToolObservation",
    "observe_run",
    "running",
    "tool_observation",
]

_NOTHING: Final = contextlib.nullcontext()
"""What runs inside an observation without ``running()`` (one, reused: it holds nothing)."""


def running(observation: object) -> AbstractContextManager[object]:
    """What the observed thing runs inside: the observation's optional ``running()``, else
    nothing (also for no observation at all). Enter and leave it in the task that runs it."""
    enter = getattr(observation, "running", None)  # optional: observers may predate it
    context: AbstractContextManager[object] = _NOTHING if enter is None else enter()
    return context


class ChatObservation(Protocol):
    """One model call.

    An observation may also have ``running() -> ContextManager[object]``: what the inner
    client's stream runs inside, entered and left in the round's consumer task around the
    whole stream (``Telemetry``'s makes the call's span the current one, so that what the
    inner client traces -- its HTTP request -- is its child). Optional, as for a
    :class:`ToolObservation`.
    """

    def end(
        self, finish: Finish | None, message: ChatMessage | None, error: BaseException | None
    ) -> None:
        """The call ended: with its ``Finish`` (``None`` if the stream had none), the assistant
        message it produced, or the error that cut it short (``trio.Cancelled`` included; never
        a group: of a group from the client's own nursery, the interrupt or error it holds)."""


class ToolObservation(Protocol):
    """One tool call that runs.

    An observation may also have ``running() -> ContextManager[object]``: what the call (its
    middleware and its tool) runs inside, entered and left in the call's task (inside its
    concurrency slot, around its time limit), and left before :meth:`end` (``Telemetry``'s
    makes the call's span the current one, so that spans started by the tool's code are its
    children). It is optional: the loop looks it up, and an observation without it is fine.

    Also optional: ``replaced(tool: Tool) -> object``, called in the call's task, inside
    ``running()``, when a middleware replaced the call's tool (``context.evolve(tool=...)``) and
    ``tool``, not the one :meth:`RunObservation.tool` was told of, runs the call; only once
    the arguments passed its schema (a tool that does not run is not told of).
    """

    def end(self, called: ToolCalled | None, error_type: str | None) -> None:
        """The call ended with ``called`` (``None`` when it was cancelled or interrupted);
        ``error_type`` names what went wrong when it did: the exception's class (a tool's, or
        the interrupt's: ``"KeyboardInterrupt"``), ``"timeout"`` or ``"cancelled"``."""


class RunObservation(Protocol):
    """One run of the loop.

    An observation may also have ``observes_tools: bool``, read once as the run starts:
    ``False`` says that the run's tool calls need no observation (``Telemetry``'s, when no
    OpenTelemetry SDK is configured: nothing would be recorded and no context would be made
    current). Then :meth:`tool` is not called, and the calls run as they would without an
    observer, with nothing around them. Optional, as ``running()`` is; without it, every
    tool call that runs is observed.
    """

    def chat(
        self, client: object, messages: Sequence[ChatMessage], options: RunOptions
    ) -> ChatObservation:
        """A model call starts (``client`` is the inner chat client)."""

    def tool(self, call: ToolCall, tool: Tool, arguments: Mapping[str, Any]) -> ToolObservation:
        """A tool call starts running (after its arguments were validated)."""

    def end(self, reason: FinishReason | None, usage: Usage | None, error: str | None) -> None:
        """The run ended: its final reason (``None`` if it did not finish), the usage summed
        over its model calls, and what went wrong if something did."""


class Observer(Protocol):
    """What ``FunctionInvokingChatClient(telemetry=...)`` takes.

    An observer may also have ``run_with(messages, client) -> RunObservation``, which the loop
    then calls instead of :meth:`run`, with the inner chat client: so the run's observation
    knows who its model calls go to from its start, also in a run that makes none (an approval
    resume whose calls end it, a run cancelled or capped before its first model call).
    ``Telemetry``'s sets the run span's provider and model from it. Optional, as an
    observation's ``running()`` is.
    """

    def run(self, messages: Sequence[ChatMessage]) -> RunObservation:
        """A run starts on ``messages``."""


def tool_observation(observation: RunObservation | None) -> RunObservation | None:
    """``observation``, for the run's tool calls: ``None`` when it says it need not see them
    (its optional ``observes_tools`` is false; one that raises counts as true)."""
    if observation is None:
        return None
    try:
        observes = bool(getattr(observation, "observes_tools", True))
    except Exception:  # a broken observer: its calls are observed, as without the attribute
        observes = True
    return observation if observes else None


def observe_run(
    observer: Observer, messages: Sequence[ChatMessage], client: object
) -> RunObservation:
    """The observation of a run of the inner chat client ``client`` on ``messages``: the
    observer's optional ``run_with(messages, client)``, else its ``run(messages)``."""
    run_with = getattr(observer, "run_with", None)
    if run_with is None:
        return observer.run(messages)
    observation: RunObservation = run_with(messages, client)
    return observation
