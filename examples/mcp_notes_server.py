"""A small local MCP server: a notebook kept in memory, spoken over stdio.

It is what ``mcp_agent.py`` starts; any MCP client can use it::

    python examples/mcp_notes_server.py   # waits for an MCP client on stdin/stdout

Written with the MCP SDK's server API (the extra ``trio_invoke[mcp]`` brings it).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes", log_level="WARNING")
notes: dict[str, str] = {}


@server.tool(name="notes.add")
def add_note(title: str, text: str) -> str:
    """Add a note, or replace the note with that title."""
    notes[title] = text
    return f"saved {title!r} ({len(notes)} notes)"


@server.tool(name="notes.search")
def search_notes(query: str) -> list[str]:
    """The titles of the notes whose title or text contains ``query`` (any case)."""
    query = query.casefold()
    return [t for t, text in notes.items() if query in t.casefold() or query in text.casefold()]


@server.tool(name="notes.read")
def read_note(title: str) -> str:
    """The text of one note."""
    if title not in notes:
        raise ToolError(f"no note titled {title!r}; there are: {', '.join(notes) or 'none'}")
    return notes[title]


@server.tool(name="notes.delete")
def delete_note(title: str) -> str:
    """Delete a note (the agent asks the user first)."""
    if notes.pop(title, None) is None:
        raise ToolError(f"no note titled {title!r}")
    return f"deleted {title!r}"


if __name__ == "__main__":
    server.run()  # stdio
