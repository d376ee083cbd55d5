"""One call, whatever its tool does wrong, gets one result (``_loop/_invoke.py``).

A ``StopLoop`` whose result is not JSON-serialisable still stops the loop, an exception whose
``__str__`` raises under ``include_detailed_errors=True`` still gives its call a result, and a
tool (or middleware) whose own tasks fail while it is cancelled or timed out gets the result
of a cancelled or timed-out call.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_invoke import (
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
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


# -- a tool's own nursery, letting out Cancelled beside its errors ----------------------------


async def _cleanup_fails() -> None:
    """A nursery whose helper task's cleanup raises when it is cancelled: cancelled, the nursery
    lets out a group holding that error beside the Cancelled."""

    async def helper() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("cleanup failed")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(helper)
        await trio.sleep_forever()


@tool(name="fails_in_cleanup")
async def fails_in_cleanup() -> str:
    """Fails while it is cancelled."""
    await _cleanup_fails()
    return "never"  # pragma: no cover


@tool(name="fails_in_cleanup_1s", timeout=1)
async def fails_in_cleanup_1s() -> str:
    """Fails while it is cancelled, with a time limit of 1 s of its own."""
    await _cleanup_fails()
    return "never"  # pragma: no cover


@tool
async def slow_sibling() -> str:
    """A sibling that needs 2 s."""
    await trio.sleep(2)
    return "sibling done"


@tool
async def quick_sibling() -> str:
    """A sibling that needs half a second."""
    await trio.sleep(0.5)
    return "sibling done"


async def cleanup_middleware(context: Any, call_next: Any) -> ToolCalled:
    """A middleware with a nursery of its own around the call, failing while it is cancelled."""
    if context.call.name != "sleeps":
        return await call_next(context)  # type: ignore[no-any-return]
    await _cleanup_fails()
    raise AssertionError("never")  # pragma: no cover


@tool
async def sleeps() -> str:
    """Sleeps for ever (its middleware is what fails)."""
    await trio.sleep_forever()
    return "never"  # pragma: no cover


TIMED_OUT = [
    pytest.param("fails_in_cleanup_1s", {}, id="the tool's own timeout"),
    pytest.param("fails_in_cleanup", {"tool_timeout": 1}, id="the client's tool_timeout"),
    pytest.param(
        "sleeps", {"tool_timeout": 1, "middleware": [cleanup_middleware]}, id="in a middleware"
    ),
]


@pytest.mark.parametrize(("name", "options"), TIMED_OUT)
@pytest.mark.parametrize("mode", [{}, {"sequential": True}, {"eager_tools": True}])
async def test_a_call_whose_tasks_fail_as_it_times_out_gets_its_time_out_result(
    name: str, options: dict[str, Any], mode: dict[str, Any], autojump_clock: Any
) -> None:
    """The timeout's Cancelled comes back in a group beside the tool's own error: the call
    times out like any other, and its sibling and the run go on."""
    batch = tool_calls_response(ToolCall("c1", name, "{}"), ToolCall("c2", "quick_sibling", "{}"))
    tools = [fails_in_cleanup, fails_in_cleanup_1s, sleeps, quick_sibling]
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch, "done"]), tools, **options, **mode
    )
    with trio.fail_after(30):
        result = await run_to_completion(agent, USER)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert called["c1"].result == f"Error: tool {name!r} timed out after 1 s"
    assert called["c1"].is_error
    assert called["c2"].result == "sibling done"
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert_transcript_valid([*USER, *result.messages])


@pytest.mark.parametrize(
    ("name", "options"),
    [
        pytest.param("fails_in_cleanup", {}, id="a tool"),
        pytest.param("sleeps", {"middleware": [cleanup_middleware]}, id="a middleware"),
    ],
)
async def test_a_run_cancelled_while_a_calls_tasks_fail_ends_cancelled(
    name: str, options: dict[str, Any], autojump_clock: Any
) -> None:
    """Cancelled through its scope, the run ends with ``Error("cancelled")`` and every call is
    answered "cancelled", however the cancelled call's tasks failed on the way out."""
    batch = tool_calls_response(ToolCall("c1", name, "{}"), ToolCall("c2", "slow_sibling", "{}"))
    tools = [fails_in_cleanup, sleeps, slow_sibling]
    agent = FunctionInvokingChatClient(ScriptedChatClient([batch]), tools, **options)
    scope = trio.CancelScope(deadline=trio.current_time() + 1)
    with trio.fail_after(30):
        result = await run_to_completion(agent, USER, RunOptions(cancel_scope=scope))
    called = {u.call.id: u.result for u in result.updates if isinstance(u, ToolCalled)}
    assert called == {"c1": "Error: cancelled", "c2": "Error: cancelled"}
    assert result.updates[-1] == Error("cancelled")
    assert_transcript_valid([*USER, *result.messages])


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
async def test_an_interrupt_in_a_tools_group_beside_a_cancelled_reaches_the_caller(
    interrupt: type[BaseException], autojump_clock: Any
) -> None:
    @tool
    async def interrupted() -> str:
        """Its helper task is interrupted while the tool is being timed out."""

        async def helper() -> None:
            try:
                await trio.sleep_forever()
            finally:
                raise interrupt

        async with trio.open_nursery() as nursery:
            nursery.start_soon(helper)
            await trio.sleep_forever()
        return "never"  # pragma: no cover

    batch = tool_calls_response(ToolCall("c1", "interrupted", "{}"))
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch, "done"]), [interrupted], tool_timeout=1
    )
    with trio.fail_after(30), pytest.raises(interrupt):
        await run_to_completion(agent, USER)


class HostileText(str):
    """A ``str`` subclass whose ``__str__`` raises and whose ``__repr__`` lies."""

    __slots__ = ()

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    def __repr__(self) -> str:
        return "not the text"


@pytest.mark.parametrize("how", ["returned", "stop loop"])
async def test_a_str_subclass_result_is_its_text_as_a_plain_str(how: str) -> None:
    @tool
    async def sly() -> str:
        """Return text of a hostile ``str`` subclass."""
        if how == "stop loop":
            raise StopLoop(HostileText("the text"))
        return HostileText("the text")

    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("c1", "sly", "{}"), ToolCall("c2", "fine", "{}")), "ok"]
    )
    client = FunctionInvokingChatClient(model, [sly, fine])
    with trio.fail_after(10):
        result = await run_to_completion(client, USER)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert (called["c1"].result, called["c1"].is_error) == ("the text", False)
    assert type(called["c1"].result) is str
    assert (called["c2"].result, called["c2"].is_error) == ("fine", False)
    tool_message = next(m for m in result.messages if m.tool_call_id == "c1")
    assert type(tool_message.content) is str
    assert tool_message.to_dict()["content"] == "the text"
    assert_transcript_valid([*USER, *result.messages])
    given = ChatMessage.user(HostileText("from a caller"))  # the same for a message built by hand
    assert (given.content, type(given.content)) == ("from a caller", str)
