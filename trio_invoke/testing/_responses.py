"""Building model responses for scripts and function models: the streamed form of tool calls."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from .._messages import FinishReason, ToolCall, Usage
from .._scripted import _describe
from .._updates import AgentResponseUpdate, Finish, ToolCallArgs, ToolCallEnd, ToolCallStart

__all__ = ["tool_call_updates", "tool_calls_response"]


def tool_call_updates(
    call_id: str,
    name: str,
    arguments: str,
    *,
    pieces: int = 1,
    provider_data: Mapping[str, Any] | None = None,
) -> list[AgentResponseUpdate]:
    """The updates a model streams for one call: start, ``arguments`` in ``pieces``, end.

    Args:
        call_id: The call's id, unique within the response.
        name: The tool the call is for.
        arguments: The call's JSON arguments, as text (``""`` means no arguments).
        pieces: How many ``ToolCallArgs`` to cut ``arguments`` into, of sizes that differ by
            one character at most (fewer only if it has fewer characters; none for ``""``).
        provider_data: The call's keys beyond id, type and function (Gemini's thought
            signature), on its ``ToolCallStart``.

    Returns:
        ``[ToolCallStart, ToolCallArgs..., ToolCallEnd]``; no ``Finish``. For every chunking and
        interleaving of several calls, draw from :func:`tool_call_streams`.

    Raises:
        TypeError: ``pieces`` is not an int, or ``arguments`` not a str.
        ValueError: ``pieces`` is less than 1.
    """
    if isinstance(pieces, bool) or not isinstance(pieces, int):
        raise TypeError(f"tool_call_updates takes an int for pieces, got {_describe(pieces)}")
    if pieces < 1:
        raise ValueError(f"tool_call_updates needs pieces >= 1, got {pieces!r}")
    if not isinstance(arguments, str):
        raise TypeError(
            f"tool_call_updates takes the arguments as JSON text (a str; json.dumps them), "
            f"got {_describe(arguments)}"
        )
    count = min(pieces, len(arguments))  # one piece per character at most
    size, longer = divmod(len(arguments), count) if count else (0, 0)
    # The first ``longer`` pieces take one character more: ``count`` pieces, none empty.
    bounds = [i * size + min(i, longer) for i in range(count + 1)]
    chunks = [arguments[a:b] for a, b in itertools.pairwise(bounds)]
    return [
        ToolCallStart(call_id, name, provider_data=provider_data),
        *(ToolCallArgs(call_id, chunk) for chunk in chunks),
        ToolCallEnd(call_id),
    ]


def tool_calls_response(*calls: ToolCall, usage: Usage | None = None) -> list[AgentResponseUpdate]:
    """A whole model response that calls ``calls``: each one's :func:`tool_call_updates`, in
    order (a call's ``provider_data`` in its ``ToolCallStart``), then
    ``Finish(FinishReason.TOOL_CALLS, usage)``.

    For a :class:`ScriptedChatClient` script or a :class:`FunctionChatClient` function::

        tool_calls_response(ToolCall("c1", "search", '{"query": "trio"}'))

    Raises:
        TypeError: one of ``calls`` is not a :class:`ToolCall` (a list of them: unpack it,
            ``tool_calls_response(*calls)``).
    """
    updates: list[AgentResponseUpdate] = []
    given: tuple[object, ...] = calls  # checked at run time, whatever the annotations say
    for index, call in enumerate(given):
        if not isinstance(call, ToolCall):
            hint = (
                ": pass the calls themselves, tool_calls_response(*calls)"
                if isinstance(call, list | tuple) and all(isinstance(c, ToolCall) for c in call)
                else ""
            )
            raise TypeError(
                f"tool_calls_response takes ToolCalls, but call {index} is {_describe(call)}{hint}"
            )
        updates += tool_call_updates(
            call.id, call.name, call.arguments, provider_data=call.provider_data
        )
    updates.append(Finish(FinishReason.TOOL_CALLS, usage))
    return updates
