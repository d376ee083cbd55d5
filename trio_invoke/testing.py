"""Test doubles and checks for your own tests of tools, chat clients and agents.

What trio_invoke's own test suite uses, shipped for yours:

* :class:`ScriptedChatClient`, the embedded model that replays a script;
* :func:`tool_call_updates`, the streamed form of one tool call;
* :func:`run_to_completion`, which runs a client and returns its updates and messages;
* :func:`assert_transcript_valid`, the invariant every transcript must keep.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._client import ChatClient
from ._messages import ChatMessage, MessageRole
from ._options import RunOptions
from ._scripted import ScriptedCall, ScriptedChatClient
from ._updates import AgentResponseUpdate, ToolCallArgs, ToolCallEnd, ToolCallStart

__all__ = [
    "RunResult",
    "ScriptedCall",
    "ScriptedChatClient",
    "assert_transcript_valid",
    "run_to_completion",
    "tool_call_updates",
]


def tool_call_updates(
    call_id: str, name: str, arguments: str, *, pieces: int = 1
) -> list[AgentResponseUpdate]:
    """The updates a model streams for one call: start, ``arguments`` in ``pieces``, end."""
    size = max(1, -(-len(arguments) // max(1, pieces)))
    chunks = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    return [
        ToolCallStart(call_id, name),
        *(ToolCallArgs(call_id, chunk) for chunk in chunks),
        ToolCallEnd(call_id),
    ]


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


def assert_transcript_valid(messages: Sequence[ChatMessage]) -> None:
    """Assert that every assistant tool call is answered by exactly one tool message, in call
    order, right after the assistant message, and that no tool message answers nothing.

    This is what a provider checks before it accepts a conversation (an unanswered call is an
    HTTP 400 at OpenAI).

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
