"""The public API as users annotate it; checked by mypy (``nox -s typecheck``), never run.

Each ``# type: ignore[code]`` marks a line that must be a type error: mypy's strict mode warns
about an ignore that is not needed, so the check fails if such a line starts to type-check.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from trio_invoke import (
    AgentResponseUpdate,
    AnthropicChatClient,
    ChatClient,
    ChatMessage,
    FinishReason,
    FunctionInvokingChatClient,
    InvocationStream,
    RunOptions,
    ScriptedChatClient,
    ScriptedResponse,
    TextDelta,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    Usage,
)
from trio_invoke.testing import ChatFunction, FunctionChatClient, FunctionResponse

request = ToolApprovalRequest(ToolCall("c1", "transfer", "{}"))

# Answers are ToolApprovalResponse values; a request is not an answer.
answers: list[ToolApprovalResponse] = [request.approve(), request.reject("no")]
RunOptions(tool_approval_responses=answers)
RunOptions(tool_approval_responses=(a for a in answers))
RunOptions(tool_approval_responses=[request])  # type: ignore[list-item]


def model(messages: tuple[ChatMessage, ...], options: RunOptions) -> FunctionResponse:
    return "hello" if messages else [TextDelta("hi")]


function: ChatFunction = model
script: list[ScriptedResponse] = ["hello", [TextDelta("hi")]]
agent = FunctionInvokingChatClient(FunctionChatClient(function))
scripted = FunctionInvokingChatClient(ScriptedChatClient(script))

# run() is an async context manager whose value is the stream.
running: AbstractAsyncContextManager[InvocationStream] = agent.run([ChatMessage.user("hi")])


async def stream_text() -> str:
    text = ""
    async with agent.run([ChatMessage.user("hi")]) as stream:
        update: AgentResponseUpdate
        async for update in stream:
            if isinstance(update, TextDelta):
                text += update.text
    return text


async def not_an_iterator() -> None:
    async for _ in agent.run([]):  # type: ignore[attr-defined]
        pass


reason: str = f"{FinishReason.STOP}"

# The Anthropic client is a chat client; the loop wraps it. Usage's cache counts are keywords.
claude: ChatClient = AnthropicChatClient("claude-haiku-4-5", thinking={"type": "adaptive"})
FunctionInvokingChatClient(claude)
cached = Usage(10, 2, cache_read_input_tokens=8) + Usage(1, 1)
Usage(10, 2, 8)  # type: ignore[call-arg]
AnthropicChatClient("claude-haiku-4-5", max_tokens="many")  # type: ignore[arg-type]
