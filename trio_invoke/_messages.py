"""The conversation: roles, messages, tool calls and token usage.

Plain values (attrs, frozen) with a lossless mapping to and from the OpenAI chat-completions
message format, so a transcript can be stored as JSON and sent to a model again later, possibly
from another process.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["ChatMessage", "FinishReason", "MessageRole", "ToolCall", "Usage"]


class MessageRole(enum.Enum):
    """Who wrote a message; the values are the OpenAI wire format's.

    ``str()`` and f-strings give the value: ``f"{MessageRole.USER}"`` is ``"user"``.
    """

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"

    def __str__(self) -> str:
        return self.value


class FinishReason(enum.Enum):
    """Why a response (or a whole run of the loop) ended.

    ``str()`` and f-strings give the value, as the wire format spells it:

    >>> print(f"finished: {FinishReason.AWAITING_APPROVAL}")
    finished: awaiting_approval
    """

    STOP = "stop"
    """The model answered without calling a tool."""
    TOOL_CALLS = "tool_calls"
    """The model called tools. Internal to the loop: callers of the loop never see it."""
    AWAITING_APPROVAL = "awaiting_approval"
    """A tool call needs a human's approval; resume with ``RunOptions.tool_approval_responses``."""
    MAX_ROUNDS = "max_rounds"
    """The loop reached ``max_rounds`` model calls."""
    LENGTH = "length"
    """The model ran out of output tokens."""
    CONTENT_FILTER = "content_filter"
    """The provider's content filter stopped the model."""

    def __str__(self) -> str:
        return self.value


@attrs.frozen
class ToolCall:
    """One call of a tool, as the model made it."""

    id: str
    """The call id the model (or provider) gave; tool messages answer it by this id."""
    name: str
    """The tool's name."""
    arguments: str
    """The raw JSON text of the arguments, exactly as the model sent it (possibly invalid)."""

    def to_dict(self) -> dict[str, Any]:
        """This call in the OpenAI format (``{"id", "type": "function", "function": {...}}``)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Read a call in the OpenAI format.

        Raises:
            ValueError: ``data`` lacks ``id`` or ``function.name``, or a field has the wrong type.
        """
        function = data.get("function")
        if not isinstance(function, Mapping):
            raise ValueError(f"tool call needs a 'function' object, got {data!r}")
        call_id, name = data.get("id"), function.get("name")
        arguments = function.get("arguments", "")
        if not isinstance(call_id, str):
            raise ValueError(f"tool call 'id' must be a string, got {call_id!r}")
        if not isinstance(name, str):
            raise ValueError(f"tool call 'function.name' must be a string, got {name!r}")
        if arguments is None:
            arguments = ""
        if not isinstance(arguments, str):
            raise ValueError(
                f"tool call 'function.arguments' must be a JSON string, got {arguments!r}"
            )
        return cls(id=call_id, name=name, arguments=arguments)


def _to_tool_calls(value: Iterable[ToolCall] | None) -> tuple[ToolCall, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class ChatMessage:
    """One message of a conversation.

    Use the constructors for the common cases: ``ChatMessage.user("hi")``. The loop itself writes
    assistant messages with ``tool_calls`` and ``TOOL`` messages that answer them.
    """

    role: MessageRole = attrs.field(converter=MessageRole)
    """Who wrote it."""
    content: str = ""
    """Its text; for a ``TOOL`` message, the tool's result."""
    tool_calls: tuple[ToolCall, ...] | None = attrs.field(default=None, converter=_to_tool_calls)
    """On an assistant message: the tools it calls, in call order. ``None`` when it calls none."""
    name: str | None = None
    """On a ``TOOL`` message: the tool's name (optional on the wire)."""
    tool_call_id: str | None = None
    """On a ``TOOL`` message: the id of the call it answers."""

    @classmethod
    def system(cls, text: str) -> ChatMessage:
        """A system message."""
        return cls(MessageRole.SYSTEM, text)

    @classmethod
    def user(cls, text: str) -> ChatMessage:
        """A user message."""
        return cls(MessageRole.USER, text)

    @classmethod
    def assistant(cls, text: str, tool_calls: Iterable[ToolCall] | None = None) -> ChatMessage:
        """An assistant message, optionally with tool calls."""
        return cls(MessageRole.ASSISTANT, text, tool_calls)

    @classmethod
    def tool_result(cls, call: ToolCall, result: str) -> ChatMessage:
        """The ``TOOL`` message that answers ``call`` with ``result``."""
        return cls(MessageRole.TOOL, result, name=call.name, tool_call_id=call.id)

    def to_dict(self) -> dict[str, Any]:
        """This message in the OpenAI chat-completions format.

        Keys whose value is ``None`` are left out; ``ChatMessage.from_dict(m.to_dict()) == m``
        for every message (an empty ``tool_calls`` tuple stays an empty tuple).
        """
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls is not None:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.name is not None:
            data["name"] = self.name
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatMessage:
        """Read a message in the OpenAI chat-completions format.

        ``content`` may be a string, ``None`` (read as ``""``) or a list of text parts (joined).

        Raises:
            ValueError: the role is missing or unknown, or a field has the wrong type; the
                message names the field.
        """
        role = data.get("role")
        try:
            message_role = MessageRole(role)
        except ValueError:
            known = ", ".join(repr(r.value) for r in MessageRole)
            raise ValueError(f"message 'role' must be one of {known}, got {role!r}") from None
        content = data.get("content")
        if content is None:
            content = ""
        elif isinstance(content, list):
            content = "".join(_text_part(part) for part in content)
        elif not isinstance(content, str):
            raise ValueError(f"message 'content' must be a string, got {content!r}")
        raw_calls = data.get("tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list | tuple):
            raise ValueError(f"message 'tool_calls' must be a list, got {raw_calls!r}")
        name, tool_call_id = data.get("name"), data.get("tool_call_id")
        for field, value in (("name", name), ("tool_call_id", tool_call_id)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"message {field!r} must be a string, got {value!r}")
        return cls(
            message_role,
            content,
            None if raw_calls is None else tuple(ToolCall.from_dict(c) for c in raw_calls),
            name=name,
            tool_call_id=tool_call_id,
        )


def _text_part(part: object) -> str:
    if (
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ):
        text: str = part["text"]
        return text
    raise ValueError(f"message 'content' parts must be text parts, got {part!r}")


@attrs.frozen
class Usage:
    """Tokens a model call consumed. Add two with ``+``."""

    input_tokens: int = 0
    """Tokens of the prompt."""
    output_tokens: int = 0
    """Tokens the model generated."""

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )
