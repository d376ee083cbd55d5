"""A real MCP server for the tests of ``trio_invoke.mcp``, written with the SDK's server API.

Run as a subprocess: over stdio by default, or over streamable HTTP with ``--http PORT``
(127.0.0.1 only). ``--log PATH`` appends one JSON line per event the tests look for: the
server's pid at start, every notification it receives (``notifications/cancelled`` among them),
every ``tools/list`` page it serves, and each tool call that was cancelled.

``--page-size N`` paginates ``tools/list``; ``--extra-tools N`` adds ``tool_<i>`` tools, and
``--odd-names`` adds tools whose names are not valid for model providers (dots, 100 characters),
``--collide`` two of them that map to one provider name; ``--bad-schema`` lists ``echo`` with
an input schema whose regex does not compile; ``--cursor-loop`` (with ``--page-size``) answers
every page with the same next cursor. Over HTTP, ``--no-get`` answers every GET with 404 (a
router with no GET for the endpoint, as an Express app with only ``app.post('/mcp')``), and
``--not-found-tool NAME`` answers a call of tool NAME with 404 and a JSON-RPC "method not
found" error (as a gateway in front of the server might), and ``--token-file PATH`` answers
HTTP 401 to every request without ``Authorization: Bearer`` and the file's text (read at each
request, so a test can revoke a token); ``--mode-file PATH`` makes the server misbehave as the
file says, read at each request (missing or empty: it does not): ``forget`` answers 404 to
every POST with an ``Mcp-Session-Id`` (a server that forgets every session), ``forget-calls``
only to those that call a tool, ``500`` answers HTTP 500 to every POST, ``bad-init`` answers
``initialize`` with a result that is not one, ``fail-list`` answers ``tools/list`` with a
JSON-RPC error and ``hang-list`` never answers it (both log each ``initialize``), ``hang``
never answers a POST, ``hang-delete`` never answers a ``DELETE``,
``legacy-only`` answers 400 to every POST without a session that is not ``initialize`` (a
server of the 2025 protocols only); several modes, separated by spaces, apply together.
With any of these HTTP flags, each ``DELETE`` (a client
ending its session) is logged with the session's id. Over stdio,
``--wire`` adds tools that write onto the protocol stream itself, past the SDK: ``wire_bytes``
(any bytes, then a normal answer) and ``wire_answer`` (its own answer as the given JSON text,
then it waits).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel


class Place(BaseModel):
    """A point on the map."""

    lat: float
    lon: float
    name: str = ""


PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def build(args: argparse.Namespace) -> MCPServer:
    log_path: str | None = args.log

    def log(**event: Any) -> None:
        if log_path is not None:
            with open(log_path, "a", encoding="utf-8") as file:
                file.write(json.dumps(event) + "\n")

    class Observe:
        """Server middleware: logs notifications and pages ``tools/list``."""

        async def __call__(self, ctx: Any, call_next: Any) -> Any:
            if ctx.request_id is None:
                log(event="notification", method=ctx.method, params=ctx.params)
                return await call_next(ctx)
            if ctx.method == "tools/call":
                params = ctx.params or {}
                meta = params.get("_meta") or {}
                log(
                    event="call",
                    id=ctx.request_id,
                    tool=params.get("name"),
                    traceparent=meta.get("traceparent"),
                )
            result = await call_next(ctx)
            if ctx.method == "tools/list" and args.bad_schema:
                for listed in result["tools"]:
                    if listed["name"] == "echo":  # a pattern no regex engine compiles
                        listed["inputSchema"]["properties"]["text"]["pattern"] = "("
            if ctx.method == "tools/list" and args.page_size:
                # The SDK hands middleware the result as a wire dict.
                tools = result["tools"]
                cursor = (ctx.params or {}).get("cursor")
                start = int(cursor) if cursor else 0
                end = start + args.page_size
                result = {**result, "tools": tools[start:end]}
                if end < len(tools):
                    result["nextCursor"] = str(end)
                if args.cursor_loop:  # a server bug: the listing never ends
                    result["nextCursor"] = str(args.page_size)
                log(event="tools/list", cursor=cursor, count=len(result["tools"]))
            return result

    server = MCPServer("test-server", middleware=[Observe()], log_level="WARNING")
    log(event="started", pid=os.getpid())

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def record(text: str) -> str:
        """Records the text in the log (a side effect the tests can see)."""
        log(event="recorded", text=text)
        return f"recorded {text}"

    @server.tool()
    def locate(place: Place, tags: tuple[str, int] = ("none", 0)) -> str:
        """Takes a nested model ($defs and $ref) and a tuple (prefixItems): JSON Schema 2020-12."""
        return f"{place.name or 'somewhere'} at {place.lat},{place.lon} ({tags[0]}, {tags[1]})"

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the given message."""
        raise ToolError(message)

    @server.tool()
    def rpc_error(code: int, message: str) -> str:
        """Answers with a JSON-RPC error instead of a result."""
        raise MCPError(code=code, message=message)

    @server.tool()
    async def slow(seconds: float, tag: str = "") -> str:
        """Sleep, then answer."""
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            log(event="tool cancelled", tool="slow", tag=tag)
            raise
        return f"slept {seconds}"

    @server.tool()
    async def exit_now(code: int = 3, delay: float = 0.0) -> str:
        """Ends the server process abruptly (after ``delay`` seconds)."""
        await anyio.sleep(delay)
        sys.stdout.flush()
        os._exit(code)

    @server.tool()
    def media() -> CallToolResult:
        """Answers with one block of every kind."""
        return CallToolResult(
            content=[
                TextContent(type="text", text="here they are"),
                ImageContent(type="image", data=PIXEL, mime_type="image/png"),
                AudioContent(type="audio", data=PIXEL, mime_type="audio/wav"),
                EmbeddedResource(
                    type="resource",
                    resource=TextResourceContents(
                        uri="file:///notes.txt", mime_type="text/plain", text="the notes"
                    ),
                ),
                ResourceLink(
                    type="resource_link", uri="file:///big.bin", name="big", mime_type="x/y"
                ),
            ]
        )

    @server.tool()
    def structured_only() -> CallToolResult:
        """Answers with structured content and no content blocks."""
        return CallToolResult(content=[], structured_content={"answer": 42, "unit": "none"})

    @server.tool()
    def text_and_structured() -> CallToolResult:
        """Answers with both, as the spec recommends."""
        return CallToolResult(
            content=[TextContent(type="text", text='{"answer": 42}')],
            structured_content={"answer": 42},
        )

    @server.tool()
    def two_texts() -> CallToolResult:
        """Answers with two text blocks."""
        return CallToolResult(
            content=[
                TextContent(type="text", text="first"),
                TextContent(type="text", text="second"),
            ]
        )

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Adds a tool named ``name`` and says the tool list changed."""
        server.add_tool(lambda: f"I am {name}", name=name, description=f"The {name} tool.")
        await ctx.session.send_tool_list_changed()  # handshake-era clients
        await ctx.notify_tools_changed()  # 2026-07-28 clients listening
        return f"added {name}"

    @server.tool()
    async def remove_tool(name: str, ctx: Context) -> str:
        """Removes the tool named ``name`` and says the tool list changed."""
        server.remove_tool(name)
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return f"removed {name}"

    @server.tool()
    def block(seconds: float) -> str:
        """Blocks the whole server (a sync sleep in its event loop)."""
        time.sleep(seconds)
        return "unblocked"

    if args.wire:
        wire: int = os.dup(1)  # the protocol stream (the SDK moves stdout away from it)

        @server.tool()
        def wire_bytes(data_hex: str) -> str:
            """Writes these bytes onto the protocol stream, then answers."""
            os.write(wire, bytes.fromhex(data_hex))
            return "written"

        @server.tool()
        async def wire_answer(template: str, ctx: Context) -> str:
            """Writes ``template`` with ``{id}`` replaced by this call's request id as its
            answer, then waits (a server that sent an answer the client cannot read)."""
            line = template.replace("{id}", json.dumps(ctx.request_id)) + "\n"
            os.write(wire, line.encode("utf-8", "surrogatepass"))
            await anyio.sleep_forever()
            return "never"

    for i in range(args.extra_tools):
        server.add_tool(lambda i=i: f"tool {i}", name=f"tool_{i}", description=f"Extra tool {i}.")
    if args.odd_names:
        server.add_tool(lambda: "dotted", name="files.read.v2", description="A dotted name.")
        server.add_tool(lambda: "long", name="x" * 100, description="A long name.")
    if args.collide:
        server.add_tool(lambda: "dot", name="ns.tool", description="Dotted.")
        server.add_tool(lambda: "underscore", name="ns_tool", description="Underscored.")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, metavar="PORT")
    parser.add_argument("--log", default=None)
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--extra-tools", type=int, default=0)
    parser.add_argument("--odd-names", action="store_true")
    parser.add_argument("--collide", action="store_true")
    parser.add_argument("--bad-schema", action="store_true")
    parser.add_argument("--cursor-loop", action="store_true")
    parser.add_argument("--no-get", action="store_true")
    parser.add_argument("--not-found-tool", default=None, metavar="NAME")
    parser.add_argument("--wire", action="store_true")
    parser.add_argument("--token-file", default=None, metavar="PATH")
    parser.add_argument("--mode-file", default=None, metavar="PATH")
    args = parser.parse_args()
    server = build(args)
    if args.http is None:
        server.run()
    elif not (args.no_get or args.not_found_tool or args.token_file or args.mode_file):
        anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=args.http))
    else:
        import uvicorn

        app = _Router(server.streamable_http_app(), args.no_get, args.not_found_tool)
        app.token_file = args.token_file
        app.mode_file = args.mode_file
        app.log_path = args.log
        config = uvicorn.Config(app, host="127.0.0.1", port=args.http, log_level="error")
        anyio.run(uvicorn.Server(config).serve)


class _Router:
    """An ASGI app in front of the server's: ``--no-get``, ``--not-found-tool`` and
    ``--token-file`` (see above)."""

    token_file: str | None = None
    mode_file: str | None = None
    log_path: str | None = None

    def __init__(self, inner: Any, no_get: bool, not_found_tool: str | None) -> None:
        self.inner, self.no_get, self.not_found_tool = inner, no_get, not_found_tool

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        if self.token_file is not None:
            token = await anyio.Path(self.token_file).read_text(encoding="utf-8")
            expected = f"Bearer {token.strip()}".encode()
            if dict(scope["headers"]).get(b"authorization") != expected:
                await _answer(send, 401, "text/plain", b"Unauthorized")
                return
        if scope["method"] == "DELETE" and self.log_path is not None:
            session = dict(scope["headers"]).get(b"mcp-session-id", b"").decode()
            line = json.dumps({"event": "delete", "session": session}) + "\n"
            async with await anyio.open_file(self.log_path, "a", encoding="utf-8") as file:
                await file.write(line)
        mode = ""
        if self.mode_file is not None and os.path.exists(self.mode_file):
            mode = (await anyio.Path(self.mode_file).read_text(encoding="utf-8")).strip()
        modes = set(mode.split())  # (one, or several separated by spaces)
        if "hang-delete" in modes and scope["method"] == "DELETE":
            await anyio.sleep_forever()
        if mode and scope["method"] == "POST":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            request = json.loads(body or b"null")
            method = request.get("method") if isinstance(request, dict) else None
            has_session = b"mcp-session-id" in dict(scope["headers"])
            if "hang" in modes:
                await anyio.sleep_forever()
            if "500" in modes:
                await _answer(send, 500, "text/plain", b"Internal Server Error")
                return
            if has_session and (
                "forget" in modes or ("forget-calls" in modes and method == "tools/call")
            ):
                if self.log_path is not None:
                    line = json.dumps({"event": "forgot", "method": method}) + "\n"
                    async with await anyio.open_file(self.log_path, "a", encoding="utf-8") as file:
                        await file.write(line)
                await _answer(send, 404, "text/plain", b"Session not found")
                return
            if "legacy-only" in modes and not has_session and method != "initialize":
                # (as a server of the 2025 protocols: a session begins with initialize)
                error = {"code": -32600, "message": "Bad Request: Missing session ID"}
                answer = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
                await _answer(send, 400, "application/json", json.dumps(answer).encode())
                return
            if modes & {"fail-list", "hang-list"} and method == "initialize" and self.log_path:
                line = json.dumps({"event": "initialize"}) + "\n"
                async with await anyio.open_file(self.log_path, "a", encoding="utf-8") as file:
                    await file.write(line)
            if "hang-list" in modes and method == "tools/list":
                await anyio.sleep_forever()
            if "fail-list" in modes and method == "tools/list":
                error = {"code": -32603, "message": "the tool list is not ready"}
                answer = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
                await _answer(send, 200, "application/json", json.dumps(answer).encode())
                return
            if "bad-init" in modes and method == "initialize":
                answer = {"jsonrpc": "2.0", "id": request.get("id"), "result": {"nonsense": 1}}
                await _answer(send, 200, "application/json", json.dumps(answer).encode())
                return
            sent = False

            async def again() -> Any:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.inner(scope, again, send)
            return
        if scope["method"] == "GET" and self.no_get:
            await _answer(send, 404, "text/html", b"Cannot GET /mcp")
            return
        messages: list[Any] = []
        if scope["method"] == "POST" and self.not_found_tool is not None:
            body = b""
            while True:
                message = await receive()
                messages.append(message)
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            request = json.loads(body or b"null")
            params = request.get("params") if isinstance(request, dict) else None
            if isinstance(params, dict) and params.get("name") == self.not_found_tool:
                error = {"code": -32601, "message": "Method not found"}
                answer = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
                await _answer(send, 404, "application/json", json.dumps(answer).encode())
                return

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.inner(scope, replay, send)


async def _answer(send: Any, status: int, kind: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", kind.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    main()
