"""RunOptions, ToolApprovalResponse and ToolDefinition: immutable values."""

from __future__ import annotations

import attrs
import pytest
import trio

from trio_invoke import ApprovalRequiredTool, RunOptions, ToolApprovalResponse, ToolDefinition, tool


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
