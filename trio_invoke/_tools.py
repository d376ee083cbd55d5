"""What a tool is: the structural ``Tool`` protocol, and the approval wrapper.

Any object with these attributes is a tool; ``@tool`` (in ``_function_tool``) builds one from a
plain function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = ["ApprovalRequiredTool", "Tool", "ToolDefinition"]


@runtime_checkable
class Tool(Protocol):
    """A tool the model can call.

    Structural: any object with these attributes works, no base class needed.
    """

    @property
    def name(self) -> str:
        """The name the model calls it by; unique among one client's tools."""
        ...

    @property
    def description(self) -> str:
        """What it does, for the model."""
        ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON Schema (``"type": "object"``) its arguments must match."""
        ...

    @property
    def requires_approval(self) -> bool:
        """Whether a human must approve each call before it runs."""
        ...

    async def execute(self, arguments: dict[str, Any]) -> Any:
        """Run the tool with validated arguments.

        A ``str`` result goes to the model as it is, anything else as compact JSON. An exception
        becomes an error result for the model. On cancellation the call gets a "cancelled" result;
        whatever the tool did before that stays done.
        """
        ...


@attrs.frozen
class ToolDefinition:
    """What the model is told about a tool: sent down to the inner chat client every round."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    @classmethod
    def of(cls, tool: Tool) -> ToolDefinition:
        """The definition of ``tool``."""
        return cls(tool.name, tool.description, tool.parameters)

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@attrs.frozen
class ApprovalRequiredTool:
    """The same tool, but every call needs a human's approval before it runs.

    Example::

        delete = ApprovalRequiredTool(delete_file)
    """

    tool: Tool
    """The wrapped tool."""

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def description(self) -> str:
        return self.tool.description

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self.tool.parameters

    @property
    def requires_approval(self) -> bool:
        """Always ``True``."""
        return True

    @property
    def timeout(self) -> float | None:
        """The wrapped tool's own time limit, if it has one."""
        timeout: float | None = getattr(self.tool, "timeout", None)
        return timeout

    async def execute(self, arguments: dict[str, Any]) -> Any:
        """Run the wrapped tool (see :meth:`Tool.execute`).

        Cancellation: as the wrapped tool's; the loop answers the call with a "cancelled" result.
        """
        return await self.tool.execute(arguments)
