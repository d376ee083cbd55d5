"""What the loop does next, as a pure function of the run so far (sans-IO: no Trio here).

The loop asks four questions, and each is answered here and nowhere else:

* before a round, :meth:`Policy.plan`: is there a round at all, and are its tools withheld?
  (the round cap and ``on_max_rounds``; the error streak);
* when a response is over, :func:`turn_reason`: do its calls run, or does the batch pause for
  approval, or did the model answer?
* for each call, :meth:`Policy.allows`: is it within the run's budget of tool calls?
* after a round, :meth:`Policy.after`: go on, or end -- and with which finish reason?
  (a tool's ``StopLoop``, a withheld round, the model's own reason).

A resume (the calls a conversation ends with, answered before the first model call) is a round
like the others: it counts towards the cap, the streak and the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import attrs

from .._messages import FinishReason, ToolCall
from .._options import RunOptions

__all__ = ["Policy", "RoundOutcome", "RoundPlan", "later_round_options", "turn_reason"]

ROUND_LIMIT = "the round limit is reached"
BUDGET_SPENT = "this run's budget of tool calls is spent"
_MODEL_ENDINGS = frozenset({FinishReason.LENGTH, FinishReason.CONTENT_FILTER})
"""Reasons a response without calls keeps; any other such response ends the run with STOP."""


@attrs.frozen
class RoundPlan:
    """How the next round runs, decided before it starts."""

    withheld: str | None = None
    """Why the round's tools are withheld -- still listed, with ``tool_choice="none"``, and
    any call the model makes anyway is not run -- or ``None`` when they are offered."""
    final: FinishReason | None = None
    """The reason the run ends with after this round, when that is known before it (the round
    cap with ``on_max_rounds="answer"``)."""


@attrs.define
class RoundOutcome:
    """What a round did, as the policy needs to know it; read, never changed. (Not ``frozen``:
    a frozen class's ``__init__`` takes twice as long, and a round makes one.)"""

    reason: FinishReason
    """The round's reason (see :func:`turn_reason`)."""
    calls: int = 0
    """The calls the round answered."""
    all_failed: bool = False
    """The round answered calls and every one was an error."""
    stopped: bool = False
    """A tool raised ``StopLoop``."""


_OFFERED = RoundPlan()


def turn_reason(
    model_reason: FinishReason,
    calls: Sequence[ToolCall],
    *,
    withheld: bool,
    needs_approval: Callable[[str], bool],
) -> FinishReason:
    """The round's reason once the model's response is over.

    ``TOOL_CALLS``: the calls run (or get "not run" results when ``withheld``);
    ``AWAITING_APPROVAL``: a call needs approval, so the batch pauses; otherwise the model
    answered without calls: ``LENGTH`` or ``CONTENT_FILTER`` as it said, else ``STOP``.
    """
    if not calls:
        return model_reason if model_reason in _MODEL_ENDINGS else FinishReason.STOP
    if not withheld:
        for call in calls:
            if needs_approval(call.name):
                return FinishReason.AWAITING_APPROVAL
    return FinishReason.TOOL_CALLS


_FREE_CHOICES = ("auto", "none")
"""The ``tool_choice`` values that force no call (also as the ``type`` of a mapping, such as
Anthropic's ``{"type": "auto"}``): they hold for every model call of a run."""


def later_round_options(options: RunOptions) -> RunOptions:
    """The inner options after the first model call: a ``tool_choice`` that forces a call
    (``"required"`` or one named tool) applies to the first call only, so the model can answer.
    One that forces none (``"auto"``, ``"none"``, or a mapping of those types, which may carry
    more, such as ``disable_parallel_tool_use``) is kept."""
    choice = options.tool_choice
    if choice is None or choice in _FREE_CHOICES:
        return options
    if isinstance(choice, Mapping) and choice.get("type") in _FREE_CHOICES:
        return options
    return options.evolve(tool_choice=None)


@attrs.define
class Policy:
    """The loop's limits and where the run stands against them."""

    max_rounds: int
    """The most rounds with tools offered (a resume counts as one)."""
    on_max_rounds: Literal["finish", "answer"] = "finish"
    """At the cap: end at once, or first make one more model call with the tools withheld."""
    max_consecutive_errors: int | None = 3
    """Rounds in a row in which every call failed, after which tools are withheld."""
    budget: float = math.inf
    """Tool calls the run may still answer by running them."""
    rounds: int = 0
    """Rounds that ran calls so far."""
    failed_streak: int = 0
    """Rounds in a row, up to now, in which every call failed."""

    def plan(self) -> RoundPlan | FinishReason:
        """The next round's plan, or the reason to end the run without one."""
        if self.rounds >= self.max_rounds:
            if self.on_max_rounds == "finish":
                return FinishReason.MAX_ROUNDS
            return RoundPlan(ROUND_LIMIT, FinishReason.MAX_ROUNDS)
        streak = self.max_consecutive_errors
        if streak is not None and self.failed_streak >= streak:
            return RoundPlan(
                f"tools are disabled after {self.failed_streak} rounds in a row in which every "
                "call failed"
            )
        return _OFFERED

    def allows(self, position: int) -> bool:
        """Whether the call at ``position`` in this round's call order is within the budget."""
        return position < self.budget

    def after(self, plan: RoundPlan, outcome: RoundOutcome) -> FinishReason | None:
        """Account for a finished round; ``None`` to go on, else the run's final reason."""
        self.budget = max(0, self.budget - outcome.calls)
        if outcome.reason is FinishReason.TOOL_CALLS and plan.withheld is None:
            if outcome.stopped:
                return FinishReason.STOP
            self.rounds += 1
            self.failed_streak = self.failed_streak + 1 if outcome.all_failed else 0
            return None
        if plan.final is not None:
            return plan.final
        return FinishReason.STOP if outcome.reason is FinishReason.TOOL_CALLS else outcome.reason
