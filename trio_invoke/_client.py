"""What a chat client is: the structural ``ChatClient`` protocol."""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from ._messages import ChatMessage
from ._options import RunOptions
from ._updates import AgentResponseUpdate

__all__ = ["ChatClient"]


@runtime_checkable
class ChatClient(Protocol):
    """Anything that streams a model's response to a conversation.

    ``run`` returns an async context manager whose value is an async iterable of updates::

        async with client.run(messages) as updates:
            async for update in updates:
                ...

    The context manager shape lets an implementation run tasks in a nursery for the duration of
    the stream (Trio forbids yielding from inside a nursery in a plain async generator), and
    guarantees that leaving the block closes everything the stream opened.

    A response is a sequence of ``TextDelta`` and ``ToolCallStart`` / ``ToolCallArgs`` /
    ``ToolCallEnd`` updates (every started call ends, ids unique within the response), closed by
    at most one ``Finish`` (``TOOL_CALLS`` when it called tools) that carries the usage.

    Optional attributes that telemetry (``trio_invoke.otel.Telemetry``) reads, as the built-in
    clients have them: ``model`` (the model name: ``gen_ai.request.model`` and the span's
    name), ``provider_name`` (who serves it, in the OpenTelemetry GenAI conventions' names:
    ``"openai"``, ``"anthropic"``, ``"groq"``, ... -- ``gen_ai.provider.name``) and
    ``base_url`` (an http(s) URL: ``server.address`` and ``server.port``). A client without
    them works the same; its model calls are just described less.
    """

    def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AbstractAsyncContextManager[AsyncIterable[AgentResponseUpdate]]:
        """Stream the model's response to ``messages``.

        Cancellation: leaving the ``async with`` (or cancelling the surrounding scope) stops the
        stream and releases what it holds; updates not yet received are lost.
        """
        ...
