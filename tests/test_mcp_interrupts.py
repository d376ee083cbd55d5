"""Ctrl-C in an MCP connection: wherever it lands -- in trio_invoke.mcp's code or in the MCP
SDK's, in the caller's task or in one the SDK started -- the interrupt reaches the caller as a
bare ``KeyboardInterrupt``, promptly, the transcript is valid, and the session is ended (a stdio
server's process stopped; an HTTP session's ``DELETE`` sent).

A tracer counts the lines of ``trio_invoke/mcp`` and of the SDK that a run executes (entering
an :class:`MCPServer` over streamable HTTP or stdio, two calls through the loop, leaving) and
at the n-th calls Trio's SIGINT handler there, as a real Ctrl-C does (see
``tests/test_interrupt_anywhere.py`` for the loop's own code). Raised inside the SDK's tasks,
the interrupt used to be lost (the run finished as if nothing had happened), or to come out as
``MCPConnectionError(... RuntimeError: Cancel scope stack corrupted ...)`` with Trio's state
corrupted. Then real signals, sent from another thread while a long call is in flight.

Real servers (tests/mcp_server.py) in subprocesses, so real time, bounded everywhere.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpcore2
import httpx2
import mcp
import pytest
import trio
from ctrl_c import ctrl_c_at, tracing

import trio_invoke
from trio_invoke import ChatMessage, FunctionInvokingChatClient, ScriptedChatClient, ToolCall
from trio_invoke.mcp import MCPServer
from trio_invoke.testing import assert_transcript_valid, tool_calls_response

SERVER = str(Path(__file__).with_name("mcp_server.py"))
USER = [ChatMessage.user("go")]
OURS = trio_invoke.__file__.rsplit("/", 1)[0] + "/mcp/"
SDK = mcp.__file__.rsplit("/", 1)[0] + "/"
UNDER_THE_SDK = tuple(m.__file__.rsplit("/", 1)[0] + "/" for m in (anyio, httpx2, httpcore2))
SCRIPT = [
    tool_calls_response(
        ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "echo", '{"text": "hi"}')
    ),
    "done",
]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has ended
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def started_pids(log: Path) -> list[int]:
    if not log.exists():
        return []
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    return [e["pid"] for e in events if e["event"] == "started"]


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    """tests/mcp_server.py over streamable HTTP on 127.0.0.1, stopped at the end."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [
            *(sys.executable, SERVER, "--http", str(port), "--log", str(tmp_path / "http.jsonl")),
            *("--mode-file", str(tmp_path / "no-modes")),  # (none: the server logs each DELETE)
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # a real wait: the process must start listening
            assert process.poll() is None, "the HTTP test server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP test server never listened"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def interrupted_run(
    make: Callable[[], MCPServer], at: int | None, roots: tuple[str, ...]
) -> dict[str, Any]:
    """One run -- enter ``make()``, two calls through the loop, leave -- with Trio's SIGINT
    handler called at the ``at``-th line run in a file under ``roots`` (``None``: never)."""
    state: dict[str, Any] = {"lines": [], "where": None, "stream": None}
    tracer = ctrl_c_at(at, state, roots)

    async def main() -> None:
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # Trio's
        with tracing(tracer), trio.fail_after(30):
            async with make() as server:
                tools = {tool.remote_name: tool for tool in server.tools}
                client = FunctionInvokingChatClient(
                    ScriptedChatClient(SCRIPT), [tools["add"], tools["echo"]]
                )
                async with client.run(USER) as stream:
                    state["stream"] = stream
                    async for _ in stream:
                        pass

    began = time.monotonic()
    try:
        trio.run(main)
        state["outcome"] = "finished"
    except KeyboardInterrupt:
        state["outcome"] = "interrupted"
    except BaseException as exc:  # what must never come of a Ctrl-C
        state["outcome"] = f"{type(exc).__name__}: {exc}"[:300]
    state["seconds"] = time.monotonic() - began
    return state


def problems(state: dict[str, Any]) -> list[str]:
    found = []
    if state["outcome"] != "interrupted":
        found.append(f"came out as {state['outcome']}")
    if state["seconds"] > 10:
        found.append(f"took {state['seconds']:.1f} s")
    if state["stream"] is not None:
        try:
            assert_transcript_valid([*USER, *state["stream"].messages])
        except AssertionError as exc:
            found.append(f"transcript: {exc}")
    return found


def sweep(make: Callable[[], MCPServer], roots: tuple[str, ...], samples: int) -> int:
    """Interrupt runs at about ``samples`` lines spread over a clean run's; how many fired."""
    clean = interrupted_run(make, None, roots)
    assert clean["outcome"] == "finished"
    assert problems({**clean, "outcome": "interrupted"}) == []
    count = len(clean["lines"])
    assert count > 1000  # the tracer sees the SDK
    every = max(1, count // samples)
    failures: dict[str, list[str]] = {}
    fired = 0
    moments = range(1, count + count // 10, every)  # (a little past the end: paths vary)
    for at in moments:
        state = interrupted_run(make, at, roots)
        if state["where"] is None:
            continue  # the run ended before its at-th line
        fired += 1
        found = problems(state)
        if found and state["where"] not in failures:
            failures[state["where"]] = found
    assert fired > len([at for at in moments if at <= count]) * 0.9
    assert not failures, "\n".join(f"{where}: {found}" for where, found in failures.items())
    return fired


@pytest.mark.slow  # (about 500 runs, each a connection: 30 to 60 seconds)
def test_a_ctrl_c_on_any_line_of_an_http_connection_reaches_the_caller(http_url: str) -> None:
    sweep(lambda: MCPServer.http(http_url), (OURS, SDK), samples=500)


@pytest.mark.slow
def test_a_ctrl_c_under_the_sdk_of_an_http_connection_reaches_the_caller(http_url: str) -> None:
    # anyio's, httpx2's and httpcore2's lines, which the SDK's tasks run.
    sweep(lambda: MCPServer.http(http_url), UNDER_THE_SDK, samples=150)


@pytest.mark.slow  # (a server process per run: about 30 seconds)
def test_a_ctrl_c_on_any_line_of_a_stdio_connection_reaches_the_caller_and_ends_the_process(
    tmp_path: Path,
) -> None:
    log = tmp_path / "stdio.jsonl"

    def make() -> MCPServer:
        return MCPServer.stdio(sys.executable, [SERVER, "--log", str(log)])

    fired = sweep(make, (OURS, SDK), samples=25)
    pids = started_pids(log)
    assert len(pids) >= fired * 0.5  # (a run interrupted before the process started has none)
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # (a real process: the SDK reaps it; give that a moment)
    assert [pid for pid in pids if pid_alive(pid)] == []


@pytest.mark.parametrize("transport", ["stdio", "http", "http-legacy"])
def test_a_real_ctrl_c_during_a_long_mcp_call_reaches_the_caller_at_once(
    transport: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # SIGINT from another thread once the server runs the call: the main task waits for it.
    log = tmp_path / "stdio.jsonl"
    if transport == "stdio":
        make = lambda: MCPServer.stdio(sys.executable, [SERVER, "--log", str(log)])  # noqa: E731
    else:
        url = request.getfixturevalue("http_url")
        log = tmp_path / "http.jsonl"
        protocol = "legacy" if transport == "http-legacy" else "auto"  # (legacy: a session)
        make = lambda: MCPServer.http(url, protocol=protocol)  # noqa: E731
    state: dict[str, Any] = {}

    def calls_begun() -> int:
        if not log.exists():
            return 0
        events = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x]
        return sum(e["event"] == "call" and e["tool"] == "slow" for e in events)

    def interrupt_once_called() -> None:
        deadline = time.monotonic() + 60
        while calls_begun() == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        state["sent"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    async def main() -> None:
        with trio.fail_after(90):
            async with make() as server:
                tools = {tool.remote_name: tool for tool in server.tools}
                script = [
                    tool_calls_response(
                        ToolCall("c1", "slow", '{"seconds": 60, "tag": "long"}'),
                        ToolCall("c2", "add", '{"a": 1, "b": 2}'),
                    ),
                    "done",
                ]
                client = FunctionInvokingChatClient(
                    ScriptedChatClient(script), [tools["slow"], tools["add"]]
                )
                threading.Thread(target=interrupt_once_called, daemon=True).start()
                async with client.run(USER) as stream:
                    state["stream"] = stream
                    async for _ in stream:
                        pass

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    assert time.monotonic() - state["sent"] < 10  # not the call's 60 s
    messages = [*USER, *state["stream"].messages]
    assert_transcript_valid(messages)
    results = {m.tool_call_id: m for m in messages if m.tool_call_id is not None}
    assert set(results) == {"c1", "c2"}  # the call cut short is answered too
    # (the interrupt came out of the caller's wait, so the call was cancelled: see README)
    assert results["c1"].text.startswith("Error: cancelled")
    if transport == "stdio":
        (pid,) = started_pids(log)
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(pid)
    elif transport == "http-legacy":  # the session ended: its DELETE reached the server
        events = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x]
        assert [e["event"] for e in events].count("delete") == 1
