"""The conversation: roles, messages, tool calls and token usage.

Plain values (attrs, frozen) with a lossless mapping to and from the OpenAI chat-completions
message format, so a transcript can be stored as JSON and sent to a model again later, possibly
from another process.

What providers send beyond text and tool calls has a place too:

* ``ChatMessage.content`` is a ``str`` for text (nearly every message), or a tuple of content
  parts (``_content``: text, images, anything else kept raw) when a message holds more.
* ``ChatMessage.reasoning`` is the reasoning a thinking model streamed before its answer
  (DeepSeek's and Qwen's ``reasoning_content``; vLLM's, Ollama's and OpenRouter's ``reasoning``),
  with ``reasoning_field`` remembering which of the two names it came in, so it goes back the same.
* ``provider_data`` -- on a message, a tool call and a content part -- holds every key of the
  wire object that trio_invoke does not model, unchanged, by its name: OpenRouter's
  ``reasoning_details`` (signed and encrypted reasoning that must go back during tool use),
  Anthropic's signed ``thinking_blocks``, Gemini's ``extra_content`` on a tool call, a part's
  ``cache_control``, ``refusal``, ``annotations`` or ``audio`` from a stored history. ``to_dict()``
  writes them back beside the modelled keys. Each provider's client decides which of them its
  API takes back (the OpenAI client sends ``reasoning_details`` to OpenRouter and nothing else);
  the rest stay in the transcript. A model's stream delivers them as ``ProviderDataDelta``
  updates, which the accumulator folds into the assistant message.

The round trip is exact: ``ChatMessage.from_dict(m.to_dict()) == m`` for every message, and
``ChatMessage.from_dict(d).to_dict() == d`` for every message ``d`` in the OpenAI format, with
these normalisations: a key whose value is ``null`` is read as absent (``"content": null`` beside
tool calls becomes ``""``), a tool call's missing ``"type"`` is written as ``"function"``, and
the same reasoning under both names (a server in transition sends that) is read once, under
``reasoning_content``. A message holds one reasoning: different reasoning under both names is a
``ValueError``, and so is ``provider_data`` holding either name.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, TypeGuard

import attrs

from ._content import (
    EMPTY,
    ContentPart,
    ImagePart,
    RawPart,
    TextPart,
    json_copy,
    json_object,
    optional_str_field,
    part_from_dict,
    parts_text,
    preview,
    reduce_value,
    show,
    str_field,
    to_parts,
    without_nulls,
)
from ._text import wire_json, wire_text

__all__ = [
    "REASONING_FIELDS",
    "ChatMessage",
    "FinishReason",
    "MessageRole",
    "ToolCall",
    "Usage",
    "check_call_keys",
    "first_not_a_message",
    "is_conversation",
]

REASONING_FIELDS: Final = ("reasoning_content", "reasoning")
"""The wire names of a message's reasoning, in the order ``from_dict`` looks for them."""
_MESSAGE_KEYS: Final = frozenset({"role", "content", "tool_calls", "name", "tool_call_id"})
_MODELLED_KEYS: Final = _MESSAGE_KEYS.union(REASONING_FIELDS)
_CALL_KEYS: Final = frozenset({"id", "type", "function"})
_FUNCTION_KEYS: Final = frozenset({"name", "arguments"})
_LOOP_ERROR: Final = re.compile(r"(?:\[arguments replaced by the user: .*?\] )?Error: ", re.S)
"""The loop's error text: ``"Error: ..."``, after the note of replaced arguments if any. The one
definition of it: a tool message without ``provider_data["is_error"]`` is an error result when
its text reads so (the Anthropic wire), and the loop marks a result only where that reading
would be wrong (:func:`_loop_tool_result`)."""


_ERROR_MARK: Final = MappingProxyType({"is_error": True})
_SUCCESS_MARK: Final = MappingProxyType({"is_error": False})
_STOP_MARK: Final = "stop_loop"


class MessageRole(enum.Enum):
    """Who wrote a message; the values are the OpenAI wire format's.

    ``str()`` and f-strings give the value: ``f"{MessageRole.USER}"`` is ``"user"``.
    """

    SYSTEM = "system"
    DEVELOPER = "developer"
    """OpenAI's successor of ``system`` for its reasoning models; other servers may not know it."""
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


def _call_extra(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is EMPTY or not value:  # the identity first: the common case, and the cheapest
        return EMPTY
    if not isinstance(value, Mapping):
        raise ValueError(f"ToolCall.provider_data must be a mapping, got {preview(value)}")
    data = json_object(without_nulls(value), "ToolCall.provider_data")
    check_call_keys(data, "ToolCall.provider_data")
    if "function" in data:  # its nulls are absent, and so is an empty one (as on the wire)
        function = without_nulls(data["function"])
        rest = {key: item for key, item in data.items() if key != "function"}
        if function:
            rest["function"] = function
        data = MappingProxyType(rest) if rest else EMPTY
    return data


def check_call_keys(data: Mapping[str, Any], where: str) -> None:
    """A call's provider data holds none of the keys the call models (``id``, ``type``, and in
    ``function`` -- an object of the function's other keys -- ``name`` and ``arguments``):
    ``ValueError`` naming them."""
    clash = sorted(_CALL_KEYS.difference({"function"}).intersection(data))
    function = data.get("function", EMPTY)
    if not isinstance(function, Mapping):
        raise ValueError(
            f"{where} 'function' must be an object (the function's keys beyond 'name' and "
            f"'arguments'), got {preview(function)}"
        )
    clash += sorted(f"function.{key}" for key in _FUNCTION_KEYS.intersection(function))
    if clash:
        raise ValueError(f"{where} may not set {', '.join(map(repr, clash))}")


@attrs.frozen
class ToolCall:
    """One call of a tool, as the model made it.

    Raises:
        TypeError: ``id``, ``name`` or ``arguments`` is not a ``str``.
    """

    id: str = attrs.field(validator=str_field)
    """The call id the model (or provider) gave; tool messages answer it by this id."""
    name: str = attrs.field(validator=str_field)
    """The tool's name."""
    arguments: str = attrs.field(validator=str_field)
    """The raw JSON text of the arguments, exactly as the model sent it (possibly invalid)."""
    provider_data: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_call_extra, hash=False, repr=show
    )
    """Keys of the call object beyond ``id``, ``type`` and ``function`` (Gemini's
    ``extra_content``, ...), kept unchanged; see the module docstring. Keys of its ``function``
    object beyond ``name`` and ``arguments`` are kept the same way, as an object under
    ``"function"``."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)

    def to_dict(self) -> dict[str, Any]:
        """This call in the OpenAI format (``{"id", "type": "function", "function": {...}}``).

        Text that is not valid Unicode is made valid as :meth:`ChatMessage.to_dict` says.
        """
        function = {"name": wire_text(self.name), "arguments": wire_text(self.arguments)}
        data: dict[str, Any] = {"id": wire_text(self.id), "type": "function", "function": function}
        if self.provider_data:
            extra = wire_json(self.provider_data)
            function.update(extra.pop("function", ()))  # the function's own other keys
            data.update(extra)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> ToolCall:
        """Read a call in the OpenAI format. ``where`` says which call it is in error messages.

        Raises:
            ValueError: ``data`` is not an object, lacks ``id`` or ``function.name``, or a field
                has the wrong type; the message names the field.
        """
        at = f" (in {where})" if where else ""
        if not isinstance(data, Mapping):
            raise ValueError(f"a tool call must be an object, got {preview(data)}{at}")
        kind = data.get("type")
        if kind is not None and kind != "function":
            raise ValueError(f"tool call 'type' must be 'function', got {preview(kind)}{at}")
        function = data.get("function")
        if not isinstance(function, Mapping):
            raise ValueError(f"tool call needs a 'function' object, got {preview(data)}{at}")
        call_id, name = data.get("id"), function.get("name")
        arguments = function.get("arguments", "")
        if not isinstance(call_id, str):
            raise ValueError(f"tool call 'id' must be a string, got {preview(call_id)}{at}")
        if not isinstance(name, str):
            raise ValueError(f"tool call 'function.name' must be a string, got {preview(name)}{at}")
        if arguments is None:
            arguments = ""
        if not isinstance(arguments, str):
            raise ValueError(
                f"tool call 'function.arguments' must be a JSON string, "
                f"got {preview(arguments)}{at}"
            )
        extra = {k: v for k, v in data.items() if k not in _CALL_KEYS and v is not None}
        if not _FUNCTION_KEYS.issuperset(function):  # (nearly every call: only the two)
            more = {k: v for k, v in function.items() if k not in _FUNCTION_KEYS}
            extra["function"] = more  # (its nulls are dropped as the call's own are)
        return cls(call_id, name, arguments, provider_data=_json(extra, "tool call", at))


def _json(extra: dict[str, Any], what: str, at: str = "") -> dict[str, Any]:
    try:
        copied: dict[str, Any] = json_copy(extra, what)
    except ValueError as exc:
        raise ValueError(f"{exc}{at}") from None
    return copied


def _to_tool_calls(value: Iterable[ToolCall] | None) -> tuple[ToolCall, ...] | None:
    if value is None:
        return None
    if isinstance(value, ToolCall | Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            f"ChatMessage tool_calls must be an iterable of ToolCall, got {preview(value)}"
        )
    calls = tuple(value)
    for i, call in enumerate(calls):
        if not isinstance(call, ToolCall):
            raise TypeError(
                f"ChatMessage tool_calls[{i}] must be a ToolCall, got {preview(call)}; read "
                "OpenAI-format messages with ChatMessage.from_dict"
            )
    return calls


def _to_content(value: str | Iterable[ContentPart]) -> str | tuple[ContentPart, ...]:
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # a plain str: a subclass's own __str__ may raise
    if isinstance(value, TextPart | ImagePart | RawPart):
        return (value,)
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            "ChatMessage content must be a str or an iterable of content parts (TextPart, "
            f"ImagePart, RawPart), got {preview(value)}; read OpenAI-format messages with "
            "ChatMessage.from_dict"
        )
    return to_parts(value)


def _message_extra(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is EMPTY or not value:
        return EMPTY
    if not isinstance(value, Mapping):
        raise ValueError(f"ChatMessage.provider_data must be a mapping, got {preview(value)}")
    return json_object(without_nulls(value), "ChatMessage.provider_data")


@attrs.frozen
class ChatMessage:
    """One message of a conversation.

    Use the constructors for the common cases: ``ChatMessage.user("hi")``, or with an image
    ``ChatMessage.user([TextPart("What is this?"), ImagePart(url="https://...")])``. The loop
    itself writes assistant messages with ``tool_calls`` (and the model's ``reasoning``) and
    ``TOOL`` messages that answer them.

    Raises:
        TypeError: ``content`` is neither a ``str`` nor content parts; ``tool_calls`` is not
            ``None`` or ``ToolCall`` objects; ``name``, ``tool_call_id`` or ``reasoning`` is
            not a ``str`` (or ``None``).
        ValueError: ``reasoning_field`` is not a known name, or ``provider_data`` holds a key
            the message models itself (either reasoning name included, with or without
            reasoning), or a value that is not JSON.
    """

    role: MessageRole = attrs.field(converter=MessageRole)
    """Who wrote it."""
    content: str | tuple[ContentPart, ...] = attrs.field(default="", converter=_to_content)
    """Its text; for a ``TOOL`` message, the tool's result. A tuple of content parts when the
    message holds more than text (images); :attr:`text` is the text either way."""
    tool_calls: tuple[ToolCall, ...] | None = attrs.field(default=None, converter=_to_tool_calls)
    """On an assistant message: the tools it calls, in call order. ``None`` when it calls none."""
    name: str | None = attrs.field(default=None, validator=optional_str_field)
    """On a ``TOOL`` message: the tool's name (optional on the wire)."""
    tool_call_id: str | None = attrs.field(default=None, validator=optional_str_field)
    """On a ``TOOL`` message: the id of the call it answers."""
    reasoning: str | None = attrs.field(default=None, kw_only=True)
    """On an assistant message: the reasoning the model streamed before (or between) its text
    and calls, whole; ``None`` when it streamed none."""
    reasoning_field: str = attrs.field(default="reasoning_content", kw_only=True)
    """The wire name of :attr:`reasoning`: ``"reasoning_content"`` or ``"reasoning"``, the one it
    came in, so that it goes back the same. Without reasoning, always the default."""
    provider_data: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_message_extra, hash=False, repr=show
    )
    """Keys of the wire message that trio_invoke does not model, by name, unchanged (JSON
    values): OpenRouter's ``reasoning_details``, ... See the module docstring."""

    def __attrs_post_init__(self) -> None:
        if self.reasoning is None and self.provider_data is EMPTY:  # a plain message: done
            if self.reasoning_field != "reasoning_content":
                object.__setattr__(self, "reasoning_field", "reasoning_content")
            return
        if self.reasoning is not None and not isinstance(self.reasoning, str):
            raise TypeError(f"ChatMessage reasoning must be a str, got {preview(self.reasoning)}")
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(
                f"ChatMessage reasoning_field must be one of {', '.join(REASONING_FIELDS)}, "
                f"got {self.reasoning_field!r}"
            )
        if self.reasoning is None:
            object.__setattr__(self, "reasoning_field", "reasoning_content")
        # Both reasoning names, whatever the message's reasoning_field: from_dict reads the
        # reasoning from either, so one left in provider_data would be read back as it.
        clash = sorted(_MODELLED_KEYS.intersection(self.provider_data))
        if clash:
            raise ValueError(
                f"ChatMessage provider_data may not set {', '.join(map(repr, clash))}: the "
                "message models it itself"
            )

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)

    @property
    def text(self) -> str:
        """The message's text: :attr:`content` itself, or the text of its text parts."""
        content = self.content
        return content if isinstance(content, str) else parts_text(content)

    @property
    def parts(self) -> tuple[ContentPart, ...]:
        """The content as parts: a text message is one :class:`TextPart` (none when empty)."""
        content = self.content
        if isinstance(content, str):
            return (TextPart(content),) if content else ()
        return content

    @classmethod
    def system(cls, text: str) -> ChatMessage:
        """A system message."""
        return cls(MessageRole.SYSTEM, text)

    @classmethod
    def developer(cls, text: str) -> ChatMessage:
        """A developer message (OpenAI's name for system instructions to reasoning models)."""
        return cls(MessageRole.DEVELOPER, text)

    @classmethod
    def user(cls, content: str | Iterable[ContentPart]) -> ChatMessage:
        """A user message: text, or content parts (``[TextPart(...), ImagePart(...)]``)."""
        return cls(MessageRole.USER, content)

    @classmethod
    def assistant(
        cls,
        text: str,
        tool_calls: Iterable[ToolCall] | None = None,
        *,
        reasoning: str | None = None,
    ) -> ChatMessage:
        """An assistant message, optionally with tool calls and the reasoning behind them."""
        return cls(MessageRole.ASSISTANT, text, tool_calls, reasoning=reasoning)

    @classmethod
    def tool_result(
        cls, call: ToolCall, result: str | Iterable[ContentPart], *, is_error: bool = False
    ) -> ChatMessage:
        """The ``TOOL`` message that answers ``call`` with ``result`` (text, or content parts
        when the tool returned an image).

        ``is_error=True`` marks a result that reports a failure: it is kept as
        ``provider_data["is_error"]``, which providers that take the flag get (Anthropic's
        ``tool_result`` blocks); the chat-completions API has no such field and is not sent it.
        (The loop's own error results need no mark: they read ``"Error: ..."``. The loop marks
        a result only where its text says otherwise: an error in a middleware's own words, or a
        success that reads ``"Error: ..."``, which is marked ``{"is_error": False}``.)
        """
        data = _ERROR_MARK if is_error else None
        return cls(
            MessageRole.TOOL, result, name=call.name, tool_call_id=call.id, provider_data=data
        )

    def to_dict(self) -> dict[str, Any]:
        """This message in the OpenAI chat-completions format.

        Keys whose value is ``None`` are left out; ``ChatMessage.from_dict(m.to_dict()) == m``
        for every message whose text is valid Unicode (an empty ``tool_calls`` tuple stays an
        empty tuple). Content parts are written as a list of parts, the reasoning under
        :attr:`reasoning_field`, and :attr:`provider_data` beside the rest.

        Text that is not valid Unicode is made valid, exactly as it is sent to a model: a
        surrogate pair held as two code points becomes its character, and a lone surrogate
        (``os.listdir`` gives them for file names that are not UTF-8) becomes U+FFFD. So the
        result always encodes as UTF-8 (``json.dumps(..., ensure_ascii=False).encode()``),
        and what is stored is what the model saw.
        """
        content = self.content
        data: dict[str, Any] = {
            "role": self.role.value,
            "content": (
                wire_text(content) if isinstance(content, str) else [p.to_dict() for p in content]
            ),
        }
        if self.tool_calls is not None:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.name is not None:
            data["name"] = wire_text(self.name)
        if self.tool_call_id is not None:
            data["tool_call_id"] = wire_text(self.tool_call_id)
        if self.reasoning is not None:
            data[self.reasoning_field] = wire_text(self.reasoning)
        if self.provider_data:
            data.update(wire_json(self.provider_data))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatMessage:
        """Read a message in the OpenAI chat-completions format.

        ``content`` may be a string, ``None`` (read as ``""``) or a list of content parts (kept
        as parts: text, images, and any other part as a :class:`RawPart`). The reasoning is read
        from ``reasoning_content`` or ``reasoning`` (the same text under both, once); every other
        key goes to ``provider_data``.

        Raises:
            ValueError: ``data`` is not an object, the role is missing or unknown, a field has
                the wrong shape (the message names the field), or it holds different reasoning
                under both names.
        """
        if not isinstance(data, Mapping):
            raise ValueError(
                f"a message must be a JSON object, got {type(data).__name__}: {preview(data)}"
            )
        role = data.get("role")
        try:
            message_role = MessageRole(role)
        except ValueError:
            known = ", ".join(repr(r.value) for r in MessageRole)
            raise ValueError(
                f"message 'role' must be one of {known}, got {preview(role)}"
            ) from None
        raw_content = data.get("content")
        content: str | tuple[ContentPart, ...]
        if raw_content is None:
            content = ""
        elif isinstance(raw_content, str):
            content = raw_content
        elif isinstance(raw_content, list | tuple):
            content = tuple(
                part_from_dict(part, f"content[{i}]") for i, part in enumerate(raw_content)
            )
        else:
            raise ValueError(
                "message 'content' must be a string or a list of content parts, "
                f"got {preview(raw_content)}"
            )
        raw_calls = data.get("tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list | tuple):
            raise ValueError(f"message 'tool_calls' must be a list, got {preview(raw_calls)}")
        calls = None
        if raw_calls is not None:
            calls = tuple(
                ToolCall.from_dict(c, f"'tool_calls[{i}]'") for i, c in enumerate(raw_calls)
            )
        name, tool_call_id = data.get("name"), data.get("tool_call_id")
        for field, value in (("name", name), ("tool_call_id", tool_call_id)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"message {field!r} must be a string, got {preview(value)}")
        reasoning: str | None = None
        reasoning_field = REASONING_FIELDS[0]
        extra: dict[str, Any] = {}
        for field in REASONING_FIELDS:
            value = data.get(field)
            if value is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"message {field!r} must be a string, got {preview(value)}")
            if reasoning is None:
                reasoning, reasoning_field = value, field
            elif value != reasoning:  # a message keeps one reasoning
                raise ValueError(
                    "message has different reasoning under 'reasoning_content' and 'reasoning' "
                    f"({preview(reasoning, 40)} and {preview(value, 40)}); it keeps one"
                )
        for key, value in data.items():
            if key not in _MESSAGE_KEYS and key not in REASONING_FIELDS and value is not None:
                extra[key] = value
        return cls(
            message_role,
            content,
            calls,
            name=name,
            tool_call_id=tool_call_id,
            reasoning=reasoning,
            reasoning_field=reasoning_field,
            provider_data=_json(extra, "message"),
        )


def _loop_tool_result(
    call: ToolCall,
    content: str | tuple[ContentPart, ...],
    *,
    is_error: bool,
    stops: bool = False,
) -> ChatMessage:
    """The tool message the loop writes for a call's result: ``provider_data["is_error"]`` only
    where the text, read as ``_LOOP_ERROR`` says, would tell otherwise than ``is_error``, and
    ``provider_data["stop_loop"]`` when ``stops`` (see :func:`_stops_loop`). So in the common
    case -- a success, or the loop's own ``"Error: ..."`` -- it is exactly
    ``ChatMessage.tool_result(call, content)``, the message a user would build by hand."""
    message = ChatMessage.tool_result(call, content)
    text = message.text
    reads_as_error = "Error: " in text and _LOOP_ERROR.match(text) is not None  # (most don't)
    if reads_as_error == bool(is_error) and not stops:
        return message
    data: dict[str, Any] = {}
    if reads_as_error != bool(is_error):
        data.update(_ERROR_MARK if is_error else _SUCCESS_MARK)
    if stops:
        data[_STOP_MARK] = True
    return attrs.evolve(message, provider_data=data)


def _stops_loop(message: ChatMessage) -> bool:
    """Whether ``message`` is the result of a call that raised ``StopLoop`` in a batch that
    paused for approval: the mark (``provider_data["stop_loop"]``, which no wire sends) carries
    the stop over to the resume, which ends the run once the batch is answered."""
    return message.role is MessageRole.TOOL and message.provider_data.get(_STOP_MARK) is True


def _token_count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A validator: a count of tokens is an ``int`` >= 0 (not a ``bool``, a float or a string
    from a provider's JSON: a sum of them would go wrong later, far from here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Usage {attribute.name} must be an int >= 0, got {preview(value)}")
    if value < 0:
        raise ValueError(f"Usage {attribute.name} must be an int >= 0, got {value!r}")


@attrs.frozen(repr=False)
class Usage:
    """Tokens a model call consumed. Add two with ``+`` (every field adds).

    ``input_tokens`` counts every token of the prompt, those served from or written to the
    provider's prompt cache included, so that it means the same for every provider (OpenAI's
    ``prompt_tokens`` includes cached tokens; Anthropic's ``input_tokens`` does not, and
    ``AnthropicChatClient`` adds its cache counts in). The cache fields say how many of them
    the cache served and how many it stored; ``0`` when the provider reported none.
    """

    input_tokens: int = attrs.field(default=0, validator=_token_count)
    """Tokens of the prompt, cached ones included."""
    output_tokens: int = attrs.field(default=0, validator=_token_count)
    """Tokens the model generated (its reasoning included)."""
    cache_read_input_tokens: int = attrs.field(default=0, kw_only=True, validator=_token_count)
    """Of ``input_tokens``, those read from the provider's prompt cache."""
    cache_creation_input_tokens: int = attrs.field(default=0, kw_only=True, validator=_token_count)
    """Of ``input_tokens``, those written to the provider's prompt cache."""

    def __repr__(self) -> str:
        # The cache counts only when there are any: most providers report none.
        cache = "".join(
            f", {name}={getattr(self, name)!r}"
            for name in ("cache_read_input_tokens", "cache_creation_input_tokens")
            if getattr(self, name)
        )
        counts = f"input_tokens={self.input_tokens!r}, output_tokens={self.output_tokens!r}"
        return f"Usage({counts}{cache})"

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
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=(
                self.cache_creation_input_tokens + other.cache_creation_input_tokens
            ),
        )


def is_conversation(messages: object) -> TypeGuard[Sequence[Any]]:
    """Whether ``messages`` can be a conversation: a sequence, but no ``str``, ``bytes`` or
    single message. A list or tuple is one at once (``isinstance(a_tuple, Sequence)`` is not
    cached: 0.3 µs a call, and a conversation is checked every round)."""
    if isinstance(messages, list | tuple):
        return True
    return isinstance(messages, Sequence) and not isinstance(messages, str | bytes | ChatMessage)


def first_not_a_message(messages: Sequence[object]) -> tuple[int, object] | None:
    """The first item of ``messages`` that is not a :class:`ChatMessage`, with its index;
    ``None`` if every one is (checked at C speed)."""
    if all(map(isinstance, messages, itertools.repeat(ChatMessage))):
        return None
    return next((i, m) for i, m in enumerate(messages) if not isinstance(m, ChatMessage))
