"""The updates a chat client streams, and that the loop streams to its caller.

Match on them::

    match update:
        case ReasoningDelta(text):
            print(f"\x1b[2m{text}\x1b[0m", end="")  # dimmed
        case TextDelta(text):
            print(text, end="")
        case ToolCalled(call, result, is_error):
            ...
        case Finish(reason, usage):
            ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import attrs

from ._approval import call_digest
from ._content import EMPTY, ContentPart, json_object, preview, reduce_value, to_parts
from ._messages import REASONING_FIELDS, FinishReason, ToolCall, Usage, check_call_keys
from ._options import ToolApprovalResponse

__all__ = [
    "MODEL_UPDATES",
    "AgentResponseUpdate",
    "Error",
    "Finish",
    "ProviderDataDelta",
    "ReasoningDelta",
    "TextDelta",
    "ToolApprovalRequest",
    "ToolCallArgs",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolCalled",
]


@attrs.frozen
class TextDelta:
    """A piece of the model's answer text."""

    text: str
    """The piece, as it arrived."""


def _reasoning_field(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and value not in REASONING_FIELDS:
        raise ValueError(
            f"ReasoningDelta field must be None or one of {', '.join(REASONING_FIELDS)}, "
            f"got {value!r}"
        )


@attrs.frozen
class ReasoningDelta:
    """A piece of the model's reasoning (its "thinking"), streamed before or between its text.

    The round's assistant message keeps the pieces joined as ``ChatMessage.reasoning``.
    """

    text: str
    """The piece, as it arrived."""
    field: str | None = attrs.field(default=None, kw_only=True, validator=_reasoning_field)
    """The wire field it came in (``"reasoning_content"`` or ``"reasoning"``), so that it goes
    back in the same one; ``None`` when the provider has no such field."""


def _update_values(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return json_object(value, "ProviderDataDelta.update")


def _extend_values(value: Mapping[str, str] | None) -> Mapping[str, str]:
    data = json_object(value, "ProviderDataDelta.extend")
    for key, text in data.items():
        if not isinstance(text, str):
            raise ValueError(f"ProviderDataDelta.extend[{key!r}] must be a str, got {text!r}")
    return data


@attrs.frozen
class ProviderDataDelta:
    """A piece of provider-opaque data for the response's assistant message: something the
    provider needs back unchanged in later requests (OpenRouter's ``reasoning_details``,
    Anthropic's signed thinking blocks), which the caller need not read.

    The accumulator collects, per ``field``, a list of JSON objects, one per ``key`` in the order
    the keys first came: each piece sets the item's ``update`` values (``None`` and ``""`` never
    replace a value) and appends each ``extend`` text to the item's string of that name. The
    list ends up in ``ChatMessage.provider_data[field]``.
    """

    field: str
    """The name under which the list goes back (``"reasoning_details"``)."""
    key: str
    """Which item of the list the piece belongs to; a new key starts a new item."""
    update: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_update_values, hash=False
    )
    """Values the item takes (JSON)."""
    extend: Mapping[str, str] = attrs.field(
        default=EMPTY, kw_only=True, converter=_extend_values, hash=False
    )
    """Text appended to the item's strings of these names (streamed text, a signature)."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)


def _call_values(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None or value is EMPTY:  # nearly every call: nothing to check
        return EMPTY
    data = json_object(value, "ToolCallStart.provider_data")
    check_call_keys(data, "ToolCallStart.provider_data")
    return data


def _late_call_values(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None or value is EMPTY:
        return EMPTY
    data = json_object(value, "ToolCallEnd.provider_data")
    check_call_keys(data, "ToolCallEnd.provider_data")
    return data


@attrs.frozen(repr=False)
class ToolCallStart:
    """The model starts a tool call. Call order is the order of these within a response."""

    id: str
    """The call's id, unique within the response."""
    name: str
    """The tool it calls."""
    provider_data: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_call_values, hash=False
    )
    """Keys of the call beyond its id, type and function, which must go back with it
    unchanged (Gemini's ``extra_content`` with its thought signature): the finished
    ``ToolCall.provider_data``. Empty for nearly every call."""

    def __repr__(self) -> str:
        extra = f", provider_data={dict(self.provider_data)!r}" if self.provider_data else ""
        return f"ToolCallStart(id={self.id!r}, name={self.name!r}{extra})"

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)


@attrs.frozen
class ToolCallArgs:
    """A piece of a started call's JSON arguments."""

    id: str
    """The id of the call the piece belongs to."""
    args_delta: str
    """The piece of JSON text; the call's arguments are its pieces joined."""


@attrs.frozen(repr=False)
class ToolCallEnd:
    """A started call's arguments are complete."""

    id: str
    """The id of the call that ended."""
    provider_data: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_late_call_values, hash=False
    )
    """Keys of the call (as in :attr:`ToolCallStart.provider_data`) that arrived after its
    start, when the provider sends some in a later piece of the call: the finished
    ``ToolCall.provider_data`` is the start's with these set over it (objects merged key by
    key). Empty for nearly every call."""

    def __repr__(self) -> str:
        extra = f", provider_data={dict(self.provider_data)!r}" if self.provider_data else ""
        return f"ToolCallEnd(id={self.id!r}{extra})"

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _check_request_call(call: object) -> None:
    if not isinstance(call, ToolCall):
        raise TypeError(f"ToolApprovalRequest call must be a ToolCall, got {preview(call)}")


@attrs.frozen
class ToolApprovalRequest:
    """A call that needs a human's approval before it runs; one per such call.

    The loop stops with ``Finish(AWAITING_APPROVAL)`` after sending these; resume it with the
    answers, built by :meth:`approve` or :meth:`reject`, in ``RunOptions.tool_approval_responses``.

    To answer later, possibly in another process, store the requests with :meth:`to_dict` beside
    the conversation (:meth:`ChatMessage.to_dict`) and rebuild them with :meth:`from_dict`,
    which keeps the stored digest: an answer built from the rebuilt request still refuses to
    run a call that was edited in the stored conversation.

    >>> request = ToolApprovalRequest(ToolCall("call_1", "transfer", '{"amount": 10}'))
    >>> stored = request.to_dict()
    >>> stored["call"]["function"]
    {'name': 'transfer', 'arguments': '{"amount": 10}'}
    >>> ToolApprovalRequest.from_dict(stored) == request
    True
    """

    call: ToolCall = attrs.field(validator=lambda _, __, value: _check_request_call(value))
    """The call that waits; it has not run."""
    digest: str = attrs.field(kw_only=True)
    """A digest of the call's id, tool name and arguments. Answers built here carry it, and on
    resume it must match the call found in the conversation, so a call edited after it was
    shown cannot run on the strength of an approval given to the original."""

    @digest.default
    def _digest(self) -> str:
        _check_request_call(self.call)  # (defaults are computed before validators run)
        return call_digest(self.call)

    def to_dict(self) -> dict[str, Any]:
        """This request as JSON-ready data: ``{"call": <the call in the OpenAI format>, "digest":
        "<hex>"}``."""
        return {"call": self.call.to_dict(), "digest": self.digest}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolApprovalRequest:
        """Rebuild a request stored with :meth:`to_dict`.

        The digest is taken as stored, never recomputed from the call: it is what ties an answer
        to the call that was shown. (A request rebuilt from the conversation instead would carry
        a digest of whatever the conversation now says, and so would approve an edited call.)

        Raises:
            ValueError: ``data`` is not a mapping with a ``call`` in the OpenAI format and a
                ``digest`` of 64 hexadecimal digits; the message names the field.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored approval request must be a mapping, got {data!r}")
        call = data.get("call")
        if not isinstance(call, Mapping):
            raise ValueError(f"approval request 'call' must be a tool call object, got {call!r}")
        digest = data.get("digest")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise ValueError(
                "approval request 'digest' must be the 64 hexadecimal digits to_dict() stored, "
                f"got {digest!r}"
            )
        return cls(ToolCall.from_dict(call), digest=digest)

    def approve(self, *, arguments: str | Mapping[str, Any] | None = None) -> ToolApprovalResponse:
        """Approve the call, optionally with replacement ``arguments`` (validated like the
        model's; the tool message records them; a mapping that is not JSON, NaN or an infinity
        included, is an ``ApprovalError`` on resume)."""
        return ToolApprovalResponse(self.call.id, True, digest=self.digest, arguments=arguments)

    def reject(self, reason: str | None = None) -> ToolApprovalResponse:
        """Reject the call; the model is told, with ``reason`` if given."""
        return ToolApprovalResponse(self.call.id, False, reason, digest=self.digest)


@attrs.frozen
class ToolCalled:
    """A call got its result: one per tool message, sent as soon as the call finishes.

    Errors, rejections and cancellations are results too, with ``is_error=True``.
    """

    call: ToolCall
    """The call, with the arguments it ran with (replacement arguments from an approval)."""
    result: str
    """The text sent back to the model as the tool message."""
    is_error: bool
    """Whether the result reports a failure (bad arguments, an exception, a time-out, a
    rejection, a cancellation, a call that was not run). Providers that take the flag
    (Anthropic's ``tool_result``) are sent it, whatever :attr:`result` reads: the tool message
    is marked ``provider_data["is_error"]`` where the text says otherwise."""
    duration: float = attrs.field(default=0.0, kw_only=True, eq=False)
    """Seconds (``trio.current_time()``) from the call's start to its result; 0 if it never ran."""
    exception: BaseException | None = attrs.field(default=None, kw_only=True, eq=False)
    """The exception the tool raised (or the argument error), ``None`` when it returned; a
    ``StopLoop`` too (the call ended the loop; its result is not an error)."""
    parts: tuple[ContentPart, ...] = attrs.field(default=(), kw_only=True, converter=to_parts)
    """The result as content parts, when the tool returned an image (or parts): the tool
    message holds these, and :attr:`result` is their text with ``[image]`` for each image.
    Empty for a text result, and when a middleware changed :attr:`result` to other text (the
    tool message is then that text)."""

    @property
    def content(self) -> str | tuple[ContentPart, ...]:
        """What the tool message holds: :attr:`parts` if there are any, else :attr:`result`."""
        return self.parts if self.parts else self.result


@attrs.frozen
class Finish:
    """The response (or the whole run of the loop) ended."""

    finish_reason: FinishReason
    """Why it ended."""
    usage: Usage | None = None
    """Tokens used: for the loop, the sum over all its model calls; ``None`` when none reported."""


@attrs.frozen
class Error:
    """An in-band error, such as ``Error("cancelled")`` at the end of a cancelled run."""

    message: str
    """What went wrong, e.g. ``"cancelled"``."""


AgentResponseUpdate: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | ProviderDataDelta
    | ToolCallStart
    | ToolCallArgs
    | ToolCallEnd
    | ToolApprovalRequest
    | ToolCalled
    | Finish
    | Error
)
"""Any update a chat client or the loop streams."""

MODEL_UPDATES: tuple[type, ...] = (
    TextDelta,
    ReasoningDelta,
    ProviderDataDelta,
    ToolCallStart,
    ToolCallArgs,
    ToolCallEnd,
    Finish,
)
"""The updates a model's response consists of: what an inner chat client may stream. The others
(``ToolApprovalRequest``, ``ToolCalled``, ``Error``) only the loop sends."""
