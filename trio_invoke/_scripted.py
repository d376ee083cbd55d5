"""The embedded model: a chat client that replays a script. No network, no API key."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Final, TypeAlias, cast

import attrs
import trio
import trio.lowlevel

from ._exceptions import ConfigurationError, ScriptExhaustedError
from ._messages import ChatMessage, FinishReason, first_not_a_message, is_conversation
from ._once import entered_once
from ._options import RunOptions
from ._updates import AgentResponseUpdate, Finish, TextDelta

__all__ = ["ScriptedCall", "ScriptedChatClient", "ScriptedItem", "ScriptedResponse"]

ScriptedItem: TypeAlias = AgentResponseUpdate | BaseException | str
"""One item of a scripted response: an update to stream; an exception to raise when the stream
reaches it; or a string, short for ``TextDelta(s)``."""

ScriptedResponse: TypeAlias = str | Sequence[ScriptedItem]
"""One scripted response: a list of items to stream (updates; exceptions, raised when the stream
reaches them; strings, short for ``TextDelta(s)``), or a plain string, short for
``[TextDelta(s), Finish(FinishReason.STOP)]``."""

_UPDATE_TYPES: tuple[type, ...] = typing.get_args(AgentResponseUpdate)


@attrs.frozen
class ScriptedCall:
    """What a :class:`ScriptedChatClient` (or a :class:`FunctionChatClient`) was given on one
    call."""

    messages: tuple[ChatMessage, ...]
    """The conversation it was asked to answer."""
    options: RunOptions
    """The options of that call (``options.tools`` says which tools the model was offered)."""


def text_response(text: str) -> tuple[AgentResponseUpdate, ...]:
    """A plain text answer: ``(TextDelta(text), Finish(STOP))``."""
    return (TextDelta(text), Finish(FinishReason.STOP))


def _describe(value: object) -> str:
    if value is None:
        return "None"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"a {type(value).__name__} ({text})"


def checked_item(item: object, where: str) -> AgentResponseUpdate | BaseException:
    """``item`` as something a replay can stream or raise; a str becomes a ``TextDelta``.

    Raises:
        TypeError: ``item`` is not an update, an exception or a str; the message says
            ``where`` it is and what it is.
    """
    if isinstance(item, _UPDATE_TYPES):
        return cast("AgentResponseUpdate", item)
    if isinstance(item, str):
        return TextDelta(item)
    if isinstance(item, BaseException):
        return item
    if isinstance(item, type) and issubclass(item, BaseException):
        raise TypeError(
            f"{where} is the exception class {item.__name__}; put an instance there: "
            f"{item.__name__}(...)"
        )
    raise TypeError(
        f"{where} is {_describe(item)}, not an update (TextDelta, ToolCallStart, Finish, ...), "
        "an exception or a str"
    )


def _normalise(response: object, index: int) -> tuple[AgentResponseUpdate | BaseException, ...]:
    if isinstance(response, str):
        return text_response(response)
    if isinstance(response, Mapping | bytes | bytearray) or not isinstance(response, Iterable):
        hint = (
            " (for one response, put its updates in a list of their own: "
            "ScriptedChatClient([[...]]))"
            if isinstance(response, _UPDATE_TYPES)
            else ""
        )
        raise TypeError(
            f"ScriptedChatClient response {index} is {_describe(response)}, not a str or a "
            f"list of updates{hint}"
        )
    where = f"ScriptedChatClient response {index}, item {{}},"
    return tuple(checked_item(item, where.format(i)) for i, item in enumerate(response))


def _normalise_all(
    responses: Iterable[ScriptedResponse],
) -> tuple[tuple[AgentResponseUpdate | BaseException, ...], ...]:
    if isinstance(responses, str | Mapping) or not isinstance(responses, Iterable):
        raise TypeError(
            f"ScriptedChatClient takes a list of responses, not {_describe(responses)}: for "
            "one text answer, ScriptedChatClient(['...'])"
        )
    return tuple(_normalise(r, i) for i, r in enumerate(responses))


def recorded_call(who: str, messages: object, options: object) -> ScriptedCall:
    """The record of a call given ``messages`` and ``options``, checked as a real client would
    (a str is no conversation, a dict no message).

    Raises:
        TypeError: ``messages`` is not a sequence of :class:`ChatMessage`, or ``options`` is
            neither ``None`` nor a :class:`RunOptions`; the message says which.
    """
    if not is_conversation(messages):
        raise TypeError(
            f"{who}.run() takes a sequence of ChatMessages for messages, not {_describe(messages)}"
        )
    snapshot = tuple(messages)
    stranger = first_not_a_message(snapshot)
    if stranger is not None:
        index, message = stranger
        raise TypeError(
            f"{who}.run() takes ChatMessages, but messages[{index}] is "
            f"{_describe(message)} (build it with ChatMessage.user(...) or "
            "ChatMessage.from_dict(...))"
        )
    if options is not None and not isinstance(options, RunOptions):
        raise TypeError(
            f"{who}.run() takes a RunOptions or None for options, not {_describe(options)}"
        )
    return ScriptedCall(snapshot, options or RunOptions())


def check_delay(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    """An attrs validator: ``value`` is a finite number of seconds, at least 0."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or (isinstance(value, float) and not math.isfinite(value)) or value < 0:
        raise ConfigurationError(
            f"{type(instance).__name__} {attribute.name} must be a finite number of seconds "
            f">= 0, got {value!r}"
        )


@attrs.define
class ScriptedChatClient:
    """A :class:`ChatClient` whose every call replays the next scripted response.

    Example::

        model = ScriptedChatClient([
            [ToolCallStart("c1", "add"), ToolCallArgs("c1", '{"a": 1, "b": 2}'),
             ToolCallEnd("c1"), Finish(FinishReason.TOOL_CALLS)],
            "1 + 2 = 3",
        ])

    Each call is recorded in :attr:`calls`. A call past the end of the script raises
    :class:`ScriptExhaustedError`. With no ``delay``, the replay yields to the scheduler every
    64 updates (and a response of fewer has no schedule point), so a deadline around a long
    stream fires.

    Raises:
        TypeError: at construction, for a script that cannot be replayed: ``responses`` is not
            a list of responses, a response is neither a str nor a list, or an item is not an
            update, an exception or a str (``None``, a dict...); the message names the
            response's and the item's index and what it is.
        ConfigurationError: ``delay`` is negative, NaN, infinite or not a number.
    """

    responses: tuple[tuple[AgentResponseUpdate | BaseException, ...], ...] = attrs.field(
        converter=_normalise_all
    )
    """The script: one entry per model call."""
    delay: float = attrs.field(default=0.0, kw_only=True, validator=check_delay)
    """Seconds to sleep before each update (``trio.sleep``; use a virtual clock in tests)."""
    calls: list[ScriptedCall] = attrs.field(factory=list, init=False)
    """One record per call so far, in order."""

    def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentResponseUpdate]]:
        """Replay the next scripted response.

        Raises:
            RuntimeError: the value ``run()`` returned is entered a second time (each is one
                model call: call ``run()`` again), or its stream is read after its ``async
                with`` block was left.
            ScriptExhaustedError: every scripted response has been used.
            TypeError: on entering, ``messages`` is not a sequence of :class:`ChatMessage`
                (a str, a dict) or ``options`` is not a :class:`RunOptions`; not recorded.

        Cancellation: the replay stops where it was; the call stays recorded in :attr:`calls`.
        """
        return self._run(messages, options)

    @entered_once
    @asynccontextmanager
    async def _run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        """The generator behind :meth:`run`."""
        call = recorded_call("ScriptedChatClient", messages, options)
        index = len(self.calls)
        self.calls.append(call)
        if index >= len(self.responses):
            raise ScriptExhaustedError(
                f"ScriptedChatClient has {len(self.responses)} scripted responses and was "
                f"called {index + 1} times"
            )
        replay = _Replay(iter(self.responses[index]), self.delay)
        try:
            yield replay
        finally:
            replay.close()


_END = object()
_CHECKPOINT_EVERY: Final = 64
"""Without a delay, a replay yields to the scheduler once every this many items of a response
(and never before the first 64), so a deadline or a cancellation around a long, or endless,
stream fires, and a short response streams with no schedule point at all."""


class _Replay:
    """An async iterator over one response's items; ``check`` vets each one as it comes."""

    __slots__ = ("_check", "_closed", "_delay", "_index", "_items")

    def __init__(
        self,
        items: Iterable[object],
        delay: float,
        check: Callable[[object, int], AgentResponseUpdate | BaseException] | None = None,
    ) -> None:
        self._items = iter(items)
        self._delay = delay
        self._check = check
        self._index = 0
        self._closed = False

    def __aiter__(self) -> _Replay:
        return self

    def close(self) -> None:
        """The call is over (its ``async with`` was left): close the items' iterator if it is
        a generator (its ``finally`` blocks run now); reading on is an error, as it is from a
        real client's closed response."""
        self._closed = True
        if isinstance(self._items, types.GeneratorType):
            self._items.close()

    async def __anext__(self) -> AgentResponseUpdate:
        if self._closed:
            raise RuntimeError(
                "this model call's stream was read after its `async with` block was left: "
                "read it inside the block"
            )
        item = next(self._items, _END)
        if item is _END:
            raise StopAsyncIteration
        if self._check is not None:
            item = self._check(item, self._index)
        self._index += 1
        if self._delay:
            await trio.sleep(self._delay)
        elif not self._index % _CHECKPOINT_EVERY:
            await trio.lowlevel.checkpoint()
        if isinstance(item, BaseException):
            # The same object may be raised by every replay of a shared script: without the
            # reset its traceback would grow by these frames each time, and keep them alive.
            raise item.with_traceback(None)
        return cast("AgentResponseUpdate", item)
