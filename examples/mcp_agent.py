"""An agent whose tools come from an MCP server: the notebook in ``mcp_notes_server.py``.

Runs offline: the model is a :class:`FunctionChatClient`, a small function that decides each
reply from the conversation (no network, no API key)::

    python examples/mcp_agent.py          # asks before deleting; answer y or n
    python examples/mcp_agent.py --yes    # approves without asking
    python examples/mcp_agent.py --base-url http://localhost:11434/v1 --model llama3.2

What it shows: ``MCPServer.stdio`` starting the server as a subprocess, its tool names
(``notes.add``) made valid for models and prefixed (``nb_notes_add``), parallel calls to one
server, a server-side error the model reads and recovers from, and a tool that needs the
user's approval before it runs, with the run resumed after the answer. Leaving the ``async
with`` ends the server's process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from trio_invoke import (
    ChatClient,
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ToolApprovalRequest,
    ToolCall,
    ToolCalled,
)
from trio_invoke.mcp import MCPServer
from trio_invoke.testing import FunctionChatClient, tool_calls_response

SERVER = Path(__file__).with_name("mcp_notes_server.py")


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


def model(messages: tuple[ChatMessage, ...], options: RunOptions) -> Any:
    """The offline model: what a capable model would do with this request, step by step."""
    results = {m.tool_call_id: m.content for m in messages if m.role is MessageRole.TOOL}
    answered = set(results)
    if not answered:  # two notes at once
        return tool_calls_response(
            call("c1", "nb_notes_add", title="trio", text="Structured concurrency for Python."),
            call("c2", "nb_notes_add", title="mcp", text="Tools that live in other processes."),
        )
    if "c3" not in answered:  # a title that is not there: the server says which ones are
        return tool_calls_response(call("c3", "nb_notes_read", title="Trio"))
    if "c4" not in answered:
        return tool_calls_response(call("c4", "nb_notes_read", title="trio"))
    if "c5" not in answered:  # needs approval
        return tool_calls_response(call("c5", "nb_notes_delete", title="mcp"))
    return f"Done. The note 'trio' says: {results['c4']} Deleting 'mcp': {results['c5']}"


async def ask(question: str) -> bool:
    """A yes from the terminal; no answer (end of input) is a no."""
    try:
        answer = await trio.to_thread.run_sync(input, question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


async def main(argv: Sequence[str] | None = None) -> list[ChatMessage]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--yes", action="store_true", help="approve the deletion without asking")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: offline)")
    parser.add_argument("--model", default="llama3.2", help="the model name, with --base-url")
    parser.add_argument("--api-key", default=None, help="the API key, with --base-url")
    args = parser.parse_args(argv)
    notes = MCPServer.stdio(
        sys.executable, [str(SERVER)], prefix="nb", require_approval=["notes.delete"]
    )
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(notes)
        print("tools:", ", ".join(f"{t.name} ({t.remote_name})" for t in notes.tools))
        chat: ChatClient = FunctionChatClient(model)
        if args.base_url:
            from trio_invoke import OpenAIChatClient

            live = OpenAIChatClient(args.model, base_url=args.base_url, api_key=args.api_key)
            chat = await stack.enter_async_context(live)
        agent = FunctionInvokingChatClient(chat, notes.tools)
        messages = [ChatMessage.user("Note down trio and mcp, read back trio, then drop mcp.")]
        options = RunOptions()
        while True:
            requests: list[ToolApprovalRequest] = []
            finish = None
            async with agent.run(messages, options) as stream:
                async for update in stream:
                    if isinstance(update, ToolCalled):
                        mark = "error" if update.is_error else "ok"
                        print(f"  {update.call.name} {update.call.arguments}")
                        print(f"    -> [{mark}] {update.result}")
                    elif isinstance(update, ToolApprovalRequest):
                        requests.append(update)
                    elif isinstance(update, Finish):
                        finish = update.finish_reason
            messages += stream.messages
            if finish is not FinishReason.AWAITING_APPROVAL:
                break
            answers = []
            for request in requests:
                question = f"Allow {request.call.name}({request.call.arguments})? [y/N] "
                yes = args.yes or await ask(question)
                answers.append(request.approve() if yes else request.reject("the user said no"))
            options = RunOptions(tool_approval_responses=answers)
    print("assistant:", messages[-1].content)
    return messages


if __name__ == "__main__":
    trio.run(main)
