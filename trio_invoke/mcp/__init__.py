"""MCP servers' tools in the loop: ``MCPServer.stdio(...)`` and ``MCPServer.http(...)``.

Needs the extra ``trio_invoke[mcp]`` (the ``mcp`` SDK, 2.x)::

    from trio_invoke.mcp import MCPServer

    async with MCPServer.stdio("python", ["server.py"], prefix="notes") as server:
        client = FunctionInvokingChatClient(model, server.tools)

The README's "MCP servers" section tells the whole story: names, results, time limits,
cancellation, servers that die, tool list changes.
"""

try:
    import mcp as _mcp  # noqa: F401 -- only to check that the SDK is there
except ImportError as _exc:  # pragma: no cover - the test hides mcp and re-imports this module
    raise ImportError(
        "trio_invoke.mcp needs the MCP SDK, which is not installed: "
        'pip install "trio-invoke[mcp] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[mcp]")'
    ) from _exc

from ._errors import MCPConnectionError as MCPConnectionError
from ._errors import MCPInitTimeoutError as MCPInitTimeoutError
from ._errors import MCPTimeoutError as MCPTimeoutError
from ._errors import MCPToolError as MCPToolError
from ._names import model_name as model_name
from ._server import DEFAULT_INIT_TIMEOUT as DEFAULT_INIT_TIMEOUT
from ._server import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from ._server import MCPServer as MCPServer
from ._server import MCPTool as MCPTool

__all__ = [
    "DEFAULT_INIT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "MCPConnectionError",
    "MCPInitTimeoutError",
    "MCPServer",
    "MCPTimeoutError",
    "MCPTool",
    "MCPToolError",
    "model_name",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) or callable(_obj):
        _obj.__module__ = __name__
del _name, _obj
