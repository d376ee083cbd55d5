"""Tool middleware: code of yours around every tool call that runs.

A middleware is ``async def middleware(context, call_next) -> ToolCalled``. ``await
call_next(context)`` runs the rest of the chain and the tool and returns the call's result; a
middleware may call it with ``context.evolve(arguments=...)`` (JSON, with no NaN or infinity,
and validated against the tool's schema, like the model's arguments), not call it at all and
return a result of its own (a cache, a policy refusal), return a changed result
(``attrs.evolve(called, result=...)``), or raise ``StopLoop`` to end the run after the batch,
as a tool can. The first middleware in the list is the outermost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

import attrs

from ._messages import ChatMessage, ToolCall
from ._tools import Tool
from ._updates import ToolCalled

__all__ = ["CallNext", "ToolContext", "ToolMiddleware"]


def _read_only(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return value if isinstance(value, MappingProxyType) else MappingProxyType(dict(value))


@attrs.frozen
class ToolContext:
    """What a middleware knows of the call it wraps. Immutable: derive a changed one with
    :meth:`evolve` and pass that to ``call_next``."""

    call: ToolCall
    """The call, as the model made it (or as an approval replaced its arguments). A context
    evolved with a call whose ``arguments`` text differs (and the same :attr:`arguments`) runs
    what that text says, parsed and validated as :attr:`arguments` would be."""
    arguments: Mapping[str, Any] = attrs.field(converter=_read_only)
    """The call's arguments, parsed and validated against the tool's schema (read-only). The
    tool gets arguments of its own, parsed from the text that was validated: a nested value
    changed in place here never reaches it; pass changed arguments with :meth:`evolve`."""
    tool: Tool
    """The tool the call runs."""
    round: int
    """Which round of the run the call belongs to, counting from 1 (a resume is round 1)."""
    messages: Sequence[ChatMessage]
    """The conversation the model saw when it made the call."""

    def evolve(self, **changes: Any) -> ToolContext:
        """A copy with ``changes`` applied, e.g. ``context.evolve(arguments={...})``."""
        return attrs.evolve(self, **changes)


CallNext: TypeAlias = Callable[[ToolContext], Awaitable[ToolCalled]]
"""The rest of the chain: ``await call_next(context)`` runs it and the tool."""
ToolMiddleware: TypeAlias = Callable[[ToolContext, CallNext], Awaitable[ToolCalled]]
"""``async def middleware(context: ToolContext, call_next: CallNext) -> ToolCalled``."""
