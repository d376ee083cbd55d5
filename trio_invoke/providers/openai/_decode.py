"""The sans-IO half of :class:`OpenAIChatClient`'s responses: chat-completion chunks in, updates
out.

Plain synchronous code with no I/O and no httpx2 import, so it can be tested (and property-tested
on any split of a recorded stream) without the ``openai`` extra:

* ``ChunkDecoder`` turns a response's events into updates: content deltas into ``TextDelta``;
  reasoning deltas (``reasoning_content`` as DeepSeek, Qwen and llama.cpp send it, ``reasoning``
  as vLLM, Ollama and OpenRouter do) into ``ReasoningDelta``; OpenRouter's ``reasoning_details``
  into ``ProviderDataDelta`` pieces, one item per detail ``type`` and ``index``; ``tool_calls``
  deltas into ``ToolCallStart`` / ``ToolCallArgs`` / ``ToolCallEnd`` (a call's keys beyond
  ``index``, ``id``, ``type`` and ``function`` -- Gemini's ``extra_content``, with the call's
  thought signature -- in ``ToolCallStart.provider_data``, and its ``function``'s keys beyond
  ``name`` and ``arguments`` there under ``"function"``, as ``ToolCall`` keeps them; such keys
  that come on a later piece of the call, as Gemini's signature is reported to on a trailing
  piece with no index, in ``ToolCallEnd.provider_data``); the ``finish_reason`` chunk and the
  later usage chunk into one ``Finish``.
* ``error_message`` reads a provider's error body.

Tool-call deltas are matched to their call by ``index`` (an integer, or an integer written as a
string: ``"1"``); any other index is a ``ModelResponseError``, never a guess. Without an index, by
``id``. With neither, a delta that names a function starts a new call and one that does not
continues the latest call: that is right for servers that send whole calls, or one call's
pieces in a row (Gemini's trailing piece with only a call's ``extra_content`` is one), and
the one thing a decoder cannot tell apart is two unnamed, unnumbered streams interleaved (they
are credited to the latest call, whose arguments then fail to parse and go back to the model as
an error result, not to another call).

Call ids are unique in a response: a call whose id an earlier call has is renamed (``_1``,
``_2``, ... appended), and its later pieces, which repeat the server's id, still go to it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ..._content import json_object, merged
from ..._exceptions import ModelResponseError
from ..._facts import ResponseFacts
from ..._messages import _FUNCTION_KEYS, FinishReason, Usage
from ..._updates import (
    AgentResponseUpdate,
    Finish,
    ProviderDataDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from .._sse import ServerSentEvent

__all__ = ["PREVIEW", "ChunkDecoder", "error_message", "preview"]

PREVIEW: Final = 300
_DETAIL_TEXT: Final = ("text", "summary", "data")
"""The string fields of a ``reasoning_details`` item that stream in pieces (appended)."""
_FINISH_REASONS: Final = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "model_length": FinishReason.LENGTH,  # Mistral: the context window is full
    "insufficient_system_resource": FinishReason.LENGTH,  # DeepSeek: cut off for lack of capacity
    "content_filter": FinishReason.CONTENT_FILTER,
}
"""What each ``finish_reason`` means; any other (``"eos"``, ...) is the model's own ending.
``"error"`` (vLLM, Mistral, OpenRouter) is a ``ModelResponseError``: the response failed."""


def preview(text: str, limit: int = PREVIEW) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


@attrs.define
class _Call:
    id: str
    """The call's id in the updates: the server's, made unique in the response."""
    wire_id: str | None
    """The id the server gave the call (``None`` if it gave none): what its later pieces
    repeat, which :attr:`id` is not when the server gave two calls one id."""
    open: bool = True
    data: Mapping[str, Any] = attrs.field(factory=dict)
    """The call's keys beyond the ones the decoder reads, from all its pieces so far."""
    late: dict[str, Any] | None = None
    """Those of them that came after its first piece (they go on its ``ToolCallEnd``)."""

    def end(self) -> ToolCallEnd:
        self.open = False
        return ToolCallEnd(self.id, provider_data=self.late)


class ChunkDecoder:
    """Turns the data of a response's events into updates. Plain synchronous code, no I/O.

    One instance per response. ``feed`` takes each event's data (a JSON chunk or ``[DONE]``);
    ``end_of_body`` is called when the body ends. Raises :class:`ModelResponseError` when the
    stream breaks the protocol.
    """

    def __init__(self, facts: ResponseFacts | None = None) -> None:
        self.facts = facts
        """Takes the response's ``id`` and ``model`` from the first chunk that has each."""
        self._calls: dict[int | str, _Call] = {}  # by index, else by id, else by position
        self._ids: dict[str, int | str] = {}  # a call's id -> its key
        self._order: list[_Call] = []
        self._used: set[str] = set()  # the ids in _order
        self._last_key: int | str | None = None
        self.reason: str | None = None
        """The raw ``finish_reason`` of choice 0, once it arrived."""
        self.usage: Usage | None = None
        """The usage the stream reported last."""
        self.events = 0
        """How many events were fed."""
        self.finished = False
        """The ``Finish`` has been produced (on ``[DONE]`` or at the end of the body)."""
        self.working = False
        """Never: every piece of a chat-completions stream shows what the model did."""

    def event(self, event: ServerSentEvent) -> list[AgentResponseUpdate]:
        """The updates in one server-sent event (an ``error`` event raises, but not after
        ``[DONE]``: nothing counts then, in whichever piece of the body it came)."""
        if event.event == "error" and not self.finished:
            raise ModelResponseError(
                f"the server reported an error in the stream: {error_message(event.data, '')}"
            )
        return self.feed(event.data)

    def feed(self, data: str) -> list[AgentResponseUpdate]:
        """The updates in one event's data."""
        self.events += 1
        if self.finished:
            return []  # nothing counts after [DONE]
        if data.strip() == "[DONE]":
            return self._finish()
        chunk = _loads(data)
        if not isinstance(chunk, dict):
            raise ModelResponseError(
                f"the server sent a chunk that is not a JSON object: {preview(data)!r}"
            )
        if chunk.get("error"):
            raise ModelResponseError(
                f"the server reported an error in the stream: {error_message(data, '')}"
            )
        facts = self.facts
        if facts is not None and (facts.id is None or facts.model is None):
            facts.take(chunk)
        usage = chunk.get("usage")
        if isinstance(usage, dict):  # the usage chunk; ordinary chunks carry null or nothing
            self.usage = _usage(usage)
        updates: list[AgentResponseUpdate] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, "0"):
                continue  # we never ask for n > 1
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, updates)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                if reason == "error":
                    raise ModelResponseError(
                        "the server ended the response with finish_reason 'error' (the "
                        "generation failed)"
                    )
                self.reason = reason
                updates += self._end_calls()  # OpenAI never ends a call explicitly
        return updates

    message = feed
    """The updates in an event of the default type (``message``) with this data: what
    :meth:`event` gives for it, without the event (the SSE stream's fast path)."""

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

    def _delta(self, delta: Mapping[str, Any], updates: list[AgentResponseUpdate]) -> None:
        """Append the updates in one choice's ``delta`` to ``updates``."""
        if "reasoning_content" in delta or "reasoning" in delta or "reasoning_details" in delta:
            updates += self._reasoning(delta)
        text = delta.get("content")
        if isinstance(text, str) and text:
            updates.append(TextDelta(text))
        text = delta.get("refusal")  # a refusal is the model's answer text too
        if isinstance(text, str) and text:
            updates.append(TextDelta(text))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                if isinstance(call, dict):
                    self._tool_call(call, position, updates)

    @staticmethod
    def _reasoning(delta: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        updates: list[AgentResponseUpdate] = []
        content, reasoning = delta.get("reasoning_content"), delta.get("reasoning")
        if isinstance(content, str) and content:
            updates.append(ReasoningDelta(content, field="reasoning_content"))
        if isinstance(reasoning, str) and reasoning and reasoning != content:
            updates.append(ReasoningDelta(reasoning, field="reasoning"))  # a server sending
        details = delta.get("reasoning_details")  # both names sends the same text in both
        for position, detail in enumerate(details if isinstance(details, list) else ()):
            if not isinstance(detail, dict):
                continue
            kind, index = detail.get("type"), detail.get("index", position)
            update = {k: v for k, v in detail.items() if k not in _DETAIL_TEXT}
            extend = {k: v for k, v in detail.items() if k in _DETAIL_TEXT and isinstance(v, str)}
            try:
                piece = ProviderDataDelta(
                    "reasoning_details", f"{kind}#{index}", update=update, extend=extend
                )
            except ValueError as exc:  # NaN or an infinity (1e400): it cannot go back as JSON
                raise ModelResponseError(
                    f"the server sent a reasoning_details item that is not JSON ({exc})"
                ) from exc
            updates.append(piece)
        return updates

    def _key(self, index: object, call_id: str | None, name: str | None) -> int | str | None:
        """Which call a tool-call delta continues or starts (see the module docstring); ``None``
        for a piece that continues nothing."""
        if index is not None:
            if isinstance(index, str) and index.isascii() and index.isdigit():
                return int(index)
            if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
                return index
            raise ModelResponseError(
                "the server sent a tool-call delta whose index is not an integer >= 0: "
                f"{preview(repr(index))}"
            )
        if call_id is not None:
            return self._ids.get(call_id, call_id)
        if name:
            return f"#{len(self._order)}"  # a call of its own
        return self._last_key

    def _tool_call(
        self, call: Mapping[str, Any], position: int, updates: list[AgentResponseUpdate]
    ) -> None:
        """Append the updates of one tool-call delta to ``updates``."""
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = None
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        if not isinstance(name, str):
            name = None
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            pass
        elif isinstance(arguments, dict | list):  # some servers send the object, not its text
            arguments = json.dumps(arguments, ensure_ascii=False)
        else:
            arguments = ""
        index = call.get("index")
        if type(index) is int and index >= 0:  # what nearly every server sends
            key: int | str | None = index
        else:
            key = self._key(index, call_id, name)
        if key is None:
            key = f"?{position}"  # nothing to continue: a start, which needs a name
        current = self._calls.get(key)
        # A new id *and* a name at a known index is a new call (a server that reuses index 0);
        # a new id alone is a server that renames every piece of one call. New to the server:
        # the id it gave the call, not the one the call was renamed to.
        if current is None or (name and call_id is not None and call_id != current.wire_id):
            if not name:
                raise ModelResponseError(
                    f"tool call {key!r} started without a function name: "
                    f"{preview(json.dumps(call))}"
                )
            if current is not None and current.open:
                updates.append(current.end())
            current = self._start(call, key, call_id, name, updates)
        else:
            if not (_CALL_KEYS.issuperset(call) and _FUNCTION_KEYS.issuperset(function)):
                extra = _call_extra(call)  # (only then: nearly every piece has no other keys)
                if extra is not None:
                    self._late(current, extra)
            if not current.open:
                if arguments:
                    raise ModelResponseError(
                        f"the server sent arguments for tool call {current.id!r} after it ended"
                    )
                return
        self._last_key = key
        if arguments:
            updates.append(ToolCallArgs(current.id, arguments))

    def _start(
        self,
        call: Mapping[str, Any],
        key: int | str,
        call_id: str | None,
        name: str,
        updates: list[AgentResponseUpdate],
    ) -> _Call:
        """A new call at ``key``: its ``ToolCallStart`` goes into ``updates``."""
        new_id = self._unique(call_id or f"call_{uuid.uuid4().hex[:24]}")
        extra = _call_extra(call)
        started = _Call(new_id, call_id, data=extra or {})
        self._calls[key] = started
        self._ids.setdefault(new_id, key)
        if call_id is not None:
            self._ids.setdefault(call_id, key)
        self._order.append(started)
        self._used.add(new_id)
        updates.append(ToolCallStart(started.id, name, provider_data=extra))
        return started

    @staticmethod
    def _late(call: _Call, extra: Mapping[str, Any]) -> None:
        """Keep the keys of a later piece of ``call`` (Gemini's thought signature, where it
        comes after the call's first piece) for its ``ToolCallEnd``; what the call already has
        changes nothing."""
        data = merged(call.data, extra)
        if data == call.data:
            return  # (a server that repeats the call's keys on every piece)
        if not call.open:
            raise ModelResponseError(
                f"the server sent {', '.join(map(repr, sorted(extra)))} for tool call "
                f"{call.id!r} after it ended: {preview(json.dumps(dict(extra)))}"
            )
        call.data = data
        call.late = merged(call.late or {}, extra)

    def _unique(self, call_id: str) -> str:
        """``call_id``, or, if a call of the response has it, ``call_id`` with ``_n`` appended
        (``n`` the call's place, or the next number no call has: the server may have given
        another call that id itself). Ids are unique in a response."""
        if call_id not in self._used:
            return call_id
        n = len(self._order)
        while f"{call_id}_{n}" in self._used:
            n += 1
        return f"{call_id}_{n}"

    def _end_calls(self) -> list[AgentResponseUpdate]:
        ended: list[AgentResponseUpdate] = []
        for call in self._order:
            if call.open:
                ended.append(call.end())
        return ended

    def _finish(self) -> list[AgentResponseUpdate]:
        self.finished = True
        reason = _FINISH_REASONS.get(self.reason or "", FinishReason.STOP)
        if reason not in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
            # "stop" with tool calls happens (some OpenAI models, older Ollama): the calls decide.
            reason = FinishReason.TOOL_CALLS if self._order else FinishReason.STOP
        return [*self._end_calls(), Finish(reason, self.usage)]


_CALL_KEYS: Final = frozenset({"index", "id", "type", "function"})


def _call_extra(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """The keys of a piece of a call beyond the ones the decoder reads (Gemini's
    ``extra_content``, which holds the call's thought signature), to go back with the call;
    and those of its ``function`` beyond ``name`` and ``arguments``, as an object under
    ``"function"``, which ``ToolCall.to_dict()`` puts back inside the call's ``function``.
    ``None`` when there are none."""
    function = call.get("function")
    more = (
        {k: v for k, v in function.items() if k not in _FUNCTION_KEYS and v is not None}
        if isinstance(function, dict) and not _FUNCTION_KEYS.issuperset(function)
        else {}
    )
    if _CALL_KEYS.issuperset(call) and not more:
        return None  # what nearly every server sends
    extra = {k: v for k, v in call.items() if k not in _CALL_KEYS and v is not None}
    if more:
        extra["function"] = more
    try:
        json_object(extra, "a tool call")
    except ValueError as exc:  # NaN or an infinity (1e400): it cannot go back as JSON
        raise ModelResponseError(f"the server sent a tool call that is not JSON ({exc})") from exc
    return extra


_raw_decode = json.JSONDecoder().raw_decode


def _loads(data: str) -> Any:
    """``json.loads(data)``, raising ``ModelResponseError`` for what is not JSON.

    A chunk is one JSON value with nothing around it, which ``raw_decode`` reads without the
    whitespace scans ``json.loads`` makes around it; anything else (whitespace around the
    value, extra data, not JSON at all) goes through ``json.loads`` itself, so the value and
    the error are always ``json.loads``'s.
    """
    try:
        value, end = _raw_decode(data)
    except (ValueError, RecursionError):
        end = -1
    if end != len(data):
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise ModelResponseError(
                f"the server sent a chunk that is not valid JSON ({exc}): {preview(data)!r}"
            ) from exc
    return value


def _usage(data: Mapping[str, Any]) -> Usage:
    """The usage a chunk reports. ``prompt_tokens`` includes the cached tokens, which
    ``prompt_tokens_details.cached_tokens`` counts (OpenAI, and DeepSeek, Z.ai and OpenRouter
    too), else DeepSeek's own ``prompt_cache_hit_tokens``; OpenRouter counts the tokens written
    to the cache in ``prompt_tokens_details.cache_write_tokens``. ``completion_tokens`` includes
    the reasoning tokens, except where ``total_tokens`` says it does not (xAI, Gemini: the
    total is prompt + completion + ``completion_tokens_details.reasoning_tokens``), and then
    the reasoning is added. A count that is missing or not an integer >= 0 is ignored (0, or
    the next place it may be)."""
    details = data.get("prompt_tokens_details")
    if not isinstance(details, Mapping):
        details = {}
    cached = _count(details, "cached_tokens")
    if cached is None:
        cached = _count(data, "prompt_cache_hit_tokens")
    prompt = _count(data, "prompt_tokens") or 0
    output = _count(data, "completion_tokens") or 0
    output_details = data.get("completion_tokens_details")
    if isinstance(output_details, Mapping):
        reasoning = _count(output_details, "reasoning_tokens")
        if reasoning and _count(data, "total_tokens") == prompt + output + reasoning:
            output += reasoning
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        cache_read_input_tokens=cached or 0,
        cache_creation_input_tokens=_count(details, "cache_write_tokens") or 0,
    )


def _count(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def error_message(body: str, reason_phrase: str) -> str:
    """The provider's message in an error body: ``error.message`` (OpenAI, vLLM, llama.cpp),
    ``error`` as a string (Ollama's native API), ``message`` (older vLLM), ``detail``
    (FastAPI servers); else the body's text; else the reason phrase."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
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
