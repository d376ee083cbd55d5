"""The loop's decisions (``trio_invoke._loop._policy``), tested directly as plain code, the way
h11 tests its state machine: round cap, error streak, withheld tools, budget, approval pause and
the final finish reason."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import FinishReason, RunOptions, ToolCall
from trio_invoke._loop._policy import (
    BUDGET_SPENT,
    ROUND_LIMIT,
    Policy,
    RoundOutcome,
    RoundPlan,
    later_round_options,
    turn_reason,
)

F = FinishReason
CALLS = (ToolCall("a", "ok", "{}"), ToolCall("b", "sensitive", "{}"))
RAN = RoundOutcome(F.TOOL_CALLS, calls=2)
FAILED = RoundOutcome(F.TOOL_CALLS, calls=2, all_failed=True)


def test_the_module_is_sans_io() -> None:
    import trio_invoke._loop._policy as module

    assert "trio" not in vars(module)
    source = Path(module.__file__ or "").read_text()
    assert "import trio\n" not in source
    assert "trio_invoke._loop._policy" in sys.modules


# -- turn_reason: what a finished response means ------------------------------------------------


@pytest.mark.parametrize("model", list(F))
def test_a_response_without_calls_keeps_only_length_and_content_filter(model: F) -> None:
    expected = model if model in (F.LENGTH, F.CONTENT_FILTER) else F.STOP
    assert turn_reason(model, (), withheld=False, needs_approval=lambda _: True) is expected


@pytest.mark.parametrize("model", list(F))
def test_calls_decide_whatever_the_model_said(model: F) -> None:
    assert turn_reason(model, CALLS, withheld=False, needs_approval=lambda _: False) is (
        F.TOOL_CALLS
    )


def test_one_call_that_needs_approval_pauses_the_batch() -> None:
    needs = {"sensitive"}.__contains__
    assert turn_reason(F.TOOL_CALLS, CALLS, withheld=False, needs_approval=needs) is (
        F.AWAITING_APPROVAL
    )
    assert turn_reason(F.TOOL_CALLS, CALLS[:1], withheld=False, needs_approval=needs) is (
        F.TOOL_CALLS
    )


def test_withheld_calls_never_pause_they_are_not_run() -> None:
    assert turn_reason(F.TOOL_CALLS, CALLS, withheld=True, needs_approval=lambda _: True) is (
        F.TOOL_CALLS
    )


# -- plan: before each round ------------------------------------------------------------------


def test_rounds_are_offered_until_the_cap() -> None:
    policy = Policy(max_rounds=3)
    for _ in range(3):
        assert policy.plan() == RoundPlan()
        assert policy.after(RoundPlan(), RAN) is None
    assert policy.plan() is F.MAX_ROUNDS


def test_answer_mode_withholds_the_tools_for_one_last_round_then_ends_max_rounds() -> None:
    policy = Policy(max_rounds=1, on_max_rounds="answer")
    assert policy.after(policy.plan(), RAN) is None  # type: ignore[arg-type]
    plan = policy.plan()
    assert plan == RoundPlan(ROUND_LIMIT, F.MAX_ROUNDS)
    assert isinstance(plan, RoundPlan)
    for outcome in (RoundOutcome(F.STOP), RAN, RoundOutcome(F.LENGTH)):
        assert policy.after(plan, outcome) is F.MAX_ROUNDS


def test_the_error_streak_withholds_tools_and_a_success_resets_it() -> None:
    policy = Policy(max_rounds=100, max_consecutive_errors=2)
    assert policy.after(RoundPlan(), FAILED) is None
    assert policy.plan() == RoundPlan()  # one failed round: not yet
    assert policy.after(RoundPlan(), RAN) is None  # a success resets the streak
    assert policy.failed_streak == 0
    assert policy.after(RoundPlan(), FAILED) is None
    assert policy.plan() == RoundPlan()
    assert policy.after(RoundPlan(), FAILED) is None
    plan = policy.plan()
    assert isinstance(plan, RoundPlan)
    assert plan.withheld == (
        "tools are disabled after 2 rounds in a row in which every call failed"
    )
    assert plan.final is None
    assert policy.after(plan, RAN) is F.STOP  # the withheld round is the last


def test_no_streak_limit_never_withholds() -> None:
    policy = Policy(max_rounds=100, max_consecutive_errors=None)
    for _ in range(50):
        assert policy.after(RoundPlan(), FAILED) is None
        assert policy.plan() == RoundPlan()


@pytest.mark.parametrize("model", [F.STOP, F.LENGTH, F.CONTENT_FILTER, F.AWAITING_APPROVAL])
def test_a_round_without_calls_ends_with_its_own_reason(model: F) -> None:
    assert Policy(max_rounds=5).after(RoundPlan(), RoundOutcome(model)) is model


def test_a_stop_loop_ends_with_stop_and_is_not_a_round() -> None:
    policy = Policy(max_rounds=5)
    assert policy.after(RoundPlan(), RoundOutcome(F.TOOL_CALLS, 1, stopped=True)) is F.STOP
    assert policy.rounds == 0


# -- the budget -------------------------------------------------------------------------------


def test_the_budget_counts_every_answered_call_across_rounds() -> None:
    policy = Policy(max_rounds=10, budget=5)
    assert [policy.allows(p) for p in range(7)] == [True] * 5 + [False] * 2
    policy.after(RoundPlan(), RoundOutcome(F.TOOL_CALLS, calls=3, all_failed=True))  # failed too
    assert [policy.allows(p) for p in range(3)] == [True, True, False]
    policy.after(RoundPlan(), RoundOutcome(F.TOOL_CALLS, calls=4))  # more than was left
    assert policy.budget == 0
    assert not policy.allows(0)
    assert BUDGET_SPENT == "this run's budget of tool calls is spent"


def test_no_budget_allows_everything() -> None:
    policy = Policy(max_rounds=2)
    assert policy.budget == math.inf
    assert policy.allows(10**9)


@given(
    st.lists(
        st.tuples(st.sampled_from([F.TOOL_CALLS, F.STOP]), st.integers(0, 5), st.booleans()),
        max_size=30,
    ),
    st.integers(1, 8),
    st.integers(1, 4),
)
def test_a_run_always_ends_within_the_cap_plus_one(
    rounds: list[tuple[F, int, bool]], max_rounds: int, streak: int
) -> None:
    """Whatever the rounds do, ``plan`` ends the run after at most ``max_rounds`` rounds that ran
    calls, plus one withheld round; a withheld round always ends it."""
    policy = Policy(max_rounds=max_rounds, on_max_rounds="answer", max_consecutive_errors=streak)
    played = 0
    for reason, calls, failed in [*rounds, *[(F.TOOL_CALLS, 1, True)] * 20]:
        plan = policy.plan()
        if isinstance(plan, F):
            break
        played += 1
        end = policy.after(plan, RoundOutcome(reason, calls, failed and calls > 0))
        if plan.withheld is not None:
            assert end is not None
        if end is not None:
            break
    assert played <= max_rounds + 1


# -- a forced tool_choice -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "after"),
    [
        ("required", None),
        ({"type": "function", "function": {"name": "x"}}, None),
        ("any", None),  # Anthropic's "required"
        ({"type": "any"}, None),
        ({"type": "tool", "name": "x"}, None),
        ("auto", "auto"),
        ("none", "none"),
        (None, None),
        # Anthropic's forms that force no call: kept, with what they carry.
        ({"type": "auto"}, {"type": "auto"}),
        ({"type": "none"}, {"type": "none"}),
        (
            {"type": "auto", "disable_parallel_tool_use": True},
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_a_forcing_tool_choice_is_dropped_after_the_first_call(
    choice: object, after: object
) -> None:
    options = RunOptions(tool_choice=choice)  # type: ignore[arg-type]
    assert later_round_options(options).tool_choice == after
