"""Test doubles, Hypothesis strategies and checks for your own tests of tools, chat clients and
agents.

What trio_invoke's own test suite uses, shipped for yours:

* chat clients with no network: :class:`ScriptedChatClient`, which replays a script, and
  :class:`FunctionChatClient`, whose responses come from a function of the conversation;
* building responses: :func:`tool_call_updates` (the streamed form of one tool call) and
  :func:`tool_calls_response` (a whole response that calls tools);
* running and checking: :func:`run_to_completion`, which runs a client and returns its updates
  and messages, and :func:`assert_transcript_valid`, the invariant every transcript must keep;
* Hypothesis strategies: :func:`json_values`, :func:`tool_arguments`,
  :func:`schemas_with_arguments`, :func:`tool_call_streams` and :func:`scripted_rounds`.

The strategies need Hypothesis, which comes with the extra ``trio_invoke[testing]``; everything
else works without it (the strategies are imported on first use).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._client import ChatClient
from ._function_client import FunctionChatClient
from ._messages import ChatMessage, FinishReason, MessageRole, ToolCall, Usage
from ._options import RunOptions
from ._scripted import ScriptedCall, ScriptedChatClient
from ._updates import AgentResponseUpdate, Finish, ToolCallArgs, ToolCallEnd, ToolCallStart

if TYPE_CHECKING:  # at run time, imported on first use by __getattr__ below
    from ._strategies import (
        json_values,
        schemas_with_arguments,
        scripted_rounds,
        tool_arguments,
        tool_call_streams,
    )

__all__ = [
    "FunctionChatClient",
    "RunResult",
    "ScriptedCall",
    "ScriptedChatClient",
    "assert_transcript_valid",
    "json_values",
    "run_to_completion",
    "schemas_with_arguments",
    "scripted_rounds",
    "tool_arguments",
    "tool_call_streams",
    "tool_call_updates",
    "tool_calls_response",
]

_STRATEGIES = frozenset(
    {
        "json_values",
        "schemas_with_arguments",
        "scripted_rounds",
        "tool_arguments",
        "tool_call_streams",
    }
)
"""Public names that need Hypothesis: imported from ``._strategies`` on first access."""


def __getattr__(name: str) -> Any:
    """Import a strategy on first use; without Hypothesis that raises an ``ImportError`` naming
    the extra to install, ``trio_invoke[testing]``."""
    if name not in _STRATEGIES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module("._strategies", __package__)
    except ImportError as exc:
        raise ImportError(
            f"trio_invoke.testing.{name} needs Hypothesis, which is not installed: "
            'pip install "trio_invoke[testing]"'
        ) from exc
    value = getattr(module, name)
    value.__module__ = __name__  # reprs and tracebacks show the public path
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _STRATEGIES)


def tool_call_updates(
    call_id: str, name: str, arguments: str, *, pieces: int = 1
) -> list[AgentResponseUpdate]:
    """The updates a model streams for one call: start, ``arguments`` in ``pieces``, end.

    Args:
        call_id: The call's id, unique within the response.
        name: The tool the call is for.
        arguments: The call's JSON arguments, as text (``""`` means no arguments).
        pieces: How many ``ToolCallArgs`` to cut ``arguments`` into (fewer if it is short).

    Returns:
        ``[ToolCallStart, ToolCallArgs..., ToolCallEnd]``; no ``Finish``. For every chunking and
        interleaving of several calls, draw from :func:`tool_call_streams`.
    """
    size = max(1, -(-len(arguments) // max(1, pieces)))
    chunks = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    return [
        ToolCallStart(call_id, name),
        *(ToolCallArgs(call_id, chunk) for chunk in chunks),
        ToolCallEnd(call_id),
    ]


def tool_calls_response(*calls: ToolCall, usage: Usage | None = None) -> list[AgentResponseUpdate]:
    """A whole model response that calls ``calls``: each one's :func:`tool_call_updates`, in
    order, then ``Finish(FinishReason.TOOL_CALLS, usage)``.

    For a :class:`ScriptedChatClient` script or a :class:`FunctionChatClient` function::

        tool_calls_response(ToolCall("c1", "search", '{"query": "trio"}'))
    """
    updates: list[AgentResponseUpdate] = []
    for call in calls:
        updates += tool_call_updates(call.id, call.name, call.arguments)
    updates.append(Finish(FinishReason.TOOL_CALLS, usage))
    return updates


@attrs.frozen
class RunResult:
    """What :func:`run_to_completion` saw."""

    updates: tuple[AgentResponseUpdate, ...]
    """Every update, in the order the stream gave them."""
    messages: tuple[ChatMessage, ...]
    """The stream's ``.messages`` (the loop's), or ``()`` for a client without them."""


async def run_to_completion(
    client: ChatClient, messages: Sequence[ChatMessage], options: RunOptions | None = None
) -> RunResult:
    """Run ``client`` on ``messages`` until its stream ends; return what it produced.

    Raises whatever the stream raises. Cancellation: the updates seen so far are lost; use
    ``options.cancel_scope`` to cancel a loop run and still get its result.
    """
    updates: list[AgentResponseUpdate] = []
    async with client.run(messages, options) as stream:
        async for update in stream:
            updates.append(update)
    added = getattr(stream, "messages", ())
    return RunResult(tuple(updates), tuple(added))


def assert_transcript_valid(
    messages: Sequence[ChatMessage], *, allow_pending_approval: bool = False
) -> None:
    """Assert that every assistant tool call is answered by exactly one tool message, in call
    order, right after the assistant message, and that no tool message answers nothing.

    This is what a provider checks before it accepts a conversation (an unanswered call is an
    HTTP 400 at OpenAI).

    Args:
        messages: The conversation, or what a run added to it.
        allow_pending_approval: Accept a conversation paused for approval (a run that ended with
            ``Finish(AWAITING_APPROVAL)``): the calls of the last assistant message may then be
            left without a tool message, as long as only tool messages follow it. Those of its
            calls that are answered (with ``eager_tools``, calls may have run before the pause)
            must still be answered once each, in call order.

    Raises:
        AssertionError: naming the message index and the call id that breaks the rule.
    """
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role is MessageRole.TOOL:
            raise AssertionError(
                f"message {index} is a tool message for call {message.tool_call_id!r} that no "
                "assistant message right before it made"
            )
        at, index = index, index + 1
        if message.role is not MessageRole.ASSISTANT or not message.tool_calls:
            continue
        ids = [call.id for call in message.tool_calls]
        if len(set(ids)) != len(ids):
            raise AssertionError(f"message {at} repeats a tool call id: {ids}")
        if allow_pending_approval and all(m.role is MessageRole.TOOL for m in messages[index:]):
            _check_paused_batch(messages, at)
            return
        for call in message.tool_calls:
            if index >= len(messages) or messages[index].role is not MessageRole.TOOL:
                raise AssertionError(
                    f"tool call {call.id!r} ({call.name}) of message {at} has no tool message "
                    f"(expected one at index {index})"
                )
            if messages[index].tool_call_id != call.id:
                raise AssertionError(
                    f"message {index} answers {messages[index].tool_call_id!r}, but call order "
                    f"expects {call.id!r}"
                )
            index += 1


def _check_paused_batch(messages: Sequence[ChatMessage], at: int) -> None:
    """The tool messages after ``messages[at]`` answer some of its calls, once each, in call
    order; the rest are pending."""
    open_ids = [call.id for call in messages[at].tool_calls or ()]
    for index in range(at + 1, len(messages)):
        answered = messages[index].tool_call_id
        if answered not in open_ids:
            raise AssertionError(
                f"message {index} answers {answered!r}, but the calls of message {at} still "
                f"open in call order are {open_ids}"
            )
        del open_ids[: open_ids.index(answered) + 1]
