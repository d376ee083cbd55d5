"""The sans-IO half of :class:`OpenAIChatClient`: chat-completion chunks in, updates out.

Plain synchronous code with no I/O and no httpx import, so it can be tested (and property-tested
on any split of a recorded stream) without the ``openai`` extra:

* ``ChunkDecoder`` turns the data of a response's events into updates: content deltas into
  ``TextDelta``; ``tool_calls`` deltas, keyed by their ``index``, into ``ToolCallStart`` /
  ``ToolCallArgs`` / ``ToolCallEnd``; the ``finish_reason`` chunk and the later usage chunk into
  one ``Finish``.
* ``error_message`` reads a provider's error body; ``wire_message`` writes a message as the
  chat-completions API defines it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ..._exceptions import ModelResponseError
from ..._messages import ChatMessage, FinishReason, MessageRole, Usage
from ..._updates import (
    AgentResponseUpdate,
    Finish,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = ["PREVIEW", "ChunkDecoder", "error_message", "preview", "wire_message"]

PREVIEW: Final = 300
_FINISH_REASONS: Final = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def preview(text: str, limit: int = PREVIEW) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


@attrs.define
class _Call:
    id: str
    open: bool = True


class ChunkDecoder:
    """Turns the data of a response's events into updates. Plain synchronous code, no I/O.

    One instance per response. ``feed`` takes each event's data (a JSON chunk or ``[DONE]``);
    ``end_of_body`` is called when the body ends. Raises :class:`ModelResponseError` when the
    stream breaks the protocol.
    """

    def __init__(self) -> None:
        self._calls: dict[int | str, _Call] = {}
        self._order: list[_Call] = []
        self._last_key: int | str | None = None
        self.reason: str | None = None
        """The raw ``finish_reason`` of choice 0, once it arrived."""
        self.usage: Usage | None = None
        """The usage the stream reported last."""
        self.events = 0
        """How many events were fed."""
        self.finished = False
        """The ``Finish`` has been produced (on ``[DONE]`` or at the end of the body)."""

    def feed(self, data: str) -> list[AgentResponseUpdate]:
        """The updates in one event's data."""
        self.events += 1
        if self.finished:
            return []  # nothing counts after [DONE]
        if data.strip() == "[DONE]":
            return self._finish()
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ModelResponseError(
                f"the server sent a chunk that is not valid JSON ({exc}): {preview(data)!r}"
            ) from exc
        if not isinstance(chunk, dict):
            raise ModelResponseError(
                f"the server sent a chunk that is not a JSON object: {preview(data)!r}"
            )
        if chunk.get("error"):
            raise ModelResponseError(
                f"the server reported an error in the stream: {error_message(data, '')}"
            )
        usage = chunk.get("usage")
        if isinstance(usage, dict):  # the usage chunk; ordinary chunks carry null or nothing
            self.usage = _usage(usage)
        updates: list[AgentResponseUpdate] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we never ask for n > 1
            delta = choice.get("delta")
            if isinstance(delta, dict):
                updates += self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.reason = reason
                updates += self._end_calls()  # OpenAI never ends a call explicitly
        return updates

    def end_of_body(self, diagnosis: str = "") -> list[AgentResponseUpdate]:
        """The updates still owed when the body ends.

        Raises:
            ModelResponseError: the body ended with neither a finish reason nor ``[DONE]``.
        """
        if self.finished:
            return []
        if self.reason is None:
            raise ModelResponseError(
                "the response stream ended before the response was complete (no finish_reason "
                f"and no [DONE] after {self.events} events){diagnosis}"
            )
        return self._finish()

    def _delta(self, delta: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        updates: list[AgentResponseUpdate] = []
        for key in ("content", "refusal"):  # a refusal is the model's answer text too
            text = delta.get(key)
            if isinstance(text, str) and text:
                updates.append(TextDelta(text))
        calls = delta.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else ()):
            if isinstance(call, dict):
                updates += self._tool_call(call, position)
        return updates

    def _tool_call(self, call: Mapping[str, Any], position: int) -> list[AgentResponseUpdate]:
        index = call.get("index")
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else None
        arguments = function.get("arguments")
        if isinstance(arguments, dict | list):  # some servers send the object, not its JSON text
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif not isinstance(arguments, str):
            arguments = ""
        # Calls are keyed by index; a server that sends none (older Ollama) sends whole calls
        # with an id each; a piece with neither continues the last call.
        key: int | str
        if isinstance(index, int) and not isinstance(index, bool):
            key = index
        elif call_id is not None:
            key = call_id
        else:
            key = self._last_key if self._last_key is not None else position
        current = self._calls.get(key)
        updates: list[AgentResponseUpdate] = []
        # A new id *and* a name at a known index is a new call (a server that reuses index 0);
        # a new id alone is a server that renames every piece of one call.
        if current is None or (name and call_id is not None and call_id != current.id):
            if not name:
                raise ModelResponseError(
                    f"tool call {key!r} started without a function name: "
                    f"{preview(json.dumps(call))}"
                )
            if current is not None and current.open:
                current.open = False
                updates.append(ToolCallEnd(current.id))
            new_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
            if any(c.id == new_id for c in self._order):
                new_id = f"{new_id}_{len(self._order)}"  # ids must be unique in a response
            current = _Call(new_id)
            self._calls[key] = current
            self._order.append(current)
            updates.append(ToolCallStart(current.id, name))
        elif not current.open:
            if arguments:
                raise ModelResponseError(
                    f"the server sent arguments for tool call {current.id!r} after it ended"
                )
            return updates
        self._last_key = key
        if arguments:
            updates.append(ToolCallArgs(current.id, arguments))
        return updates

    def _end_calls(self) -> list[AgentResponseUpdate]:
        ended: list[AgentResponseUpdate] = []
        for call in self._order:
            if call.open:
                call.open = False
                ended.append(ToolCallEnd(call.id))
        return ended

    def _finish(self) -> list[AgentResponseUpdate]:
        self.finished = True
        reason = _FINISH_REASONS.get(self.reason or "", FinishReason.STOP)
        if reason not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
            # "stop" with tool calls happens (some OpenAI models, older Ollama): the calls decide.
            reason = FinishReason.TOOL_CALLS if self._order else FinishReason.STOP
        return [*self._end_calls(), Finish(reason, self.usage)]


def _usage(data: Mapping[str, Any]) -> Usage:
    def count(key: str) -> int:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Usage(input_tokens=count("prompt_tokens"), output_tokens=count("completion_tokens"))


def error_message(body: str, reason_phrase: str) -> str:
    """The provider's message in an error body: ``error.message`` (OpenAI, vLLM, llama.cpp),
    ``error`` as a string (Ollama's native API), ``message`` (older vLLM), ``detail``
    (FastAPI servers); else the body's text; else the reason phrase."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
            message: str = error["message"]
            return message
        for candidate in (error, data.get("message"), data.get("detail")):
            if isinstance(candidate, str) and candidate:
                return candidate
    text = body.strip()
    return preview(text) if text else (reason_phrase or "no error message")


def wire_message(message: ChatMessage) -> dict[str, Any]:
    """``message.to_dict()`` as the chat-completions API defines it: a tool message carries no
    ``name`` there, and some strict OpenAI-compatible servers reject one."""
    data = message.to_dict()
    if message.role is MessageRole.TOOL:
        data.pop("name", None)
    return data
