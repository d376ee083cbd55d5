"""The demo behind ``python -m trio_invoke``: a short agent conversation, streamed readably.

By default the model is the embedded :class:`ScriptedChatClient` (no network, no API key); the
tools are real and local: a calculator, a clock, a directory lister, and a note writer that
needs the user's approval. Each tool first waits as long as a remote service would take (a few
hundred milliseconds, ``LATENCY``), so that the output shows the calls of a batch overlapping:
a line per batch gives its wall time beside the sum of its calls' times.

Ctrl-C anywhere, at the approval prompt too, ends the demo with one line and exit status 130.
With ``--base-url URL --model NAME`` the model is a live OpenAI-compatible server; with
``--provider anthropic --model NAME`` Anthropic's Messages API (``--base-url`` optional). With a
live model, ``--mcp "COMMAND ARGS"`` adds the tools of MCP servers started over stdio.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import importlib
import operator
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._client import ChatClient
from ._exceptions import HTTPStatusError, ModelTimeoutError, TrioInvokeError
from ._function_tool import tool
from ._loop._client import FunctionInvokingChatClient
from ._messages import ChatMessage, FinishReason, Usage
from ._options import RunOptions, ToolApprovalResponse
from ._scripted import ScriptedChatClient
from ._tools import Tool
from ._updates import (
    AgentResponseUpdate,
    Error,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolApprovalRequest,
    ToolCallArgs,
    ToolCalled,
    ToolCallEnd,
    ToolCallStart,
)

if TYPE_CHECKING:  # the clients need an optional extra: imported when --provider asks
    from .providers.anthropic._client import AnthropicChatClient
    from .providers.openai._client import OpenAIChatClient

__all__ = ["main"]

NOTE_PATH = os.path.join(tempfile.gettempdir(), "trio_invoke_demo_note.txt")

# -- the tools ------------------------------------------------------------------------------

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError("booleans are not numbers here")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        if isinstance(node.op, ast.Pow) and abs(_evaluate(node.right)) > 100:
            raise ValueError("exponents above 100 are not allowed")
        result: float | int = _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        result = _OPERATORS[type(node.op)](_evaluate(node.operand))
    else:
        raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")
    return result


def evaluate(expression: str) -> float | int:
    """Evaluate arithmetic (numbers, + - * / // % **, parentheses) without ``eval``."""
    return _evaluate(ast.parse(expression, mode="eval"))


@tool
async def calculate(expression: str) -> float | int:
    """Evaluate an arithmetic expression.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, e.g. "2 * (3 + 4)".
    """
    return evaluate(expression)


@tool
def clock(utc: bool = True) -> str:
    """The current date and time, ISO 8601.

    Args:
        utc: UTC if true, else the machine's local time.
    """
    now = datetime.datetime.now(datetime.UTC if utc else None)
    return now.isoformat(timespec="seconds")


@tool
def list_directory(path: str = ".", limit: int = 8) -> dict[str, Any]:
    """List the entries of a directory (sorted; directories end with a slash).

    Args:
        path: The directory.
        limit: The most entries to return.
    """
    with os.scandir(path) as entries:
        names = sorted(e.name + ("/" if e.is_dir() else "") for e in entries)
    return {"path": os.path.abspath(path), "count": len(names), "entries": names[:limit]}


@tool(requires_approval=True)
def save_note(text: str) -> str:
    """Save a short note to a file in the temporary directory (asks the user first).

    Args:
        text: The note.
    """
    with open(NOTE_PATH, "w", encoding="utf-8") as file:
        file.write(text + "\n")
    return f"saved {len(text)} characters to {NOTE_PATH}"


LATENCY: Mapping[str, float] = {
    "calculate": 0.25,
    "clock": 0.15,
    "list_directory": 0.4,
    "save_note": 0.3,
}
"""Seconds each tool waits before it works, as a remote service would (``trio.sleep``)."""


@attrs.frozen
class WithLatency:
    """``tool``, answering after ``seconds`` (a stand-in for a service's response time)."""

    tool: Tool
    seconds: float

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def description(self) -> str:
        return self.tool.description

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self.tool.parameters

    @property
    def requires_approval(self) -> bool:
        return self.tool.requires_approval

    @property
    def timeout(self) -> float | None:
        return self.tool.timeout

    async def execute(self, arguments: dict[str, Any]) -> Any:
        """Wait, then run the tool. Cancellation: the wait or the tool stops where it was."""
        await trio.sleep(self.seconds)
        return await self.tool.execute(arguments)


TOOLS: tuple[Tool, ...] = tuple(
    WithLatency(t, LATENCY[t.name]) for t in (calculate, clock, list_directory, save_note)
)

# -- the embedded model's script ----------------------------------------------------------------

PROMPT = (
    "What is 17 * 23 + 4, and 1 / 0? What time is it, and what is in this directory? "
    "Then save a note with the first answer."
)


def _words(text: str) -> list[AgentResponseUpdate]:
    """Text as a model streams it: a delta per word."""
    pieces = text.split(" ")
    return [TextDelta(p + (" " if i < len(pieces) - 1 else "")) for i, p in enumerate(pieces)]


def _thoughts(text: str) -> list[AgentResponseUpdate]:
    """Reasoning as a thinking model streams it before its answer: a delta per word."""
    pieces = text.split(" ")
    return [ReasoningDelta(p + (" " if i < len(pieces) - 1 else "")) for i, p in enumerate(pieces)]


def _call(call_id: str, name: str, arguments: str) -> list[AgentResponseUpdate]:
    half = len(arguments) // 2
    return [
        ToolCallStart(call_id, name),
        ToolCallArgs(call_id, arguments[:half]),
        ToolCallArgs(call_id, arguments[half:]),
        ToolCallEnd(call_id),
    ]


def scripted_model(delay: float = 0.02) -> ScriptedChatClient:
    """The demo's embedded model: three scripted turns, ``delay`` seconds between updates."""
    return ScriptedChatClient(
        [
            [
                *_thoughts(
                    "Two sums, the time and a listing: the calculator, the clock and the "
                    "directory tool can all run at once."
                ),
                *_words("Four things at once: two sums, the clock and the directory."),
                *_call("call_1", "calculate", '{"expression": "17 * 23 + 4"}'),
                *_call("call_2", "calculate", '{"expression": "1 / 0"}'),
                *_call("call_3", "clock", '{"utc": true}'),
                *_call("call_4", "list_directory", '{"path": ".", "limit": 5}'),
                Finish(FinishReason.TOOL_CALLS, Usage(120, 60)),
            ],
            [
                *_words(
                    "17 * 23 + 4 = 395, and 1 / 0 has no answer: the calculator said so. "
                    "Saving the note now."
                ),
                *_call("call_5", "save_note", '{"text": "17 * 23 + 4 = 395"}'),
                Finish(FinishReason.TOOL_CALLS, Usage(260, 40)),
            ],
            [
                *_words("Done. The time and the listing are above; the note's fate is too."),
                Finish(FinishReason.STOP, Usage(310, 20)),
            ],
        ],
        delay=delay,
    )


# -- rendering --------------------------------------------------------------------------------


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_DIM, _PLAIN = "\x1b[2m", "\x1b[0m"


class Printer:
    """Prints a run's updates as they arrive; the model's reasoning on lines of its own, after
    ``thinking:``, dimmed on a terminal."""

    def __init__(self, out: Any = None) -> None:
        self.out = out or sys.stdout
        self.names: dict[str, str] = {}
        self.arguments: dict[str, list[str]] = {}
        self.at_line_start = True
        self.batch: list[tuple[float, float]] = []
        """(start, end) in ``trio.current_time()`` of each call of the batch that is finishing."""
        self.thinking = False
        isatty = getattr(self.out, "isatty", None)
        self.dim = bool(isatty and isatty()) and "NO_COLOR" not in os.environ

    def _stop_thinking(self) -> None:
        if self.thinking:
            self.thinking = False
            self.out.write((_PLAIN if self.dim else "") + "\n")
            self.at_line_start = True

    def end_batch(self) -> None:
        """Print the line of the batch whose results came in, if any: its wall time (first
        start to last result) beside the sum of its calls' times."""
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        wall = max(end for _, end in batch) - min(start for start, _ in batch)
        summed = sum(end - start for start, end in batch)
        if summed == 0:
            return  # nothing ran: rejected or not run
        if len(batch) == 1:
            self.line(f"  == 1 call: {wall * 1000:,.0f} ms")
            return
        saved = f", {summed / wall:.1f}x faster than one by one" if wall > 0 else ""
        self.line(
            f"  == batch of {len(batch)} calls: {wall * 1000:,.0f} ms wall, "
            f"{summed * 1000:,.0f} ms summed{saved}"
        )

    def write(self, text: str) -> None:
        """Write ``text`` where the cursor is (a prompt, say)."""
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        self._stop_thinking()
        if not self.at_line_start:
            self.out.write("\n")
        self.out.write(text + "\n")
        self.out.flush()
        self.at_line_start = True

    def show(self, update: AgentResponseUpdate) -> None:
        if self.thinking and not isinstance(update, ReasoningDelta):
            self._stop_thinking()
        if not isinstance(update, ToolCalled):
            self.end_batch()
        match update:
            case ReasoningDelta(text):
                if not self.thinking:
                    if not self.at_line_start:
                        self.out.write("\n")
                    self.out.write((_DIM if self.dim else "") + "  thinking: ")
                    self.thinking = True
                self.out.write(" ".join(text.split("\n")))
                self.out.flush()
                self.at_line_start = False
            case TextDelta(text):
                self.out.write(text)
                self.out.flush()
                self.at_line_start = text.endswith("\n")
            case ToolCallStart(call_id, name):
                self.names[call_id] = name
                self.arguments[call_id] = []
            case ToolCallArgs(call_id, piece):
                self.arguments.setdefault(call_id, []).append(piece)
            case ToolCallEnd(call_id):
                arguments = _short("".join(self.arguments.pop(call_id, [])), 60)
                self.line(f"  -> {self.names.get(call_id, '?')}({arguments})  [{call_id}]")
            case ToolCalled(call, result, is_error):
                now = trio.current_time()
                self.batch.append((now - update.duration, now))
                mark = "x" if is_error else "ok"
                took = f"{update.duration * 1000:,.0f} ms"
                self.line(f"  <- [{mark}] {call.name}({_short(call.arguments, 60)}) in {took}")
                self.line(f"       {_short(result)}")
            case ToolApprovalRequest(call):
                self.line(f"  ?? {call.name}({call.arguments}) needs your approval")
            case Finish(reason, usage):
                tokens = f", {usage.total_tokens} tokens" if usage else ""
                self.line(f"[finish: {reason.value}{tokens}]")
            case Error(message):
                self.line(f"[error: {message}]")


# -- the conversation ---------------------------------------------------------------------------


async def ask_at_terminal(request: ToolApprovalRequest, printer: Printer) -> ToolApprovalResponse:
    """Ask the user on stdin; anything but y/yes (or the end of input) rejects.

    The read runs in a worker thread that is abandoned on cancellation, so Ctrl-C at the prompt
    ends the demo at once. An answer read from a pipe is not echoed by a terminal, so it is
    written after the question, ending its line: what follows starts on a line of its own.
    """
    stdin = sys.stdin
    printer.write(f"  Allow {request.call.name}({request.call.arguments})? [y/N] ")
    if stdin is None:  # no standard input at all (closed, or a GUI's pythonw): end of input
        line = ""
    else:
        line = await trio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
    if not line:
        printer.write("(end of input: no)\n")
    elif not stdin.isatty():
        printer.write(line.rstrip("\r\n") + "\n")  # as a terminal would have echoed it
    else:
        printer.at_line_start = True  # the terminal echoed the answer and its newline
    approved = line.strip().lower() in ("y", "yes")
    return ToolApprovalResponse(request.call.id, approved, None if approved else "the user said no")


async def converse(
    client: ChatClient,
    messages: list[ChatMessage],
    decide: Callable[[ToolApprovalRequest], Any],
    printer: Printer,
) -> list[ChatMessage]:
    """Run the loop until it answers, asking ``decide`` whenever a call needs approval.

    Returns the whole conversation. Cancellation: the conversation so far is lost with the
    caller's scope; the loop itself leaves no task behind.
    """
    options = RunOptions()
    while True:
        requests: list[ToolApprovalRequest] = []
        finish: Finish | None = None
        async with client.run(messages, options) as stream:
            async for update in stream:
                printer.show(update)
                if isinstance(update, ToolApprovalRequest):
                    requests.append(update)
                elif isinstance(update, Finish):
                    finish = update
        printer.end_batch()
        messages = [*messages, *getattr(stream, "messages", [])]
        if finish is None or finish.finish_reason is not FinishReason.AWAITING_APPROVAL:
            return messages
        responses = [await decide(request) for request in requests]
        for response in responses:
            printer.line(f"  {'approved' if response.approved else 'rejected'}: {response.call_id}")
        options = RunOptions(tool_approval_responses=responses)


PROVIDERS = ("openai", "anthropic")
"""What ``--provider`` takes: the API the live model speaks."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m trio_invoke",
        description="A short agent conversation on trio_invoke's tool-calling loop. Without "
        "--base-url (or --provider anthropic) the model is the embedded scripted one (no "
        "network, no API key).",
    )
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--yes", action="store_true", help="approve every tool call that asks")
    answer.add_argument("--no", action="store_true", help="reject every tool call that asks")
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="openai",
        help="the API of the live model: an OpenAI-compatible /chat/completions endpoint "
        "(the default; needs --base-url and the extra trio-invoke[openai]) or Anthropic's "
        "Messages API (--base-url defaults to $ANTHROPIC_BASE_URL, else "
        "https://api.anthropic.com; needs the extra trio-invoke[anthropic])",
    )
    parser.add_argument(
        "--base-url",
        help="the live model's API root: an OpenAI-compatible endpoint such as "
        "http://localhost:11434/v1 for Ollama, or with --provider anthropic the root without "
        "/v1",
    )
    parser.add_argument("--model", help="the live model's name, e.g. llama3.2 or claude-sonnet-4-5")
    parser.add_argument(
        "--api-key",
        help="the API key (default: $OPENAI_API_KEY, or $ANTHROPIC_API_KEY with --provider "
        "anthropic; or none)",
    )
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar='"COMMAND ARGS"',
        help="also give the model the tools of this MCP server, started over stdio (one "
        "shell-quoted command line; repeat for more servers; needs a live model and the extra "
        "trio-invoke[mcp])",
    )
    parser.add_argument("prompt", nargs="?", default=PROMPT, help="the user's message")
    args = parser.parse_args(argv)
    args.live = bool(args.base_url) or args.provider == "anthropic"
    if args.live and not args.model:
        parser.error(
            "--provider anthropic needs --model"
            if args.provider == "anthropic" and not args.base_url
            else "--base-url needs --model"
        )
    if args.model and not args.live:
        parser.error(
            "--model needs --base-url, or --provider anthropic (without them the demo uses the "
            "scripted model)"
        )
    if args.mcp and not args.live:
        parser.error("--mcp needs --base-url: the scripted model knows only the demo's tools")
    for command in args.mcp:
        if not shlex.split(command):
            parser.error("--mcp takes a command line, got an empty one")
    return args


RETRIES = 2
"""How often the demo retries a live server's 429/5xx answers and connection failures."""


def _retry_reporter(printer: Printer, max_retries: int) -> Callable[[Exception, int, float], None]:
    def report(error: Exception, retry: int, delay: float) -> None:
        if isinstance(error, HTTPStatusError):
            cause = f"HTTP {error.status_code}"
        elif isinstance(error, ModelTimeoutError):
            cause = "a timeout"
        else:
            cause = "a connection failure"
        printer.line(f"  retrying after {cause}, {retry} of {max_retries} (in {delay:.1f} s)")

    return report


def _live_model(
    args: argparse.Namespace, printer: Printer
) -> OpenAIChatClient | AnthropicChatClient:
    """The live model client ``--provider`` names (its extra is installed: ``main`` checked)."""
    settings: dict[str, Any] = {
        "base_url": args.base_url,
        "api_key": args.api_key,
        "max_retries": RETRIES,
        "on_retry": _retry_reporter(printer, RETRIES),
    }
    if getattr(args, "provider", "openai") == "anthropic":
        from .providers.anthropic._client import AnthropicChatClient  # noqa: PLC0415 -- needs the optional httpx2

        return AnthropicChatClient(args.model, **settings)
    from .providers.openai._client import OpenAIChatClient  # noqa: PLC0415 -- needs the optional httpx2

    return OpenAIChatClient(args.model, **settings)


async def amain(
    args: argparse.Namespace, printer: Printer | None = None, *, delay: float = 0.02
) -> list[ChatMessage]:
    """The demo's conversation; returns the transcript.

    Raises:
        ChatClientError: the live model server failed (a live model only).
        MCPConnectionError: an ``--mcp`` server could not be started.
        ImportError: a live model without its extra (``trio-invoke[openai]`` or
            ``trio-invoke[anthropic]``).

    Cancellation: the transcript is lost; no task is left running.
    """
    printer = printer or Printer()
    async with contextlib.AsyncExitStack() as stack:
        model: ChatClient
        if getattr(args, "live", bool(args.base_url)):
            live = _live_model(args, printer)
            model = await stack.enter_async_context(live)
            from .providers._settings import shown_url  # noqa: PLC0415 -- needs the optional httpx2

            printer.line(f"model: {args.model} at {shown_url(live.base_url)}")
        else:
            model = scripted_model(delay)
            printer.line("model: the embedded scripted model (no network, no API key)")
            if args.prompt != PROMPT:
                printer.line(
                    "note: the scripted model ignores your prompt and replays its script; "
                    "pass --base-url and --model (or --provider anthropic --model) to ask a "
                    "live model"
                )
        waits = sorted(LATENCY.values())
        printer.line(
            f"tools: {', '.join(t.name for t in TOOLS)} (each waits {waits[0] * 1000:.0f}-"
            f"{waits[-1] * 1000:.0f} ms, as a remote service would)"
        )
        tools: list[Any] = list(TOOLS)
        for command in args.mcp:
            from .mcp import MCPServer  # noqa: PLC0415 -- needs the optional mcp SDK

            words = shlex.split(command)
            server = await stack.enter_async_context(MCPServer.stdio(words[0], words[1:]))
            names = ", ".join(tool.name for tool in server.tools) or "none"
            printer.line(f"mcp: {server.name} ({command}): {names}")
            tools += server.tools
        client = FunctionInvokingChatClient(model, tools)
        messages = [
            ChatMessage.system("You are a helpful assistant. Use the tools when they help."),
            ChatMessage.user(args.prompt),
        ]
        printer.line(f"user: {args.prompt}")

        async def decide(request: ToolApprovalRequest) -> ToolApprovalResponse:
            if args.yes or args.no:
                printer.line(f"  (--{'yes' if args.yes else 'no'}) {request.call.name}")
                return request.approve() if args.yes else request.reject("the user said no")
            return await ask_at_terminal(request, printer)

        printer.line("assistant:")
        return await converse(client, messages, decide, printer)
    raise AssertionError("unreachable")  # pragma: no cover


def _interrupted(exc: BaseException) -> bool:
    if isinstance(exc, KeyboardInterrupt):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None


def _broken_pipe(exc: BaseException) -> bool:
    if isinstance(exc, BrokenPipeError):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.split(BrokenPipeError)[1] is None


def _discard_output(out: Any) -> None:
    """Point the file descriptor under ``out`` at the null device, so that the interpreter's
    last flush of what is still buffered does not fail again at exit."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, out.fileno())
        os.close(null)


def main(argv: Sequence[str] | None = None, printer: Printer | None = None) -> int:
    """Entry point of ``python -m trio_invoke``.

    Returns 0 on success; 1 if the model server failed, an ``--mcp`` server could not be
    started (or its tools' names clash), or the live model's extra is missing (one line on
    stderr); 1, silently, if the output's reader went away (``| head``); 130 on Ctrl-C (one
    line on stderr).
    """
    args = parse_args(argv)
    printer = printer or Printer()
    if args.live:
        extra = args.provider
        try:
            importlib.import_module(f".providers.{extra}._client", __package__)
        except ImportError:
            needs = "--provider anthropic" if extra == "anthropic" else "--base-url"
            print(
                f"error: {needs} needs the extra trio-invoke[{extra}], which is not installed: "
                f'{_pip()} install ".[{extra}]" in a checkout of trio_invoke',
                file=sys.stderr,
            )
            return 1
    try:
        trio.run(amain, args, printer)
    except TrioInvokeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if _broken_pipe(exc):  # the reader went away (`| head`): stop writing, quietly
            _discard_output(printer.out)
            return 1
        if not _interrupted(exc):
            raise
        if not printer.at_line_start:
            printer.out.write("\n")
            printer.out.flush()
        print("interrupted", file=sys.stderr)
        return 130
    return 0


def _pip() -> str:
    """The pip command of the interpreter running the demo, as the user would type it."""
    python = os.path.relpath(sys.executable) if sys.executable else "python"
    python = python if len(python) < len(sys.executable or "") else sys.executable
    return f"{python} -m pip"
