"""The MCP server the ``mcp`` workload calls: one no-op tool, over stdio.

Written with the MCP SDK's server API, like any Python MCP server. The tool is synchronous and
returns at once, so what is measured is the round trip: client, pipes, server, back.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", log_level="WARNING")


@server.tool()
def noop(i: int) -> str:
    """Does nothing; answers "ok"."""
    return "ok"


if __name__ == "__main__":
    server.run()
