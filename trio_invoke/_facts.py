"""What a model's response says of itself, for an observer: its id and the model that made it.

These reach no update (``Finish`` carries the reason and the usage only): an observer that wants
them (``trio_invoke.otel``'s chat span: ``gen_ai.response.id``, ``gen_ai.response.model``) sets
:data:`RESPONSE_FACTS` to a fresh :class:`ResponseFacts` around the inner client's stream, and the
built-in HTTP clients' decoders fill it in as the response tells them. Nothing is read or kept
when no observer asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Final

import attrs

__all__ = ["RESPONSE_FACTS", "ResponseFacts"]


@attrs.define
class ResponseFacts:
    """The id and the model a response named (``None`` until, or unless, it names them)."""

    id: str | None = None
    model: str | None = None

    def take(self, data: Mapping[str, Any]) -> None:
        """Take ``data``'s ``id`` and ``model``, those that are non-empty strings, unless one
        was taken before (the first response of a model call is the one it names: a continued
        Anthropic turn's later responses are its parts)."""
        if self.id is None:
            found = data.get("id")
            if isinstance(found, str) and found:
                self.id = found
        if self.model is None:
            model = data.get("model")
            if isinstance(model, str) and model:
                self.model = model


RESPONSE_FACTS: Final[ContextVar[ResponseFacts | None]] = ContextVar(
    "trio_invoke.response_facts", default=None
)
"""Where the response being streamed in this context puts its facts, if an observer asked."""
