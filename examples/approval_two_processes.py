"""Approval across two processes: one process runs the agent until a call needs approval and
stores the conversation and the pending requests as JSON; another, later, loads them, asks the
user, resumes and stores what came of it: answering again runs nothing. A stored call that was
edited in between does not run.

    python examples/approval_two_processes.py            # the whole story, in subprocesses
    python examples/approval_two_processes.py ask --state pending.json
    python examples/approval_two_processes.py answer --state pending.json --approve

Offline by default, on a scripted model; --base-url and --model for a live server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from trio_invoke import (
    ApprovalError,
    ChatClient,
    ChatMessage,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    ScriptedResponse,
    ToolApprovalRequest,
    tool,
)
from trio_invoke.testing import tool_call_updates


@tool(requires_approval=True)
async def transfer(amount: int, to: str) -> str:
    """Send money to someone (asks for approval first).

    Args:
        amount: How much, in euros.
        to: Who gets it.
    """
    return f"sent {amount} EUR to {to}"


@contextlib.asynccontextmanager
async def model_for(
    args: argparse.Namespace, scripted: list[ScriptedResponse]
) -> AsyncIterator[ChatClient]:
    """The scripted model (this process's part of the script), or the live one."""
    if not args.base_url:
        yield ScriptedChatClient(scripted)
        return
    from trio_invoke import OpenAIChatClient

    async with OpenAIChatClient(args.model, base_url=args.base_url, api_key=args.api_key) as live:
        yield live


async def ask(args: argparse.Namespace) -> None:
    """Process 1: run until the transfer waits for approval; store everything as JSON."""
    conversation = [ChatMessage.user("Please send 10 EUR to Bob.")]
    call = tool_call_updates("call_1", "transfer", '{"amount": 10, "to": "Bob"}')
    async with model_for(args, [call]) as model:
        agent = FunctionInvokingChatClient(model, [transfer])
        response = await agent.get_response(conversation)
    state = {
        "conversation": [m.to_dict() for m in [*conversation, *response.messages]],
        "requests": [r.to_dict() for r in response.approval_requests],  # digests included
    }
    Path(args.state).write_text(json.dumps(state, indent=2), encoding="utf-8")
    print(f"[ask] finish: {response.finish_reason}; stored {len(state['requests'])} request(s)")
    for request in response.approval_requests:
        print(f"[ask] waiting: {request.call.name}({request.call.arguments})")


async def answer(args: argparse.Namespace) -> int:
    """Process 2: load, answer every request, resume, and store what came of it (so the same
    answer cannot run the calls twice). Returns the exit status."""
    state = json.loads(Path(args.state).read_text(encoding="utf-8"))
    if not state["requests"]:
        print("[answer] nothing to answer: the stored requests were answered already")
        return 1
    conversation = [ChatMessage.from_dict(m) for m in state["conversation"]]
    requests = [ToolApprovalRequest.from_dict(r) for r in state["requests"]]  # digest kept
    answers = [r.approve() if args.approve else r.reject("the user said no") for r in requests]
    for request in requests:
        verdict = "approved" if args.approve else "rejected"
        print(f"[answer] {verdict}: {request.call.name}({request.call.arguments})")
    async with model_for(args, ["Done: 10 EUR went to Bob."]) as model:
        agent = FunctionInvokingChatClient(model, [transfer])
        try:
            response = await agent.get_response(
                conversation, RunOptions(tool_approval_responses=answers)
            )
        except ApprovalError as exc:  # raised before anything ran
            print(f"[answer] refused, nothing ran: {exc}")
            return 1
    for message in response.messages:
        print(f"[answer] {message.role}: {message.content}")
    state = {"conversation": [*state["conversation"], *(m.to_dict() for m in response.messages)]}
    state["requests"] = [r.to_dict() for r in response.approval_requests]  # a new pause, if any
    Path(args.state).write_text(json.dumps(state, indent=2), encoding="utf-8")
    return 0


def tamper(state_path: str) -> None:
    """What someone with write access to the store might do: change amount and recipient."""
    state = json.loads(Path(state_path).read_text(encoding="utf-8"))
    call = state["conversation"][-1]["tool_calls"][0]["function"]
    call["arguments"] = json.dumps({**json.loads(call["arguments"]), "amount": 10000, "to": "Eve"})
    Path(state_path).write_text(json.dumps(state, indent=2), encoding="utf-8")
    print(f"[tamper] the stored call now reads {call['arguments']}")


def story(args: argparse.Namespace) -> int:
    """Both processes, twice: once as stored, once after the store was edited."""
    live = ["--base-url", args.base_url, "--model", args.model] if args.base_url else []
    state = args.state or str(Path.cwd() / "approval_state.json")

    def step(*argv: str) -> int:
        command = [sys.executable, __file__, *argv, "--state", state, *live]
        return subprocess.run(command, check=False).returncode

    assert step("ask") == 0
    assert step("answer", "--approve") == 0
    assert step("answer", "--approve") == 1  # answered already: the transfer does not run again
    assert step("ask") == 0
    tamper(state)
    refused = step("answer", "--approve")
    Path(state).unlink()
    return 0 if refused == 1 else 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Approval across two processes.")
    parser.add_argument("step", nargs="?", choices=["ask", "answer"], help="default: the story")
    parser.add_argument("--state", help="the JSON file between the steps")
    parser.add_argument("--approve", action="store_true", help="answer: approve (else reject)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--model", default="llama3.2", help="the model at --base-url")
    parser.add_argument("--api-key", help="default: $OPENAI_API_KEY")
    args = parser.parse_args()
    if args.step and not args.state:
        parser.error(f"{args.step} needs --state")
    return args


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.step == "ask":
        trio.run(ask, arguments)
    elif arguments.step == "answer":
        sys.exit(trio.run(answer, arguments))
    else:
        sys.exit(story(arguments))
