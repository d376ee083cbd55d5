"""RunOptions, ToolApprovalResponse and ToolDefinition: immutable values."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import attrs
import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from trio_invoke import (
    ApprovalRequiredTool,
    ConfigurationError,
    RunOptions,
    ToolApprovalResponse,
    ToolDefinition,
    tool,
)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_evolve_copies_and_leaves_the_original_alone() -> None:
    scope = trio.CancelScope()
    options = RunOptions(provider_tools=[add])
    later = options.evolve(cancel_scope=scope, tool_timeout=2.0)
    assert (later.cancel_scope, later.tool_timeout, later.provider_tools) == (scope, 2.0, (add,))
    assert options.cancel_scope is None
    assert options.tool_timeout is None


def test_sequences_become_tuples_and_mappings_read_only() -> None:
    options = RunOptions(
        tool_approval_responses=[ToolApprovalResponse("c", True)],
        tools=[ToolDefinition.of(add)],
        model_options={"temperature": 0},
    )
    assert isinstance(options.tool_approval_responses, tuple)
    assert isinstance(options.tools, tuple)
    with pytest.raises(TypeError):
        options.model_options["temperature"] = 1  # type: ignore[index]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.tool_timeout = 1  # type: ignore[misc]


def test_tool_definition_is_the_openai_tools_entry() -> None:
    assert ToolDefinition.of(ApprovalRequiredTool(add)).to_dict() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": dict(add.parameters),
        },
    }


def test_approval_response_defaults() -> None:
    response = ToolApprovalResponse("c1", approved=False)
    assert (response.reason, response.digest, response.arguments) == (None, None, None)


# -- values checked when they are given ---------------------------------------------------------


def good_seconds(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not math.isnan(value) and value > 0


any_value = (
    st.none()
    | st.floats()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.booleans()
    | st.text(max_size=3)
    | st.just(Decimal("1.5"))
    | st.just([1])
)


@given(any_value)
@example(math.nan)
@example(-math.inf)
@example(math.inf)
@example(0)
@example(-0.0)
@example(True)
@example("5")
def test_a_timeout_is_checked_when_it_is_given(value: object) -> None:
    for make in (
        lambda: RunOptions(tool_timeout=value),  # type: ignore[arg-type]
        lambda: RunOptions().evolve(tool_timeout=value),
        lambda: tool(timeout=value)(add.func),  # type: ignore[arg-type]
    ):
        if good_seconds(value):
            make()
            continue
        with pytest.raises(ConfigurationError) as info:
            make()
        assert f"timeout must be a number of seconds > 0 or None, got {value!r}" in str(info.value)


@given(any_value)
@example(-1)
@example(True)
@example(2.0)
@example(0)
def test_a_budget_of_tool_calls_is_checked_when_it_is_given(value: object) -> None:
    good = value is None or (type(value) is int and value >= 0)
    if good:
        assert RunOptions(max_tool_calls=value).max_tool_calls == value  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigurationError) as info:
        RunOptions(max_tool_calls=value)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"RunOptions max_tool_calls must be an integer >= 0 or None, got {value!r}"
    )


@tool
async def search(q: str) -> str:
    """Search."""
    return q


@tool(name="search")
async def other_search(q: str) -> str:
    """Another search."""
    return q


@pytest.mark.parametrize(
    "tools",
    [
        [search, other_search],
        [search, search],
        [add, search, ApprovalRequiredTool(other_search)],
        [search, ApprovalRequiredTool(search)],
    ],
)
def test_two_provider_tools_with_one_name_are_a_configuration_error(tools: list[Any]) -> None:
    with pytest.raises(ConfigurationError, match="provider_tools has two tools named 'search'"):
        RunOptions(provider_tools=tools)
    with pytest.raises(ConfigurationError, match="two tools named 'search'"):
        RunOptions(provider_tools=tools[:1]).evolve(provider_tools=tools)


@pytest.mark.parametrize("mode", ["per-call", "PER_CALL", "perCall", "", True, 1, ("per_call",)])
def test_an_approval_mode_is_checked_when_it_is_given(mode: object) -> None:
    """A misspelt mode must not silently pause the whole batch (``"batch"``, the default)."""
    expected = f"RunOptions approval must be 'batch', 'per_call' or None, got {mode!r}"
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        RunOptions(approval=mode)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        RunOptions().evolve(approval=mode)


def test_the_approval_modes_and_none_are_accepted() -> None:
    assert [RunOptions(approval=m).approval for m in ("batch", "per_call", None)] == [
        "batch",
        "per_call",
        None,
    ]


def test_provider_tools_with_distinct_names_are_fine() -> None:
    assert RunOptions(provider_tools=[add, search]).provider_tools == (add, search)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "tool_approval_responses",
            [{"call_id": "c1"}],
            "tool_approval_responses must hold ToolApprovalResponse values, got dict",
        ),
        (
            "tool_approval_responses",
            [ToolApprovalResponse("c", True), "c2"],
            "must hold ToolApprovalResponse values, got str",
        ),
        ("cancel_scope", trio.move_on_after, "cancel_scope must be a trio.CancelScope"),
        ("cancel_scope", object(), "cancel_scope must be a trio.CancelScope"),
        ("parallel_tool_calls", "yes", "parallel_tool_calls must be True, False or None"),
        ("tool_choice", 3, "tool_choice must be a str, a mapping or None"),
        ("model_options", [("temperature", 0)], "model_options must be a mapping"),
        (
            "tool_approval_responses",
            5,
            "RunOptions tool_approval_responses must be an iterable of ToolApprovalResponse "
            "(a list or tuple), got 5",
        ),
        (
            "tool_approval_responses",
            ToolApprovalResponse("c1", True),
            "tool_approval_responses must be an iterable of ToolApprovalResponse (a list or "
            "tuple), got ToolApprovalResponse(",
        ),
        ("tool_approval_responses", "c1", "tool_approval_responses must be an iterable"),
        ("tool_approval_responses", {"c1": True}, "tool_approval_responses must be an iterable"),
        ("provider_tools", 5, "RunOptions provider_tools must be an iterable of tools"),
        ("provider_tools", "search", "RunOptions provider_tools must be an iterable of tools"),
        ("provider_tools", None, "RunOptions provider_tools must be an iterable of tools"),
        ("tools", 5, "RunOptions tools must be an iterable of ToolDefinition"),
        ("tools", [{"name": "x"}], "RunOptions tools[0] must be a ToolDefinition, got {'name'"),
    ],
)
def test_a_run_option_of_the_wrong_type_is_named(field: str, value: object, expected: str) -> None:
    with pytest.raises(TypeError, match=re.escape(expected)):
        RunOptions(**{field: value})


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"call_id": 1, "approved": True}, "call_id must be a str, got 1 (int)"),
        ({"call_id": None, "approved": True}, "call_id must be a str, got None (NoneType)"),
        ({"call_id": "c1", "approved": "no"}, "approved must be True or False, got 'no' (str)"),
        ({"call_id": "c1", "approved": 1}, "approved must be True or False, got 1 (int)"),
        ({"call_id": "c1", "approved": None}, "approved must be True or False, got None"),
        ({"call_id": "c1", "approved": False, "reason": 3}, "reason must be a str or None, got 3"),
        ({"call_id": "c1", "approved": True, "digest": b"ab"}, "digest must be a str or None"),
        (
            {"call_id": "c1", "approved": True, "arguments": [1, 2]},
            "arguments must be JSON text, a mapping or None, got [1, 2] (list)",
        ),
    ],
)
def test_an_approval_response_of_the_wrong_type_is_named(
    kwargs: dict[str, Any], expected: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(f"ToolApprovalResponse {expected}")):
        ToolApprovalResponse(**kwargs)


def test_approval_responses_of_the_right_types() -> None:
    ToolApprovalResponse("c1", True, digest="ab", arguments='{"a": 1}')
    ToolApprovalResponse("c1", False, "too risky")
    ToolApprovalResponse("c1", True, arguments=MappingProxyType({"a": 1}))


async def test_a_bad_per_run_timeout_never_reaches_the_tools() -> None:
    # It used to be accepted, and then every call's result said its tool raised ValueError.
    from trio_invoke import FunctionInvokingChatClient, ScriptedChatClient, ToolCall, ToolCalled
    from trio_invoke.testing import run_to_completion, tool_calls_response

    with pytest.raises(ConfigurationError, match=r"tool_timeout .* got -1"):
        RunOptions(tool_timeout=-1)
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("c1", "add", '{"a": 1, "b": 2}')), "3"]
    )
    client = FunctionInvokingChatClient(model, [add])
    result = await run_to_completion(client, [], RunOptions(tool_timeout=math.inf))
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert (called.result, called.is_error) == ("3", False)  # inf: no limit
