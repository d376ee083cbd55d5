"""trio_invoke.mcp against real MCP servers (tests/mcp_server.py, built on the SDK's MCPServer):
over stdio as a subprocess, and over streamable HTTP on 127.0.0.1 in a subprocess.

These wait for real processes and sockets, so time here is real time (bounded by
``trio.fail_after`` everywhere); the loop's own timing is tested on virtual time elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import importlib
import itertools
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pydantic
import pytest
import trio
import trio.testing
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import trio_invoke
from trio_invoke import (
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCalled,
    ToolTimeoutError,
)
from trio_invoke.mcp import (
    MCPConnectionError,
    MCPInitTimeoutError,
    MCPServer,
    MCPTimeoutError,
    MCPTool,
    MCPToolError,
)
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

SERVER = str(Path(__file__).with_name("mcp_server.py"))
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
USER = [ChatMessage.user("go")]
BASE_TOOLS = {
    *("add", "echo", "record", "locate", "fail", "rpc_error", "slow", "exit_now", "media"),
    *("structured_only", "text_and_structured", "two_texts", "add_tool", "remove_tool", "block"),
}
ENTER = 60  # seconds: a cold start of the server process imports the whole MCP SDK


# -- servers ----------------------------------------------------------------------------------


class Log:
    """The JSON lines the test server appends (see tests/mcp_server.py)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if kind is None or e["event"] == kind]

    def pids(self) -> list[int]:
        return [e["pid"] for e in self.events("started")]

    def cancelled_notifications(self) -> list[dict[str, Any]]:
        """The ``notifications/cancelled`` that name a ``tools/call`` (closing the connection
        also cancels the 2026-07-28 ``subscriptions/listen`` stream)."""
        calls = {e["id"] for e in self.events("call")}
        return [
            e
            for e in self.events("notification")
            if e["method"] == "notifications/cancelled" and e["params"]["requestId"] in calls
        ]

    def cancelled_tags(self) -> list[str]:
        return [e["tag"] for e in self.events("tool cancelled")]

    async def wait_for(self, predicate: Any, seconds: float = 10.0) -> None:
        """Until ``predicate(self)`` holds: the server writes its log from another process."""
        with trio.fail_after(seconds):
            while not predicate(self):  # noqa: ASYNC110 -- another process
                await trio.sleep(0.02)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "server.jsonl")


def stdio(log: Log, *flags: str, **options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [SERVER, "--log", str(log.path), *flags], **options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HTTPServer:
    """tests/mcp_server.py --http on 127.0.0.1, as a subprocess this test stops; on ``port``
    to restart a server where it was."""

    def __init__(self, log: Log, *flags: str, port: int | None = None) -> None:
        self.port = free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        self.process = subprocess.Popen(
            [SERVER_PYTHON, SERVER, "--http", str(self.port), "--log", str(log.path), *flags],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + ENTER
        while True:  # a real wait: the process must start listening
            if self.process.poll() is not None:
                raise RuntimeError(f"the HTTP test server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


SERVER_PYTHON = sys.executable


@pytest.fixture
def http_server(log: Log) -> Iterator[HTTPServer]:
    server = HTTPServer(log)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_servers(log: Log) -> Iterator[list[HTTPServer]]:
    """The HTTP servers a test starts (``http_servers.append(HTTPServer(log, ...))``), each
    stopped when it ends."""
    started: list[HTTPServer] = []
    try:
        yield started
    finally:
        for server in started:
            server.stop()


@pytest.fixture(params=["stdio", "http"])
def make_server(request: pytest.FixtureRequest, log: Log) -> Iterator[Any]:
    """Builds an MCPServer of the parametrised transport, with the given options."""
    started: list[HTTPServer] = []

    def make(*flags: str, **options: Any) -> MCPServer:
        if request.param == "stdio":
            return stdio(log, *flags, **options)
        started.append(HTTPServer(log, *flags))
        return MCPServer.http(started[-1].url, **options)

    make.transport = request.param  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        for server in started:
            server.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie counts as ended: the SDK reaps it, but give that a moment.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def by_remote(server: MCPServer) -> dict[str, MCPTool]:
    return {tool.remote_name: tool for tool in server.tools}


def calls_response(*calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
    return tool_calls_response(*(ToolCall(i, n, json.dumps(a)) for i, n, a in calls))


def answer(text: str = "done") -> list[Any]:
    return [TextDelta(text), Finish(FinishReason.STOP)]


def called(updates: Any) -> dict[str, ToolCalled]:
    return {u.call.id: u for u in updates if isinstance(u, ToolCalled)}


# -- listing ----------------------------------------------------------------------------------


async def test_lists_every_tool_with_its_schema_and_description(make_server: Any) -> None:
    with trio.fail_after(ENTER):
        async with make_server() as server:
            tools = by_remote(server)
            assert set(tools) == BASE_TOOLS
            add = tools["add"]
            assert add.name == "add"
            assert add.description == "Add two integers."
            assert add.parameters["required"] == ["a", "b"]
            assert add.parameters["properties"]["a"]["type"] == "integer"
            assert add.definition.name == "add"
            assert not add.requires_approval
            assert add.call_timeout == 60.0
            assert add.timeout is None  # the loop's tool_timeout stays in charge
            assert server.name == "test-server"
            assert server.available
            assert server.remote_names == {t.name: t.remote_name for t in server.tools}


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("fs", "fs_add"), ("my.server", "my_server_add"), ("a-b", "a-b_add")],
)
async def test_prefix_comes_first_and_names_stay_valid(
    log: Log, prefix: str, expected: str
) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, "--odd-names", prefix=prefix) as server:
            names = [tool.name for tool in server.tools]
            assert expected in names
            assert all(PROVIDER_NAME.match(name) for name in names), names
            assert len(set(names)) == len(names)
            reverse = server.remote_names
            assert reverse[expected] == "add"
            assert reverse[f"{prefix.replace('.', '_')}_files_read_v2"] == "files.read.v2"
            long = [n for n, remote in reverse.items() if remote == "x" * 100]
            assert len(long) == 1
            assert len(long[0]) == 64


async def test_odd_names_without_prefix_are_mapped_and_called_by_their_server_name(
    log: Log,
) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, "--odd-names") as server:
            tools = by_remote(server)
            assert tools["files.read.v2"].name == "files_read_v2"
            assert await tools["files.read.v2"].execute({}) == "dotted"
            assert await tools["x" * 100].execute({}) == "long"


async def test_paginated_listing_is_followed_to_the_end(make_server: Any, log: Log) -> None:
    with trio.fail_after(ENTER):
        async with make_server("--page-size", "4", "--extra-tools", "7") as server:
            assert set(by_remote(server)) == BASE_TOOLS | {f"tool_{i}" for i in range(7)}
    pages = log.events("tools/list")
    total = len(BASE_TOOLS) + 7
    assert len(pages) >= -(-total // 4)
    assert sum(p["count"] for p in pages[: -(-total // 4)]) == total


PROMPTS_ONLY = """
import anyio
import mcp_types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

async def prompts(ctx, params):
    return mcp_types.ListPromptsResult(prompts=[])

server = Server("prompts-only", on_list_prompts=prompts)

async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""
"""An MCP server (the SDK's low-level API) with prompts and no tools: it does not announce
the ``tools`` capability and answers ``tools/list`` "method not found"."""


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_server_without_tools_has_none(protocol: str) -> None:
    with trio.fail_after(ENTER):
        async with MCPServer.stdio(
            sys.executable, ["-c", PROMPTS_ONLY], protocol=protocol
        ) as server:
            assert server.name == "prompts-only"
            assert server.tools == ()
            assert await server.refresh_tools() == ()
            assert server.available


async def test_a_listing_that_never_ends_is_an_error(log: Log) -> None:
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError, match="cursor '3' twice"):
        async with stdio(log, "--page-size", "3", "--cursor-loop"):
            pytest.fail("entered")
    assert len(log.events("tools/list")) == 2


@pytest.mark.parametrize(
    "allowed", [["add"], ["add", "echo", "files.read.v2"], ("slow",), {"media", "fail"}]
)
async def test_allowed_tools_filters_by_server_names(log: Log, allowed: Any) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, "--odd-names", prefix="p", allowed_tools=allowed) as server:
            assert set(by_remote(server)) == set(allowed)
            assert all(tool.name.startswith("p_") for tool in server.tools)


@pytest.mark.parametrize(
    "allowed",
    [["add", "nope"], ["missing"], ["p_add"], ["files_read_v2"]],  # model-facing names too
)
async def test_allowed_tools_naming_an_unknown_tool_is_an_error_naming_it(
    log: Log, allowed: list[str]
) -> None:
    unknown = [name for name in allowed if name != "add"]
    with trio.fail_after(ENTER), pytest.raises(ConfigurationError) as caught:
        async with stdio(log, "--odd-names", prefix="p", allowed_tools=allowed):
            pytest.fail("entered")
    for name in unknown:
        assert repr(name) in str(caught.value)
    assert "allowed_tools" in str(caught.value)
    await log.wait_for(lambda log: log.pids())
    assert not pid_alive(log.pids()[0])


async def test_names_that_collide_after_mapping_are_an_error_naming_both(log: Log) -> None:
    with trio.fail_after(ENTER), pytest.raises(ConfigurationError) as caught:
        async with stdio(log, "--collide"):
            pytest.fail("entered")
    message = str(caught.value)
    assert "'ns.tool'" in message
    assert "'ns_tool'" in message
    # Leaving one out resolves it.
    with trio.fail_after(ENTER):
        async with stdio(log, "--collide", allowed_tools=["ns.tool", "add"]) as server:
            assert by_remote(server)["ns.tool"].name == "ns_tool"
            assert await by_remote(server)["ns.tool"].execute({}) == "dot"


@pytest.mark.parametrize("bad", ["add", b"add", 3])
def test_option_collections_must_be_collections_of_names(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="allowed_tools"):
        MCPServer.stdio("python", allowed_tools=bad)
    with pytest.raises(ConfigurationError, match="require_approval"):
        MCPServer.http("http://127.0.0.1:1/mcp", require_approval=bad)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1.0}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"init_timeout": None}, "init_timeout"),
        ({"init_timeout": 0}, "init_timeout"),
        ({"prefix": ""}, "prefix"),
        ({"protocol": "modern"}, "protocol"),
        ({"require_approval": None}, "require_approval"),
    ],
)
def test_bad_options_are_configuration_errors(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        MCPServer.stdio("python", **options)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: MCPServer.stdio(""), "command"),
        (lambda: MCPServer.stdio("   "), "command"),
        (lambda: MCPServer.stdio("python", "server.py"), r"args=\['server.py'\]"),
        (lambda: MCPServer.http("ftp://example.com/mcp"), "http://"),
        (lambda: MCPServer.http("localhost:8000/mcp"), "http://"),
        (lambda: MCPServer.http("http:///mcp"), "no host"),
    ],
)
def test_bad_targets_are_configuration_errors(make: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        make()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"env": {"A": 1}}, r"env\['A'\] must be a str"),
        ({"env": {"A": None}}, r"env\['A'\] must be a str"),
        ({"env": {"A": "x\0y"}}, "without NUL"),
        ({"env": {1: "x"}}, "env names"),
        ({"env": {"": "x"}}, "env names"),
        ({"env": {"A=B": "x"}}, "env names"),
        ({"env": ["A=1"]}, "env must be a mapping"),
        ({"env": "A=1"}, "env must be a mapping"),
        ({"cwd": 3}, "cwd must be a str or a path"),
    ],
)
def test_bad_stdio_environments_are_configuration_errors(
    options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        MCPServer.stdio("python", **options)


@pytest.mark.parametrize(
    "env",
    [
        {"API_KEY": "sk-secret-value\0"},
        {"API_KEY": b"sk-secret-value"},
        ["API_KEY=sk-secret-value"],
        "API_KEY=sk-secret-value",
    ],
)
def test_a_bad_stdio_environment_is_refused_without_showing_its_values(env: Any) -> None:
    """An environment holds API keys: the error names what is wrong, never a value."""
    with pytest.raises(ConfigurationError) as caught:
        MCPServer.stdio("python", env=env)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("headers", "match"),
    [
        ({"Authorization": "Bearer sk-secret\n"}, "'Authorization' cannot go in an HTTP header"),
        ({"Authorization": "Bearer sk-sécret"}, "'Authorization' cannot go in an HTTP header"),
        ({"Authorization": b"Bearer sk-secret"}, "strings to strings"),
        ({"X-Count": 1}, "strings to strings"),
        ({"Bad Name": "sk-secret"}, "not a valid header name"),
        ("Authorization: Bearer sk-secret", "headers must be a mapping"),
        ([("Authorization", "Bearer sk-secret")], "headers must be a mapping"),
    ],
)
def test_bad_http_headers_are_refused_without_showing_their_values(
    headers: Any, match: str
) -> None:
    """A header holds a token: a newline left by a file read was an error on entering with
    the token in its message."""
    with pytest.raises(ConfigurationError, match=match) as caught:
        MCPServer.http("http://127.0.0.1:9/mcp", headers=headers)
    assert "secret" not in str(caught.value)


def test_option_names_must_be_strings() -> None:
    with pytest.raises(ConfigurationError, match="tool names"):
        MCPServer.stdio("python", require_approval=["ok", 3])


def test_tools_before_entering_is_an_error_naming_the_server() -> None:
    server = MCPServer.http("http://user:secret@127.0.0.1:9/mcp?token=t")
    with pytest.raises(RuntimeError, match=r"'http://127\.0\.0\.1:9/mcp' is not connected"):
        server.tools  # noqa: B018
    assert "secret" not in repr(server)
    assert not server.available


@pytest.mark.parametrize(
    ("url", "label"),
    [
        ("https://user:secret@example.com/mcp?token=t", "https://example.com/mcp"),
        ("http://user:secret@[::1]:8080/mcp", "http://[::1]:8080/mcp"),
    ],
)
def test_a_url_is_named_without_credentials_or_query(url: str, label: str) -> None:
    assert MCPServer.http(url).label == label


# -- approval -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("require", "needing"),
    [
        (True, BASE_TOOLS),
        (False, set()),
        (["record"], {"record"}),
        ({"record", "add"}, {"record", "add"}),
    ],
)
async def test_require_approval_marks_the_tools(log: Log, require: Any, needing: set[str]) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, require_approval=require) as server:
            assert {t.remote_name for t in server.tools if t.requires_approval} == needing


async def test_require_approval_naming_an_unknown_tool_is_an_error(log: Log) -> None:
    with trio.fail_after(ENTER), pytest.raises(ConfigurationError, match="'deleet'"):
        async with stdio(log, require_approval=["record", "deleet"]):
            pytest.fail("entered")


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_of_an_mcp_tool_then_resume(
    make_server: Any, log: Log, approved: bool
) -> None:
    model = ScriptedChatClient(
        [
            calls_response(
                ("c1", "srv_record", {"text": "hello"}), ("c2", "srv_add", {"a": 2, "b": 3})
            ),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with make_server(prefix="srv", require_approval=["record"]) as server:
            client = FunctionInvokingChatClient(model, server.tools)
            first = await run_to_completion(client, USER)
            requests = [u for u in first.updates if isinstance(u, ToolApprovalRequest)]
            assert [r.call.id for r in requests] == ["c1"]
            assert first.updates[-1] == Finish(FinishReason.AWAITING_APPROVAL)
            assert not called(first.updates)
            assert log.events("call") == []  # nothing of the batch ran
            # The paused transcript survives JSON, as it would between processes.
            paused = [
                ChatMessage.from_dict(json.loads(json.dumps(m.to_dict())))
                for m in [*USER, *first.messages]
            ]
            response = requests[0].approve() if approved else requests[0].reject("no thanks")
            second = await run_to_completion(
                client, paused, RunOptions(tool_approval_responses=[response])
            )
    results = called(second.updates)
    assert results["c2"].result == "5"
    assert not results["c2"].is_error
    if approved:
        assert results["c1"].result == "recorded hello"
        assert [e["text"] for e in log.events("recorded")] == ["hello"]
    else:
        assert results["c1"].is_error
        assert "rejected" in results["c1"].result
        assert "no thanks" in results["c1"].result
        assert log.events("recorded") == []
    assert_transcript_valid([*paused, *second.messages])


# -- calls through the loop -------------------------------------------------------------------


async def test_a_run_fans_out_50_parallel_calls_to_one_server(make_server: Any, log: Log) -> None:
    calls = [(f"c{i}", "add", {"a": i, "b": 1000}) for i in range(50)]
    calls += [
        ("s1", "slow", {"seconds": 0.5, "tag": "a"}),
        ("s2", "slow", {"seconds": 0.5, "tag": "b"}),
    ]
    model = ScriptedChatClient([calls_response(*calls), answer()])
    with trio.fail_after(ENTER):
        async with make_server() as server:
            client = FunctionInvokingChatClient(model, server.tools)
            start = trio.current_time()
            result = await run_to_completion(client, USER)
            took = trio.current_time() - start
    results = called(result.updates)
    assert [results[f"c{i}"].result for i in range(50)] == [str(i + 1000) for i in range(50)]
    assert not any(r.is_error for r in results.values())
    # The two slow calls ran at the same time as each other (and as the 50).
    assert took < 0.5 * 2
    tool_messages = [m for m in result.messages if m.tool_call_id is not None]
    assert [m.tool_call_id for m in tool_messages] == [c[0] for c in calls]  # call order
    assert_transcript_valid(result.messages)
    assert len(log.events("call")) == 52


async def test_results_what_the_model_reads(make_server: Any) -> None:
    with trio.fail_after(ENTER):
        async with make_server() as server:
            tools = by_remote(server)
            assert await tools["add"].execute({"a": 1, "b": 2}) == "3"
            assert await tools["echo"].execute({"text": "é ✓"}) == "é ✓"
            assert await tools["two_texts"].execute({}) == "first\nsecond"
            assert await tools["structured_only"].execute({}) == '{"answer":42,"unit":"none"}'
            assert await tools["text_and_structured"].execute({}) == '{"answer": 42}'
            media = (await tools["media"].execute({})).split("\n")
            assert media == [
                "here they are",
                "[image: image/png, 24 bytes]",
                "[audio: audio/wav, 24 bytes]",
                "[resource: file:///notes.txt (text/plain, 9 characters)]",
                "the notes",
                "[resource link: big <file:///big.bin> (x/y)]",
            ]


async def test_error_results_carry_the_servers_words(make_server: Any) -> None:
    model = ScriptedChatClient(
        [
            calls_response(
                ("e1", "fail", {"message": "the disk is full"}),
                ("e2", "rpc_error", {"code": -32042, "message": "quota exceeded"}),
                ("e3", "add", {"a": "one", "b": 2}),  # the server's own validation says no
                ("ok", "add", {"a": 1, "b": 2}),
            ),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with make_server() as server:
            client = FunctionInvokingChatClient(model, server.tools)
            result = await run_to_completion(client, USER)
    results = called(result.updates)
    assert results["e1"].is_error
    assert results["e1"].result.startswith("Error: ")
    assert "the disk is full" in results["e1"].result
    assert isinstance(results["e1"].exception, MCPToolError)
    assert results["e1"].exception.code is None
    assert results["e2"].is_error
    assert "-32042" in results["e2"].result
    assert "quota exceeded" in results["e2"].result
    assert results["e2"].exception.code == -32042  # type: ignore[union-attr]
    assert results["e2"].result == (
        f"Error: MCP server {server.label!r} (named 'test-server') answered with JSON-RPC "
        "error -32042: quota exceeded"
    )
    assert results["e3"].is_error  # our schema check stops it before the server
    assert "field 'a'" in results["e3"].result
    assert results["ok"].result == "3"
    assert not results["ok"].is_error
    assert_transcript_valid(result.messages)


async def test_the_servers_validation_error_reaches_the_model(log: Log) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log) as server:
            with pytest.raises(MCPToolError) as caught:
                await by_remote(server)["add"].execute({"a": "one", "b": 2})
    assert "validation error" in str(caught.value)
    assert caught.value.tool == "add"
    assert caught.value.server == server.label  # what the user configured


async def test_json_schema_2020_12_from_the_server_validates_calls(log: Log) -> None:
    model = ScriptedChatClient(
        [
            calls_response(
                ("ok", "locate", {"place": {"lat": 48.85, "lon": 2.35, "name": "Paris"}}),
                ("tuple", "locate", {"place": {"lat": 0, "lon": 0}, "tags": ["x", 2]}),
                ("nested", "locate", {"place": {"lat": "north", "lon": 2.35}}),
                ("missing", "locate", {"place": {"lat": 1.0}}),
            ),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with stdio(log) as server:
            schema = by_remote(server)["locate"].parameters
            assert "$defs" in schema
            assert "prefixItems" in json.dumps(schema)
            client = FunctionInvokingChatClient(model, server.tools)
            result = await run_to_completion(client, USER)
    results = called(result.updates)
    assert results["ok"].result == "Paris at 48.85,2.35 (none, 0)"
    assert results["tuple"].result == "somewhere at 0.0,0.0 (x, 2)"
    assert results["nested"].is_error
    assert "place.lat" in results["nested"].result  # our validator, from the $ref'd schema
    assert results["missing"].is_error
    assert "lon" in results["missing"].result
    assert [e["tool"] for e in log.events("call")] == ["locate", "locate"]  # only the valid ones


async def test_a_schema_that_does_not_compile_gives_a_usable_tool(log: Log) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, "--bad-schema") as server:
            echo = by_remote(server)["echo"]
            assert echo.parameters == {"type": "object"}
            assert "could not be used" in echo.description
            assert "Return the text unchanged." in echo.description
            model = ScriptedChatClient([calls_response(("c1", "echo", {"text": "hi"})), answer()])
            client = FunctionInvokingChatClient(model, server.tools)  # no crash here
            result = await run_to_completion(client, USER)
    assert called(result.updates)["c1"].result == "hi"


# -- time and cancellation ----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_slow_call_times_out_and_is_cancelled_on_the_server(
    make_server: Any, log: Log, protocol: str
) -> None:
    model = ScriptedChatClient(
        [
            calls_response(
                ("slow", "slow", {"seconds": 30, "tag": "late"}),
                ("fast", "add", {"a": 1, "b": 1}),
            ),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with make_server(timeout=0.5, protocol=protocol) as server:
            client = FunctionInvokingChatClient(model, server.tools)
            start = trio.current_time()
            result = await run_to_completion(client, USER)
            assert trio.current_time() - start < 10
            await log.wait_for(lambda log: log.cancelled_tags())
            if notifies(make_server, protocol):
                await log.wait_for(lambda log: log.cancelled_notifications())
            # The session is still good for more calls.
            assert await by_remote(server)["add"].execute({"a": 2, "b": 2}) == "4"
    results = called(result.updates)
    assert results["slow"].is_error
    assert "timed out after 0.5 s" in results["slow"].result
    assert isinstance(results["slow"].exception, MCPTimeoutError)
    assert isinstance(results["slow"].exception, ToolTimeoutError)
    assert results["fast"].result == "2"
    assert log.cancelled_tags() == ["late"]
    slow_call = next(e for e in log.events("call") if e["tool"] == "slow")
    cancelled = log.cancelled_notifications()
    expected = [slow_call["id"]] if notifies(make_server, protocol) else []
    assert [n["params"]["requestId"] for n in cancelled] == expected


def notifies(make_server: Any, protocol: str) -> bool:
    """Whether a cancelled call reaches the server as ``notifications/cancelled``: always, but
    over streamable HTTP at protocol 2026-07-28, where closing the request's response stream is
    the cancellation (the server's tool is cancelled all the same)."""
    return not (make_server.transport == "http" and protocol == "auto")


@pytest.mark.parametrize(("loop_timeout", "mcp_timeout"), [(0.3, 60.0), (0.3, None), (20.0, 0.3)])
async def test_the_shortest_time_limit_wins(
    log: Log, loop_timeout: float, mcp_timeout: float | None
) -> None:
    model = ScriptedChatClient(
        [calls_response(("slow", "slow", {"seconds": 30, "tag": "t"})), answer()]
    )
    with trio.fail_after(ENTER):
        async with stdio(log, timeout=mcp_timeout) as server:
            client = FunctionInvokingChatClient(model, server.tools, tool_timeout=loop_timeout)
            start = trio.current_time()
            result = await run_to_completion(client, USER)
            took = trio.current_time() - start
            await log.wait_for(lambda log: log.cancelled_notifications())
    outcome = called(result.updates)["slow"]
    assert outcome.is_error
    assert "timed out after 0.3 s" in outcome.result
    assert isinstance(outcome.exception, ToolTimeoutError)
    assert took < 10
    assert log.cancelled_tags() == ["t"]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_cancelling_a_run_cancels_its_calls_on_the_server(
    make_server: Any, log: Log, protocol: str
) -> None:
    model = ScriptedChatClient(
        [
            calls_response(
                ("a", "slow", {"seconds": 30, "tag": "a"}),
                ("b", "slow", {"seconds": 30, "tag": "b"}),
            ),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with make_server(protocol=protocol) as server:
            client = FunctionInvokingChatClient(model, server.tools)
            scope = trio.CancelScope()

            async def cancel_when_running() -> None:
                await log.wait_for(lambda log: len(log.events("call")) == 2)
                scope.cancel()

            async with (
                client.run(USER, RunOptions(cancel_scope=scope)) as stream,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(cancel_when_running)
                updates = [update async for update in stream]
            await log.wait_for(lambda log: len(log.cancelled_tags()) == 2)
            if notifies(make_server, protocol):
                await log.wait_for(lambda log: len(log.cancelled_notifications()) == 2)
            assert server.available
    assert sorted(log.cancelled_tags()) == ["a", "b"]
    assert len(log.cancelled_notifications()) == (2 if notifies(make_server, protocol) else 0)
    results = called(updates)
    assert all(r.is_error and "cancelled" in r.result for r in results.values())
    assert_transcript_valid(stream.messages)


async def test_leaving_the_block_while_calls_run_cancels_them_and_ends_the_process(
    log: Log,
) -> None:
    results: list[BaseException | str] = []

    async def call(tool: MCPTool, tag: str) -> None:
        try:
            results.append(await tool.execute({"seconds": 30, "tag": tag}))
        except MCPToolError as exc:
            results.append(exc)

    with trio.fail_after(ENTER):
        async with trio.open_nursery() as outside:
            with pytest.raises(KeyError):  # bare, not in a group
                async with stdio(log) as server:
                    slow = by_remote(server)["slow"]
                    outside.start_soon(call, slow, "outside")
                    try:  # the body fails while a call runs in it
                        async with trio.open_nursery() as inside:
                            inside.start_soon(call, slow, "inside")
                            await log.wait_for(lambda log: len(log.events("call")) == 2)
                            raise KeyError("boom")
                    except ExceptionGroup as group:
                        # Not `except*`: before Python 3.11.4 a new exception raised there
                        # comes out wrapped in a group of its own.
                        (boom,) = group.exceptions
                        raise boom from None
            # Out of the block: the call of the other task is answered, the process is gone.
    assert len(results) == 1
    assert isinstance(results[0], MCPToolError)
    assert "ended while the call was running" in str(results[0])
    assert "closed" in str(results[0])
    assert not pid_alive(log.pids()[0])
    assert "inside" in log.cancelled_tags()  # a cancelled call is cancelled on the server
    assert not server.available
    with pytest.raises(MCPToolError, match="not available"):
        await slow.execute({"seconds": 1})


async def test_an_exception_in_the_block_comes_out_bare(log: Log) -> None:
    with trio.fail_after(ENTER), pytest.raises(ValueError, match="mine") as caught:
        async with stdio(log):
            raise ValueError("mine")
    assert type(caught.value) is ValueError


async def test_cancelling_the_block_leaves_nothing_behind(log: Log) -> None:
    with trio.fail_after(ENTER):
        with trio.CancelScope() as scope:
            async with stdio(log) as server, trio.open_nursery() as nursery:

                async def cancel_when_running() -> None:
                    await log.wait_for(lambda log: log.events("call"))
                    scope.cancel()

                nursery.start_soon(cancel_when_running)
                await by_remote(server)["slow"].execute({"seconds": 30, "tag": "x"})
        assert scope.cancelled_caught
    await log.wait_for(lambda log: log.cancelled_tags())
    assert not pid_alive(log.pids()[0])


@pytest.mark.parametrize("after", [0.0, 0.05, 0.3])
async def test_cancelling_while_entering_leaves_nothing_behind(log: Log, after: float) -> None:
    with trio.fail_after(ENTER):
        with trio.move_on_after(after) as scope:
            async with stdio(log):
                pytest.fail("entered")
        assert scope.cancelled_caught
        await trio.sleep(0.2)  # a process that was started has written its pid by now
    for pid in log.pids():
        assert not pid_alive(pid)


async def test_a_server_can_be_entered_again_but_not_twice_at_once(log: Log) -> None:
    server = stdio(log)
    with trio.fail_after(2 * ENTER):
        async with server:
            with pytest.raises(RuntimeError, match="already entered"):
                async with server:
                    pass
            assert await by_remote(server)["add"].execute({"a": 1, "b": 1}) == "2"
        async with server:  # a fresh connection: a new process
            assert await by_remote(server)["add"].execute({"a": 2, "b": 1}) == "3"
    assert len(set(log.pids())) == 2
    assert not any(pid_alive(pid) for pid in log.pids())


# -- servers that die ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["sigkill", "exit"])
async def test_a_stdio_server_that_dies_mid_call(log: Log, how: str) -> None:
    calls = [("a", "slow", {"seconds": 30, "tag": "a"}), ("b", "slow", {"seconds": 30, "tag": "b"})]
    if how == "exit":
        calls.append(("x", "exit_now", {"code": 3, "delay": 0.2}))
    model = ScriptedChatClient([calls_response(*calls), answer()])
    with trio.fail_after(ENTER):
        async with stdio(log) as server:
            client = FunctionInvokingChatClient(model, server.tools)

            async def kill() -> None:
                await log.wait_for(lambda log: len(log.events("call")) == len(calls))
                if how == "sigkill":
                    os.kill(log.pids()[0], signal.SIGKILL)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill)
                result = await run_to_completion(client, USER)
            assert not server.available
            with trio.fail_after(1):  # at once, no hang
                later = await run_to_completion(
                    FunctionInvokingChatClient(
                        ScriptedChatClient(
                            [calls_response(("l", "add", {"a": 1, "b": 1})), answer()]
                        ),
                        server.tools,
                    ),
                    USER,
                )
    results = called(result.updates)
    assert set(results) == {c[0] for c in calls}
    for outcome in results.values():
        assert outcome.is_error
        assert "ended while the call was running" in outcome.result
        assert "the server process ended" in outcome.result
    assert_transcript_valid(result.messages)
    late = called(later.updates)["l"]
    assert late.is_error
    assert "not available" in late.result
    assert not pid_alive(log.pids()[0])


async def test_an_http_server_that_dies_mid_call(log: Log) -> None:
    http = HTTPServer(log)
    try:
        model = ScriptedChatClient(
            [
                calls_response(
                    ("a", "slow", {"seconds": 30, "tag": "a"}),
                    ("b", "slow", {"seconds": 30, "tag": "b"}),
                ),
                answer(),
            ]
        )
        with trio.fail_after(ENTER):
            async with MCPServer.http(http.url) as server:
                client = FunctionInvokingChatClient(model, server.tools)

                async def kill() -> None:
                    await log.wait_for(lambda log: len(log.events("call")) == 2)
                    http.kill()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(kill)
                    result = await run_to_completion(client, USER)
                with trio.fail_after(5):
                    await wait_until_unavailable(server)
                with trio.fail_after(1), pytest.raises(MCPToolError, match="not available"):
                    await by_remote(server)["add"].execute({"a": 1, "b": 1})
    finally:
        http.stop()
    for outcome in called(result.updates).values():
        assert outcome.is_error
        assert f"MCP server {http.url!r} (named 'test-server')" in outcome.result
        assert "ended while the call was running" in outcome.result
    assert_transcript_valid(result.messages)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_gone_while_idle_is_connected_to_again_once_it_is_back(
    log: Log, http_servers: list[HTTPServer], protocol: str
) -> None:
    # Nothing tells an idle HTTP client that its server went away: the first request that
    # finds it gone does (it may have reached the server: it is not sent again). While the
    # server is down, every later call, run and listing is answered "not available" at once;
    # once it is back on its port, the next call connects again by itself and is answered.
    http = HTTPServer(log)
    http_servers.append(http)
    calls = [("c1", "add", {"a": 1, "b": 2}), ("c2", "echo", {"text": "hi"})]
    model = ScriptedChatClient([calls_response(*calls), answer()])
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol=protocol) as server:
            add = by_remote(server)["add"]
            assert await add.execute({"a": 1, "b": 2}) == "3"
            http.kill()  # between two calls
            with trio.fail_after(5), pytest.raises(MCPToolError) as first:
                await add.execute({"a": 1, "b": 2})
            assert "the HTTP connection ended" in str(first.value)
            assert not server.available
            with trio.fail_after(1):  # at once
                with pytest.raises(MCPToolError) as later:
                    await add.execute({"a": 1, "b": 2})
                result = await run_to_completion(
                    FunctionInvokingChatClient(model, server.tools), USER
                )
                with pytest.raises(MCPConnectionError, match="not available"):
                    await server.refresh_tools()
            port = http.port
            http_servers.append(await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port)))
            assert await add.execute({"a": 2, "b": 2}) == "4"  # connected again
            assert server.available
            again = await run_to_completion(
                FunctionInvokingChatClient(
                    ScriptedChatClient([calls_response(*calls), answer()]), server.tools
                ),
                USER,
            )
            # and the new connection follows tool list changes
            assert await by_remote(server)["add_tool"].execute({"name": "new"}) == "added new"
            await wait_for_tool(server, "new")
    assert str(later.value) == (
        f"MCP server {http.url!r} (named 'test-server') is not available: the HTTP connection "
        f"ended (connecting again failed: nothing takes connections at {http.url})"
    )
    for outcome in called(result.updates).values():
        assert outcome.result == f"Error: {later.value}"
    assert {c: (u.result, u.is_error) for c, u in called(again.updates).items()} == {
        "c1": ("3", False),
        "c2": ("hi", False),
    }
    assert_transcript_valid(again.messages)


async def forward_proxy(target: int, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """An HTTP forward proxy on 127.0.0.1 that sends every request to port ``target``, its
    absolute-form target (``POST http://host:port/mcp``) made a path; a connection it cannot
    make upstream is closed, as the server's port closed would be."""

    async def forward(client: trio.SocketStream, upstream: trio.SocketStream) -> None:
        buffer = b""

        async def more() -> bool:
            nonlocal buffer
            data = await client.receive_some(65536)
            buffer += data
            return bool(data)

        while True:
            while b"\r\n\r\n" not in buffer:
                if not await more():
                    return
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            line, _, headers = head.partition(b"\r\n")
            method, url, version = line.split(b" ")
            path = b"/" + url.split(b"/", 3)[3] if url.startswith(b"http://") else url
            length = 0
            for header in headers.split(b"\r\n"):
                name, _, value = header.partition(b":")
                assert name.strip().lower() != b"transfer-encoding"
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buffer) < length:
                if not await more():
                    return
            body, buffer = buffer[:length], buffer[length:]
            request = b" ".join([method, path, version]) + b"\r\n" + headers + b"\r\n\r\n"
            await upstream.send_all(request + body)

    async def answer(upstream: trio.SocketStream, client: trio.SocketStream) -> None:
        while data := await upstream.receive_some(65536):
            await client.send_all(data)

    async def handle(client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", target)
        except OSError:
            await client.aclose()
            return
        async with client, upstream, trio.open_nursery() as nursery:

            async def pipe(half: Any, source: trio.SocketStream, sink: trio.SocketStream) -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await half(source, sink)
                nursery.cancel_scope.cancel()

            nursery.start_soon(pipe, forward, client, upstream)
            nursery.start_soon(pipe, answer, upstream, client)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy settings from the environment (``NO_PROXY`` excluding 127.0.0.1 among them)."""
    for name in ("NO_PROXY", "ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_behind_a_proxy_is_connected_to_again_once_it_is_back(
    log: Log, http_servers: list[HTTPServer], monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    # httpx2 goes through HTTP_PROXY; the check that the server is back must too (nothing
    # takes connections at the URL itself here: only the proxy reaches the server).
    http = HTTPServer(log)
    http_servers.append(http)
    url = f"http://127.0.0.1:{free_port()}/mcp"
    no_proxies(monkeypatch)
    async with trio.open_nursery() as nursery:
        proxy = await nursery.start(forward_proxy, http.port)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy}")
        with trio.fail_after(ENTER):
            async with MCPServer.http(url, protocol=protocol) as server:
                add = by_remote(server)["add"]
                assert await add.execute({"a": 1, "b": 2}) == "3"
                http.kill()
                with trio.fail_after(5), pytest.raises(MCPToolError, match=r"not available|ended"):
                    await add.execute({"a": 1, "b": 2})
                port = http.port
                http_servers.append(
                    await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port))
                )
                assert await add.execute({"a": 2, "b": 2}) == "4"  # connected again
                assert server.available
        nursery.cancel_scope.cancel()


async def test_a_proxy_that_goes_away_is_named_not_the_server(
    http_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server is up; the proxy in between is what stops taking connections: "not
    # available" names the proxy (without its credentials), and the server's URL.
    no_proxies(monkeypatch)
    async with trio.open_nursery() as nursery:
        proxy_scope = trio.CancelScope()

        async def proxy(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            with proxy_scope:
                await forward_proxy(http_server.port, task_status=task_status)

        port = await nursery.start(proxy)
        monkeypatch.setenv("HTTP_PROXY", f"http://someone:secret@127.0.0.1:{port}")
        with trio.fail_after(ENTER):
            async with MCPServer.http(http_server.url) as server:
                add = by_remote(server)["add"]
                assert await add.execute({"a": 1, "b": 2}) == "3"
                proxy_scope.cancel()  # its port and its connections are closed
                await trio.sleep(0.1)
                with trio.fail_after(5), pytest.raises(MCPToolError):
                    await add.execute({"a": 1, "b": 2})  # (found the connection gone, or not)
                with trio.fail_after(5), pytest.raises(MCPToolError) as later:
                    await add.execute({"a": 1, "b": 2})
    message = str(later.value)
    assert (
        f"nothing takes connections at the proxy http://127.0.0.1:{port} (HTTP_PROXY), "
        f"through which requests to {http_server.url} go"
    ) in message
    assert "secret" not in message
    assert "someone" not in message


async def test_a_proxy_where_nothing_listens_is_named_on_entering(
    http_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_proxies(monkeypatch)
    port = free_port()
    monkeypatch.setenv("ALL_PROXY", f"http://someone:secret@127.0.0.1:{port}")
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(http_server.url, init_timeout=20):
            pytest.fail("entered")
    message = str(caught.value)
    assert message.startswith(
        f"could not reach MCP server {http_server.url!r} (through the proxy "
        f"http://127.0.0.1:{port} (ALL_PROXY)): ConnectError"
    )
    assert "secret" not in message
    assert "someone" not in message


async def test_an_http_server_that_no_longer_knows_the_session_gets_a_new_one(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # The MCP spec (streamable HTTP): a 404 to a request with an Mcp-Session-Id means the
    # session is gone, and the client "MUST start a new session". The server refused the
    # call (it was not run), so the call goes to the new session: it runs once, and the
    # calls after it too, without leaving the block.
    http = HTTPServer(log)
    http_servers.append(http)
    model = ScriptedChatClient(
        [
            calls_response(("c1", "record", {"text": "after"}), ("c2", "add", {"a": 1, "b": 2})),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy") as server:
            assert await by_remote(server)["record"].execute({"text": "before"}) == (
                "recorded before"
            )
            http.kill()
            http_servers.append(HTTPServer(log, port=http.port))  # restarted where it was
            result = await run_to_completion(FunctionInvokingChatClient(model, server.tools), USER)
            assert server.available
            assert await by_remote(server)["add"].execute({"a": 2, "b": 2}) == "4"
        async with server:  # and entering again starts one too
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"
    assert {c: u.result for c, u in called(result.updates).items()} == {
        "c1": "recorded after",
        "c2": "3",
    }
    assert [e["text"] for e in log.events("recorded")] == ["before", "after"]  # each once


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_restarted_with_other_tools(
    log: Log, http_servers: list[HTTPServer], protocol: str
) -> None:
    # Back with a tool removed and others added: the connection made again lists the tools
    # anew, so `server.tools` is the new server's; a run that kept the old list and calls the
    # removed tool gets the server's own error result naming it, and its other calls run.
    http = HTTPServer(log, "--extra-tools", "2")
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol=protocol, prefix="s") as server:
            old_tools = server.tools
            assert {"tool_0", "tool_1"} <= set(by_remote(server))
            http.kill()
            with trio.fail_after(5), pytest.raises(MCPToolError):
                await by_remote(server)["add"].execute({"a": 1, "b": 2})  # finds it gone
            port = http.port
            http_servers.append(
                await trio.to_thread.run_sync(
                    lambda: HTTPServer(log, "--extra-tools", "1", "--odd-names", port=port)
                )
            )
            model = ScriptedChatClient(
                [
                    calls_response(("c1", "s_tool_1", {}), ("c2", "s_tool_0", {})),
                    answer(),
                ]
            )
            result = await run_to_completion(FunctionInvokingChatClient(model, old_tools), USER)
            assert set(by_remote(server)) == BASE_TOOLS | {"tool_0", "files.read.v2", "x" * 100}
            assert server.remote_names["s_files_read_v2"] == "files.read.v2"
            assert await by_remote(server)["files.read.v2"].execute({}) == "dotted"
    results = called(result.updates)
    assert results["c1"].is_error
    assert "tool_1" in results["c1"].result
    assert (results["c2"].result, results["c2"].is_error) == ("tool 0", False)
    assert_transcript_valid(result.messages)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_many_calls_when_an_http_server_dies_then_the_next_run_works(
    log: Log, http_servers: list[HTTPServer], protocol: str
) -> None:
    # 20 calls running when the server is killed: each gets exactly one result (an error
    # naming the server), none hangs, the run ends with a valid transcript; the server comes
    # back on its port and the next run's calls are answered, without leaving the block.
    http = HTTPServer(log)
    http_servers.append(http)
    calls = [(f"c{i}", "slow", {"seconds": 30, "tag": str(i)}) for i in range(20)]
    model = ScriptedChatClient([calls_response(*calls), answer()])
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol=protocol) as server:
            client = FunctionInvokingChatClient(model, server.tools)

            async def kill() -> None:
                await log.wait_for(lambda log: len(log.events("call")) == len(calls))
                http.kill()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill)
                with trio.fail_after(10):
                    result = await run_to_completion(client, USER)
            port = http.port
            http_servers.append(await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port)))
            later = [(f"l{i}", "add", {"a": i, "b": 1}) for i in range(20)]
            again = await run_to_completion(
                FunctionInvokingChatClient(
                    ScriptedChatClient([calls_response(*later), answer()]), server.tools
                ),
                USER,
            )
    tool_messages = [m for m in result.messages if m.role.value == "tool"]
    assert len(tool_messages) == len(calls)
    results = called(result.updates)
    assert set(results) == {c[0] for c in calls}
    for outcome in results.values():
        assert outcome.is_error
        assert f"MCP server {http.url!r} (named 'test-server')" in outcome.result
    assert_transcript_valid(result.messages)
    assert {c: u.result for c, u in called(again.updates).items()} == {
        f"l{i}": str(i + 1) for i in range(20)
    }


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("forget", "answered tools/list with JSON-RPC error -32600"),  # (initialize has no session)
        ("forget-calls", "is not available: the server ended the session"),
        ("500", "(HTTP 500 Internal Server Error)"),
        ("bad-init", "ValidationError"),
        ("hang", "did not finish the handshake within init_timeout=1 s"),
    ],
)
async def test_an_http_server_back_but_misbehaving(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path, mode: str, says: str
) -> None:
    # Found gone, then back on its port, but forgetting every session (or every call's),
    # answering HTTP 500, a handshake that is not one, or nothing: each call gets one error
    # result, in bounded
    # time; none runs twice (a call refused twice is not sent a third time); once the server
    # behaves again, the next call is answered.
    mode_file = tmp_path / "mode"
    http = HTTPServer(log, "--mode-file", str(mode_file))
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy", init_timeout=1) as server:
            record = by_remote(server)["record"]
            http.kill()
            with trio.fail_after(5), pytest.raises(MCPToolError, match="ended while the call"):
                await record.execute({"text": "finds it gone"})
            mode_file.write_text(mode, encoding="utf-8")
            http_servers.append(HTTPServer(log, "--mode-file", str(mode_file), port=http.port))
            for i in range(3):
                with trio.fail_after(5), pytest.raises(MCPToolError) as refused:
                    await record.execute({"text": f"refused {i}"})
                assert says in str(refused.value)
                assert not server.available
            mode_file.write_text("", encoding="utf-8")
            with trio.fail_after(5):
                assert await record.execute({"text": "back"}) == "recorded back"
            assert server.available
    assert [e["text"] for e in log.events("recorded")] == ["back"]
    if mode == "forget-calls":
        assert len(log.events("forgot")) == 2 * 3  # each call: sent, refused, sent once more


async def test_each_session_of_a_server_whose_listing_fails_is_ended(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path
) -> None:
    # Back on its port, the server finishes each handshake but fails to list its tools: every
    # attempt to connect again (a call's, the background's) makes a session that is no use,
    # and each is ended (DELETE) at once, not left on the server until the block ends.
    mode_file = tmp_path / "mode"
    http = HTTPServer(log, "--mode-file", str(mode_file))
    http_servers.append(http)
    with trio.fail_after(ENTER + 30):
        async with MCPServer.http(http.url, protocol="legacy", init_timeout=2) as server:
            add = by_remote(server)["add"]
            http.kill()
            mode_file.write_text("fail-list", encoding="utf-8")
            restart = functools.partial(
                HTTPServer, log, "--mode-file", str(mode_file), port=http.port
            )
            http_servers.append(await trio.to_thread.run_sync(restart))
            for _ in range(3):
                with trio.fail_after(5), pytest.raises(MCPToolError) as refused:
                    await add.execute({"a": 1, "b": 2})
            assert "the tool list is not ready" in str(refused.value)
            assert not server.available
            made = len(log.events("initialize"))
            assert made >= 3
            # (the first session's DELETE too, answered 404 by the restarted server)
            await log.wait_for(lambda log: len(log.events("delete")) >= made + 1)
            mode_file.write_text("", encoding="utf-8")
            with trio.fail_after(5):
                assert await add.execute({"a": 1, "b": 2}) == "3"
    sessions = [e["session"] for e in log.events("delete")]
    # every session ended once: the first, each that failed, and the last (at the block's end;
    # it may be one whose handshake came while the listing still failed)
    assert len(sessions) == len(set(sessions)) >= len(log.events("initialize")) + 1
    assert all(sessions)


async def test_a_session_made_again_is_deleted_when_the_block_ends(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path
) -> None:
    # As the first session is: the server is told (DELETE) that the session ends, not left
    # to time it out.
    mode = str(tmp_path / "mode")  # (not there: the server behaves; it logs each DELETE)
    http = HTTPServer(log, "--mode-file", mode)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy") as server:
            http.kill()
            http_servers.append(HTTPServer(log, "--mode-file", mode, port=http.port))
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"  # a new one
            await log.wait_for(lambda log: len(log.events("delete")) == 1)  # (the old one)
    deleted = [e["session"] for e in log.events("delete")]
    assert len(deleted) == 2
    assert deleted[0] != deleted[1]


async def _close_cancelled(server: MCPServer, how: str) -> None:
    """Enter ``server`` and leave it as ``how`` says, its close cancelled each way."""
    if how == "init_timeout":  # the handshake done, the listing never answered
        with pytest.raises(MCPInitTimeoutError, match="did not list its tools"):
            async with server:
                pytest.fail("entered")
    elif how == "cancelled entering":
        with trio.move_on_after(1.5) as scope:
            async with server:
                pytest.fail("entered")
        assert scope.cancelled_caught
    elif how == "cancelled serving":
        with trio.CancelScope() as scope:
            async with server:
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
    else:  # "cancelled calling": a call is running in another task when the block is cancelled
        with trio.CancelScope() as scope:
            async with server, trio.open_nursery() as nursery:
                slow = by_remote(server)["slow"]
                nursery.start_soon(slow.execute, {"seconds": 30, "tag": "held"})
                await trio.sleep(0.5)  # a real wait: the call reaches the server
                scope.cancel()
        assert scope.cancelled_caught


HOW = ["init_timeout", "cancelled entering", "cancelled serving", "cancelled calling"]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize("how", HOW)
async def test_a_session_whose_close_is_cancelled_is_still_deleted(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path, how: str, protocol: str
) -> None:
    # The SDK ends the session with a DELETE in the task that closes it; where that close is
    # cancelled, the DELETE was never sent and the server kept the session. Each way a close
    # is cancelled, the session is ended as when the block ends on its own.
    mode_file = tmp_path / "mode"
    http = HTTPServer(log, "--mode-file", str(mode_file))
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol=protocol):
            pass
    expected = len(log.events("delete"))  # as the block ends on its own (0 with no session)
    mode_file.write_text("hang-list" if how in HOW[:2] else "", encoding="utf-8")
    start = trio.current_time()
    with trio.fail_after(ENTER):
        init_timeout = 1 if how == "init_timeout" else 30
        server = MCPServer.http(http.url, protocol=protocol, init_timeout=init_timeout)
        await _close_cancelled(server, how)
    assert trio.current_time() - start < ENTER / 2
    if protocol == "legacy":
        assert expected == 1
    await log.wait_for(lambda log: len(log.events("delete")) >= 2 * expected)
    sessions = [e["session"] for e in log.events("delete")]
    assert len(sessions) == 2 * expected
    assert len(set(sessions)) == len(sessions)
    assert all(sessions)
    if how == "cancelled calling":  # and the server was told to stop the call
        await log.wait_for(lambda log: log.cancelled_tags() == ["held"])


async def test_a_session_made_again_that_never_lists_is_deleted_when_the_block_ends(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path
) -> None:
    # Connecting again to a restarted server that finishes the handshake but never lists its
    # tools: the block's end cancels that connection (its close is cancelled), and its
    # session is ended too.
    mode_file = tmp_path / "mode"
    http = HTTPServer(log, "--mode-file", str(mode_file))
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy", init_timeout=30) as server:
            http.kill()
            mode_file.write_text("hang-list", encoding="utf-8")
            restart = functools.partial(
                HTTPServer, log, "--mode-file", str(mode_file), port=http.port
            )
            http_servers.append(await trio.to_thread.run_sync(restart))
            with trio.move_on_after(2):  # the call waits for the connection made again
                await by_remote(server)["add"].execute({"a": 1, "b": 2})
                pytest.fail("answered")
            assert log.events("initialize")  # (logged by the restarted server only)
    # the first session (answered 404 by the restarted server) and every one made again
    made = 1 + len(log.events("initialize"))
    await log.wait_for(lambda log: len(log.events("delete")) >= made)
    sessions = [e["session"] for e in log.events("delete")]
    assert len(sessions) == len(set(sessions)) == made
    assert all(sessions)


async def test_a_cancelled_close_waits_for_a_delete_no_longer_than_its_bound(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path
) -> None:
    # A server that never answers the DELETE holds the cancelled close no longer than the
    # DELETE's own bound (5 s), and nothing more is sent.
    mode_file = tmp_path / "mode"
    http = HTTPServer(log, "--mode-file", str(mode_file))
    http_servers.append(http)
    mode_file.write_text("hang-list hang-delete", encoding="utf-8")
    start = time.monotonic()
    with trio.fail_after(ENTER):
        await _close_cancelled(
            MCPServer.http(http.url, protocol="legacy", init_timeout=1), "init_timeout"
        )
    assert time.monotonic() - start < 1 + 5 + 5
    assert len(log.events("delete")) == 1


async def test_connecting_again_to_a_server_that_hangs_is_bounded(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # Back on its port but answering nothing: a call waits for the new connection no longer
    # than its own timeout (it was not sent), and one without a timeout gets "not available"
    # after init_timeout; leaving the block while the connection is being made ends it at
    # once, a call waiting for it gets an error result, and nothing is left running.
    http = HTTPServer(log)
    http_servers.append(http)
    waiting: list[BaseException] = []
    server = MCPServer.http(http.url, init_timeout=1.5, timeout=0.5)

    async def wait_for_it(add: MCPTool) -> None:
        try:
            await add.execute({"a": 1, "b": 2})
        except MCPToolError as exc:
            waiting.append(exc)

    with trio.fail_after(ENTER):
        async with trio.open_nursery() as listener, trio.open_nursery() as nursery:
            async with server:
                add = by_remote(server)["add"]
                http.kill()
                with trio.fail_after(5), pytest.raises(MCPToolError) as first:
                    await add.execute({"a": 1, "b": 2})  # finds it gone
                await first_attempt_over(server)
                await listener.start(hold_silently, http.port)
                with trio.fail_after(2), pytest.raises(MCPTimeoutError) as timed_out:
                    await add.execute({"a": 1, "b": 2})
                server.timeout = None
                with trio.fail_after(3), pytest.raises(MCPToolError) as slow:
                    await add.execute({"a": 1, "b": 2})
                server.init_timeout = 60
                nursery.start_soon(wait_for_it, add)
                while server._attempt is None:  # noqa: ASYNC110 -- a real connection
                    await trio.sleep(0.02)
                await trio.sleep(0.2)
                left = trio.current_time()
            assert trio.current_time() - left < 2
            with trio.fail_after(2):
                while not waiting:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            listener.cancel_scope.cancel()
    assert "ended while the call was running" in str(first.value)
    assert "timed out after 0.5 s while connecting again" in str(timed_out.value)
    assert "the call was not sent" in str(timed_out.value)
    assert (
        'did not answer server/discover (the handshake of protocol="auto") within '
        "init_timeout=1.5 s" in str(slow.value)
    )  # (it answers nothing)
    assert "is not available: it was closed" in str(waiting[0])
    assert not server.available


async def test_connecting_again_to_a_port_that_does_not_answer_is_bounded_by_init_timeout(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # Something holds the server's port but takes no connection (its queue of connections
    # not yet accepted is full, so a connect waits): a call without a timeout of its own is
    # answered "not available" after init_timeout, as for a server that does not answer.
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, init_timeout=0.5, timeout=None) as server:
            add = by_remote(server)["add"]
            http.kill()
            with trio.fail_after(5), pytest.raises(MCPToolError):
                await add.execute({"a": 1, "b": 2})  # finds it gone
            with socket.socket() as full, socket.socket() as waiting:
                full.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                full.bind(("127.0.0.1", http.port))
                full.listen(0)
                waiting.connect(("127.0.0.1", http.port))  # (never accepted)
                start = trio.current_time()
                with trio.fail_after(5), pytest.raises(MCPToolError) as slow:
                    await add.execute({"a": 1, "b": 2})
                assert trio.current_time() - start < 2
    assert "is not available" in str(slow.value)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_leaving_the_block_while_connecting_again_to_a_server_that_is_back(
    log: Log, http_servers: list[HTTPServer], monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    # The block ends while the attempt to connect again is still checking the server's port
    # (the server is back, so the handshake would succeed): leaving is at once, the call
    # waiting gets an error result, and no connection is made after the block (it would be
    # held open, and leaving would wait for it forever).
    http = HTTPServer(log)
    http_servers.append(http)
    probing = trio.Event()
    reachable = trio_invoke.mcp._server._HTTP.reachable

    async def slow_probe(target: Any) -> bool:
        probing.set()
        await trio.sleep(0.3)  # (a port slow to take the connection)
        return await reachable(target)

    waiting: list[BaseException] = []

    async def wait_for_it(add: MCPTool) -> None:
        try:
            await add.execute({"a": 1, "b": 2})
        except MCPToolError as exc:
            waiting.append(exc)

    with trio.fail_after(ENTER):
        async with trio.open_nursery() as nursery:
            async with MCPServer.http(http.url, protocol=protocol) as server:
                add = by_remote(server)["add"]
                http.kill()
                with trio.fail_after(5), pytest.raises(MCPToolError):
                    await add.execute({"a": 1, "b": 2})  # finds it gone
                await first_attempt_over(server)
                http_servers.append(HTTPServer(log, port=http.port))
                monkeypatch.setattr(trio_invoke.mcp._server._HTTP, "reachable", slow_probe)
                nursery.start_soon(wait_for_it, add)
                await probing.wait()
                left = trio.current_time()
            assert trio.current_time() - left < 0.2
            with trio.fail_after(2):
                while not waiting:  # noqa: ASYNC110
                    await trio.sleep(0.02)
    assert "is not available: it was closed" in str(waiting[0])
    assert not server.available


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_leaving_the_block_while_an_http_server_hangs_is_bounded(
    log: Log, http_servers: list[HTTPServer], protocol: str
) -> None:
    # The server stops answering (its port still takes connections): calls time out, and
    # leaving the block (which deletes the session) is done within a bounded wait.
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with trio.open_nursery() as listener:
            async with MCPServer.http(http.url, protocol=protocol, timeout=0.5) as server:
                http.kill()
                await listener.start(hold_silently, http.port)
                with trio.fail_after(2), pytest.raises(MCPTimeoutError):
                    await by_remote(server)["add"].execute({"a": 1, "b": 2})
                left = trio.current_time()
            assert trio.current_time() - left < 5 + 2
            listener.cancel_scope.cancel()


async def test_ctrl_c_while_connecting_again_comes_out_at_once(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # A KeyboardInterrupt in the block while a call waits for a new connection (to a server
    # that hangs): the block ends at once, the interrupt comes out of it as it is, the call
    # waiting gets an error result, and the connection being made is abandoned.
    http = HTTPServer(log)
    http_servers.append(http)
    waiting: list[BaseException] = []
    server = MCPServer.http(http.url)

    async def wait_for_it(add: MCPTool) -> None:
        try:
            await add.execute({"a": 1, "b": 2})
        except MCPToolError as exc:
            waiting.append(exc)

    with trio.fail_after(ENTER):
        async with trio.open_nursery() as listener:
            async with trio.open_nursery() as nursery:
                with pytest.raises(KeyboardInterrupt):
                    async with server:
                        add = by_remote(server)["add"]
                        http.kill()
                        with trio.fail_after(5), pytest.raises(MCPToolError):
                            await add.execute({"a": 1, "b": 2})  # finds it gone
                        await first_attempt_over(server)
                        await listener.start(hold_silently, http.port)
                        nursery.start_soon(wait_for_it, add)
                        while server._attempt is None:  # noqa: ASYNC110 -- a real connection
                            await trio.sleep(0.02)
                        await trio.sleep(0.2)
                        left = trio.current_time()
                        raise KeyboardInterrupt
                assert trio.current_time() - left < 2
            listener.cancel_scope.cancel()
    assert "is not available: it was closed" in str(waiting[0])
    assert not server.available


async def first_attempt_over(server: MCPServer) -> None:
    """Until the attempt to connect again made in the background at the loss has failed (call
    it before the server's port takes connections again): the next attempt is to what takes
    them."""
    with trio.fail_after(5):
        while server._again is None or server._attempt is not None:  # noqa: ASYNC110
            await trio.sleep(0.02)


async def hold_silently(port: int, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Takes connections on ``port`` and never answers (a server that hangs)."""
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")

    async def hold(stream: trio.SocketStream) -> None:
        async with stream:
            await trio.sleep_forever()

    await trio.serve_listeners(hold, listeners, task_status=task_status)


async def wait_until_unavailable(server: MCPServer) -> None:
    while server.available:  # noqa: ASYNC110 -- another process
        await trio.sleep(0.02)


# -- text and bytes that are not valid ---------------------------------------------------------


async def test_arguments_with_lone_surrogates_do_not_end_the_connection(make_server: Any) -> None:
    # A model's arguments may hold half of a surrogate pair (an emoji cut in two): it reaches
    # the server as U+FFFD, as on every wire trio_invoke writes, and the connection goes on.
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("half", "echo", '{"text": "cut \\ud83d"}')),
            calls_response(("next", "add", {"a": 1, "b": 2})),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with make_server() as server:
            result = await run_to_completion(FunctionInvokingChatClient(model, server.tools), USER)
            assert server.available
    results = called(result.updates)
    assert results["half"].result == "cut \ufffd"
    assert results["next"].result == "3"


async def test_bytes_on_stdout_that_are_not_utf8_do_not_end_the_connection(log: Log) -> None:
    # A stdio server that prints bytes that are not UTF-8: the line is not a message (the SDK
    # logs it), and every later answer is still read.
    with trio.fail_after(ENTER):
        async with stdio(log, "--wire", timeout=None) as server:
            tools = by_remote(server)
            with trio.fail_after(10):
                junk = b"\xff\xfe not utf-8 \xc3\n".hex()
                assert await tools["wire_bytes"].execute({"data_hex": junk}) == "written"
                assert await tools["echo"].execute({"text": "still here"}) == "still here"
            assert server.available


@pytest.mark.parametrize(
    "answer_line",
    [
        '{"jsonrpc": "2.0", "id": {id}, "result": null}',
        '{"jsonrpc": "2.0", "id": {id}, "result": [1, 2]}',
        '{"jsonrpc": "2.0", "id": {id}, "error": "no"}',
        '{"jsonrpc": "2.0", "id": {id}, "error": {"message": "no code"}}',
        '{"jsonrpc": "1.0", "id": {id}, "result": {"content": []}}',
    ],
)
async def test_an_answer_over_stdio_that_cannot_be_read_is_that_calls_error(
    log: Log, answer_line: str
) -> None:
    # The answer names its call but is not a valid response: that call gets an error result
    # at once (as over HTTP), not a wait for an answer that never comes.
    with trio.fail_after(ENTER):
        async with stdio(log, "--wire", timeout=None) as server:
            tools = by_remote(server)
            with trio.fail_after(10), pytest.raises(MCPToolError) as caught:
                await tools["wire_answer"].execute({"template": answer_line})
            assert caught.value.code == mcp_types.PARSE_ERROR
            assert "could not be read" in str(caught.value)
            assert server.available
            assert await tools["add"].execute({"a": 1, "b": 2}) == "3"


async def test_an_answer_over_stdio_with_a_lone_surrogate_escape_is_read(log: Log) -> None:
    # JSON.stringify writes half a surrogate pair as "\\ud83d", which the SDK's parser refuses;
    # the answer is still the call's result (the loop sends it on as U+FFFD).
    cut = '"cut \\ud83d"'
    result = '{"content": [{"type": "text", "text": CUT}], "structuredContent": {"result": CUT}'
    line = '{"jsonrpc": "2.0", "id": {id}, "result": ' + result.replace("CUT", cut)
    line += ', "resultType": "complete"}}'
    with trio.fail_after(ENTER):
        async with stdio(log, "--wire", timeout=None) as server:
            with trio.fail_after(10):
                text = await by_remote(server)["wire_answer"].execute({"template": line})
    assert text == "cut \ud83d"  # one code point: the half pair as it came


def unparsed(line: str) -> pydantic.ValidationError:
    """What the SDK's stdio transport hands the session for ``line``."""
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError(f"{line!r} parses")  # pragma: no cover


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"jsonrpc": "2.0", "method": 5}',
        '{"jsonrpc": "2.0", "id": true, "result": null}',
        '{"jsonrpc": "2.0", "id": null, "error": 1}',
    ],
)
def test_lines_that_answer_no_request_are_left_to_the_sdk(line: str) -> None:
    from trio_invoke.mcp._server import _readable

    exc = unparsed(line)
    assert _readable(exc) is exc


def http_response(status: int, body: bytes, kind: str, request_body: bytes) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1:9/mcp", content=request_body)
    return httpx2.Response(status, content=body, headers={"content-type": kind}, request=request)


@pytest.mark.parametrize(
    ("response", "noted"),
    [
        (http_response(401, b"no", "text/plain", b'{"id": 7, "method": "tools/call"}'), True),
        (http_response(502, b"[]", "application/json", b'{"id": "7", "method": "x"}'), True),
        (http_response(400, b'{"error": {"code": 1}}', "application/json", b'{"id": 7}'), False),
        (http_response(401, b"no", "text/plain", b'{"method": "notifications/x"}'), False),
        (http_response(401, b"no", "text/plain", b'{"id": true}'), False),
        (http_response(401, b"no", "text/plain", b"not json"), False),
    ],
)
async def test_an_http_error_status_is_noted_only_for_a_request_without_json_rpc_error(
    response: httpx2.Response, noted: bool
) -> None:
    from trio_invoke.mcp._server import _note_status

    statuses: dict[Any, str] = {}
    await _note_status(response, statuses)
    assert bool(statuses) is noted
    if noted:
        assert set(statuses.values()) == {f"HTTP {response.status_code} {response.reason_phrase}"}


@pytest.mark.parametrize(
    ("method", "body", "long_lived"),
    [
        ("POST", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}', True),
        ("POST", b'{"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen"}', True),
        ("GET", b"", True),
        ("POST", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}', False),
        ("POST", b'{"jsonrpc": "2.0", "method": "notifications/cancelled"}', False),
        ("POST", b"not json", False),
        ("POST", b"[]", False),
        ("PUT", b"", False),
    ],
)
async def test_only_calls_and_streams_go_without_read_and_pool_timeouts(
    method: str, body: bytes, long_lived: bool
) -> None:
    from trio_invoke.mcp._server import _HTTP_TIMEOUT, _long_lived

    async with httpx2.AsyncClient(timeout=_HTTP_TIMEOUT) as http:
        request = http.build_request(method, "http://127.0.0.1:9/mcp", content=body or None)
    await _long_lived(request)
    timeouts = request.extensions["timeout"]
    assert timeouts["connect"] == 30.0
    if long_lived:
        assert (timeouts["read"], timeouts["pool"]) == (None, None)
    else:
        assert (timeouts["read"], timeouts["pool"]) == (300.0, 30.0)


async def test_the_request_that_deletes_the_session_is_bounded_in_all() -> None:
    from trio_invoke.mcp._server import _CLOSE_TIMEOUT, _HTTP_TIMEOUT, _long_lived

    async with httpx2.AsyncClient(timeout=_HTTP_TIMEOUT) as http:
        request = http.build_request("DELETE", "http://127.0.0.1:9/mcp")
    await _long_lived(request)
    assert request.extensions["timeout"] == dict.fromkeys(
        ("connect", "read", "write", "pool"), _CLOSE_TIMEOUT
    )


async def test_only_the_sdks_stand_in_for_a_noted_request_gets_its_status() -> None:
    from trio_invoke.mcp._server import _Noted, _WatchedStream

    def error(request_id: int, code: int, message: str) -> SessionMessage:
        data = mcp_types.ErrorData(code=code, message=message)
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=data))

    answer = SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=1, result={}))
    sent = [
        answer,
        error(2, mcp_types.INVALID_REQUEST, "Session terminated"),
        error(3, mcp_types.INTERNAL_ERROR, "Server returned an error response"),
        error(4, mcp_types.INTERNAL_ERROR, "its own"),
    ]
    send, receive = trio.open_memory_channel[SessionMessage](len(sent))
    for item in sent:
        send.send_nowait(item)
    statuses: dict[Any, str] = {2: "HTTP 404 Not Found", 3: "HTTP 401 Unauthorized"}
    stream = _WatchedStream(receive, lambda: None, _Noted(statuses=statuses))
    got = [await stream.receive() for _ in sent]
    assert got[0] is answer
    assert got[1] is sent[1]  # the SDK's own words for a 404: the status is not needed
    assert got[2].message.error.message == (  # type: ignore[union-attr]
        "Server returned an error response (HTTP 401 Unauthorized)"
    )
    assert got[3] is sent[3]
    assert statuses == {}


# -- tool list changes --------------------------------------------------------------------------


async def wait_for_tool(server: MCPServer, remote: str, present: bool = True) -> None:
    # (30 s: on a loaded 2-core machine a restarted server's process takes seconds to listen,
    # and listening again backs off meanwhile; a run that works takes well under one)
    with trio.fail_after(30):
        while (remote in by_remote(server)) != present:  # noqa: ASYNC110 -- another process
            await trio.sleep(0.02)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_the_tool_list_follows_the_server(make_server: Any, protocol: str) -> None:
    with trio.fail_after(ENTER):
        async with make_server(prefix="s", protocol=protocol) as server:
            before = server.tools
            assert await by_remote(server)["add_tool"].execute({"name": "weather"}) == (
                "added weather"
            )
            await wait_for_tool(server, "weather")
            weather = by_remote(server)["weather"]
            assert weather.name == "s_weather"
            assert weather.description == "The weather tool."
            assert await weather.execute({}) == "I am weather"
            assert "weather" not in {t.remote_name for t in before}  # the old tuple stays
            await by_remote(server)["remove_tool"].execute({"name": "echo"})
            await wait_for_tool(server, "echo", present=False)
            assert set(by_remote(server)) == (BASE_TOOLS | {"weather"}) - {"echo"}


async def test_one_tool_list_change_is_one_listing(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # A change comes on the subscriptions/listen stream, and the SDK tees it to the message
    # handler too: the tools are listed once for it, not once for each.
    http = HTTPServer(log, "--page-size", "100")  # (the server logs each tools/list page)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            before = len(log.events("tools/list"))
            await by_remote(server)["add_tool"].execute({"name": "weather"})
            await wait_for_tool(server, "weather")
            await trio.sleep(0.5)  # (a real wait: a second listing would come meanwhile)
            assert len(log.events("tools/list")) == before + 1


async def test_tool_list_changes_are_followed_again_after_an_http_server_restart(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # The 2026-07-28 protocol has no session: a server restarted on its port while nothing ran
    # answers calls as before, but the subscriptions/listen stream was lost with it (the SDK:
    # "re-listen and refetch"). It is opened again, and the tools are listed again: what
    # changed in between (the restarted server lost the tool added before) shows too.
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            assert await by_remote(server)["add_tool"].execute({"name": "before"}) == (
                "added before"
            )
            await wait_for_tool(server, "before")
            http.kill()
            http_servers.append(HTTPServer(log, port=http.port))  # (this loop waits meanwhile)
            await wait_for_tool(server, "before", present=False)  # listed again
            assert server.available
            assert await by_remote(server)["add_tool"].execute({"name": "after"}) == "added after"
            await wait_for_tool(server, "after")  # followed again
            assert set(by_remote(server)) == BASE_TOOLS | {"after"}


async def test_a_tool_list_change_while_connecting_again_is_followed(
    log: Log, http_servers: list[HTTPServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server's tools change while the new connection is being made, after its listing
    # was answered (another client adds one): the change it announces is not lost, and
    # `server.tools` has the new tool, as when the change comes while entering.
    http = HTTPServer(log)
    http_servers.append(http)
    listing = MCPServer._list
    other: list[MCPServer] = []
    changed = []

    async def list_then_change(self: MCPServer, client: Any) -> Any:
        listed = await listing(self, client)
        if self is server and not changed:  # connecting again, in the background or for a call
            while not (other and other[0].available):  # noqa: ASYNC110 -- another process
                await trio.sleep(0.05)
            await by_remote(other[0])["add_tool"].execute({"name": "late"})
            changed.append(True)
            await trio.sleep(0.5)  # (the announcement arrives meanwhile)
        return listed

    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            add = by_remote(server)["add"]
            http.kill()
            with trio.fail_after(5), pytest.raises(MCPToolError):
                await add.execute({"a": 1, "b": 2})  # finds it gone
            monkeypatch.setattr(MCPServer, "_list", list_then_change)
            http_servers.append(HTTPServer(log, port=http.port))
            async with MCPServer.http(http.url) as changer:
                other.append(changer)
                assert await add.execute({"a": 1, "b": 2}) == "3"  # connected again
                await wait_for_tool(server, "late")
                assert changed


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_found_gone_is_connected_to_again_without_a_call(
    log: Log, http_servers: list[HTTPServer], protocol: str
) -> None:
    # A request in flight when the server goes away loses the connection (its call's result
    # says so). Once the server is back on its port the connection is made again in the
    # background, with no call to ask for it: `server.tools` is the restarted server's list
    # (it lost the tool added before), and its changes are followed again.
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol=protocol) as server:
            assert await by_remote(server)["add_tool"].execute({"name": "before"}) == (
                "added before"
            )
            await wait_for_tool(server, "before")
            http.kill()
            with trio.fail_after(5), pytest.raises(MCPToolError, match="connection ended"):
                await by_remote(server)["add"].execute({"a": 1, "b": 2})  # finds it gone
            assert not server.available
            port = http.port
            http_servers.append(await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port)))
            await wait_for_tool(server, "before", present=False)  # no call: listed again
            assert server.available
            assert await by_remote(server)["add_tool"].execute({"name": "after"}) == ("added after")
            await wait_for_tool(server, "after")  # followed again


async def test_an_http_server_restarted_again_and_again_is_connected_to_again_each_time(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # Each connection made again is lost in turn (a call finds it gone), and made again in
    # the background once the server is back: `available` and `server.tools` (each restart
    # has one more tool) say so every time, with no call to ask for it.
    http = HTTPServer(log)
    http_servers.append(http)
    port = http.port
    with trio.fail_after(2 * ENTER):
        async with MCPServer.http(http.url) as server:
            for i in range(2):  # (the second loses a connection made again)
                http_servers[-1].kill()
                with trio.fail_after(5), pytest.raises(MCPToolError, match="connection ended"):
                    await by_remote(server)["add"].execute({"a": i, "b": 1})  # finds it gone
                assert not server.available
                restarted = functools.partial(
                    HTTPServer, log, "--extra-tools", str(i + 1), port=port
                )
                http_servers.append(await trio.to_thread.run_sync(restarted))
                await wait_for_tool(server, f"tool_{i}")  # no call: connected again
                assert server.available
                assert set(by_remote(server)) == BASE_TOOLS | {f"tool_{j}" for j in range(i + 1)}
                assert await by_remote(server)["add"].execute({"a": i, "b": 1}) == str(i + 1)


async def test_connecting_again_in_the_background_backs_off_and_ends_with_the_block(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once the connection is lost it is made again at once, then, while attempts fail, after
    # a wait that doubles from 0.25 s to 30 s (it cannot spin); a call meanwhile has it try
    # at once; after a new connection it waits for the next loss, and the next loss is tried
    # at once again. The block's end stops it.
    server = MCPServer.http("http://127.0.0.1:9/mcp")
    attempts: list[float] = []
    fails = [12]

    async def connect_again(self: MCPServer, nursery: trio.Nursery) -> str | None:
        attempts.append(trio.current_time())
        if fails[0]:
            fails[0] -= 1
            return "nothing takes connections"
        self._lost = None  # (as a connection made again: see _adopt)
        return None

    monkeypatch.setattr(MCPServer, "_connect_again", connect_again)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server._reconnect, nursery)
        await trio.sleep(1)
        assert attempts == []  # nothing is lost yet
        start = trio.current_time()
        server._lose("the HTTP connection ended")
        await trio.sleep(100)
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        assert attempts[0] == start
        assert gaps == [0.25, 0.5, 1, 2, 4, 8, 16, 30, 30]
        server._entered = True
        with pytest.raises(MCPConnectionError, match=r"not available: .* \(connecting again"):
            await server._reconnected(None)  # as a call does: tried at once
        assert attempts[-1] == trio.current_time()
        assert len(attempts) == 11
        await trio.sleep(200)
        assert len(attempts) == 13  # the last one connected; then it waits
        assert attempts[-1] - attempts[-2] == 30
        assert server._lost is None
        lost_again = trio.current_time()
        server._lose("the HTTP connection ended")
        await trio.sleep(0.01)
        assert attempts[-1] == lost_again
        server._closing.set()
        server._wanted.set()  # as the block's end does
    assert len(attempts) == 14


async def test_connecting_again_warns_once_per_reason_while_the_server_is_down(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A server down for long, restarting over and over (a crash loop: its port refuses, then
    # takes connections but the handshake fails, ...): the attempts' reasons alternate, and
    # each is a WARNING once, not once per attempt (every 30 s, for as long as it is down);
    # the attempts after it are in the debug log. Once connected again, the next loss warns
    # again.
    caplog.set_level(logging.DEBUG, logger="trio_invoke.mcp")
    server = MCPServer.http("http://127.0.0.1:9/mcp")
    reasons = iter(["refused", "closed in the handshake"] * 10 + [None, "refused"])

    async def connect_again(self: MCPServer, nursery: trio.Nursery) -> str | None:
        why = next(reasons)
        if why is None:
            self._lost = None  # (as a connection made again: see _adopt)
        return why

    def warned() -> list[str]:
        return [
            r.getMessage().rpartition(": ")[2]
            for r in caplog.records
            if r.levelno >= logging.WARNING and "could not connect again" in r.getMessage()
        ]

    monkeypatch.setattr(MCPServer, "_connect_again", connect_again)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server._reconnect, nursery)
        server._lose("the HTTP connection ended")
        await trio.sleep(600)  # 20 failed attempts, then connected
        assert server._lost is None
        assert warned() == ["refused", "closed in the handshake"]
        logged = [r for r in caplog.records if "could not connect again" in r.getMessage()]
        assert len(logged) == 20  # (the other 18 at DEBUG)
        server._lose("the HTTP connection ended")
        await trio.sleep(0.01)
        assert warned() == ["refused", "closed in the handshake", "refused"]  # a new loss
        server._closing.set()
        server._wanted.set()  # as the block's end does


async def wait_until_available(server: MCPServer, available: bool) -> None:
    with trio.fail_after(30):  # (as wait_for_tool: a restarted process takes seconds to listen)
        while server.available != available:  # noqa: ASYNC110 -- another process
            await trio.sleep(0.02)


@pytest.mark.parametrize("down", [0.5, 2.0])
async def test_an_http_server_restarted_while_idle_goes_on(
    log: Log, http_servers: list[HTTPServer], down: float
) -> None:
    # Down for a while, and back on its port before any call: listening again fails meanwhile,
    # which does not lose the server (the 2026-07-28 protocol has no session to lose), though
    # it is not available; once it is back, it is, and calls are answered and tool list
    # changes followed as before. (The restart runs
    # in a thread, so that the loop goes on meanwhile.)
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"
            http.kill()
            await trio.sleep(down)  # nothing is called meanwhile
            port = http.port
            http_servers.append(await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port)))
            await wait_until_available(server, True)  # (the listen stream's next attempt)
            assert server._lost is None, server._lost
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"
            assert await by_remote(server)["add_tool"].execute({"name": "after"}) == "added after"
            await wait_for_tool(server, "after")


async def test_a_server_that_stops_taking_connections_while_idle_is_not_available_until_back(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # The 2026-07-28 protocol: nothing is called, so no request finds the server gone; its
    # tool list changes stream ends, and its port refuses connections: not available. Back on
    # its port, it is available again with no call, the same connection (no session to lose),
    # and its tool list changes are followed. (The restart runs in a thread.)
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            assert server._client is not None
            assert server._announces_changes(server._client)  # a 2026-07-28 listen stream
            assert await by_remote(server)["add_tool"].execute({"name": "before"}) == (
                "added before"
            )
            await wait_for_tool(server, "before")
            epoch = server._epoch
            http.kill()
            await wait_until_available(server, False)
            assert server._lost is None  # not lost: its connection goes on once it is back
            assert "not connected" in repr(server)
            port = http.port
            http_servers.append(await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port)))
            await wait_until_available(server, True)
            assert server._epoch == epoch
            await wait_for_tool(server, "before", present=False)  # the restarted server's list
            assert await by_remote(server)["add_tool"].execute({"name": "after"}) == "added after"
            await wait_for_tool(server, "after")


async def test_a_call_to_a_server_that_stopped_taking_connections_says_it_is_not_available(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # Still down when a call comes: the call is not sent, and says why at once; the server is
    # lost (connected to again once it is back, by the next call or the background).
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            add = by_remote(server)["add"]
            http.kill()
            await wait_until_available(server, False)
            with trio.fail_after(5), pytest.raises(MCPToolError) as refused:
                await add.execute({"a": 1, "b": 2})
            assert server._lost is not None
            restart = functools.partial(HTTPServer, log, port=http.port)
            http_servers.append(await trio.to_thread.run_sync(restart))
            with trio.fail_after(30):
                assert await add.execute({"a": 2, "b": 2}) == "4"
            assert server.available
    assert str(refused.value) == (
        f"MCP server {http.url!r} (named 'test-server') is not available: it stopped taking "
        f"connections while nothing was called (connecting again failed: nothing takes "
        f"connections at {http.url})"
    )


async def test_a_call_answered_says_a_server_that_stopped_taking_connections_is_back(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # Back before the listen stream's next attempt (which may be up to 30 s away): the first
    # call it answers makes it available again.
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url) as server:
            server._unreachable = server._epoch  # as the listen stream records it
            assert not server.available
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"
            assert server.available


@pytest.mark.parametrize("restarts", [1, 2])
async def test_ending_a_session_a_restarted_server_never_knew_is_no_warning(
    log: Log, http_servers: list[HTTPServer], caplog: pytest.LogCaptureFixture, restarts: int
) -> None:
    # Each session ends with a DELETE; the restarted server answers 404 for the sessions of
    # the servers before it (it never knew them): the end the DELETE asked for, not a failed
    # termination to warn of. (A DELETE of ours answered otherwise still is, by the SDK.)
    caplog.set_level(logging.DEBUG)
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER * (restarts + 1)):
        async with MCPServer.http(http.url, protocol="legacy") as server:
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"
            for _ in range(restarts):
                epoch = server._epoch
                http_servers[-1].kill()
                restart = functools.partial(HTTPServer, log, port=http.port)
                http_servers.append(await trio.to_thread.run_sync(restart))
                with trio.fail_after(30):  # until a call is answered over a new session
                    while server._epoch == epoch or not server.available:
                        with contextlib.suppress(MCPToolError):  # (the connection ended)
                            await by_remote(server)["add"].execute({"a": 1, "b": 2})
                        await trio.sleep(0.05)
                assert await by_remote(server)["add"].execute({"a": 2, "b": 2}) == "4"
    terminations = [r for r in caplog.records if "Session termination" in r.getMessage()]
    assert [r for r in terminations if r.levelno >= logging.WARNING] == []
    ended = "the server knew the session no more when it was ended (HTTP 404)"
    assert any(r.getMessage() == ended for r in caplog.records)


@pytest.mark.parametrize(
    ("message", "ours", "kept"),
    [
        ("Session termination failed: 404", True, False),
        ("Session termination failed: 404", False, True),  # the SDK's own users' sessions
        ("Session termination failed: 500", True, True),
        ("Session termination failed: All connection attempts failed", True, True),
    ],
)
def test_only_a_session_of_ours_ended_with_a_404_is_not_a_failed_termination(
    message: str, ours: bool, kept: bool
) -> None:
    record = logging.LogRecord(
        "mcp.client.streamable_http", logging.WARNING, __file__, 1, message, (), None
    )
    gone = trio_invoke.mcp._server._GONE_ALREADY
    token = gone.set(ours)
    try:
        assert trio_invoke.mcp._server._SDKParseErrors().filter(record) is kept
    finally:
        gone.reset(token)


async def test_a_legacy_session_a_restarted_server_forgot_while_idle_is_made_again_with_no_call(
    log: Log, http_servers: list[HTTPServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK opens its GET stream again (with the session's id) once the killed server's
    # stream breaks; the restarted server answers it 404: the session ended, so a new one is
    # made in the background, and server.tools is the restarted server's list with no call.
    # (The SDK tries once more, a second after the stream broke; here that GET waits until
    # the restarted server listens, as a server back within that second would be there.)
    long_lived = trio_invoke.mcp._server._long_lived
    back = trio.Event()
    killed = False

    async def gated(request: httpx2.Request) -> None:
        if killed and request.method == "GET":
            await back.wait()
        await long_lived(request)

    monkeypatch.setattr(trio_invoke.mcp._server, "_long_lived", gated)
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy") as server:
            assert await by_remote(server)["add_tool"].execute({"name": "before"}) == (
                "added before"
            )
            await wait_for_tool(server, "before")
            killed = True
            http.kill()
            port = http.port
            http_servers.append(await trio.to_thread.run_sync(lambda: HTTPServer(log, port=port)))
            back.set()
            await wait_for_tool(server, "before", present=False)  # nothing was called
            assert server.available, server._lost
            assert await by_remote(server)["add_tool"].execute({"name": "after"}) == "added after"
            await wait_for_tool(server, "after")


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_server_with_no_get_stream_stays_available(
    log: Log, http_servers: list[HTTPServer], protocol: str
) -> None:
    # The SDK's optional GET stream carries the session id too; a server with no GET for the
    # endpoint answers it 404, which is not the session's end.
    http = HTTPServer(log, "--no-get")
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol=protocol) as server:  # type: ignore[arg-type]
            await trio.sleep(1)  # the SDK opens its GET stream after the handshake
            assert server.available
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"


async def test_a_404_that_says_method_not_found_is_that_calls_error_not_the_sessions_end(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    http = HTTPServer(log, "--not-found-tool", "echo")
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy") as server:
            with pytest.raises(MCPToolError, match="Method not found"):
                await by_remote(server)["echo"].execute({"text": "hi"})
            assert server.available
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"


class Subscriptions:
    """A client whose ``listen`` streams are scripted: each item is how one attempt goes --
    an exception on opening, the number of changes the open stream announces before it is
    lost, or ``"closed"``: the server closes it at once. It records when each attempt began."""

    def __init__(self, script: list[BaseException | int | str]) -> None:
        self.script = script
        self.attempts: list[float] = []

    @asynccontextmanager
    async def listen(self, **filters: Any) -> AsyncIterator[AsyncIterator[None]]:
        self.attempts.append(trio.current_time())
        step = self.script.pop(0) if self.script else RuntimeError("refused")
        if isinstance(step, BaseException):
            raise step
        yield self.changes(step)

    async def changes(self, step: int | str) -> AsyncIterator[None]:
        if step == "closed":
            return
        for _ in range(int(step)):
            await trio.sleep(1)
            yield None
        raise RuntimeError("subscription lost")


async def test_listening_again_backs_off_refetches_and_stops_with_the_server(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It cannot spin: attempts wait 0.25 s, doubling to 30 s at most (back to 0.25 s after a
    # stream that stayed open that long); each stream opened again lists the tools again; it
    # stops once the server is lost, and with the block (a cancelled scope).
    up = [True]

    async def reachable(self: object) -> bool:
        return up[0]

    monkeypatch.setattr(
        type(MCPServer.http("http://127.0.0.1:9/mcp")._target), "reachable", reachable
    )
    server = MCPServer.http("http://127.0.0.1:9/mcp")
    changes_send, changes = trio.open_memory_channel[None](100)
    server._changed = changes_send
    refused = MCPError(mcp_types.METHOD_NOT_FOUND, "Method not found")
    client = Subscriptions([refused] + [RuntimeError("refused")] * 11 + [40, 2])

    async def refetches() -> int:
        count = 0
        while True:
            try:
                changes.receive_nowait()
            except trio.WouldBlock:
                return count
            count += 1

    with trio.CancelScope() as scope:
        scope.deadline = trio.current_time() + 400
        await server._listen(client)  # type: ignore[arg-type]
    waits = [b - a for a, b in itertools.pairwise(client.attempts[:13])]
    assert waits == [0.25, 0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30, 30]
    assert client.attempts[13] - client.attempts[12] == 40 + 0.25  # open 40 s: from 0.25 again
    assert client.attempts[14] - client.attempts[13] == 2 + 0.5  # open 2 s: doubled
    # One per stream opened again; a change on a stream is refreshed through the message
    # handler, which the SDK tees it to (test_one_tool_list_change_is_one_listing).
    assert await refetches() == 2
    assert scope.cancelled_caught  # it went on until cancelled, waiting 30 s between attempts
    assert len(client.attempts) < 14 + 400 / 30

    client = Subscriptions([RuntimeError("refused")] * 3)
    server._lose("it went away")  # (a call found it gone)
    with trio.fail_after(1):
        await server._listen(client)  # type: ignore[arg-type]
    assert len(client.attempts) == 1  # lost: it stops

    server = MCPServer.http("http://127.0.0.1:9/mcp")
    closed = MCPError(mcp_types.CONNECTION_CLOSED, "Connection closed")
    client = Subscriptions(["closed", closed, 100])
    with trio.move_on_after(10):
        await server._listen(client)  # type: ignore[arg-type]
    assert len(client.attempts) == 3  # the connection gone on listening again: it goes on
    assert server._lost is None  # (a call is what finds a server gone)

    # While the server takes no connections, nothing is sent through the SDK (a request its
    # transport cannot connect ends the session): it waits as long again, then listens.
    client = Subscriptions(["closed", 100])
    up[0] = False

    async def back() -> None:
        await trio.sleep(20)
        up[0] = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(back)
        with trio.move_on_after(40):
            await server._listen(client)  # type: ignore[arg-type]
    assert len(client.attempts) == 2
    assert client.attempts[1] - client.attempts[0] > 20  # not before the server was back


@pytest.fixture
def short_http_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx's read and pool timeouts of a fraction of a second (300 s and 30 s really)."""
    import trio_invoke.mcp._server

    short = httpx2.Timeout(30.0, read=0.3, pool=0.3)
    monkeypatch.setattr(trio_invoke.mcp._server, "_HTTP_TIMEOUT", short)


@pytest.mark.usefixtures("short_http_timeouts")
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_http_calls_longer_than_the_read_timeout_and_more_than_the_pool_are_answered(
    http_server: HTTPServer, protocol: str
) -> None:
    # A call may take its whole `timeout` (None: no limit), and an agent may run more calls at
    # once than httpx has connections: neither is a transport failure, which would end the
    # whole session (every call "the connection ... ended").
    results: list[str] = []
    with trio.fail_after(ENTER):
        async with MCPServer.http(http_server.url, timeout=20, protocol=protocol) as server:
            slow = by_remote(server)["slow"]

            async def call() -> None:
                results.append(await slow.execute({"seconds": 1}))

            async with trio.open_nursery() as nursery:
                for _ in range(105):  # httpx has 100 connections
                    nursery.start_soon(call)
            assert server.available
    assert results == ["slept 1.0"] * 105


@pytest.mark.usefixtures("short_http_timeouts")
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_tool_list_changes_are_followed_after_the_connection_was_idle(
    http_server: HTTPServer, protocol: str
) -> None:
    # The stream the server announces changes on (the GET stream; subscriptions/listen at
    # 2026-07-28) is quiet while nothing changes: httpx's read timeout must not end it (the
    # SDK gives up on a GET stream after two).
    with trio.fail_after(ENTER):
        async with MCPServer.http(http_server.url, protocol=protocol) as server:
            await trio.sleep(3)  # a real wait: ten read timeouts, and the SDK's retries
            assert await by_remote(server)["add_tool"].execute({"name": "late"}) == "added late"
            await wait_for_tool(server, "late")


async def test_a_run_in_progress_keeps_the_tools_it_started_with(log: Log) -> None:
    model = ScriptedChatClient(
        [
            calls_response(("c1", "add_tool", {"name": "late"})),
            calls_response(("c2", "late", {})),
            answer(),
        ]
    )
    with trio.fail_after(ENTER):
        async with stdio(log) as server:
            client = FunctionInvokingChatClient(model)
            first = await run_to_completion(client, USER, RunOptions(provider_tools=server.tools))
            await wait_for_tool(server, "late")
            second = await run_to_completion(
                FunctionInvokingChatClient(
                    ScriptedChatClient([calls_response(("c3", "late", {})), answer()])
                ),
                USER,
                RunOptions(provider_tools=server.tools),
            )
    # The run that added the tool did not see it: its second round's call is unknown.
    late_call = called(first.updates)["c2"]
    assert late_call.is_error
    assert "unknown tool 'late'" in late_call.result
    assert called(second.updates)["c3"].result == "I am late"


async def test_a_change_that_makes_names_collide_keeps_the_previous_tools(
    log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, "--odd-names") as server:
            before = server.tools
            await by_remote(server)["add_tool"].execute({"name": "files_read_v2"})
            with trio.fail_after(10):
                while "keeping its previous tools" not in caplog.text:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            assert server.tools == before
            assert "'files.read.v2' and 'files_read_v2'" in caplog.text
            with pytest.raises(ConfigurationError, match="files_read_v2"):
                await server.refresh_tools()
            assert server.tools == before


async def test_refresh_tools_when_not_available(log: Log) -> None:
    server = stdio(log)
    with pytest.raises(MCPConnectionError, match="not available"):
        await server.refresh_tools()
    with trio.fail_after(ENTER):
        async with server:
            os.kill(log.pids()[0], signal.SIGKILL)
            with trio.fail_after(10):
                while server.available:  # noqa: ASYNC110 -- another process
                    await trio.sleep(0.02)
            with pytest.raises(MCPConnectionError, match="not available: the server process"):
                await server.refresh_tools()


async def test_refresh_tools_after_an_http_server_went_away_or_restarted(
    log: Log, http_servers: list[HTTPServer]
) -> None:
    # refresh_tools() is a request like a call: the one that finds the server gone says so
    # and later ones (and calls) are "not available" at once, `available` says it is gone;
    # a listing refused with HTTP 404 to the session's id goes once more to a new session.
    http = HTTPServer(log)
    http_servers.append(http)
    with trio.fail_after(ENTER):
        async with MCPServer.http(http.url, protocol="legacy") as server:
            http.kill()
            with trio.fail_after(5), pytest.raises(MCPConnectionError, match="failed"):
                await server.refresh_tools()
            assert not server.available
            with trio.fail_after(1), pytest.raises(MCPConnectionError) as later:
                await server.refresh_tools()
            with trio.fail_after(1), pytest.raises(MCPToolError, match="not available"):
                await by_remote(server)["add"].execute({"a": 1, "b": 2})
            http_servers.append(HTTPServer(log, port=http.port))
            assert set(by_remote(server)) == BASE_TOOLS
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"
            http_servers[-1].kill()
            http_servers.append(HTTPServer(log, "--extra-tools", "1", port=http.port))
            with trio.fail_after(10):
                tools = await server.refresh_tools()  # refused, then listed on a new session
            assert {t.remote_name for t in tools} == BASE_TOOLS | {"tool_0"}
            assert server.available
    assert "connecting again failed: nothing takes connections" in str(later.value)


async def test_refresh_tools_lists_now(log: Log) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, "--page-size", "5") as server:
            pages = len(log.events("tools/list"))
            tools = await server.refresh_tools()
            assert tools == server.tools
            assert set(by_remote(server)) == BASE_TOOLS
            assert len(log.events("tools/list")) == 2 * pages


# -- tracing ------------------------------------------------------------------------------------


async def test_an_mcp_call_is_traced_under_its_execute_tool_span(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The MCP SDK traces each request ("MCP send tools/call NAME", kind CLIENT) in the current
    # context and sends that context to the server (SEP-414, `_meta.traceparent`): with
    # Telemetry on, both belong to the call's `execute_tool` span, in the run's trace.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from trio_invoke.otel import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The SDK's tracer follows the global provider, which can be set once per process: point
    # it at this test's provider instead (monkeypatch puts it back).
    monkeypatch.setattr("mcp.shared._otel._tracer", provider.get_tracer("mcp-python-sdk"))
    model = ScriptedChatClient([calls_response(("c1", "add", {"a": 1, "b": 2})), answer()])
    try:
        with trio.fail_after(ENTER):
            async with stdio(log) as server:
                agent = FunctionInvokingChatClient(
                    model, server.tools, telemetry=Telemetry(tracer_provider=provider)
                )
                await agent.get_response(USER)
        spans = exporter.get_finished_spans()
    finally:
        provider.shutdown()
    (run,) = [s for s in spans if s.name == "invoke_agent"]
    (call,) = [s for s in spans if s.name == "execute_tool add"]
    (send,) = [s for s in spans if s.name == "MCP send tools/call add"]
    assert send.context.trace_id == run.context.trace_id, "the MCP call is in a trace of its own"
    assert send.parent is not None
    assert send.parent.span_id == call.context.span_id
    (received,) = [e["traceparent"] for e in log.events("call")]  # version-trace-parent-flags
    assert received.split("-")[1:3] == [
        f"{run.context.trace_id:032x}",
        f"{send.context.span_id:016x}",
    ]


# -- bad input on entering ------------------------------------------------------------------------


async def test_a_command_that_does_not_exist(tmp_path: Path) -> None:
    server = MCPServer.stdio("trio-invoke-no-such-command", ["--flag"])
    with trio.fail_after(10), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pytest.fail("entered")
    message = str(caught.value)
    assert "could not start MCP server 'trio-invoke-no-such-command --flag'" in message
    assert isinstance(caught.value.__cause__, OSError)
    assert isinstance(caught.value, ConnectionError)
    with pytest.raises(RuntimeError, match="not connected"):
        server.tools  # noqa: B018


async def test_a_command_that_is_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "server.txt"
    script.write_text("not a program\n", encoding="utf-8")
    with trio.fail_after(10), pytest.raises(MCPConnectionError, match="could not start"):
        async with MCPServer.stdio(str(script)):
            pytest.fail("entered")


@pytest.mark.parametrize(
    ("code", "match"),
    [
        ("import sys; sys.exit(2)", "closed the connection during the handshake"),
        ("print('not json', flush=True)", "closed the connection during the handshake"),
    ],
)
async def test_a_process_that_is_not_an_mcp_server(code: str, match: str) -> None:
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError, match=match) as caught:
        async with MCPServer.stdio(sys.executable, ["-c", code]):
            pytest.fail("entered")
    assert sys.executable in str(caught.value)
    assert "(the server process ended or closed its output; its stderr may say why)" in str(
        caught.value
    )


async def read_http_request(stream: trio.SocketStream) -> tuple[str, bytes] | None:
    """The method and body of the HTTP/1.1 request that comes on ``stream`` (its body by its
    Content-Length), or ``None`` when the client goes away first."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = await stream.receive_some()
        if not piece:
            return None
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        piece = await stream.receive_some()
        if not piece:
            return None
        body += piece
    return lines[0].split()[0], body


def http_reply(
    status: str, kind: str, body: bytes = b"", *, headers: dict[str, str] | None = None
) -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(body)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    return f"{head}connection: close\r\n\r\n".encode() + body


def event_stream(*data: bytes) -> bytes:
    """An event stream of one ``message`` event for each of ``data`` (a line each)."""
    return b"".join(
        b"event: message\n"
        + b"".join(b"data: " + line + b"\n" for line in each.split(b"\n"))
        + b"\n"
        for each in data
    )


PINGS = b"event: ping\ndata: {}\n\nevent: ping\ndata:\n\n"
"""Two keep-alive events of a type that is not ``message``."""


async def serve_loopback(nursery: trio.Nursery, handler: Any) -> str:
    """Serve ``handler`` (one connection each) on a free port of 127.0.0.1 until ``nursery``
    ends; the URL of its /mcp."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, handler, listeners)
    return f"http://127.0.0.1:{port}/mcp"


def json_rpc_over_http(
    *,
    handshake: bytes | None = None,
    call: bytes | None = None,
    events: bool = False,
    compressed: bool = False,
    listen: bytes | None = None,
    listing: bytes | None = None,
    raw: bool = False,
    framing: str = "length",
    drop_gets: bool = False,
    pings: bool = False,
) -> Any:
    """A handler of a plain MCP server over HTTP (JSON answers, no session, no GET stream) of
    one tool, ``hello``, which answers the handshake (``initialize`` and ``server/discover``)
    with the body ``handshake``, when given, and the first ``tools/call`` with ``call``, when
    given (later ones with ``"hi"``). With ``events``, every answer is an event stream instead
    (``handshake`` and ``call`` are its events, split at NUL bytes), and with ``compressed``
    the one of ``call`` is gzipped. With ``listen``, the handshake gives a session, and each
    GET (the SDK's stream of the server's own messages) is answered with the event ``listen``.
    With ``listing``, every ``tools/list`` after the first is answered with it. With ``raw``,
    ``handshake``, ``call`` and ``listing`` are each the whole body of an event stream, sent as
    they are, framed by ``framing``: ``"length"`` or ``"chunked"`` (the stream ends as the
    server meant it to), ``"short"`` (a Content-Length a byte more than comes) or
    ``"chunked-cut"`` (no last chunk: the connection ends mid-body), or ``"close"`` (no
    length: the body ends as the connection does). With
    ``drop_gets``, a GET's connection is closed with no answer (else: 405). With ``pings``,
    every event stream that is not ``raw`` begins with two ``ping`` events (``event: ping``)."""
    calls = itertools.count()
    listings = itertools.count()

    async def reply(
        stream: trio.SocketStream, body: bytes, *, given: bool = False, initialize: bool = False
    ) -> None:
        headers = {"mcp-session-id": "s1"} if initialize and listen is not None else {}
        if raw and given:
            sent = http_reply("200 OK", "text/event-stream", body, headers=headers)
            head, _, _ = sent.partition(b"\r\n\r\n")
            length = b"content-length: %d" % len(body)
            if framing == "short":
                sent = sent.replace(length, b"content-length: %d" % (len(body) + 1))
            elif framing == "close":
                sent = head.replace(length + b"\r\n", b"") + b"\r\n\r\n" + body
            elif framing != "length":
                chunks = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
                last = b"" if framing == "chunked-cut" else b"0\r\n\r\n"
                head = head.replace(length, b"transfer-encoding: chunked")
                sent = head + b"\r\n\r\n" + chunks + last
            await stream.send_all(sent)
            return
        if not events:
            await stream.send_all(http_reply("200 OK", "application/json", body, headers=headers))
            return
        sent = event_stream(*body.split(b"\0")) if given else event_stream(body)
        sent = PINGS + sent if pings else sent
        if compressed and given:
            sent, headers["content-encoding"] = gzip.compress(sent), "gzip"
        await stream.send_all(http_reply("200 OK", "text/event-stream", sent, headers=headers))

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            request = await read_http_request(stream)
            if request is None:
                return
            method, body = request
            if method == "GET" and listen is not None:
                sent = (PINGS if pings else b"") + event_stream(listen)
                await stream.send_all(http_reply("200 OK", "text/event-stream", sent))
                return
            if method == "GET" and drop_gets:
                return
            if method != "POST":
                await stream.send_all(http_reply("405 Method Not Allowed", "text/plain"))
                return
            message = json.loads(body)
            what = message.get("method")
            if "id" not in message:  # a notification
                await stream.send_all(http_reply("202 Accepted", "application/json"))
                return
            if what == "tools/call":
                given = call if next(calls) == 0 else None
            elif what == "tools/list":
                given = listing if next(listings) > 0 else None
            else:
                given = handshake
            if given is not None:
                await reply(stream, given, given=True)
                return
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
            if what == "initialize":
                answer["result"] = {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "plain", "version": "1"},
                }
            elif what == "tools/list":
                answer["result"] = {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}
            elif what == "tools/call":
                answer["result"] = {"content": [{"type": "text", "text": "hi"}]}
            else:  # server/discover: an old server's "method not found"
                answer["error"] = {"code": mcp_types.METHOD_NOT_FOUND, "message": "no"}
            await reply(stream, json.dumps(answer).encode(), initialize=what == "initialize")

    return handle


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_that_ends_its_stream_during_the_handshake(
    nursery: trio.Nursery, protocol: str
) -> None:
    # It answers the handshake's POST with an event stream and ends it with no event: the
    # connection closed during the handshake, and there is no stderr of its own to look at.
    async def answer_with_nothing(stream: trio.SocketStream) -> None:
        async with stream:
            if await read_http_request(stream) is None:
                return
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )

    url = await serve_loopback(nursery, answer_with_nothing)
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(url, protocol=protocol):
            pytest.fail("entered")
    assert str(caught.value) == (
        f"MCP server {url!r} closed the connection during the handshake (the HTTP connection ended)"
    )


NOT_JSON_RPC = [
    pytest.param(b"", "an empty body", id="empty"),
    pytest.param(b"  \r\n", "an empty body", id="blank"),
    pytest.param(
        b"<!DOCTYPE html>\n<html>\n  <head><title>Welcome to nginx!</title></head>\n"
        b"  <body><h1>Welcome to nginx!</h1><p>If you see this page...</p></body>\n</html>\n",
        "a body that is not JSON ('<!DOCTYPE html> <html> <head><title>Welcome to nginx!</titl…')",
        id="html",
    ),
    pytest.param(
        b"\xff\xfe not text", "a body that is not JSON ('\ufffd\ufffd not text')", id="bytes"
    ),
    pytest.param(
        b'{"status": "ok"}',
        'JSON that is not a JSON-RPC response (\'{"status": "ok"}\')',
        id="json",
    ),
]
"""Bodies of a 200 application/json answer that are no JSON-RPC message, and how errors say
what they are."""


SDK_EVENT_PARSE = "Error parsing SSE message"


def sdk_parse_logs(
    caplog: pytest.LogCaptureFixture, what: str = "Error parsing JSON response"
) -> list[logging.LogRecord]:
    """The MCP SDK's records of a body (or, ``what`` saying so, an event) it could not parse."""
    return [r for r in caplog.records if r.getMessage() == what]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(("body", "what"), NOT_JSON_RPC)
async def test_an_http_server_that_answers_the_handshake_with_no_json_rpc(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, protocol: str, body: bytes, what: str
) -> None:
    # A web server's page, a health check's JSON, an empty 200: not an MCP endpoint. One line
    # says so (the SDK's own parse error is a multi-line pydantic dump), and the SDK's
    # traceback of it stays out of the log; its words are in trio_invoke.mcp's debug log.
    caplog.set_level(logging.DEBUG, logger="trio_invoke.mcp")
    url = await serve_loopback(nursery, json_rpc_over_http(handshake=body))
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(url, protocol=protocol):
            pytest.fail("entered")
    assert str(caught.value) == (
        f"MCP server {url!r} answered the handshake with {what}: not an MCP server's answer "
        "(a wrong URL or path?)"
    )
    assert sdk_parse_logs(caplog) == []
    assert "the MCP SDK could not parse a response: Failed to parse JSON response" in caplog.text


@pytest.mark.parametrize(("body", "what"), NOT_JSON_RPC)
async def test_an_http_server_that_answers_a_call_with_no_json_rpc(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, body: bytes, what: str
) -> None:
    url = await serve_loopback(nursery, json_rpc_over_http(call=body))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol="legacy") as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert server.available
    assert str(caught.value) == (
        f"MCP server {url!r} (named 'plain') answered the call of 'hello' with {what}: not an "
        "MCP server's answer"
    )
    assert caught.value.code == mcp_types.PARSE_ERROR
    assert sdk_parse_logs(caplog) == []


NOTICE = json.dumps(
    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
).encode()
ANSWER = b'{"jsonrpc": "2.0", "id": 1, "result": {}}'
NO_JSON_RPC_EVENT = [
    pytest.param(
        b"<!DOCTYPE html>\n<html>\n  <head><title>Welcome to nginx!</title></head>\n</html>",
        "an event stream with an event that is not JSON ('<!DOCTYPE html> <html> <head><title>"
        "Welcome to nginx!</titl…')",
        id="html",
    ),
    pytest.param(
        b'{"status": "ok"}',
        'an event stream with an event that is JSON but not a JSON-RPC message (\'{"status": '
        '"ok"}\')',
        id="json",
    ),
    pytest.param(
        # A good event before it (passed on), one after it (never read): the bad one is named.
        b"\0".join((NOTICE, b"oops", ANSWER)),
        "an event stream with an event that is not JSON ('oops')",
        id="among-others",
    ),
]
"""The events of a 200 text/event-stream answer one of which is no JSON-RPC message (split at
NUL bytes), and how errors say what it is."""


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(("body", "what"), NO_JSON_RPC_EVENT)
async def test_an_http_server_that_answers_the_handshake_with_an_event_of_no_json_rpc(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, protocol: str, body: bytes, what: str
) -> None:
    # As with a JSON body: one line, and no traceback of the SDK's in the log.
    caplog.set_level(logging.DEBUG, logger="trio_invoke.mcp")
    url = await serve_loopback(nursery, json_rpc_over_http(handshake=body, events=True))
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(url, protocol=protocol):
            pytest.fail("entered")
    assert str(caught.value) == (
        f"MCP server {url!r} answered the handshake with {what}: not an MCP server's answer "
        "(a wrong URL or path?)"
    )
    assert sdk_parse_logs(caplog, SDK_EVENT_PARSE) == []
    assert "the MCP SDK could not parse a response: Failed to parse SSE message" in caplog.text


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(("body", "what"), NO_JSON_RPC_EVENT)
async def test_an_http_server_that_answers_a_call_with_an_event_of_no_json_rpc(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, protocol: str, body: bytes, what: str
) -> None:
    url = await serve_loopback(nursery, json_rpc_over_http(call=body, events=True))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol=protocol) as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert server.available
            assert await hello.execute({}) == "hi"  # the session goes on
    assert str(caught.value) == (
        f"MCP server {url!r} (named 'plain') answered the call of 'hello' with {what}: not an "
        "MCP server's answer"
    )
    assert caught.value.code == mcp_types.PARSE_ERROR
    assert sdk_parse_logs(caplog, SDK_EVENT_PARSE) == []


async def test_an_http_server_that_answers_a_call_with_a_compressed_event_of_no_json_rpc(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # The events are read as they come, before httpx2 decompresses them: a compressed stream's
    # are not, and the error cannot show the event.
    url = await serve_loopback(
        nursery, json_rpc_over_http(call=b"oops", events=True, compressed=True)
    )
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol="legacy") as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert await hello.execute({}) == "hi"
    assert str(caught.value) == (
        f"MCP server {url!r} (named 'plain') answered the call of 'hello' with an event stream "
        "with an event that is not a JSON-RPC message: not an MCP server's answer"
    )
    assert sdk_parse_logs(caplog, SDK_EVENT_PARSE) == []


NO_RESPONSE = [
    pytest.param(
        b"data:\n\ndata: \n\nevent: message\ndata:\n\n", "3 events with no data", id="empty-data"
    ),
    pytest.param(
        b": keep-alive\n\nevent: ping\ndata: {}\n\n: still here\nevent: ping\n\n",
        "2 'ping' events and 2 comments",
        id="comments-and-pings",
    ),
    pytest.param(
        b"data: " + NOTICE + b"\n\n: done\n", "1 notification and 1 comment", id="a-notification"
    ),
    pytest.param(b"", "nothing", id="nothing"),
]
"""Whole bodies of a 200 text/event-stream answer that ends (at its Content-Length) with no
JSON-RPC response in it, and what errors say it held."""
ENDED = "an event stream that ended without a response"


@pytest.mark.parametrize(
    ("body", "held", "last_id"),
    [
        (
            b"\xef\xbb\xbfdata:\r\n\r\nevent: ping\rdata: x\r\r",
            "1 event with no data and 1 'ping' event",
            "",
        ),
        (b"id: a\ndata:\n\nid:\n\nretry: 5\n\n", "3 events with no data", "a"),  # (as httpx2)
        (b"retry: soon\n\nid: \0\n\n: c\n", "1 comment", ""),  # no field: not dispatched
        (b'data: {"jsonrpc": "2.0", "id": 3, "method": "ping"}\n\n', "1 request", ""),
        (b"data: {\n\n", "1 event", ""),  # (the SDK fails on it: never asked of _held)
        (b"data:\n\ndata: x\n", None, None),  # inside an event
        (b"data:\n\nid: 2\n", None, None),
        (b"data:\n\n: c", None, None),  # inside a line
    ],
)
def test_what_an_event_stream_with_no_response_held(
    body: bytes, held: str | None, last_id: str | None
) -> None:
    from trio_invoke.mcp._server import _held

    ended = _held(body)
    assert (ended and ended.held, ended and ended.last_id) == (held, last_id)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(("body", "held"), NO_RESPONSE)
async def test_an_http_server_that_answers_the_handshake_with_an_event_stream_of_no_response(
    nursery: trio.Nursery, protocol: str, body: bytes, held: str
) -> None:
    # The stream ended as the server meant it to: a wrong answer, not a connection that ended.
    url = await serve_loopback(nursery, json_rpc_over_http(handshake=body, raw=True))
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(url, protocol=protocol):
            pytest.fail("entered")
    assert str(caught.value) == (
        f"MCP server {url!r} answered the handshake with {ENDED} (it held {held})"
    )


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(("body", "held"), NO_RESPONSE)
async def test_an_http_server_that_answers_a_call_with_an_event_stream_of_no_response(
    nursery: trio.Nursery, protocol: str, body: bytes, held: str, framing: str
) -> None:
    url = await serve_loopback(nursery, json_rpc_over_http(call=body, raw=True, framing=framing))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol=protocol) as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert server.available  # not lost: the session goes on, no reconnect
            assert await hello.execute({}) == "hi"
    assert str(caught.value) == (
        f"MCP server {url!r} (named 'plain') answered the call of 'hello' with {ENDED} "
        f"(it held {held})"
    )
    assert caught.value.code == mcp_types.INTERNAL_ERROR


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(("body", "held"), NO_RESPONSE)
async def test_an_http_server_that_answers_a_listing_with_an_event_stream_of_no_response(
    nursery: trio.Nursery, protocol: str, body: bytes, held: str
) -> None:
    url = await serve_loopback(nursery, json_rpc_over_http(listing=body, raw=True))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol=protocol) as server:
            (hello,) = server.tools
            with pytest.raises(MCPConnectionError) as caught:
                await server.refresh_tools()
            assert server.available
            assert server.tools == (hello,)
            assert await hello.execute({}) == "hi"
    assert str(caught.value) == (
        f"listing the tools of MCP server {url!r} (named 'plain') failed: it answered "
        f"tools/list with {ENDED} (it held {held})"
    )


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("body", "framing"),
    [
        pytest.param(b"data:\n\n", "short", id="mid-body"),  # the connection ended early
        pytest.param(b"data:\n\n", "chunked-cut", id="mid-chunks"),
        pytest.param(b"data:\n\n", "close", id="at-the-connections-end"),  # (who knows?)
        pytest.param(b"data:\n\ndata: {", "length", id="mid-event"),  # all came, half an event
        pytest.param(b"data:\n\nevent: message\n", "length", id="mid-event-no-data"),
        pytest.param(b"data:\n\n: bye", "chunked", id="mid-line"),
    ],
)
async def test_an_http_server_whose_event_stream_answer_to_a_call_is_cut(
    nursery: trio.Nursery, protocol: str, body: bytes, framing: str
) -> None:
    # A stream that stops inside its body or inside an event did not end as the server meant
    # it to, nor one whose end is only the connection's: as before, the connection ended (and
    # is made again).
    url = await serve_loopback(nursery, json_rpc_over_http(call=body, raw=True, framing=framing))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol=protocol) as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert not server.available
            assert await hello.execute({}) == "hi"  # (connected again)
    assert str(caught.value) == (
        f"the connection to MCP server {url!r} (named 'plain') ended while the call was "
        "running: the HTTP connection ended"
    )


# The SDK resumes a stream whose events had an id with a GET (Last-Event-ID), twice, after the
# stream's ``retry`` milliseconds (else a second).
PRIMED = b"retry: 10\nid: e1\ndata:\n\n"
"""A priming event (an id, no data, as the SDK's own servers send first), and no more."""


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_that_ends_a_calls_event_stream_and_refuses_to_resume_it(
    nursery: trio.Nursery, protocol: str
) -> None:
    url = await serve_loopback(nursery, json_rpc_over_http(call=PRIMED, raw=True))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol=protocol) as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert server.available
            assert await hello.execute({}) == "hi"
    assert str(caught.value) == (
        f"MCP server {url!r} (named 'plain') answered the call of 'hello' with {ENDED} (it "
        "held 1 event with no data), and resuming it (a GET with Last-Event-ID 'e1') was "
        "answered HTTP 405 Method Not Allowed"
    )


async def test_an_http_server_that_ends_a_calls_event_stream_and_is_gone_when_resumed(
    nursery: trio.Nursery,
) -> None:
    # The GET that resumes it gets no answer at all: the connection ended.
    url = await serve_loopback(nursery, json_rpc_over_http(call=PRIMED, raw=True, drop_gets=True))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol="legacy") as server:
            (hello,) = server.tools
            with pytest.raises(MCPToolError) as caught:
                await hello.execute({})
            assert not server.available
    assert "ended while the call was running: the HTTP connection ended" in str(caught.value)


async def test_an_http_server_that_sends_an_event_of_no_json_rpc_on_its_get_stream(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # That event answers no request, so no error says it came: the SDK's log record of it
    # stays, and the session goes on.
    logged = trio.Event()

    class Logged(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == SDK_EVENT_PARSE:
                logged.set()

    sdk = logging.getLogger("mcp.client.streamable_http")
    sdk.addHandler(seen := Logged())
    url = await serve_loopback(nursery, json_rpc_over_http(events=True, listen=b"oops"))
    try:
        with trio.fail_after(ENTER):
            async with MCPServer.http(url, protocol="legacy") as server:
                (hello,) = server.tools
                await logged.wait()
                assert await hello.execute({}) == "hi"
    finally:
        sdk.removeHandler(seen)
    caught = sdk_parse_logs(caplog, SDK_EVENT_PARSE)[0].exc_info
    assert caught is not None
    assert isinstance(caught[1], pydantic.ValidationError)


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_ping_events_of_a_server_are_ignored_without_a_warning(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    # Every answer an event stream that begins with "event: ping" events (and the GET stream
    # too, with the session): the SDK ignores them, and would warn of each; a connection of
    # ours says so at debug level only.
    caplog.set_level(logging.DEBUG, logger="trio_invoke.mcp")
    url = await serve_loopback(nursery, json_rpc_over_http(events=True, listen=NOTICE, pings=True))
    with trio.fail_after(ENTER):
        async with MCPServer.http(url, protocol=protocol) as server:
            (hello,) = server.tools
            assert await hello.execute({}) == "hi"
            assert await hello.execute({}) == "hi"
            assert server.available
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == []
    ignored = [
        r
        for r in caplog.records
        if "that is not a message (Unknown SSE event: ping)" in r.getMessage()
    ]
    assert len(ignored) >= 2 * 4  # the handshake's answers and the two calls', two pings each


@pytest.mark.parametrize("ours", ["_OURS", "_IN_CONNECTION"])
def test_the_sdks_warning_of_an_unknown_event_stays_for_its_own_users(
    caplog: pytest.LogCaptureFixture, ours: str
) -> None:
    from trio_invoke.mcp import _server

    sdk = logging.getLogger("mcp.client.streamable_http")
    sdk.warning("Unknown SSE event: ping")
    var = getattr(_server, ours)
    token = var.set(True)
    try:
        sdk.warning("Unknown SSE event: ping")
        sdk.warning("Session termination failed: 500")  # (any other record passes)
    finally:
        var.reset(token)
    assert [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING] == [
        ("mcp.client.streamable_http", "Unknown SSE event: ping"),
        ("mcp.client.streamable_http", "Session termination failed: 500"),
    ]


def test_the_sdks_parse_errors_are_quiet_only_in_a_connection_of_ours(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The SDK's own users (and every other record of its transport's) still see them.
    from trio_invoke.mcp._server import _ANSWERING, _IN_CONNECTION

    sdk = logging.getLogger("mcp.client.streamable_http")
    invalid = unparsed("")
    body, event = "Error parsing JSON response", "Error parsing SSE message"

    def log_parse_error(exc: BaseException, what: str = body) -> None:
        try:
            raise exc
        except BaseException:
            sdk.exception(what)

    log_parse_error(invalid)  # (not in a connection of ours)
    log_parse_error(invalid, event)
    token = _IN_CONNECTION.set(True)
    try:
        log_parse_error(httpx2.ReadError("cut"))  # a body that did not come
        sdk.error("Unexpected content type: text/html")
        log_parse_error(invalid, event)  # on the GET stream: it answers no request
        log_parse_error(invalid)  # the one that is dropped
        answering = _ANSWERING.set(True)
        try:
            log_parse_error(anyio.BrokenResourceError(), event)  # (the SDK's words for it too)
            log_parse_error(invalid, event)  # dropped
        finally:
            _ANSWERING.reset(answering)
    finally:
        _IN_CONNECTION.reset(token)
    assert [
        (r.getMessage(), type(r.exc_info[1]) if r.exc_info else None) for r in caplog.records
    ] == [
        (body, pydantic.ValidationError),
        (event, pydantic.ValidationError),
        (body, httpx2.ReadError),
        ("Unexpected content type: text/html", None),
        (event, pydantic.ValidationError),
        (event, anyio.BrokenResourceError),
    ]


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_server_that_never_answers_initialize(tmp_path: Path, protocol: str) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, sys; open({str(pid_file)!r}, 'w').write(str(os.getpid())); sys.stdin.read()"
    start = trio.current_time()
    with trio.fail_after(ENTER), pytest.raises(MCPInitTimeoutError) as caught:
        async with MCPServer.stdio(sys.executable, ["-c", code], init_timeout=1, protocol=protocol):
            pytest.fail("entered")
    assert trio.current_time() - start < 15
    assert "init_timeout=1 s" in str(caught.value)
    assert "-c" in str(caught.value)
    assert ("server/discover" in str(caught.value)) == (protocol == "auto")
    assert isinstance(caught.value, TimeoutError)
    assert not pid_alive(int(pid_file.read_text()))


OLD_SERVER = r"""
import json, sys

tools_list = sys.argv[1]  # "answer", "error", or "ignore"
while line := sys.stdin.readline():
    message = json.loads(line)
    method, request = message.get("method"), message.get("id")
    if request is None:
        continue  # a notification
    answer = {"jsonrpc": "2.0", "id": request}
    if method == "initialize":
        answer["result"] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "old-server", "version": "1"},
        }
    elif method == "tools/list" and tools_list == "answer":
        answer["result"] = {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}
    elif method == "tools/list" and tools_list == "error":
        answer["error"] = {"code": -32603, "message": "the index is gone"}
    elif method == "tools/call":
        answer["result"] = {"content": [{"type": "text", "text": "hello"}]}
    else:
        continue  # an old server that never answers a method it does not know
    print(json.dumps(answer), flush=True)
"""
"""A server of the 2025 protocols as some were written: plain JSON-RPC over stdio, it answers
``initialize``, ``tools/list`` (as its argument says: answered, a JSON-RPC error, or never)
and ``tools/call``, and ignores every other method (``server/discover`` among them)."""


def old_server(tools_list: str = "answer", **options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, ["-c", OLD_SERVER, tools_list], **options)


async def test_errors_after_the_handshake_name_the_server_and_its_own_name() -> None:
    # Every error names the server by what the user configured (its label); once the
    # handshake told the server's own name, that follows. A listing that fails is not a
    # handshake that failed.
    failing = old_server("error", protocol="legacy")
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as listing:
        async with failing:
            pytest.fail("entered")
    assert str(listing.value) == (
        f"MCP server {failing.label!r} (named 'old-server') answered tools/list with JSON-RPC "
        "error -32603: the index is gone"
    )
    silent = old_server("ignore", protocol="legacy", init_timeout=2)
    with trio.fail_after(ENTER), pytest.raises(MCPInitTimeoutError) as slow:
        async with silent:
            pytest.fail("entered")
    assert str(slow.value).startswith(
        f"MCP server {silent.label!r} (named 'old-server') finished the handshake but did not "
        "list its tools within init_timeout=2 s"
    )
    unknown = old_server(protocol="legacy", allowed_tools=["nope"])
    with trio.fail_after(ENTER), pytest.raises(ConfigurationError) as option:
        async with unknown:
            pytest.fail("entered")
    assert str(option.value) == (
        f"allowed_tools names 'nope', which MCP server {unknown.label!r} (named 'old-server') "
        "does not have (it has: hello)"
    )
    server = old_server(protocol="legacy", timeout=0.5)
    with trio.fail_after(ENTER):
        async with server:
            (hello,) = server.tools
            assert await hello.execute({}) == "hello"
    with pytest.raises(MCPToolError) as later:
        await hello.execute({})
    assert str(later.value) == (
        f"MCP server {server.label!r} (named 'old-server') is not available: it was closed: "
        "the `async with` block that opened it has ended"
    )
    assert later.value.server == server.label


async def test_an_old_server_that_ignores_server_discover_is_pointed_at_legacy() -> None:
    # protocol="auto" asks server/discover first; a server that ignores methods it does not
    # know never answers, and the time runs out before the SDK falls back to initialize.
    server = old_server(init_timeout=2)
    with trio.fail_after(ENTER), pytest.raises(MCPInitTimeoutError) as caught:
        async with server:
            pytest.fail("entered")
    message = str(caught.value)
    assert message.startswith(
        f"MCP server {server.label!r} did not answer server/discover (the handshake of "
        'protocol="auto") within init_timeout=2 s: '
    )
    assert 'protocol="legacy" skips it' in message
    with trio.fail_after(ENTER):
        async with old_server(protocol="legacy", init_timeout=2) as legacy:
            assert [tool.name for tool in legacy.tools] == ["hello"]


async def test_a_slow_call_names_the_server_as_configured(log: Log) -> None:
    with trio.fail_after(ENTER):
        async with stdio(log, timeout=0.3) as server:
            with pytest.raises(MCPTimeoutError) as caught:
                await by_remote(server)["slow"].execute({"seconds": 30, "tag": "t"})
    assert str(caught.value) == (
        f"MCP tool 'slow' of MCP server {server.label!r} (named 'test-server') timed out "
        "after 0.3 s; the call was cancelled on the server"
    )
    assert caught.value.server == server.label


async def test_a_url_where_nothing_listens() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(url, init_timeout=20):
            pytest.fail("entered")
    assert f"could not reach MCP server {url!r}" in str(caught.value)


async def test_a_url_that_is_not_an_mcp_endpoint(http_server: HTTPServer) -> None:
    url = http_server.url.replace("/mcp", "/elsewhere")
    with trio.fail_after(ENTER), pytest.raises(MCPConnectionError) as caught:
        async with MCPServer.http(url):
            pytest.fail("entered")
    assert repr(url) in str(caught.value)


async def test_http_headers_are_sent(http_server: HTTPServer) -> None:
    # The server ignores them; a header that cannot be sent would fail the connection.
    with trio.fail_after(ENTER):
        async with MCPServer.http(http_server.url, headers={"X-Trace": "abc"}) as server:
            assert await by_remote(server)["add"].execute({"a": 40, "b": 2}) == "42"


async def test_http_auth_headers_reach_the_server_and_a_401_is_named(
    log: Log, http_servers: list[HTTPServer], tmp_path: Path
) -> None:
    # A wrong token fails entering with the HTTP status in the message (the SDK alone says
    # only "Server returned an error response"); so does a call after the token is revoked.
    token = tmp_path / "token"
    token.write_text("right", encoding="utf-8")
    http_servers.append(HTTPServer(log, "--token-file", str(token)))
    url = http_servers[-1].url
    with trio.fail_after(ENTER):
        with pytest.raises(MCPConnectionError, match=r"HTTP 401 Unauthorized") as caught:
            async with MCPServer.http(url, headers={"Authorization": "Bearer wrong"}):
                pass  # pragma: no cover
        assert url in str(caught.value)
        async with MCPServer.http(url, headers={"Authorization": "Bearer right"}) as server:
            tools = by_remote(server)
            assert await tools["add"].execute({"a": 40, "b": 2}) == "42"
            token.write_text("revoked", encoding="utf-8")
            with pytest.raises(MCPToolError, match=r"HTTP 401 Unauthorized"):
                await tools["add"].execute({"a": 1, "b": 1})


async def test_calls_before_entering_are_not_available() -> None:
    server = MCPServer.stdio("python")
    tool = MCPTool(
        name="t",
        description="",
        parameters={"type": "object"},
        requires_approval=False,
        remote_name="t",
        server=server,
        definition=None,  # type: ignore[arg-type]
    )
    with pytest.raises(MCPToolError, match="not available: it is not connected"):
        await tool.execute({})


def test_mcp_tool_errors_pickle() -> None:
    import pickle

    error = MCPTimeoutError("slow", server="s", tool="t", code=None)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is MCPTimeoutError
    assert (str(again), again.server, again.tool, again.code) == ("slow", "s", "t", None)


def test_import_without_the_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    for name in [m for m in sys.modules if m.startswith("trio_invoke.mcp")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(trio_invoke, "mcp", raising=False)
    with pytest.raises(ImportError, match=r'pip install "trio-invoke\[mcp\] @ git\+https://'):
        importlib.import_module("trio_invoke.mcp")


async def test_blocking_server_still_times_out(log: Log) -> None:
    # A server whose event loop is blocked cannot even read the cancellation: the call is
    # still answered on time, and the session works once the server is back.
    with trio.fail_after(ENTER):
        async with stdio(log, timeout=0.3) as server:
            with pytest.raises(MCPTimeoutError):
                await by_remote(server)["block"].execute({"seconds": 1.5})
            assert await by_remote(server)["add"].execute({"a": 1, "b": 2}) == "3"


def test_the_public_surface() -> None:
    public = importlib.import_module("trio_invoke.mcp")
    assert list(public.__all__) == sorted(public.__all__)
    for name in public.__all__:
        obj = getattr(public, name)
        if isinstance(obj, type) or callable(obj):
            assert obj.__module__ == "trio_invoke.mcp", name
    assert issubclass(MCPToolError, trio_invoke.ToolError)
    assert issubclass(MCPTimeoutError, ToolTimeoutError)
    assert issubclass(MCPConnectionError, (trio_invoke.TrioInvokeError, ConnectionError))
    assert issubclass(MCPInitTimeoutError, (MCPConnectionError, TimeoutError))
