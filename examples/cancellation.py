"""Cancellation with a deadline: the run stops where it is when the deadline passes, and the
conversation it leaves is still valid to send to a model: every call has its result.

    python examples/cancellation.py                 # a 1 s deadline on a 5 s tool
    python examples/cancellation.py --deadline 0.3

Offline by default, on a scripted model; --base-url and --model for a live server.
"""

from __future__ import annotations

import argparse
import contextlib

import trio

from trio_invoke import (
    ChatClient,
    ChatMessage,
    Error,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    ToolCall,
    ToolCalled,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, tool_calls_response


@tool
async def quick_lookup(topic: str) -> str:
    """Look a topic up in the index (fast).

    Args:
        topic: What to look up.
    """
    await trio.sleep(0.1)
    return f"3 index entries about {topic}"


@tool
async def deep_research(topic: str) -> str:
    """Read everything about a topic (slow).

    Args:
        topic: What to research.
    """
    await trio.sleep(5)
    return f"a long report on {topic}"


def scripted_model() -> ScriptedChatClient:
    both = tool_calls_response(
        ToolCall("call_1", "quick_lookup", '{"topic": "trio"}'),
        ToolCall("call_2", "deep_research", '{"topic": "trio"}'),
    )
    return ScriptedChatClient([both, "From the index: 3 entries about trio; no report in time."])


async def main(args: argparse.Namespace) -> None:
    async with contextlib.AsyncExitStack() as stack:
        model: ChatClient = scripted_model()
        if args.base_url:
            from trio_invoke import OpenAIChatClient

            live = OpenAIChatClient(args.model, base_url=args.base_url, api_key=args.api_key)
            model = await stack.enter_async_context(live)
        agent = FunctionInvokingChatClient(model, [quick_lookup, deep_research])
        conversation = [ChatMessage.user("Tell me about trio: look it up and research it.")]

        # The deadline is the scope's: cancel_scope.cancel() from any task would do the same.
        scope = trio.CancelScope(deadline=trio.current_time() + args.deadline)
        start = trio.current_time()
        async with agent.run(conversation, RunOptions(cancel_scope=scope)) as stream:
            async for update in stream:
                if isinstance(update, ToolCalled):
                    print(f"{update.call.name}: {update.result}")
                elif isinstance(update, Error):
                    print(f"[{update.message} after {trio.current_time() - start:.1f} s]")
        conversation += stream.messages
        assert_transcript_valid(conversation)  # every call has exactly one result
        print(f"{len(stream.messages)} messages kept; the transcript is valid")

        # So the conversation can go on: the model sees which call was cancelled.
        conversation.append(ChatMessage.user("Answer with what you have."))
        response = await agent.get_response(conversation, RunOptions(tool_choice="none"))
        print(f"answer: {response.text}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A run stopped by a deadline.")
    parser.add_argument("--deadline", type=float, default=1.0, help="seconds (default: 1)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--model", default="llama3.2", help="the model at --base-url")
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY")
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse_args())
