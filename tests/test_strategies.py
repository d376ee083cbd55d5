"""The Hypothesis strategies of trio_invoke.testing: what they promise about what they draw.

(``json_values`` and ``schemas_with_arguments`` are checked in test_validate.py,
``tool_call_streams`` in test_accumulate.py.)
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import Finish, FinishReason, ToolCallAccumulator, ToolCallStart, tool
from trio_invoke.testing import scripted_rounds, tool_arguments


@tool
def search(query: str) -> str:
    """Search."""
    return query


@given(tool_arguments())
def test_tool_arguments_are_json_objects(arguments: dict[str, Any]) -> None:
    assert isinstance(arguments, dict)
    assert json.loads(json.dumps(arguments)) == arguments


@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(st.just(n), scripted_rounds([search], max_rounds=n))
    )
)
def test_scripted_rounds_call_the_tools_then_answer(case: tuple[int, list[list[Any]]]) -> None:
    max_rounds, script = case
    assert 1 <= len(script) <= max_rounds
    *calling, final = script
    ids: list[str] = []
    for round_ in calling:
        accumulator = ToolCallAccumulator()
        for update in round_[:-1]:
            accumulator.add(update)
        calls = accumulator.finish()
        assert calls
        assert {c.name for c in calls} <= {"search", "no_such_tool"}
        ids += [c.id for c in calls]
        assert isinstance(round_[-1], Finish)
        assert round_[-1].finish_reason is FinishReason.TOOL_CALLS
    assert len(set(ids)) == len(ids)  # unique across the rounds
    assert not any(isinstance(u, ToolCallStart) for u in final)
    assert final[-1].finish_reason in {FinishReason.STOP, FinishReason.LENGTH}


@given(scripted_rounds(["a", "b"], max_rounds=3))
def test_scripted_rounds_take_names_too(script: list[list[Any]]) -> None:
    names = {u.name for r in script for u in r if isinstance(u, ToolCallStart)}
    assert names <= {"a", "b", "no_such_tool"}
