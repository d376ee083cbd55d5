"""The exceptions trio_invoke raises.

Every exception the library raises on purpose derives from :class:`TrioInvokeError`; where the
meaning overlaps a built-in exception, it derives from that too, so ``except ValueError`` works::

    TrioInvokeError
    ├── ConfigurationError (ValueError)   bad constructor arguments: max_rounds < 1, duplicate tools
    ├── ToolDefinitionError (TypeError)   @tool cannot describe a function (unsupported annotation)
    ├── ArgumentsError (ValueError)       tool arguments that are not valid JSON or break the schema
    ├── ApprovalError (ValueError)        approval responses that do not match the pending calls
    ├── StreamProtocolError               the inner client's stream of updates is inconsistent
    ├── ScriptExhaustedError              a ScriptedChatClient was called more often than scripted
    └── ChatClientError                   the inner chat client failed; the original is __cause__

Tool failures are never raised: they become error results that go back to the model.
"""

from __future__ import annotations

__all__ = [
    "ApprovalError",
    "ArgumentsError",
    "ChatClientError",
    "ConfigurationError",
    "ScriptExhaustedError",
    "StreamProtocolError",
    "ToolDefinitionError",
    "TrioInvokeError",
]


class TrioInvokeError(Exception):
    """The root of every exception trio_invoke raises on purpose."""


class ConfigurationError(TrioInvokeError, ValueError):
    """A client or tool was constructed with arguments that cannot work."""


class ToolDefinitionError(TrioInvokeError, TypeError):
    """``@tool`` cannot turn a function into a tool (for example, an unsupported annotation)."""


class ArgumentsError(TrioInvokeError, ValueError):
    """Tool arguments are not valid JSON, not an object, or do not match the tool's schema.

    ``errors`` holds one message per problem; ``str()`` joins them with ``"; "``.
    """

    def __init__(self, errors: list[str] | tuple[str, ...]) -> None:
        self.errors: tuple[str, ...] = tuple(errors)
        super().__init__("; ".join(self.errors))


class ApprovalError(TrioInvokeError, ValueError):
    """Approval responses on resume do not match the calls that are waiting for approval."""


class StreamProtocolError(TrioInvokeError):
    """The inner chat client sent updates that contradict each other.

    For example a ``ToolCallArgs`` for a call id that never started, or a second ``ToolCallStart``
    for an id that is still open.
    """


class ScriptExhaustedError(TrioInvokeError):
    """A :class:`ScriptedChatClient` was asked for more responses than it was given."""


class ChatClientError(TrioInvokeError):
    """The inner chat client raised; the original exception is ``__cause__``."""
