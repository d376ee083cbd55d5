"""The embedded model: a chat client that replays a script. No network, no API key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TypeAlias

import attrs
import trio

from ._exceptions import ScriptExhaustedError
from ._messages import ChatMessage, FinishReason
from ._options import RunOptions
from ._updates import AgentResponseUpdate, Finish, TextDelta

__all__ = ["ScriptedCall", "ScriptedChatClient", "ScriptedResponse"]

ScriptedResponse: TypeAlias = str | Sequence[AgentResponseUpdate | BaseException]
"""One scripted response: a list of updates to stream (an exception in the list is raised when
it is reached), or a plain string, short for ``[TextDelta(s), Finish(FinishReason.STOP)]``."""


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


def _normalise(response: ScriptedResponse) -> tuple[AgentResponseUpdate | BaseException, ...]:
    if isinstance(response, str):
        return text_response(response)
    return tuple(response)


def _normalise_all(
    responses: Iterable[ScriptedResponse],
) -> tuple[tuple[AgentResponseUpdate | BaseException, ...], ...]:
    return tuple(_normalise(r) for r in responses)


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
    :class:`ScriptExhaustedError`.
    """

    responses: tuple[tuple[AgentResponseUpdate | BaseException, ...], ...] = attrs.field(
        converter=_normalise_all
    )
    """The script: one entry per model call."""
    delay: float = attrs.field(default=0.0, kw_only=True)
    """Seconds to sleep before each update (``trio.sleep``; use a virtual clock in tests)."""
    calls: list[ScriptedCall] = attrs.field(factory=list, init=False)
    """One record per call so far, in order."""

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        """Replay the next scripted response.

        Raises:
            ScriptExhaustedError: every scripted response has been used.

        Cancellation: the replay stops where it was; the call stays recorded in :attr:`calls`.
        """
        index = len(self.calls)
        self.calls.append(ScriptedCall(tuple(messages), options or RunOptions()))
        if index >= len(self.responses):
            raise ScriptExhaustedError(
                f"ScriptedChatClient has {len(self.responses)} scripted responses and was "
                f"called {index + 1} times"
            )
        yield _Replay(iter(self.responses[index]), self.delay)


class _Replay:
    """An async iterator over one scripted response."""

    __slots__ = ("_delay", "_items")

    def __init__(self, items: Iterable[AgentResponseUpdate | BaseException], delay: float) -> None:
        self._items = iter(items)
        self._delay = delay

    def __aiter__(self) -> _Replay:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        item = next(self._items, None)
        if item is None:
            raise StopAsyncIteration
        if self._delay:
            await trio.sleep(self._delay)
        if isinstance(item, BaseException):
            raise item
        return item
