"""trio_invoke: the tool-calling loop of an LLM agent, on Trio's structured concurrency.

Everything public is importable from here; the private modules hold one idea each.
``OpenAIChatClient`` and ``AnthropicChatClient`` need the extras ``trio_invoke[openai]`` and
``trio_invoke[anthropic]`` (httpx2) and are imported on first use, so ``import trio_invoke`` works
without httpx2.
"""

import contextlib as _contextlib
import importlib as _importlib
import importlib.metadata as _metadata
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._accumulate import AccumulatedToolCall as AccumulatedToolCall
from ._accumulate import ToolCallAccumulator as ToolCallAccumulator
from ._client import ChatClient as ChatClient
from ._content import ContentPart as ContentPart
from ._content import ImagePart as ImagePart
from ._content import RawPart as RawPart
from ._content import TextPart as TextPart
from ._exceptions import ApprovalError as ApprovalError
from ._exceptions import ArgumentsError as ArgumentsError
from ._exceptions import ChatClientError as ChatClientError
from ._exceptions import ConfigurationError as ConfigurationError
from ._exceptions import ConversationError as ConversationError
from ._exceptions import HTTPStatusError as HTTPStatusError
from ._exceptions import ModelConnectionError as ModelConnectionError
from ._exceptions import ModelResponseError as ModelResponseError
from ._exceptions import ModelTimeoutError as ModelTimeoutError
from ._exceptions import ScriptExhaustedError as ScriptExhaustedError
from ._exceptions import StopLoop as StopLoop
from ._exceptions import StreamProtocolError as StreamProtocolError
from ._exceptions import ToolDefinitionError as ToolDefinitionError
from ._exceptions import ToolError as ToolError
from ._exceptions import ToolProcessError as ToolProcessError
from ._exceptions import ToolTimeoutError as ToolTimeoutError
from ._exceptions import TrioInvokeError as TrioInvokeError
from ._function_tool import FunctionTool as FunctionTool
from ._function_tool import tool as tool
from ._loop._client import FunctionInvokingChatClient as FunctionInvokingChatClient
from ._loop._stream import ChatResponse as ChatResponse
from ._loop._stream import InvocationStream as InvocationStream
from ._messages import ChatMessage as ChatMessage
from ._messages import FinishReason as FinishReason
from ._messages import MessageRole as MessageRole
from ._messages import ToolCall as ToolCall
from ._messages import Usage as Usage
from ._middleware import CallNext as CallNext
from ._middleware import ToolContext as ToolContext
from ._middleware import ToolMiddleware as ToolMiddleware
from ._options import RunOptions as RunOptions
from ._options import ToolApprovalResponse as ToolApprovalResponse
from ._scripted import ScriptedCall as ScriptedCall
from ._scripted import ScriptedChatClient as ScriptedChatClient
from ._scripted import ScriptedResponse as ScriptedResponse
from ._threads import current_default_tool_thread_limiter as current_default_tool_thread_limiter
from ._tools import ApprovalRequiredTool as ApprovalRequiredTool
from ._tools import Tool as Tool
from ._tools import ToolDefinition as ToolDefinition
from ._updates import AgentResponseUpdate as AgentResponseUpdate
from ._updates import Error as Error
from ._updates import Finish as Finish
from ._updates import ProviderDataDelta as ProviderDataDelta
from ._updates import ReasoningDelta as ReasoningDelta
from ._updates import TextDelta as TextDelta
from ._updates import ToolApprovalRequest as ToolApprovalRequest
from ._updates import ToolCallArgs as ToolCallArgs
from ._updates import ToolCalled as ToolCalled
from ._updates import ToolCallEnd as ToolCallEnd
from ._updates import ToolCallStart as ToolCallStart
from ._validate import validate_against_schema as validate_against_schema

if _TYPE_CHECKING:
    from .providers.anthropic._client import AnthropicChatClient as AnthropicChatClient
    from .providers.openai._client import OpenAIChatClient as OpenAIChatClient

try:
    __version__: str = _metadata.version("trio-invoke")
    """The installed distribution's version (PEP 440), from the package metadata."""
except _metadata.PackageNotFoundError:  # pragma: no cover - imported from a bare checkout
    __version__ = "0+unknown"

__all__ = [
    "AccumulatedToolCall",
    "AgentResponseUpdate",
    "ApprovalError",
    "ApprovalRequiredTool",
    "ArgumentsError",
    "CallNext",
    "ChatClient",
    "ChatClientError",
    "ChatMessage",
    "ChatResponse",
    "ConfigurationError",
    "ContentPart",
    "ConversationError",
    "Error",
    "Finish",
    "FinishReason",
    "FunctionInvokingChatClient",
    "FunctionTool",
    "HTTPStatusError",
    "ImagePart",
    "InvocationStream",
    "MessageRole",
    "ModelConnectionError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ProviderDataDelta",
    "RawPart",
    "ReasoningDelta",
    "RunOptions",
    "ScriptExhaustedError",
    "ScriptedCall",
    "ScriptedChatClient",
    "ScriptedResponse",
    "StopLoop",
    "StreamProtocolError",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolApprovalRequest",
    "ToolApprovalResponse",
    "ToolCall",
    "ToolCallAccumulator",
    "ToolCallArgs",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolCalled",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolError",
    "ToolMiddleware",
    "ToolProcessError",
    "ToolTimeoutError",
    "TrioInvokeError",
    "Usage",
    "current_default_tool_thread_limiter",
    "tool",
    "validate_against_schema",
]


_LAZY = {
    "AnthropicChatClient": ".providers.anthropic._client",
    "OpenAIChatClient": ".providers.openai._client",
}
"""Public names whose module needs an extra: imported on first access. They stay out of
``__all__`` so that ``from trio_invoke import *`` works without the extra."""


def _fixup_module_metadata(obj: _Any) -> None:
    # Public objects report `trio_invoke.X`, so reprs and tracebacks show the public path.
    module = getattr(obj, "__module__", "")
    if module.startswith(__name__ + ".") and any(p.startswith("_") for p in module.split(".")):
        with _contextlib.suppress(AttributeError, TypeError):  # a type alias: leave it
            obj.__module__ = __name__


for _name in __all__:
    if _name not in _LAZY:
        _fixup_module_metadata(globals()[_name])
del _name


def __getattr__(name: str) -> _Any:
    """Import ``OpenAIChatClient`` or ``AnthropicChatClient`` on first use; without httpx2 that
    raises an ``ImportError`` naming the extra to install (``trio_invoke[openai]``,
    ``trio_invoke[anthropic]``)."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module_name, __name__), name)
    _fixup_module_metadata(value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
