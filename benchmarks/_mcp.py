"""The ``mcp`` workload: parallel calls to a stdio MCP server, through the loop and bare.

Library side: a run of the loop (``FunctionInvokingChatClient`` over a ``ScriptedChatClient``)
whose one round calls the server's tool N times in parallel, the tools being ``server.tools``
of a ``trio_invoke.mcp.MCPServer``. Floor: the MCP SDK's own ``mcp.Client`` calling the same
tool N times from one Trio nursery. Each side talks to its own server process (the same
script), started once for the workload; startup is not measured. Per call is the N-call run
minus the one-call run, over N - 1, on each side: the loop's fixed cost per run (the model's
stream, the round) drops out, as in ``fan-out``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from trio_invoke import ScriptedChatClient, ToolCalled

from ._harness import Measured, Row, Side, measure_pair
from ._workloads import USER, Context, Outcome, fan_out_script

SERVER = str(Path(__file__).with_name("mcp_server.py"))
N = 100
TARGET = 1.2


def mcp(ctx: Context) -> Outcome:
    try:
        from mcp import Client, StdioServerParameters  # noqa: PLC0415 -- an optional extra

        from trio_invoke.mcp import MCPServer  # noqa: PLC0415
    except ImportError:
        return Outcome(skipped=["mcp: needs the MCP SDK (pip install -e '.[mcp]' in a checkout)"])

    async def main() -> dict[int, Measured]:
        parameters = StdioServerParameters(command=sys.executable, args=[SERVER])
        async with (
            MCPServer.stdio(sys.executable, [SERVER]) as server,
            Client(parameters, mode="auto", cache=None) as client,
        ):
            tools = server.tools

            def library(n: int) -> Side:
                def setup() -> Any:
                    loop = ctx.client_cls(ScriptedChatClient(fan_out_script(n)), tools)

                    async def run() -> None:
                        async with loop.run(USER) as stream:
                            async for _ in stream:
                                pass

                    return run

                return setup

            def floor(n: int) -> Side:
                def setup() -> Any:
                    async def run() -> None:
                        async with trio.open_nursery() as nursery:
                            for i in range(n):
                                nursery.start_soon(client.call_tool, "noop", {"i": i})

                    return run

                return setup

            # Both sides do the same work, without errors.
            loop = ctx.client_cls(ScriptedChatClient(fan_out_script(N)), tools)
            async with loop.run(USER) as stream:
                called = [u async for u in stream if isinstance(u, ToolCalled)]
            if len(called) != N or any(u.is_error or u.result != "ok" for u in called):
                raise RuntimeError(f"the library side's calls failed, e.g. {called[:1]!r}")
            result = await client.call_tool("noop", {"i": 0})
            if result.is_error or result.content[0].text != "ok":  # type: ignore[union-attr]
                raise RuntimeError(f"the floor's call failed: {result!r}")
            return {n: await measure_pair(library(n), floor(n), ctx.settings) for n in (1, N)}

    measured = trio.run(main)
    one, many = measured[1], measured[N]
    per_call_library = (many.library_median - one.library_median) / (N - 1)
    per_call_floor = (many.floor_median - one.floor_median) / (N - 1)
    return Outcome(
        [
            Row("mcp", "one run, 1 call", one.library_median, one.floor_median, data=one),
            Row(
                "mcp",
                f"one run, {N} parallel calls",
                many.library_median,
                many.floor_median,
                data=many,
            ),
            Row(
                "mcp",
                f"per call, N={N} [stdio]",
                per_call_library,
                per_call_floor,
                target=TARGET,
                note=(
                    "mcp: floor = the MCP SDK's mcp.Client calling the tool from one Trio "
                    "nursery; per call = (N-call run - 1-call run) / (N - 1), each side"
                ),
                extra={"n": N},
            ),
        ]
    )
