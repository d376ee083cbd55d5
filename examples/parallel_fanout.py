"""Parallel fan-out: one batch of tool calls runs at once, so it takes as long as its slowest
call, not the sum of them. The same batch then runs with ``sequential=True`` for comparison.

Offline by default, on a scripted model; pass --base-url and --model for a live server:

    python examples/parallel_fanout.py
    python examples/parallel_fanout.py --base-url http://localhost:11434/v1 --model llama3.2
"""

from __future__ import annotations

import argparse
import contextlib
import json

import trio

from trio_invoke import (
    ChatClient,
    ChatMessage,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    ToolCall,
    ToolCalled,
    tool,
)
from trio_invoke.testing import tool_calls_response

SERVICE_TIME = {"AAPL": 0.35, "MSFT": 0.2, "NVDA": 0.5, "TRIO": 0.25, "ACME": 0.3}
"""Seconds the (simulated) quote service takes for each symbol."""


@tool
async def get_quote(symbol: str) -> dict[str, object]:
    """The latest price of a stock.

    Args:
        symbol: The ticker symbol, e.g. "AAPL".
    """
    await trio.sleep(SERVICE_TIME.get(symbol, 0.3))
    return {"symbol": symbol, "price": round(100 + 7.3 * len(symbol) + ord(symbol[0]) / 10, 2)}


def scripted_model() -> ScriptedChatClient:
    """The model's two turns: one quote call per symbol in one response, then the answer."""
    calls = [
        ToolCall(f"call_{i}", "get_quote", json.dumps({"symbol": symbol}))
        for i, symbol in enumerate(SERVICE_TIME)
    ]
    return ScriptedChatClient([tool_calls_response(*calls), "Here are the five quotes."])


async def run_batch(model: ChatClient, *, sequential: bool) -> None:
    agent = FunctionInvokingChatClient(model, [get_quote], sequential=sequential)
    question = [ChatMessage.user(f"Quote {', '.join(SERVICE_TIME)}, all at once please.")]
    spans: list[tuple[float, float]] = []
    async with agent.run(question) as stream:
        async for update in stream:
            if isinstance(update, ToolCalled):
                end = trio.current_time()
                spans.append((end - update.duration, end))
                took = f"{update.duration * 1000:.0f} ms"
                print(f"  {update.call.arguments:<20} -> {update.result}  ({took})")
    if not spans:
        print("  (the model called no tool)")
        return
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    summed = sum(end - start for start, end in spans)
    print(
        f"  batch of {len(spans)} calls: {wall * 1000:.0f} ms wall, {summed * 1000:.0f} ms "
        f"summed ({summed / wall:.1f}x)"
    )


async def main(args: argparse.Namespace) -> None:
    for sequential in (False, True):
        async with contextlib.AsyncExitStack() as stack:
            model: ChatClient = scripted_model()
            if args.base_url:
                from trio_invoke import OpenAIChatClient

                live = OpenAIChatClient(args.model, base_url=args.base_url, api_key=args.api_key)
                model = await stack.enter_async_context(live)
            print("sequential:" if sequential else "concurrent (the default):")
            await run_batch(model, sequential=sequential)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="One batch of tool calls, run at once.")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--model", default="llama3.2", help="the model at --base-url")
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY")
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse_args())
