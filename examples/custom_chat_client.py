"""A custom ChatClient: anything whose ``run(messages, options)`` returns an async context
manager whose value is an async iterable of updates. Two of them here:

* ``KeywordModel``, a model written from scratch: it streams a tool call (its arguments in
  pieces, as real models do) when the user asks for a time, then answers from the result;
* ``Logged``, a decorator around any chat client that prints what each model call was given
  and how it finished, the way a logging, caching or fallback client would wrap one.

    python examples/custom_chat_client.py
    python examples/custom_chat_client.py --base-url http://localhost:11434/v1 --model llama3.2

Offline by default; with --base-url, ``Logged`` wraps the live model instead.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
from collections.abc import AsyncIterable, AsyncIterator, Sequence

import trio

from trio_invoke import (
    AgentResponseUpdate,
    ChatClient,
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    tool,
)


class KeywordModel:
    """Calls ``current_time`` when the user's last message mentions time; else answers."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay  # seconds between streamed pieces

    @contextlib.asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterable[AgentResponseUpdate]]:
        # Anything that needs setting up (a connection, a nursery) goes here, before the
        # yield, and is torn down after it, when the caller leaves the `async with`.
        yield self._stream(list(messages), options or RunOptions())

    async def _stream(
        self, messages: list[ChatMessage], options: RunOptions
    ) -> AsyncIterator[AgentResponseUpdate]:
        offered = {definition.name for definition in options.tools}  # the loop fills this in
        last = messages[-1]
        if last.role is MessageRole.TOOL:
            for word in f"It is {last.text}.".split(" "):
                await trio.sleep(self.delay)  # a checkpoint: cancellation stops us here
                yield TextDelta(word + " ")
            yield Finish(FinishReason.STOP, Usage(len(messages) * 10, 6))
        elif "time" in last.text.lower() and "current_time" in offered:
            arguments = json.dumps({"timezone": "UTC"})
            yield ToolCallStart("call_1", "current_time")
            for piece in (arguments[:8], arguments[8:]):
                await trio.sleep(self.delay)
                yield ToolCallArgs("call_1", piece)
            yield ToolCallEnd("call_1")
            yield Finish(FinishReason.TOOL_CALLS, Usage(len(messages) * 10, 9))
        else:
            yield TextDelta("Ask me what time it is.")
            yield Finish(FinishReason.STOP, Usage(len(messages) * 10, 6))


class Logged:
    """Wraps any chat client; prints each model call's input size and how it finished."""

    def __init__(self, inner: ChatClient) -> None:
        self.inner = inner
        self.calls = 0

    @contextlib.asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterable[AgentResponseUpdate]]:
        self.calls += 1
        number = self.calls
        tools = len(options.tools) if options else 0
        print(f"  [model call {number}: {len(messages)} messages, {tools} tools offered]")
        async with self.inner.run(messages, options) as updates:
            yield self._watch(number, updates)

    async def _watch(
        self, number: int, updates: AsyncIterable[AgentResponseUpdate]
    ) -> AsyncIterator[AgentResponseUpdate]:
        async for update in updates:
            if isinstance(update, Finish):
                print(f"  [model call {number} finished: {update.finish_reason}, {update.usage}]")
            yield update


@tool
def current_time(timezone: str = "UTC") -> str:
    """The current time.

    Args:
        timezone: Only "UTC" is known.
    """
    return datetime.datetime.now(datetime.UTC).strftime(f"%H:%M {timezone}")


async def main(args: argparse.Namespace) -> None:
    async with contextlib.AsyncExitStack() as stack:
        inner: ChatClient = KeywordModel()
        if args.base_url:
            from trio_invoke import OpenAIChatClient

            live = OpenAIChatClient(args.model, base_url=args.base_url, api_key=args.api_key)
            inner = await stack.enter_async_context(live)
        model = Logged(inner)
        assert isinstance(model, ChatClient)  # a structural protocol: no base class needed
        agent = FunctionInvokingChatClient(model, [current_time])
        response = await agent.get_response([ChatMessage.user("What time is it?")])
        print(f"answer: {response.text.strip()}")
        print(
            f"finish: {response.finish_reason}, {model.calls} model calls, usage {response.usage}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Two custom chat clients.")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--model", default="llama3.2", help="the model at --base-url")
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY")
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse_args())
