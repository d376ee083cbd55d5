"""One call, whatever its tool does wrong, gets one result (``_loop/_invoke.py``).

A ``StopLoop`` whose result is not JSON-serialisable still stops the loop, and an exception
whose ``__str__`` raises under ``include_detailed_errors=True`` still gives its call a result.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    StopLoop,
    ToolCall,
    ToolCalled,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

USER = [ChatMessage.user("go")]


def circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


NOT_JSON = {
    "object": object(),
    "set": {1, 2},
    "bytes": b"raw",
    "circular list": circular(),
    "tuple keys": {(1, 2): "x"},
}


@tool
async def fine() -> str:
    """A sibling that works."""
    return "fine"


@pytest.mark.parametrize("name", sorted(NOT_JSON))
async def test_stop_loop_with_a_result_that_is_not_json_still_stops(name: str) -> None:
    value = NOT_JSON[name]

    @tool
    async def stop() -> None:
        """Stop the loop with a result that cannot be sent."""
        raise StopLoop(value)

    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("c1", "stop", "{}"), ToolCall("c2", "fine", "{}")),
            "the model must not be called again",
        ]
    )
    client = FunctionInvokingChatClient(model, [stop, fine])
    with trio.fail_after(10):
        result = await run_to_completion(client, USER)
    assert len(model.calls) == 1  # the stop stands
    assert result.updates[-1] == Finish(FinishReason.STOP)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert set(called) == {"c1", "c2"}
    assert "JSON" in called["c1"].result  # the result says what went wrong
    assert (called["c2"].result, called["c2"].is_error) == ("fine", False)
    assert_transcript_valid([*USER, *result.messages])


class StrRaisesError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class StrReturnsNonTextError(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]  # noqa: PLE0307 -- the point of the test


class StrAndReprRaiseError(Exception):
    def __str__(self) -> str:
        raise ValueError("no str")

    def __repr__(self) -> str:
        raise ValueError("no repr")


class StrRaisesItselfError(Exception):
    def __str__(self) -> str:
        raise StrRaisesItselfError


@pytest.mark.parametrize(
    "error",
    [StrRaisesError, StrReturnsNonTextError, StrAndReprRaiseError, StrRaisesItselfError],
    ids=lambda e: e.__name__,
)
async def test_an_exception_whose_str_raises_still_yields_a_result(error: type[Exception]) -> None:
    @tool
    async def broken() -> None:
        """Raise an exception that cannot be shown."""
        raise error

    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("c1", "broken", "{}"), ToolCall("c2", "fine", "{}")), "ok"]
    )
    client = FunctionInvokingChatClient(model, [broken, fine], include_detailed_errors=True)
    with trio.fail_after(10):
        result = await run_to_completion(client, USER)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert called["c1"].is_error
    assert called["c1"].result.startswith(f"Error: tool 'broken' raised {error.__name__}")
    assert isinstance(called["c1"].exception, error)
    assert (called["c2"].result, called["c2"].is_error) == ("fine", False)
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert len(model.calls) == 2  # the run went on
    assert_transcript_valid([*USER, *result.messages])
