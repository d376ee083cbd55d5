"""Per-run options, and the answers to approval requests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from ._checks import check_count, check_seconds
from ._content import reduce_value
from ._exceptions import ConfigurationError
from ._tools import Tool, ToolDefinition

if TYPE_CHECKING:
    from ._middleware import ToolMiddleware

__all__ = ["RunOptions", "ToolApprovalResponse"]


def _of_type(*kinds: type, expected: str) -> Any:
    """An attrs validator: the value is an instance of ``kinds`` (``None`` if listed)."""

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, kinds):
            raise TypeError(
                f"{type(instance).__name__} {attribute.name} must be {expected}, "
                f"got {value!r} ({type(value).__name__})"
            )

    return check


_NONE = type(None)


@attrs.frozen
class ToolApprovalResponse:
    """A human's answer to a :class:`ToolApprovalRequest`, passed in on resume.

    Raises:
        TypeError: a field has the wrong type (``approved="no"`` would otherwise approve); the
            message names the field and the value.
    """

    call_id: str = attrs.field(validator=_of_type(str, expected="a str"))
    """The id of the call this answers (``request.call.id``)."""
    approved: bool = attrs.field(validator=_of_type(bool, expected="True or False"))
    """``True`` runs the call; ``False`` answers it with a "rejected" error result."""
    reason: str | None = attrs.field(
        default=None, validator=_of_type(str, _NONE, expected="a str or None")
    )
    """Why it was rejected; shown to the model in the rejection result."""
    digest: str | None = attrs.field(
        default=None, kw_only=True, validator=_of_type(str, _NONE, expected="a str or None")
    )
    """The request's digest of the call (``request.approve()`` and ``request.reject()`` fill it
    in). On resume a digest that does not match the call in the conversation is an
    :class:`ApprovalError`; ``None`` skips the check."""
    arguments: str | Mapping[str, Any] | None = attrs.field(
        default=None,
        kw_only=True,
        validator=_of_type(str, Mapping, _NONE, expected="JSON text, a mapping or None"),
    )
    """Replacement arguments for an approved call (JSON text or a mapping), validated like the
    model's; the tool message records them. ``None`` keeps the model's arguments. A mapping
    that is not JSON (NaN or an infinity included) is an ``ApprovalError`` on resume."""


def _sequence(value: object, field: str, of: str) -> Iterable[object]:
    """``value`` as the iterable of ``of`` that the field ``field`` holds, else a ``TypeError``
    naming the field (a str, a mapping or a single object is no such iterable)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            f"RunOptions {field} must be an iterable of {of} (a list or tuple), got {value!r:.80}"
        )
    return value


def _responses(value: Iterable[ToolApprovalResponse]) -> tuple[ToolApprovalResponse, ...]:
    responses: list[ToolApprovalResponse] = []
    items = _sequence(value, "tool_approval_responses", "ToolApprovalResponse")
    for item in items:
        if not isinstance(item, ToolApprovalResponse):
            hint = (
                ": answer a ToolApprovalRequest with request.approve() or request.reject()"
                if type(item).__name__ == "ToolApprovalRequest"
                else ""
            )
            raise TypeError(
                "tool_approval_responses must hold ToolApprovalResponse values, got "
                f"{type(item).__name__}{hint}"
            )
        responses.append(item)
    return tuple(responses)


def _tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(_sequence(value, "provider_tools", "tools"))  # type: ignore[arg-type]


def _definitions(value: Iterable[ToolDefinition]) -> tuple[ToolDefinition, ...]:
    definitions = tuple(_sequence(value, "tools", "ToolDefinition"))
    for index, item in enumerate(definitions):
        if not isinstance(item, ToolDefinition):
            raise TypeError(
                f"RunOptions tools[{index}] must be a ToolDefinition, got {item!r:.80} (the "
                "tools to run go to FunctionInvokingChatClient or RunOptions.provider_tools)"
            )
    return definitions  # type: ignore[return-value]


def _middleware(value: Iterable[ToolMiddleware] | None) -> tuple[ToolMiddleware, ...] | None:
    if value is None:
        return None
    if callable(value) or not isinstance(value, Iterable):  # one middleware, not a sequence
        raise TypeError(
            f"RunOptions middleware must be a sequence of middleware, got {value!r:.80}"
        )
    return tuple(value)


def _read_only(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"RunOptions model_options must be a mapping, got {value!r}")
    return MappingProxyType(dict(value))


def _tool_choice(value: str | Mapping[str, Any] | None) -> str | Mapping[str, Any] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(
            f"RunOptions tool_choice must be a str, a mapping or None, got {value!r} "
            f"({type(value).__name__})"
        )
    return MappingProxyType(dict(value))


def _unique_names(
    instance: RunOptions, attribute: attrs.Attribute[Any], value: tuple[Any, ...]
) -> None:
    seen: set[str] = set()
    for tool in value:
        name = getattr(tool, "name", None)
        if not isinstance(name, str):
            continue  # not a tool at all: the loop that runs it says so
        if name in seen:
            raise ConfigurationError(
                f"RunOptions provider_tools has two tools named {name!r}; names must be unique"
            )
        seen.add(name)


def _seconds(instance: RunOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    check_seconds(f"RunOptions {attribute.name}", value)


def _count(instance: RunOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    check_count(f"RunOptions {attribute.name}", value)


def _approval_mode(instance: RunOptions, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and value not in ("batch", "per_call"):
        raise ConfigurationError(
            f"RunOptions approval must be 'batch', 'per_call' or None, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class RunOptions:
    """Options for one run of a chat client. Immutable: derive copies with :meth:`evolve`.

    Example::

        options = RunOptions(cancel_scope=trio.CancelScope())
        resume = RunOptions(tool_approval_responses=[request.approve()])

    Values are checked as they are given (also by :meth:`evolve`).

    Raises:
        ConfigurationError: a bad ``tool_timeout``, ``max_tool_calls`` or ``approval``, or two
            ``provider_tools`` with one name; the message names the value.
        TypeError: a field of the wrong type (an answer that is not a
            :class:`ToolApprovalResponse`, a ``cancel_scope`` that is not a
            :class:`trio.CancelScope`...); the message names the field and the value.
    """

    tool_approval_responses: tuple[ToolApprovalResponse, ...] = attrs.field(
        default=(), converter=_responses
    )
    """Answers to the approval requests of an earlier run, whose messages this run continues."""
    provider_tools: tuple[Tool, ...] = attrs.field(
        default=(), converter=_tools, validator=_unique_names
    )
    """Tools for this run only. They add to the client's tools; one with the name of an existing
    tool replaces it only if it requires approval (the safer version wins). Two with one name
    are a :class:`ConfigurationError`."""
    cancel_scope: trio.CancelScope | None = attrs.field(
        default=None, validator=_of_type(trio.CancelScope, _NONE, expected="a trio.CancelScope")
    )
    """Cancel the run from anywhere with ``cancel_scope.cancel()`` (or a deadline): the model
    stream and the tools stop promptly, the stream ends with ``Error("cancelled")`` and the
    transcript stays valid. A scope can be entered once, so use a fresh scope per run."""
    tools: tuple[ToolDefinition, ...] = attrs.field(default=(), converter=_definitions)
    """The tools the model may call. :class:`FunctionInvokingChatClient` fills this in for its
    inner client every round; a chat client sends them to the model."""
    tool_choice: str | Mapping[str, Any] | None = attrs.field(
        default=None, converter=_tool_choice, hash=False
    )
    """Whether and which tools the model must call: ``"auto"``, ``"none"``, ``"required"``, or
    ``{"type": "function", "function": {"name": "..."}}`` for one tool. ``None`` (the default)
    leaves it to the provider. Sent as the request's ``tool_choice``. Under
    :class:`FunctionInvokingChatClient` a choice that forces a call (``"required"`` or one named
    tool) applies to the first round only, so that the model can answer afterwards."""
    parallel_tool_calls: bool | None = attrs.field(
        default=None, validator=_of_type(bool, _NONE, expected="True, False or None")
    )
    """Whether the model may call several tools in one response. ``None`` (the default) leaves it
    to the provider. Sent as the request's ``parallel_tool_calls``."""
    model_options: Mapping[str, Any] = attrs.field(factory=dict, converter=_read_only, hash=False)
    """Further fields for the model request, passed through as they are, for example
    ``{"temperature": 0.2, "max_tokens": 512, "seed": 7}``. Read-only once set. The loop hands them
    to its inner client every round; :class:`OpenAIChatClient` merges them into the request body
    (over its own ``model_options``)."""

    tool_timeout: float | None = attrs.field(default=None, validator=_seconds)
    """Seconds each tool call of this run may run, overriding the client's ``tool_timeout`` (a
    tool's own ``timeout`` still wins): a number above 0 (``math.inf``: no limit). ``None``: the
    client's setting. NaN, 0, a negative number or a non-number is a
    :class:`ConfigurationError`."""
    max_tool_calls: int | None = attrs.field(default=None, validator=_count)
    """The most tool calls this run executes, overriding the client's ``max_tool_calls``: an
    integer of at least 0. ``None``: the client's setting. Anything else is a
    :class:`ConfigurationError`."""

    approval: Literal["batch", "per_call"] | None = attrs.field(
        default=None, validator=_approval_mode
    )
    """How a batch that needs approval pauses in this run, overriding the client's ``approval``
    (``"batch"``: nothing of it runs; ``"per_call"``: the calls that need no approval run first).
    ``None``: the client's setting. Anything else is a :class:`ConfigurationError`."""
    middleware: tuple[ToolMiddleware, ...] | None = attrs.field(default=None, converter=_middleware)
    """The middleware of this run's calls, replacing the client's; ``()`` for none. ``None``:
    the client's."""

    def evolve(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` applied (``attrs.evolve``)."""
        return attrs.evolve(self, **changes)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        # ``model_options`` is read-only (a ``MappingProxyType``, which neither pickles nor
        # deep-copies): rebuilt through the constructor, as the messages are.
        return reduce_value(self)
