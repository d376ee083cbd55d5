"""Approval on resume: which calls are pending, and whether the answers match them (sans-IO).

A run that stops with ``Finish(AWAITING_APPROVAL)`` leaves the conversation ending in an
assistant message whose calls have no tool messages yet. Resuming means answering those calls,
and the answers must match exactly the calls that wait for approval. Each request carries a
digest of its call (id, tool name, arguments): an answer built with ``request.approve()`` or
``request.reject()`` carries it back, and a call whose arguments were edited in the stored
conversation since the request was shown no longer matches, so nothing runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ._exceptions import ApprovalError, ConversationError
from ._messages import ChatMessage, MessageRole, ToolCall
from ._options import ToolApprovalResponse
from ._text import digest_bytes
from ._validate import non_finite

__all__ = ["arguments_text", "call_digest", "match_approvals", "pending_calls"]


def call_digest(call: ToolCall) -> str:
    """A SHA-256 digest of ``call``'s id, tool name and arguments (hex).

    Defined for any text: lone surrogates are hashed as themselves, so two calls that differ
    only there get different digests (see :func:`~trio_invoke._text.digest_bytes`).
    """
    text = json.dumps([call.id, call.name, call.arguments], ensure_ascii=False)
    return hashlib.sha256(digest_bytes(text)).hexdigest()


def arguments_text(arguments: str | Mapping[str, Any]) -> str:
    """Replacement arguments as JSON text (a mapping becomes compact JSON).

    Raises:
        TypeError, ValueError: a mapping that is not JSON-serialisable: a value JSON has no
            form for, a mapping that contains itself, or NaN or an infinity, which JSON has no
            number for either (``"field 'x' is inf, not a JSON number"``): no tool gets one.
    """
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(
            dict(arguments), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except ValueError as exc:  # NaN or an infinity, or a circular reference
        found = non_finite(arguments, fields=True)
        if found is None:
            raise
        where, value = found
        raise ValueError(f"field {where!r} is {value!r}, not a JSON number") from exc


def pending_calls(messages: Sequence[ChatMessage]) -> list[ToolCall]:
    """The calls of the trailing assistant message that have no tool message yet.

    The trailing assistant message is the last message, or the last one before the tool
    messages that end the conversation. Those tool messages (the results of calls that ran
    before a pause) must answer the first calls of that message, once each, in call order (the
    answers of the pending calls are added after them).

    Raises:
        ConversationError: the assistant message makes two calls with one id; a trailing tool
            message answers a call the assistant message did not make, answers one twice, or
            answers a call before an earlier one is answered (out of call order, or after a
            pending call, whose answer would then come out of order); or tool messages end the
            conversation with no assistant message with calls before them.
    """
    end = len(messages)
    start = end
    while start > 0 and messages[start - 1].role is MessageRole.TOOL:
        start -= 1
    if start == 0 or messages[start - 1].role is not MessageRole.ASSISTANT:
        if start < end:
            raise ConversationError(
                f"messages[{start}] is a tool message (for call "
                f"{messages[start].tool_call_id!r}) that no assistant message with tool calls "
                "comes before"
            )
        return []
    calls = messages[start - 1].tool_calls or ()
    if not calls:
        if start < end:
            raise ConversationError(
                f"messages[{start}] is a tool message, but the assistant message before it "
                "made no tool calls"
            )
        return []
    order = {call.id: index for index, call in enumerate(calls)}
    if len(order) < len(calls):
        ids = [call.id for call in calls]
        twice = next(call_id for call_id in ids if ids.count(call_id) > 1)
        raise ConversationError(
            f"messages[{start - 1}] makes tool call {twice!r} twice: each call of a message "
            "needs an id of its own to be answered"
        )
    answered: set[str] = set()
    for index in range(start, end):
        call_id = messages[index].tool_call_id
        where = f"messages[{index}] answers tool call {call_id!r}"
        if call_id not in order:
            made = ", ".join(repr(call.id) for call in calls)
            raise ConversationError(
                f"{where}, which the assistant message before it did not make (its calls: {made})"
            )
        if call_id in answered:
            raise ConversationError(f"{where} a second time")
        if order[call_id] > len(answered):  # out of call order, or after a pending call
            pending = calls[len(answered)].id
            raise ConversationError(
                f"{where}, but {pending!r}, an earlier call of messages[{start - 1}], has no "
                "answer before it: answers must follow call order, and a pending call's answer, "
                "added on resume, would come after this one"
            )
        answered.add(call_id)
    return [call for call in calls if call.id not in answered]


def match_approvals(
    pending: Sequence[ToolCall],
    needs_approval: Callable[[ToolCall], bool],
    responses: Sequence[ToolApprovalResponse],
) -> dict[str, ToolApprovalResponse]:
    """Match ``responses`` to the pending calls that need approval, by call id.

    Raises:
        ApprovalError: a response names a call that is not waiting for approval, two responses
            name one call, a call waiting for approval has no response, a response's digest
            does not match its call, its replacement arguments are not JSON-serialisable, or
            responses were given with nothing pending. The message names the call ids.
    """
    if responses and not pending:
        ids = ", ".join(repr(r.call_id) for r in responses)
        raise ApprovalError(
            f"approval responses were given for tool calls {ids}, but the conversation does not "
            "end with tool calls waiting for approval"
        )
    waiting = {call.id: call for call in pending if needs_approval(call)}
    matched: dict[str, ToolApprovalResponse] = {}
    for response in responses:
        if response.call_id in matched:
            raise ApprovalError(f"two approval responses for tool call {response.call_id!r}")
        call = waiting.get(response.call_id)
        if call is None:
            names = ", ".join(repr(i) for i in waiting) or "none"
            raise ApprovalError(
                f"approval response names tool call {response.call_id!r}, which is not waiting "
                f"for approval (calls waiting for approval: {names})"
            )
        if response.arguments is not None:
            try:
                text = arguments_text(response.arguments)
            except (TypeError, ValueError) as exc:
                raise ApprovalError(
                    f"replacement arguments for tool call {response.call_id!r} are not "
                    f"JSON-serialisable: {exc}"
                ) from exc
            response = attrs.evolve(response, arguments=text)  # noqa: PLW2901 -- normalised
        if response.digest is not None and response.digest != call_digest(call):
            raise ApprovalError(
                f"approval response for tool call {response.call_id!r} does not match the call "
                f"in the conversation ({call.name} with arguments {call.arguments}): the call "
                "changed after the approval request was made"
            )
        matched[response.call_id] = response
    missing = [call for call in waiting.values() if call.id not in matched]
    if missing:
        names = ", ".join(f"{c.id!r} ({c.name})" for c in missing)
        raise ApprovalError(f"tool calls waiting for approval have no approval response: {names}")
    return matched
