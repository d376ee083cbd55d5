"""The floor: the least a hand-written Trio loop does for the same work, without the library.

One task streams the model through one ``open_memory_channel(256)`` to the caller, who consumes it
with ``async for``; it accumulates the calls by id, and when the response ends with calls it
``json.loads`` each call's arguments and runs one task per call in a nursery; each task sends its
result into the same channel; then the loop appends the assistant message and the tool messages
and calls the model again. It is honest, not handicapped: one channel hop per update (as the
library's: its caller reads each round's events channel directly), no validation, no error
handling, no cancellation bookkeeping.

It speaks the same value types as the library (``ChatMessage``, ``ToolCall``, ``ToolCalled``,
``Finish``): the scripted model reads and writes them, and the caller gets the same updates, so
both sides hand the same objects to the model and to the caller. Everything else is written here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_invoke import (
    AgentResponseUpdate,
    ChatClient,
    ChatMessage,
    Finish,
    FinishReason,
    MessageRole,
    RunOptions,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallArgs,
    ToolCalled,
    ToolCallStart,
)

__all__ = ["floor_run"]

CHANNEL_SIZE = 256


@asynccontextmanager
async def floor_run(
    model: ChatClient, messages: Sequence[ChatMessage], tools: Mapping[str, Tool]
) -> AsyncIterator[trio.MemoryReceiveChannel[AgentResponseUpdate]]:
    """Run the hand-written loop; the value is the channel of updates to ``async for`` over."""
    send, receive = trio.open_memory_channel[AgentResponseUpdate](CHANNEL_SIZE)
    async with trio.open_nursery() as nursery, receive:
        nursery.start_soon(_drive, model, list(messages), tools, send)
        yield receive
        nursery.cancel_scope.cancel()


async def _drive(
    model: ChatClient,
    messages: list[ChatMessage],
    tools: Mapping[str, Tool],
    send: trio.MemorySendChannel[AgentResponseUpdate],
) -> None:
    options = RunOptions()  # built once per run, as the library builds its inner options
    async with send:
        while True:
            calls: dict[str, tuple[str, list[str]]] = {}  # id -> (name, argument pieces)
            text: list[str] = []
            async with model.run(messages, options) as updates:
                async for update in updates:
                    if isinstance(update, ToolCallArgs):
                        calls[update.id][1].append(update.args_delta)
                    elif isinstance(update, ToolCallStart):
                        calls[update.id] = (update.name, [])
                    elif isinstance(update, TextDelta):
                        text.append(update.text)
                    elif isinstance(update, Finish):
                        continue
                    await send.send(update)
            if not calls:
                messages.append(ChatMessage(MessageRole.ASSISTANT, "".join(text)))
                await send.send(Finish(FinishReason.STOP))
                return
            tool_calls = tuple(
                ToolCall(call_id, name, "".join(pieces))
                for call_id, (name, pieces) in calls.items()
            )
            results: dict[str, str] = {}
            async with trio.open_nursery() as nursery:
                for call in tool_calls:
                    nursery.start_soon(_call, tools[call.name], call, results, send)
            messages.append(ChatMessage(MessageRole.ASSISTANT, "".join(text), tool_calls))
            messages.extend(ChatMessage.tool_result(call, results[call.id]) for call in tool_calls)


async def _call(
    tool: Tool,
    call: ToolCall,
    results: dict[str, str],
    send: trio.MemorySendChannel[AgentResponseUpdate],
) -> None:
    arguments: dict[str, Any] = json.loads(call.arguments)
    result = await tool.execute(arguments)
    results[call.id] = result
    await send.send(ToolCalled(call, result, False))
