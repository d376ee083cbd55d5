"""One run of the loop: the seed's Looping and Done states, in the task that owns the run.

:meth:`Run.drive` is the whole run, top to bottom: enter the run's cancel scope, answer the
calls a conversation ends with (a resume), then round after round ask the policy (``_policy``)
for a plan, play the round (``_round``), append its messages and ask the policy whether to go
on. Whatever ends the run -- a final ``Finish``, the run's cancel scope, the inner client's
failure, an interrupt -- :meth:`Run.drive` closes the transcript in one place: every tool call
in ``.messages`` has exactly one tool message, and every tool message one ``ToolCalled``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, TypeAlias

import attrs
import trio

from .._exceptions import ConfigurationError
from .._messages import ChatMessage, FinishReason, ToolCall, Usage
from .._options import RunOptions, ToolApprovalResponse
from .._updates import AgentResponseUpdate, Error, Finish
from ._channels import primary, send
from ._hooks import RunObservation, tool_observation
from ._invoke import Entry, Limits, Site
from ._policy import Policy, RoundOutcome, later_round_options
from ._round import Round

if TYPE_CHECKING:
    from .._client import ChatClient

__all__ = ["CANCELLED", "Delivery", "Run"]

CANCELLED = "cancelled"
Delivery: TypeAlias = "AgentResponseUpdate | trio.MemoryReceiveChannel[AgentResponseUpdate]"
"""What the run hands its caller's stream: a round's events channel, or an update of its own."""


@attrs.define(eq=False)
class Run:
    """The state of one run. The driver task owns it; a round's tasks read it, and write only
    through :meth:`count_usage`."""

    inner: ChatClient
    messages: list[ChatMessage]
    """The conversation as the model sees it next."""
    tools: Mapping[str, Entry]
    inner_options: RunOptions
    """The options of the next model call."""
    send: trio.MemorySendChannel[Delivery]
    """The caller's stream: each round's events channel in turn, then the run's last updates."""
    limits: Limits
    policy: Policy
    sequential: bool = False
    eager: bool = False
    per_call_approval: bool = False
    """A batch that pauses for approval runs its calls that need none first."""
    observation: RunObservation | None = None
    """The run's observer (telemetry), if it has one."""
    added: list[ChatMessage] = attrs.field(factory=list)
    """What this run added (``stream.messages``)."""
    usage: Usage | None = None
    failure: BaseException | None = None
    """What ended the run with an exception, for the caller's stream to raise (once)."""
    _round: Round | None = None
    """The round being played, if one is."""
    _rounds: int = 0
    """Rounds started so far (a resume is one)."""
    _tool_observation: RunObservation | None = attrs.field(init=False)
    """What the run's tool calls are observed by: :attr:`observation`, unless it need not see
    them (``_hooks.tool_observation``; read once, as the run starts)."""

    @_tool_observation.default
    def _observing_tools(self) -> RunObservation | None:
        return tool_observation(self.observation)

    def needs_approval(self, name: str) -> bool:
        entry = self.tools.get(name)
        return entry is not None and entry.tool.requires_approval

    def site(self, seen: tuple[ChatMessage, ...]) -> Site:
        """What the calls of the round being played are told (see ``_invoke.Site``)."""
        return Site(self._rounds, seen, self._tool_observation)

    def take_interrupt(self) -> BaseException | None:
        """The interrupt that ended the run (``KeyboardInterrupt``, ``SystemExit``, ...), if the
        caller's stream has not raised it yet; it is handed out once."""
        failure = self.failure
        if failure is None or isinstance(failure, Exception):
            return None
        self.failure = None
        return failure

    def count_usage(self, usage: Usage | None) -> None:
        """Add a model call's usage (done at its ``Finish``, whatever happens to the round)."""
        if usage is not None:
            self.usage = usage if self.usage is None else self.usage + usage

    # -- Done: the driver, which owns the run's cancel scope --------------------------------------

    @trio.lowlevel.enable_ki_protection  # Ctrl-C here waits for a checkpoint (see _ki)
    async def drive(
        self,
        cancel_scope: trio.CancelScope | None,
        pending: Sequence[ToolCall],
        decisions: Mapping[str, ToolApprovalResponse],
        entered: trio.Event,
    ) -> None:
        """The run, from its cancel scope to its last update; ``entered`` is set once the run is
        inside its cancel scope.

        Raises:
            ConfigurationError: ``cancel_scope`` was entered before (``entered`` is not set).
        """
        scope = trio.CancelScope() if cancel_scope is None else _Fresh(cancel_scope)
        not_started = started = CANCELLED
        inside = False
        with self.send:  # closed without a schedule point: the caller's stream ends here
            try:
                with scope:
                    inside = True
                    entered.set()
                    await self._loop(pending, decisions)
            except BaseException as exc:
                failure = primary(exc)
                if not inside or isinstance(failure, trio.Cancelled):
                    self._settle(CANCELLED, CANCELLED)  # an outer cancellation: nothing to send
                    self._observed(None, CANCELLED if inside else type(failure).__name__)
                    raise
                self.failure = failure  # the inner client failed, or an interrupt
                kind = "the chat client failed" if isinstance(failure, Exception) else "interrupted"
                why = f"{kind} ({type(failure).__name__})"
                not_started, started = f"not run: {why}", f"cancelled: {why}"
                self._observed(None, type(failure).__name__)
            if scope.cancelled_caught:
                self._observed(None, CANCELLED)  # (once: a failure was observed first)
            owed = self._settle(not_started, started)
            for update in owed:
                await send(self.send, update)
            if scope.cancelled_caught and self.failure is None:
                await send(self.send, Error(CANCELLED))

    def _settle(self, not_started: str, started: str) -> list[AgentResponseUpdate]:
        """Close the round that was cut short, if one was: commit its messages, and return the
        updates still owed to the caller (see :meth:`Round.settle`)."""
        round_, self._round = self._round, None
        if round_ is None:
            return []
        owed = round_.settle(not_started=not_started, started=started)
        self._commit(round_.messages())
        return owed

    # -- Looping ----------------------------------------------------------------------------------

    async def _loop(
        self, pending: Sequence[ToolCall], decisions: Mapping[str, ToolApprovalResponse]
    ) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()  # cancelled before it started: no round
        if pending:  # resume: run (or reject) the calls the conversation ends with, then round + 1
            resume = Round.resume(self, pending, decisions)
            outcome = await self._play(resume)
            self.inner_options = later_round_options(self.inner_options)  # (it was round 1)
            end = self.policy.after(resume.plan, outcome)
            if end is not None:
                return await self._finish(end)
        while True:
            plan = self.policy.plan()
            if isinstance(plan, FinishReason):
                return await self._finish(plan)
            await trio.lowlevel.checkpoint_if_cancelled()  # the seed's check, before the model
            round_ = Round.model(self, plan)
            outcome = await self._play(round_)
            self.inner_options = later_round_options(self.inner_options)
            end = self.policy.after(plan, outcome)
            if end is not None:
                return await self._finish(end)

    def _observed(self, reason: FinishReason | None, error: str | None) -> None:
        observation, self.observation = self.observation, None  # ended once
        if observation is not None:
            observation.end(reason, self.usage, error)

    async def _play(self, round_: Round) -> RoundOutcome:
        self._rounds += 1
        self._round = round_
        outcome = await round_.play()
        self._round = None
        self._commit(round_.messages())
        return outcome

    def _commit(self, messages: list[ChatMessage]) -> None:
        self.messages.extend(messages)
        self.added.extend(messages)

    async def _finish(self, reason: FinishReason) -> None:
        self._observed(reason, None)
        await send(self.send, Finish(reason, self.usage))


@attrs.define
class _Fresh:
    """A caller's cancel scope, entered as the run's own: one entered before is a
    :class:`ConfigurationError` (a scope can be entered once), raised on entering the run."""

    scope: trio.CancelScope

    @property
    def cancelled_caught(self) -> bool:
        return self.scope.cancelled_caught

    def __enter__(self) -> trio.CancelScope:
        try:
            return self.scope.__enter__()
        except RuntimeError as exc:
            raise ConfigurationError(
                f"RunOptions.cancel_scope {self.scope!r} was already entered: a cancel scope "
                "can be entered once, so give each run a fresh one"
            ) from exc

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return self.scope.__exit__(kind, value, traceback)
