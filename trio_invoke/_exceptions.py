"""The exceptions trio_invoke raises.

Every exception the library raises on purpose derives from :class:`TrioInvokeError`; where the
meaning overlaps a built-in exception, it derives from that too, so ``except ValueError`` and
``except TimeoutError`` work. The tree says what to catch::

    TrioInvokeError
    ├── ConfigurationError (ValueError)   bad constructor or option values: max_rounds < 1,
    │                                     duplicate tool names, a NaN timeout, a reused cancel scope
    ├── ToolDefinitionError (TypeError)   @tool cannot describe a function (unsupported annotation)
    ├── ArgumentsError (ValueError)       tool arguments that are not valid JSON or break the schema
    ├── ApprovalError (ValueError)        approval responses that do not match the pending calls
    ├── ConversationError (ValueError)    a conversation to continue that is not a valid transcript
    ├── ScriptExhaustedError              a ScriptedChatClient was called more often than scripted
    ├── ToolTimeoutError (TimeoutError)   a tool call ran out of time (on ToolCalled.exception)
    ├── ToolError                         raised by a tool: its message is the call's result
    │   └── ToolProcessError (RuntimeError)  a process tool's worker died, or what crosses to
    │                                        it or back does not pickle
    └── ChatClientError                   the chat client failed; a wrapped original is __cause__
        ├── StreamProtocolError           its updates contradict each other, or are not updates
        ├── HTTPStatusError               the model server answered 4xx/5xx (.status_code, .message)
        ├── ModelConnectionError          the server was unreachable or the connection broke
        │   └── ModelTimeoutError         (also TimeoutError) no progress within the timeout
        └── ModelResponseError            a malformed or cut-short stream, or an error event in it

    StopLoop                              not an error: a tool raises it to end the loop after
                                          its batch; the loop catches it

Tool failures are never raised: they become error results that go back to the model. An
interrupt (``KeyboardInterrupt``, ``SystemExit``) is never caught: it ends the run and comes out
of the stream (or its ``async with``) as it is. ``trio_invoke.mcp`` adds its own exceptions
under :class:`ToolError` and :class:`TrioInvokeError` (see that module).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApprovalError",
    "ArgumentsError",
    "ChatClientError",
    "ConfigurationError",
    "ConversationError",
    "HTTPStatusError",
    "ModelConnectionError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ScriptExhaustedError",
    "StopLoop",
    "StreamProtocolError",
    "ToolDefinitionError",
    "ToolError",
    "ToolProcessError",
    "ToolTimeoutError",
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

    def __reduce__(self) -> tuple[object, ...]:
        # The default would rebuild it from the joined message, splitting that into characters.
        return (type(self), (self.errors,), self.__dict__)


class ApprovalError(TrioInvokeError, ValueError):
    """Approval responses on resume do not match the calls that are waiting for approval."""


class ConversationError(TrioInvokeError, ValueError):
    """A conversation given to ``run()`` cannot be continued: the tool messages that end it do
    not answer the calls of the assistant message before them, once each, in call order."""


class ToolTimeoutError(TrioInvokeError, TimeoutError):
    """A tool call ran longer than its time limit. Never raised: the loop puts it on
    ``ToolCalled.exception`` and the model gets an error result naming the limit."""


class ToolError(TrioInvokeError):
    """Raise from a tool to answer the call with an error result that says ``str(exc)``.

    Any other exception becomes an error result that names only its type (unless the client has
    ``include_detailed_errors=True``), since its message may not be meant for the model. A
    ``ToolError``'s message is: the model reads ``"Error: <message>"`` and can correct itself.
    The exception is on ``ToolCalled.exception``.

    Example::

        @tool
        async def lookup(key: str) -> str:
            if key not in table:
                raise ToolError(f"no entry {key!r}; known keys: {', '.join(table)}")
            return table[key]
    """


class ToolProcessError(ToolError, RuntimeError):
    """A call of a process tool (``@tool(isolation="process")``) failed around the function.

    Its worker process died (``os._exit``, a segfault, a signal), or what crosses between the
    processes does not pickle: the function, its arguments, its result or the exception it
    raised. A :class:`ToolError`: its message (which names the tool, types and exit codes, never
    the tool's data) is the call's error result, and the exception is on
    ``ToolCalled.exception``. A worker's death is ``__cause__`` when it was seen in this
    process.
    """


class ScriptExhaustedError(TrioInvokeError):
    """A :class:`ScriptedChatClient` was asked for more responses than it was given."""


class ChatClientError(TrioInvokeError):
    """The chat client failed.

    When the loop wraps an exception of an inner chat client that is not a ``TrioInvokeError``,
    the original exception is ``__cause__``. The subclasses below are raised by the HTTP client
    (:class:`OpenAIChatClient`) itself.
    """


class HTTPStatusError(ChatClientError):
    """The model server answered with an HTTP error status (4xx or 5xx).

    ``str(exc)`` reads ``"HTTP 401: Incorrect API key provided ..."``, or with the provider's
    error type ``"HTTP 529: overloaded_error: Overloaded"``.
    """

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        body: str = "",
        retry_after: float | None = None,
        error_type: str | None = None,
    ) -> None:
        self.status_code = status_code
        """The HTTP status code."""
        self.message = message
        """The provider's error message (``error.message`` in the body), else the body's text,
        else the HTTP reason phrase."""
        self.body = body
        """The response body, as text (possibly truncated)."""
        self.retry_after = retry_after
        """Seconds the server asked to wait before a retry (``Retry-After``), if it said."""
        self.error_type = error_type
        """The provider's name for the error (Anthropic's ``error.type``: ``"rate_limit_error"``,
        ``"overloaded_error"``, ...), ``None`` when the client does not read one."""
        kind = f"{error_type}: " if error_type else ""
        super().__init__(f"HTTP {status_code}: {kind}{message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_http_status_error,
            (self.status_code, self.message, self.body, self.retry_after, self.error_type),
        )


def _rebuild_http_status_error(
    status_code: int,
    message: str,
    body: str,
    retry_after: float | None,
    error_type: str | None = None,
) -> HTTPStatusError:
    return HTTPStatusError(
        status_code, message, body=body, retry_after=retry_after, error_type=error_type
    )


class StreamProtocolError(ChatClientError):
    """The inner chat client streamed updates that contradict each other, or something that is
    not a model update: a failing client.

    For example a ``ToolCallArgs`` for a call id that never started, a second ``ToolCallStart``
    for an id that is still open, or a ``None``, a dict or a ``ToolCalled`` in the stream.
    """


class ModelConnectionError(ChatClientError):
    """The model server could not be reached, or the connection broke before the response was
    complete. The httpx2 exception is ``__cause__``."""


class ModelTimeoutError(ModelConnectionError, TimeoutError):
    """The model server sent nothing, or nothing but keep-alives, for longer than the read
    timeout (or the connect, write or pool timeout ran out). The httpx2 exception, if there is
    one, is ``__cause__``."""


class ModelResponseError(ChatClientError):
    """The model server's response broke the streaming protocol: a chunk that is not JSON, a
    stream that ended before its finish reason or ``[DONE]``, or an error the server reported
    inside the stream."""

    def __init__(self, message: str, *, error_type: str | None = None) -> None:
        self.error_type = error_type
        """For an error the server reported in the stream, its name for it when it gave one
        (Anthropic's ``"overloaded_error"``, ...); else ``None``."""
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_model_response_error, (str(self), self.error_type))


def _rebuild_model_response_error(message: str, error_type: str | None) -> ModelResponseError:
    return ModelResponseError(message, error_type=error_type)


class StopLoop(Exception):  # noqa: N818 -- a signal, like StopIteration, not an error
    """Raise from a tool to end the loop after the current batch of calls.

    The call's result is ``result`` (not an error); the batch's other calls still run to their
    results; then the run ends with ``Finish(STOP)`` without calling the model again. When
    the batch pauses for approval after the call ran, its tool message is marked
    (``provider_data["stop_loop"]``) and the resume ends the run once the batch is answered.

    Example::

        @tool
        async def submit_answer(answer: str) -> str:
            raise StopLoop(f"submitted: {answer}")
    """

    def __init__(self, result: Any = "stopped") -> None:
        super().__init__(result)
        self.result = result
        """The call's result, sent to the model as any tool result is."""
