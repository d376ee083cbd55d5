"""Quick start: an agent with one tool, streamed as it runs.

Offline by default, on a scripted model (no network, no API key); pass --base-url and --model
for any OpenAI-compatible server (needs the extra trio-invoke[openai]), or --provider anthropic
and --model for Anthropic's Messages API (needs trio-invoke[anthropic]; --base-url defaults to
$ANTHROPIC_BASE_URL, else https://api.anthropic.com, the key to $ANTHROPIC_API_KEY):

    python examples/quickstart.py
    python examples/quickstart.py --base-url http://localhost:11434/v1 --model llama3.2
    python examples/quickstart.py --provider anthropic --model claude-haiku-4-5
"""

from __future__ import annotations

import argparse
import contextlib

import trio

from trio_invoke import (
    ChatClient,
    ChatMessage,
    Finish,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    TextDelta,
    ToolCalled,
    tool,
)
from trio_invoke.testing import tool_call_updates


@tool
async def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    await trio.sleep(0.1)  # a weather service would take about this long
    return f"Sunny and 21 °C in {city}"


def scripted_model() -> ScriptedChatClient:
    """The model's two turns: call the tool, then answer from its result."""
    return ScriptedChatClient(
        [
            tool_call_updates("call_1", "get_weather", '{"city": "Paris"}'),
            "It is sunny and 21 °C in Paris.",
        ]
    )


async def main(args: argparse.Namespace) -> None:
    async with contextlib.AsyncExitStack() as stack:
        model: ChatClient = scripted_model()
        if args.provider == "anthropic":
            from trio_invoke import AnthropicChatClient

            claude = AnthropicChatClient(args.model, base_url=args.base_url, api_key=args.api_key)
            model = await stack.enter_async_context(claude)
        elif args.base_url:
            from trio_invoke import OpenAIChatClient

            live = OpenAIChatClient(args.model, base_url=args.base_url, api_key=args.api_key)
            model = await stack.enter_async_context(live)
        agent = FunctionInvokingChatClient(model, [get_weather])

        conversation = [ChatMessage.user("What's the weather in Paris?")]
        async with agent.run(conversation) as stream:
            async for update in stream:
                match update:
                    case TextDelta(text):
                        print(text, end="", flush=True)
                    case ToolCalled(call, result):
                        print(f"[{call.name}({call.arguments}) -> {result}]")
                    case Finish(reason):
                        print(f"\n[finish: {reason}]")
        conversation += stream.messages  # the assistant's call, the tool's result, the answer
        print(f"{len(conversation)} messages in the conversation")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="An agent with one tool.")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--model", default="llama3.2", help="the model at --base-url")
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY")
    parser.add_argument(
        "--provider",
        choices=["openai", "anthropic"],
        default="openai",
        help="anthropic: Anthropic's Messages API (--base-url optional)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse_args())
