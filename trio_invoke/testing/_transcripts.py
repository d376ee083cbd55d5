"""Running a chat client to its end, and the invariant every transcript must keep."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._client import ChatClient
from .._messages import ChatMessage, MessageRole
from .._options import RunOptions
from .._scripted import _describe
from .._updates import AgentResponseUpdate

__all__ = ["RunResult", "assert_transcript_valid", "run_to_completion"]


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

    Raises:
        TypeError: ``client`` is not a chat client (an object with ``run(messages,
            options)``): ``None``, a class rather than an instance, a client's ``run`` method.
    """
    given: object = client  # checked at run time, whatever the annotations say
    if isinstance(given, type) or not callable(getattr(given, "run", None)):
        if isinstance(given, type):
            hint = f": pass an instance, {given.__name__}(...)"
        elif getattr(given, "__name__", None) == "run" and hasattr(given, "__self__"):
            hint = ": pass the client itself, not its run method"
        else:
            hint = ""
        raise TypeError(
            "run_to_completion takes a chat client (an object with run(messages, options)), "
            f"not {_describe(given)}{hint}"
        )
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
        messages: The conversation, or what a run added to it (but not what a resumed run
            added alone: its first tool messages answer the assistant message it resumed).
        allow_pending_approval: Accept a conversation paused for approval (a run that ended with
            ``Finish(AWAITING_APPROVAL)``): the calls of the last assistant message may then be
            left without a tool message, as long as only tool messages follow it. Those of its
            calls that are answered (with ``eager_tools``, calls may have run before the pause)
            must still be answered once each, in call order, and come first in call order: a
            pending call answered on resume is appended, so an answer after it would be out of
            order.

    Raises:
        AssertionError: naming the message index and the call id that breaks the rule.
        TypeError: ``messages`` is not a sequence of :class:`ChatMessage` (``None``, a str, a
            dict in OpenAI's format: ``ChatMessage.from_dict`` reads one).
    """
    given: object = messages  # checked at run time, whatever the annotations say
    if isinstance(given, str) or not isinstance(given, Sequence):
        raise TypeError(
            f"assert_transcript_valid takes a sequence of ChatMessages, not {_describe(given)}"
        )
    for at, message in enumerate(given):
        if not isinstance(message, ChatMessage):
            hint = " (ChatMessage.from_dict reads a dict)" if isinstance(message, dict) else ""
            raise TypeError(
                f"assert_transcript_valid takes ChatMessages, but message {at} is "
                f"{_describe(message)}{hint}"
            )
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
    """The tool messages after ``messages[at]`` answer its first calls, once each, in call
    order; the rest are pending (their answers, on resume, follow these)."""
    open_ids = [call.id for call in messages[at].tool_calls or ()]
    for index in range(at + 1, len(messages)):
        answered = messages[index].tool_call_id
        if answered not in open_ids:
            raise AssertionError(
                f"message {index} answers {answered!r}, but the calls of message {at} still "
                f"open in call order are {open_ids}"
            )
        if answered != open_ids[0]:
            raise AssertionError(
                f"message {index} answers {answered!r}, but call order expects "
                f"{open_ids[0]!r} (of message {at}) first: an answer to it on resume would "
                "come after this one"
            )
        del open_ids[0]
