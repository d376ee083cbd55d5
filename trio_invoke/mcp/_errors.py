"""The exceptions of ``trio_invoke.mcp``, in trio_invoke's tree::

    TrioInvokeError
    ├── ToolError
    │   └── MCPToolError                    one call failed; the model reads the message
    │       └── MCPTimeoutError (ToolTimeoutError)   the call ran out of its ``timeout``
    ├── ConfigurationError (ValueError)     bad options; tool names that collide; an
    │                                       ``allowed_tools`` name the server does not have
    └── MCPConnectionError (ConnectionError)  entering failed: no such command, nothing
        │                                     listening, the handshake failed
        └── MCPInitTimeoutError (TimeoutError)  the server did not finish the handshake in time

``MCPToolError`` and ``MCPTimeoutError`` are never raised out of the loop: they end up on
``ToolCalled.exception``, and the call's error result is ``"Error: " + str(exc)``.
"""

from __future__ import annotations

from .._exceptions import ToolError, ToolTimeoutError, TrioInvokeError

__all__ = ["MCPConnectionError", "MCPInitTimeoutError", "MCPTimeoutError", "MCPToolError"]


class MCPToolError(ToolError):
    """An MCP tool call failed: the server's error result (``isError``), a JSON-RPC error, a
    server that went away or is not available, or a result that could not be read."""

    def __init__(self, message: str, *, server: str, tool: str, code: int | None = None) -> None:
        super().__init__(message)
        self.server = server
        """The server as the user configured it: its command line or URL
        (:attr:`MCPServer.label`; the message adds its ``serverInfo.name`` once known)."""
        self.tool = tool
        """The tool's name on the server."""
        self.code = code
        """The JSON-RPC error code, when the server answered with a JSON-RPC error."""

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), str(self), self.server, self.tool, self.code))


class MCPTimeoutError(MCPToolError, ToolTimeoutError):
    """An MCP tool call ran longer than the server's ``timeout``; it was cancelled, and the
    server was sent ``notifications/cancelled``."""


def _rebuild(
    cls: type[MCPToolError], message: str, server: str, tool: str, code: int | None
) -> MCPToolError:
    return cls(message, server=server, tool=tool, code=code)


class MCPConnectionError(TrioInvokeError, ConnectionError):
    """Entering ``async with MCPServer...`` failed: the command could not be started, nothing
    listens at the URL, the server closed the connection or refused the handshake, or the URL
    answered it with something else (an empty body, a web page, an event stream that ended
    without a response: no JSON-RPC response). The
    message names the server; the underlying exception is ``__cause__``."""


class MCPInitTimeoutError(MCPConnectionError, TimeoutError):
    """The server did not answer the handshake and the tool listing within ``init_timeout``."""
