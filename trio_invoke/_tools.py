"""What a tool is: the structural ``Tool`` protocol, and the approval wrapper.

Any object with these attributes is a tool; ``@tool`` (in ``_function_tool``) builds one from a
plain function.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from ._checks import check_seconds
from ._exceptions import ConfigurationError

__all__ = ["TOOL_NAME", "ApprovalRequiredTool", "Tool", "ToolDefinition", "check_tool"]

TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""What OpenAI-compatible APIs (and Anthropic's) accept as a function name (whole)."""


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

    @property
    def timeout(self) -> float | None:
        """Seconds each call may run, or ``None`` for the loop's ``tool_timeout``. Optional: a
        tool without this attribute is treated as ``None``."""
        ...

    async def execute(self, arguments: dict[str, Any]) -> Any:
        """Run the tool with validated arguments.

        A ``str`` result goes to the model as it is, anything else as compact JSON. An exception
        becomes an error result for the model. On cancellation the call gets a "cancelled" result;
        whatever the tool did before that stays done.
        """
        ...


_REQUIRED: Final = ("name", "description", "parameters", "requires_approval", "execute")


def check_tool(tool: object, what: str = "tool") -> None:
    """Check that ``tool`` has what the loop needs of a :class:`Tool`.

    Raises:
        TypeError: ``tool`` is a plain function (decorate it with ``@tool``), or lacks one of
            the attributes, or its ``execute`` is not ``async``; the message names which.
        ConfigurationError: its name is not one providers accept (``^[a-zA-Z0-9_-]{1,64}$``),
            or its ``timeout`` (if it has one) is not ``None`` or a number of seconds above 0.
    """
    missing = [attribute for attribute in _REQUIRED if not hasattr(tool, attribute)]
    if missing and callable(tool):
        name = getattr(tool, "__qualname__", None) or type(tool).__name__
        raise TypeError(
            f"{what} {name} is a function, not a tool: decorate it with @tool "
            "(from trio_invoke import tool)"
        )
    if missing:
        raise TypeError(
            f"{what} {tool!r:.80} is not a tool: it has no {', '.join(missing)} attribute "
            "(a tool has name, description, parameters, requires_approval and async execute)"
        )
    execute = getattr(tool, "execute", None)
    if not (inspect.iscoroutinefunction(execute) or _async_callable(execute)):
        raise TypeError(
            f"{what} {tool!r:.80}: its execute attribute must be an async function "
            f"(async def execute(self, arguments)), got {execute!r:.80}"
        )
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ConfigurationError(
            f"{what} name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$ "
            "(what OpenAI- and Anthropic-style APIs accept)"
        )
    parameters = getattr(tool, "parameters", None)
    if not isinstance(parameters, Mapping):
        raise TypeError(
            f"{what} {name!r}: its parameters attribute must be a JSON Schema object (a "
            f"mapping), got {type(parameters).__name__}"
        )
    check_seconds(f"{what} {name!r}: its timeout attribute", getattr(tool, "timeout", None))


def _async_callable(value: object) -> bool:
    call = getattr(type(value), "__call__", None)  # noqa: B004 -- the type's, not the value's
    return call is not None and inspect.iscoroutinefunction(call)


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

    Raises:
        TypeError, ConfigurationError: ``tool`` is not a tool (a plain function: decorate it with
            ``@tool``), as :class:`FunctionInvokingChatClient` would say of it.
    """

    tool: Tool = attrs.field(
        validator=lambda _, __, tool: check_tool(tool, "ApprovalRequiredTool:")
    )
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
