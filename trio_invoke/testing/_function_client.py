"""A chat client whose responses come from a function of the conversation. No network."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeAlias

import attrs

from .._messages import ChatMessage
from .._once import entered_once
from .._options import RunOptions
from .._scripted import (
    ScriptedCall,
    ScriptedItem,
    _describe,
    _Replay,
    check_delay,
    checked_item,
    recorded_call,
    text_response,
)
from .._updates import AgentResponseUpdate

__all__ = ["ChatFunction", "FunctionChatClient", "FunctionResponse"]

FunctionResponse: TypeAlias = str | Iterable[ScriptedItem]
"""What a :class:`FunctionChatClient`'s function returns: the updates to stream (an exception
among them is raised when it is reached, a string is short for ``TextDelta(s)``; a generator is
consumed as the stream is read), or a plain string, short for
``[TextDelta(s), Finish(FinishReason.STOP)]``."""

ChatFunction: TypeAlias = Callable[
    [tuple[ChatMessage, ...], RunOptions], FunctionResponse | Awaitable[FunctionResponse]
]
"""The function behind a :class:`FunctionChatClient`: ``(messages, options)`` to a response, or
to an awaitable of one (an ``async def`` function)."""


@attrs.define
class FunctionChatClient:
    """A :class:`ChatClient` whose every response comes from ``function(messages, options)``.

    Where :class:`ScriptedChatClient` replays a fixed script, this one decides each response
    from what it is asked, so a test can script conditional behaviour::

        def model(messages, options):
            last = messages[-1]
            if last.role is MessageRole.TOOL:
                return "Found it." if "found" in last.text else "Nothing there."
            return tool_calls_response(ToolCall("c1", "search", '{"q": "keys"}'))

        agent = FunctionInvokingChatClient(FunctionChatClient(model), [search])

    The function receives the conversation as a tuple of :class:`ChatMessage` and the call's
    :class:`RunOptions` (``options.tools`` lists the tools the model was offered). It may be a
    plain or an ``async`` function, and returns a string (short for
    ``[TextDelta(s), Finish(FinishReason.STOP)]``) or an iterable of updates; an exception in
    that iterable is raised when the stream reaches it (a model failing mid-stream). To simulate
    a model that fails before it streams anything, let the function raise: the exception comes
    out of entering ``run()`` (the loop raises it as a :class:`ChatClientError` chained to it).

    Each call is recorded in :attr:`calls` before the function runs, so a call whose function
    raised is recorded too. With no ``delay``, the stream yields to the scheduler every 64
    updates (and a response of fewer has no schedule point), so a deadline around a long, or
    endless, generator fires.
    """

    function: ChatFunction = attrs.field()
    """Called once per model call with ``(messages, options)``."""
    delay: float = attrs.field(default=0.0, kw_only=True, validator=check_delay)
    """Seconds to sleep before each update (``trio.sleep``; use a virtual clock in tests)."""
    calls: list[ScriptedCall] = attrs.field(factory=list, init=False)
    """One record per call so far, in order."""

    @function.validator
    def _callable(self, attribute: attrs.Attribute[ChatFunction], value: object) -> None:
        if not callable(value):
            raise TypeError(
                f"FunctionChatClient needs a function of (messages, options), got "
                f"{_describe(value)}"
            )

    def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentResponseUpdate]]:
        """Call the function and stream what it returned.

        Raises:
            RuntimeError: the value ``run()`` returned is entered a second time (each is one
                model call: call ``run()`` again), or its stream is read after its ``async
                with`` block was left.
            TypeError: on entering, ``messages`` is not a sequence of :class:`ChatMessage` (a
                str, a dict) or ``options`` is not a :class:`RunOptions` (not recorded, and
                the function is not called). Or the function returned something that is
                neither a string nor an iterable of updates (``None``, say: a missing
                ``return``; a dict), or an item of what it returned is not an update, an
                exception or a string. The message names what was returned, or the item's
                index and what it is. Raised on entering for a list or tuple; while
                iterating, when the item is reached, for an iterator or generator.

        Whatever the function raises propagates from entering the context manager.

        Cancellation: an ``async`` function is cancelled where it waits, or the stream stops
        where it was; the call stays recorded in :attr:`calls` either way. A generator the
        function returned is closed on leaving, read to its end or not (its ``finally`` blocks
        run then, as a real client's stream is closed when its response is left).
        """
        return self._run(messages, options)

    @entered_once
    @asynccontextmanager
    async def _run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        """The generator behind :meth:`run`."""
        call = recorded_call("FunctionChatClient", messages, options)
        self.calls.append(call)
        response = self.function(call.messages, call.options)
        if inspect.isawaitable(response):
            response = await response
        replay = _replay_of(response, self.delay)
        try:
            yield replay
        finally:
            replay.close()


def _replay_of(response: object, delay: float) -> _Replay:
    where = "item {} of what the FunctionChatClient's function returned"
    if isinstance(response, str):
        return _Replay(text_response(response), delay)
    if isinstance(response, Mapping | bytes | bytearray) or not isinstance(response, Iterable):
        raise TypeError(
            "a FunctionChatClient's function must return a str or an iterable of updates (or an "
            f"awaitable of one), not {type(response).__name__}: it returned {_describe(response)}"
        )
    if isinstance(response, Sequence):  # all there already: check it all before streaming
        items = [checked_item(item, where.format(i)) for i, item in enumerate(response)]
        return _Replay(items, delay)
    return _Replay(response, delay, lambda item, i: checked_item(item, where.format(i)))
