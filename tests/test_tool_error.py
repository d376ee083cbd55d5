"""ToolError: a tool's own words for the model, whatever ``include_detailed_errors`` says."""

from __future__ import annotations

import pytest

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    ToolCall,
    ToolCalled,
    ToolError,
    TrioInvokeError,
    tool,
)
from trio_invoke.testing import run_to_completion, tool_calls_response


class SilentError(ToolError):
    def __str__(self) -> str:
        return ""


class BrokenError(ToolError):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    if key == "tool-error":
        raise ToolError("no entry 'tool-error'; known keys: a, b")
    if key == "silent":
        raise SilentError
    if key == "broken":
        raise BrokenError
    if key == "plain":
        raise KeyError("secret detail")
    return key


async def run(key: str, *, detailed: bool = False) -> ToolCalled:
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("c", "lookup", f'{{"key": "{key}"}}')), "ok"]
    )
    client = FunctionInvokingChatClient(model, [lookup], include_detailed_errors=detailed)
    result = await run_to_completion(client, [ChatMessage.user("go")])
    assert result.updates[-1] == Finish(FinishReason.STOP)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    return called


@pytest.mark.parametrize("detailed", [False, True])
async def test_the_model_reads_a_tool_errors_message(detailed: bool) -> None:
    called = await run("tool-error", detailed=detailed)
    assert called.is_error
    assert called.result == "Error: no entry 'tool-error'; known keys: a, b"
    assert isinstance(called.exception, ToolError)


async def test_other_exceptions_still_hide_their_message() -> None:
    called = await run("plain")
    assert called.is_error
    assert "secret detail" not in called.result
    assert "KeyError" in called.result


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("silent", "SilentError"),
        ("broken", "<the exception's message could not be read: RuntimeError>"),
    ],
)
async def test_a_tool_error_without_usable_text_still_gets_a_result(
    key: str, expected: str
) -> None:
    called = await run(key)
    assert called.is_error
    assert called.result == f"Error: {expected}"


def test_tool_error_is_in_the_tree() -> None:
    assert issubclass(ToolError, TrioInvokeError)
