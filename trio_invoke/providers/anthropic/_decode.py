"""The sans-IO half of :class:`AnthropicChatClient`'s responses: Messages API events in, updates
out.

Plain synchronous code with no I/O and no httpx2 import, so that it is tested (and
property-tested on any split of a recorded stream) without the ``anthropic`` extra.

A streamed message is ``message_start``, then for each content block ``content_block_start``,
its ``content_block_delta`` events and ``content_block_stop``, then ``message_delta`` (the stop
reason and the usage so far) and ``message_stop``; ``ping`` events come anywhere. The decoder
turns them into updates:

* a ``text`` block's ``text_delta`` pieces into ``TextDelta``;
* a ``tool_use`` block into ``ToolCallStart(id, name)``, its ``input_json_delta`` pieces into
  ``ToolCallArgs`` (a block with no pieces has the arguments ``{}``), its stop into
  ``ToolCallEnd``; where text came after it, its place in the text into a ``ProviderDataDelta``
  of the field ``tool_places`` (``TOOL_PLACES``), so that the text goes back around it;
* a ``thinking`` block's ``thinking_delta`` pieces into ``ReasoningDelta``, and the block itself
  -- its text and its ``signature_delta`` pieces -- into one ``ProviderDataDelta`` of the field
  ``thinking_blocks`` when it is whole (its ``content_block_stop``: a block cut short is not
  kept, as the API refuses a conversation with an unsigned one); a ``redacted_thinking`` block
  (whole in its start) into one such piece.
  The assistant message then carries ``provider_data["thinking_blocks"]``: the blocks exactly as
  the API sent them (and, for a block that came after text or calls, its place in
  ``provider_data["thinking_places"]``), which go back unchanged in later requests of the
  tool loop (the API checks their signatures, and refuses a tool loop without them when
  thinking is on);
* ``message_delta`` and ``message_stop`` into one ``Finish`` with the stop reason and the
  usage (``message_delta``'s counts are cumulative: the last one counts, never a sum; with
  ``iterations``, the sum of the passes it lists);
* an ``error`` event into :class:`ModelResponseError` with the error's type and message.

Event, block and delta types the decoder does not know are skipped -- Anthropic adds them
(``server_tool_use``, ``mcp_tool_use``, ``web_search_tool_result``, ``citations_delta``,
``compaction``, ...) -- but kept in :attr:`AnthropicDecoder.blocks`, the response's content as
the API would return it, which is what a ``pause_turn`` continuation sends back. Only the blocks
above are modelled: a delta of any type on a block of any other type is never fatal. The
``input_json_delta`` pieces of such a block (a server tool's, an MCP connector tool's) make its
``input`` in :attr:`AnthropicDecoder.blocks`, as the API returns it, and a ``compaction``
block's ``compaction_delta`` brings its ``content`` (the summary) whole; other deltas on such a
block are skipped. Only a ``tool_use`` block is a call of the loop's. Each such block, once
whole, is also one ``ProviderDataDelta`` of the field ``server_blocks`` (``SERVER_BLOCKS``:
the block and where it came), so that the assistant message carries it back in the later
requests of the tool loop. A ``text`` block's ``citations_delta`` pieces make its ``citations``,
which go out as one ``ProviderDataDelta`` of the field ``text_citations`` when the block ends,
and a ``tool_use`` block's ``caller`` (programmatic tool calling) one of ``tool_callers``: they
go back too.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ..._exceptions import ModelResponseError
from ..._facts import ResponseFacts
from ..._messages import FinishReason, Usage
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

__all__ = [
    "CONTAINER",
    "SERVER_BLOCKS",
    "STOP_REASONS",
    "TEXT_CITATIONS",
    "THINKING_BLOCKS",
    "THINKING_PLACES",
    "TOOL_CALLERS",
    "TOOL_PLACES",
    "AnthropicDecoder",
    "error_description",
    "error_message",
]

THINKING_BLOCKS: Final = "thinking_blocks"
"""The ``provider_data`` field of an assistant message that holds its thinking blocks."""
THINKING_PLACES: Final = "thinking_places"
"""The ``provider_data`` field that says where a thinking block came that did not come before
the text and the calls: ``{"block": n, "after_calls": calls, "after_text": bool, "text_at":
chars}``, ``n`` its place in ``thinking_blocks``, ``calls`` how many ``tool_use`` blocks came
before it (interleaved thinking), ``chars`` how many characters of the turn's text. A block with
no entry came first."""
SERVER_BLOCKS: Final = "server_blocks"
"""The ``provider_data`` field of an assistant message that holds the response's blocks of the
API's own doing -- a server tool's use and its result (``server_tool_use``,
``web_search_tool_result``, ...), an MCP connector tool's, ``compaction``, any block type the
decoder does not model -- each whole, as the API returned it, with where it came:
``{"block": {...}, "after_calls": calls, "text_at": chars, "after_thinking": thoughts}``, how
many ``tool_use`` blocks, characters of the turn's text and kept thinking blocks came before it.
They go back there in later requests, as the API's content of the turn."""
TEXT_CITATIONS: Final = "text_citations"
"""The ``provider_data`` field that holds the ``citations`` of the turn's text blocks that had
some (web search's ``web_search_result_location``, with its ``encrypted_index``, which the API
wants back): ``{"text_at": chars, "length": chars, "citations": [...]}``, where the block's text
is in the message's. The text goes back there as a block of its own, with them."""
CONTAINER: Final = "container"
"""The ``provider_data`` field that holds the code execution container the response ran in
(``[{"id": ..., "expires_at": ...}]``, as ``message_start`` or ``message_delta`` said): a
request that answers calls code execution made (programmatic tool calling) must name it."""
TOOL_CALLERS: Final = "tool_callers"
"""The ``provider_data`` field that holds the ``caller`` of each ``tool_use`` block that had one
(``{"type": "direct"}``, or the code execution run of programmatic tool calling):
``{"id": call_id, "caller": {...}}``; it goes back on the call's ``tool_use`` block."""
TOOL_PLACES: Final = "tool_places"
"""The ``provider_data`` field that says where a ``tool_use`` block came that text came after
(the message keeps the turn's text as one string): ``{"id": call_id, "text_at": chars}``, how
many characters of the turn's text came before it. The text goes back cut there, the call
between the pieces; a call with no entry goes after all the text."""
STOP_REASONS: Final = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.CONTENT_FILTER,
}
"""The API's stop reasons and what they mean here; ``pause_turn`` is the client's to handle
(see :attr:`AnthropicDecoder.paused`), and an unknown reason is ``STOP``."""
PAUSE_TURN: Final = "pause_turn"
REFUSAL: Final = "refusal"
_MODELLED: Final = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
"""The block types the decoder turns into updates: a delta of a known type that does not fit
one of these is a broken stream. A delta on a block of any other type is never fatal."""
_PREVIEW: Final = 300


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."


def _whole(block: _Block) -> dict[str, Any]:
    """The block as the API would return it: its ``input`` made of its pieces, if any."""
    raw = dict(block.raw)
    if block.json:
        with contextlib.suppress(ValueError, RecursionError):  # cut short: as it started
            raw["input"] = json.loads("".join(block.json))
    return raw


def _data_piece(field: str, key: str, update: Mapping[str, Any], what: str) -> ProviderDataDelta:
    """A ``ProviderDataDelta`` of the response's own data, to go back with the message.

    Raises:
        ModelResponseError: it holds NaN or an infinity (``1e400``), which cannot go back as
            JSON; ``what`` says what the server sent.
    """
    try:
        return ProviderDataDelta(field, key, update=update)
    except ValueError as exc:
        raise ModelResponseError(f"the server sent {what} ({exc})") from exc


@attrs.define
class _Block:
    """One content block of the response, as far as it has come."""

    kind: str
    raw: dict[str, Any]
    """The block as the API would return it whole (unknown kinds: its start, and text-like
    deltas appended where they are understood)."""
    call_id: str | None = None
    """For a ``tool_use`` block: its id (a ``ToolCallStart`` went out)."""
    key: str | None = None
    """For a ``thinking`` block: the key of its ``ProviderDataDelta``, which goes out whole
    when the block is complete."""
    place: tuple[int, bool] = (0, False)
    """For a thinking block: how many calls, and whether text, came before it."""
    text_at: int = 0
    """How many characters of the turn's text came before the block."""
    server: dict[str, Any] | None = None
    """For a block the decoder does not model: the key and place of its ``SERVER_BLOCKS``
    piece, which goes out when the block is whole."""
    json: list[str] = attrs.field(factory=list)
    """The ``input_json_delta`` pieces (of a ``tool_use`` block, or of a block the decoder does
    not model: ``server_tool_use``, ``mcp_tool_use``, ...)."""
    open: bool = True


class AnthropicDecoder:
    """Turns a Messages API event stream into updates. Plain synchronous code, no I/O.

    One instance per response: feed each server-sent event to :meth:`event`, and call
    :meth:`end_of_body` when the body ends. Raises :class:`ModelResponseError` when the stream
    breaks the protocol or reports an error.

    Args:
        key_prefix: Prefixes the keys of the ``thinking_blocks`` pieces, so that the blocks of
            the responses of one paused and continued turn stay apart (their indices restart).
        after: The decoder of the paused response this one continues: its thinking blocks and
            text come first in the turn's message (see ``THINKING_PLACES``).
        continue_pause: Whether a ``pause_turn`` stop is left to the client to continue (no
            ``Finish``: :attr:`paused` says so). ``False``: the response ends with
            ``Finish(LENGTH)``, the turn unfinished. A paused response that called tools ends
            with ``Finish(TOOL_CALLS)`` either way: the calls are answered first.
    """

    def __init__(
        self,
        *,
        key_prefix: str = "",
        continue_pause: bool = True,
        facts: ResponseFacts | None = None,
        after: AnthropicDecoder | None = None,
    ) -> None:
        self.facts = facts
        """Takes the ``id`` and ``model`` of ``message_start``'s message."""
        self._prefix = key_prefix
        self._continue_pause = continue_pause
        self._blocks: dict[int, _Block] = {}
        self._order: list[_Block] = []
        self._calls = 0
        self._unplaced: list[tuple[int, _Block]] = []  # the tool_use blocks since the text
        self.kept: int = after.kept if after is not None else 0
        """How many thinking blocks of the turn went out (``ProviderDataDelta``) so far."""
        self.texted: bool = after.texted if after is not None else False
        """Text of the turn went out."""
        self.text_length: int = after.text_length if after is not None else 0
        """How many characters of text of the turn went out."""
        self._started = False
        self._input = (0, 0, 0)  # input, cache read, cache creation, as message_start said
        self._output = 0
        self.stop_reason: str | None = None
        """The raw ``stop_reason``, once ``message_delta`` brought it."""
        self.stop_sequence: str | None = None
        """Which stop sequence ended the response, for ``stop_sequence``."""
        self.events = 0
        """How many events were fed."""
        self.finished = False
        """The response is over: ``message_stop`` came (or the body ended after the stop
        reason)."""
        self.paused = False
        """The response ended with ``pause_turn`` and is the client's to continue."""
        self.working = False
        """The model is at work on what the stream does not show: a thinking block is open
        (with ``display: "omitted"`` it stays empty until its signature), a tool use block is
        open (without fine-grained tool streaming the API buffers each parameter value whole),
        or a server tool's block has ended and its result has not started (the tool runs). The
        API sends only ``ping`` events meanwhile, and they count as progress for the read
        timeout."""

    # -- what the client reads ---------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        """The response's usage so far (``input_tokens`` counts the cached tokens too)."""
        fresh, read, created = self._input
        return Usage(
            fresh + read + created,
            self._output,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=created,
        )

    @property
    def blocks(self) -> list[dict[str, Any]]:
        """The response's content blocks, as the API would return them whole (the content of
        the assistant message a ``pause_turn`` continuation sends back). A text block with no
        text is left out: the API refuses empty text blocks."""
        return [
            _whole(block) for block in self._order if block.kind != "text" or block.raw.get("text")
        ]

    # -- events --------------------------------------------------------------------------------

    def event(self, event: ServerSentEvent) -> list[AgentResponseUpdate]:
        """The updates of one server-sent event."""
        self.events += 1
        if self.finished:
            # Nothing counts after message_stop, whatever it is (a proxy's "[DONE]", a late
            # error): the response is whole, and the same in whichever piece this came.
            return []
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise ModelResponseError(
                f"the server sent an event that is not valid JSON ({exc}): {_preview(event.data)!r}"
            ) from exc
        if not isinstance(data, dict):
            raise ModelResponseError(
                f"the server sent an event that is not a JSON object: {_preview(event.data)!r}"
            )
        kind = data.get("type")
        if not isinstance(kind, str):
            kind = event.event  # a proxy that dropped the type from the data: the SSE name
        if kind == "error" or event.event == "error":
            message, error_type = error_description(event.data, "")
            named = f"{error_type}: " if error_type else ""
            raise ModelResponseError(
                f"the server reported an error in the stream: {named}{message}",
                error_type=error_type,
            )
        if kind == "message_start":
            return self._message_start(data)
        if kind == "content_block_start":
            return self._block_start(data)
        if kind == "content_block_delta":
            return self._block_delta(data)
        if kind == "content_block_stop":
            return self._block_stop(data)
        if kind == "message_delta":
            return self._message_delta(data)
        if kind == "message_stop":
            return self._stop()
        return []  # ping, and whatever event type Anthropic adds

    def end_of_body(self, diagnosis: str = "") -> list[AgentResponseUpdate]:
        """The updates still owed when the body ends.

        Raises:
            ModelResponseError: the body ended before the stop reason came.
        """
        if self.finished:
            return []
        if self.stop_reason is None:
            raise ModelResponseError(
                "the response stream ended before the response was complete (no stop_reason "
                f"and no message_stop after {self.events} events){diagnosis}"
            )
        return self._stop()

    def _message_start(self, data: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        self._started = True
        message = data.get("message")
        if self.facts is not None and isinstance(message, dict):
            self.facts.take(message)
        usage = message.get("usage") if isinstance(message, dict) else None
        if isinstance(usage, dict):
            self._count(usage)
        return self._container(message.get("container") if isinstance(message, dict) else None)

    @staticmethod
    def _container(container: object) -> list[AgentResponseUpdate]:
        """The code execution container's piece (``CONTAINER``), if the event named one."""
        if not (isinstance(container, dict) and isinstance(container.get("id"), str)):
            return []
        return [_data_piece(CONTAINER, CONTAINER, container, "a container that is not JSON")]

    def _count(self, usage: Mapping[str, Any]) -> None:
        """Take the counts ``usage`` has (``message_delta``'s are cumulative and may repeat
        the input counts, with other values: the latest one holds). A response that ran
        several model passes (server-side compaction) lists them in ``iterations``, and the
        top-level counts are the last pass's: the response's counts are the passes' sum."""
        iterations = usage.get("iterations")
        if isinstance(iterations, list) and iterations:
            passes = [item for item in iterations if isinstance(item, dict)]
            usage = {
                key: sum(_tokens(item, key, 0) for item in passes)
                for key in (
                    "input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                    "output_tokens",
                )
            }
        fresh, read, created = self._input
        fresh = _tokens(usage, "input_tokens", fresh)
        read = _tokens(usage, "cache_read_input_tokens", read)
        created = _tokens(usage, "cache_creation_input_tokens", created)
        self._input = (fresh, read, created)
        self._output = _tokens(usage, "output_tokens", self._output)

    def _index(self, data: Mapping[str, Any], event: str) -> int:
        index = data.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ModelResponseError(
                f"the server sent a {event} whose index is not an integer >= 0: {index!r}"
            )
        return index

    def _key(self, index: int) -> str:
        return f"{self._prefix}{index}"

    def _block_start(self, data: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        index = self._index(data, "content_block_start")
        if index in self._blocks:
            raise ModelResponseError(f"the server started content block {index} twice")
        content = data.get("content_block")
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            raise ModelResponseError(
                f"content block {index} started without a type: {_preview(json.dumps(data))}"
            )
        kind: str = content["type"]
        self.working = kind == "thinking" or kind.endswith("tool_use")
        block = _Block(kind, dict(content), text_at=self.text_length)
        self._blocks[index] = block
        self._order.append(block)
        if kind == "text":
            text = content.get("text")
            if isinstance(text, str) and text:
                return self._text(text)
            return []
        if kind == "tool_use":
            return self._tool_start(index, block, content)
        block.place = (self._calls, self.texted)
        if kind not in _MODELLED:
            block.server = {
                "key": self._key(index),
                "after_calls": self._calls,
                "text_at": self.text_length,
                "after_thinking": self.kept,
            }
        if kind == "thinking":
            # The block itself goes out whole at its content_block_stop (see _close).
            thinking, signature = content.get("thinking"), content.get("signature")
            block.raw["thinking"] = thinking = thinking if isinstance(thinking, str) else ""
            block.raw["signature"] = signature if isinstance(signature, str) else ""
            block.key = self._key(index)
            return [ReasoningDelta(thinking)] if thinking else []
        if kind == "redacted_thinking":
            what = "a redacted_thinking block that is not JSON"
            piece = _data_piece(THINKING_BLOCKS, self._key(index), content, what)
            return self._kept(block, piece)
        return []  # server tool use and results, compaction, ...: kept in .blocks only

    def _tool_start(
        self, index: int, block: _Block, content: Mapping[str, Any]
    ) -> list[AgentResponseUpdate]:
        call_id, name = content.get("id"), content.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise ModelResponseError(f"tool_use block {index} started without an id")
        if not isinstance(name, str) or not name:
            raise ModelResponseError(f"tool_use block {index} ({call_id}) started without a name")
        if any(b.call_id == call_id for b in self._order):
            raise ModelResponseError(f"the server sent tool_use id {call_id!r} twice")
        block.call_id = call_id
        self._calls += 1
        self._unplaced.append((index, block))
        start = ToolCallStart(call_id, name)
        caller = content.get("caller")
        if not isinstance(caller, dict):
            return [start]
        piece = _data_piece(  # programmatic tool calling: the call goes back with its caller
            TOOL_CALLERS,
            self._key(index),
            {"id": call_id, "caller": caller},
            f"a tool_use block ({call_id}) whose caller is not JSON",
        )
        return [start, piece]

    def _text(self, text: str) -> list[AgentResponseUpdate]:
        """A piece of the turn's text, after the place of each call that came before it and
        after the text before (``TOOL_PLACES``)."""
        places: list[AgentResponseUpdate] = [
            ProviderDataDelta(
                TOOL_PLACES, self._key(index), update={"id": call.call_id, "text_at": call.text_at}
            )
            for index, call in self._unplaced
        ]
        self._unplaced.clear()
        self.texted = True
        self.text_length += len(text)
        return [*places, TextDelta(text)]

    def _open(self, data: Mapping[str, Any], event: str) -> _Block:
        index = self._index(data, event)
        block = self._blocks.get(index)
        if block is None:
            raise ModelResponseError(
                f"the server sent a {event} for content block {index}, which never started"
            )
        if not block.open:
            raise ModelResponseError(
                f"the server sent a {event} for content block {index} after its content_block_stop"
            )
        return block

    def _block_delta(self, data: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        block = self._open(data, "content_block_delta")
        delta = data.get("delta")
        kind = delta.get("type") if isinstance(delta, dict) else None
        if not isinstance(delta, dict) or not isinstance(kind, str):
            return []
        if kind == "citations_delta":
            citation = delta.get("citation")
            if citation is not None:
                block.raw["citations"] = [*(block.raw.get("citations") or ()), citation]
            return []
        if block.kind not in _MODELLED:
            return self._other_delta(block, kind, delta)
        if kind == "text_delta":
            text = self._piece(delta, "text", block, ("text",))
            block.raw["text"] = block.raw.get("text", "") + text
            return self._text(text) if text else []
        if kind == "input_json_delta":
            piece = self._piece(delta, "partial_json", block, ("tool_use",))
            block.json.append(piece)
            if block.call_id is None or not piece:
                return []
            return [ToolCallArgs(block.call_id, piece)]
        if kind == "thinking_delta":
            text = self._piece(delta, "thinking", block, ("thinking",))
            block.raw["thinking"] += text
            return [ReasoningDelta(text)] if text else []
        if kind == "signature_delta":
            signature = self._piece(delta, "signature", block, ("thinking",))  # checks first
            block.raw["signature"] += signature
            return []
        return []  # a delta type Anthropic added: skipped

    @staticmethod
    def _other_delta(
        block: _Block, kind: str, delta: Mapping[str, Any]
    ) -> list[AgentResponseUpdate]:
        """A delta on a block the decoder does not model (see the module docstring): kept in
        :attr:`blocks` where its place is known, never an update, never an error."""
        piece = delta.get("partial_json")
        if kind == "input_json_delta" and isinstance(piece, str):
            block.json.append(piece)  # a server tool's input, an MCP connector tool's, ...
        elif kind == "compaction_delta" and block.kind == "compaction":
            # The block starts with "content": null; the delta brings its fields whole (the
            # summary's "content", and "encrypted_content"), as the API's SDKs take it: they
            # replace what the start had.
            block.raw.update((key, value) for key, value in delta.items() if key != "type")
        return []

    @staticmethod
    def _piece(delta: Mapping[str, Any], field: str, block: _Block, kinds: tuple[str, ...]) -> str:
        if block.kind not in kinds:
            raise ModelResponseError(
                f"the server sent a {delta.get('type')} for a {block.kind} block"
            )
        piece = delta.get(field)
        if not isinstance(piece, str):
            raise ModelResponseError(
                f"the server sent a {delta.get('type')} whose {field} is not a string: "
                f"{_preview(repr(piece))}"
            )
        return piece

    def _block_stop(self, data: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        block = self._open(data, "content_block_stop")
        return self._close(block, stopped=True)

    def _close(self, block: _Block, *, stopped: bool = False) -> list[AgentResponseUpdate]:
        block.open = False
        # server_tool_use, mcp_tool_use, ...: the API runs the tool now
        self.working = block.kind not in _MODELLED and block.kind.endswith("tool_use")
        if block.key is not None:
            return self._thinking(block, stopped=stopped)
        if block.server is not None:
            return self._server(block) if stopped else []
        if block.kind == "text":
            return self._citations(block)
        if block.call_id is None:
            return []
        updates: list[AgentResponseUpdate] = []
        start_input = block.raw.get("input")
        if not any(block.json) and isinstance(start_input, dict) and start_input:
            # the whole input in the start, no pieces (a proxy that buffers, a replay)
            arguments = json.dumps(start_input, ensure_ascii=False, separators=(",", ":"))
            updates.append(ToolCallArgs(block.call_id, arguments))
        updates.append(ToolCallEnd(block.call_id))
        return updates

    @staticmethod
    def _server(block: _Block) -> list[AgentResponseUpdate]:
        """A block of the API's own doing, whole at its ``content_block_stop`` (one cut short
        is not kept): one ``SERVER_BLOCKS`` piece, with its place."""
        place = dict(block.server or {})
        key = place.pop("key")
        update = {"block": _whole(block), **place}
        return [_data_piece(SERVER_BLOCKS, key, update, f"a {block.kind} block that is not JSON")]

    def _citations(self, block: _Block) -> list[AgentResponseUpdate]:
        """A text block's ``citations``, if it had some and text (``TEXT_CITATIONS``)."""
        citations, text = block.raw.get("citations"), block.raw.get("text")
        if not (isinstance(citations, list) and citations and isinstance(text, str) and text):
            return []
        where = {"text_at": block.text_at, "length": len(text), "citations": citations}
        index = next(n for n, started in self._blocks.items() if started is block)
        return [_data_piece(TEXT_CITATIONS, self._key(index), where, "citations that are not JSON")]

    def _kept(self, block: _Block, piece: ProviderDataDelta) -> list[AgentResponseUpdate]:
        """A thinking block's piece, and where it came if not first (``THINKING_PLACES``)."""
        position, self.kept = self.kept, self.kept + 1
        calls, texted = block.place
        if not (calls or texted):
            return [piece]
        place = {
            "block": position,
            "after_calls": calls,
            "after_text": texted,
            "text_at": block.text_at,
        }
        return [piece, ProviderDataDelta(THINKING_PLACES, piece.key, update=place)]

    def _thinking(self, block: _Block, *, stopped: bool) -> list[AgentResponseUpdate]:
        """A ``thinking`` block's one ``ProviderDataDelta``, once the block is whole: at its
        ``content_block_stop``, or at the end of the response if its signature came. The API
        checks the signature of every thinking block sent back, earlier turns' too, so a
        block cut short (a cancelled read, ``max_tokens`` inside the thinking) is never kept:
        its text stays the message's reasoning, and the conversation can be sent again."""
        thinking, signature = block.raw["thinking"], block.raw["signature"]
        if block.key is None or not (stopped or signature):
            return []
        piece = ProviderDataDelta(
            THINKING_BLOCKS,
            block.key,
            update={"type": "thinking"},
            extend={"thinking": thinking, "signature": signature},
        )
        return self._kept(block, piece)

    def _message_delta(self, data: Mapping[str, Any]) -> list[AgentResponseUpdate]:
        delta = data.get("delta")
        updates: list[AgentResponseUpdate] = []
        if isinstance(delta, dict):
            updates = self._container(delta.get("container"))
            reason = delta.get("stop_reason")
            if isinstance(reason, str) and reason:
                self.stop_reason = reason
            sequence = delta.get("stop_sequence")
            if isinstance(sequence, str):
                self.stop_sequence = sequence
        usage = data.get("usage")
        if isinstance(usage, dict):
            self._count(usage)
        return updates

    def _stop(self) -> list[AgentResponseUpdate]:
        self.finished = True
        # A block the stream never stopped (max_tokens inside a tool call) ends here; its
        # arguments are what came, and go back to the model as an error if they do not parse.
        ended: list[AgentResponseUpdate] = []
        for block in self._order:
            if block.open:
                ended += self._close(block)
        self.working = False
        if self.stop_reason == PAUSE_TURN and not self._calls and self._continue_pause:
            self.paused = True
            return ended
        if self.stop_reason == REFUSAL:
            # Even with calls: the API's classifier stopped the response, and a refused turn
            # is to be reset, not answered (as the OpenAI client keeps content_filter).
            reason = FinishReason.CONTENT_FILTER
        elif self._calls:
            reason = FinishReason.TOOL_CALLS
        elif self.stop_reason == PAUSE_TURN:
            reason = FinishReason.LENGTH  # a paused turn no one continues is unfinished
        else:
            reason = STOP_REASONS.get(self.stop_reason or "", FinishReason.STOP)
            if reason is FinishReason.TOOL_CALLS:
                reason = FinishReason.STOP  # "tool_use" with no tool_use block
        return [*ended, Finish(reason, self.usage)]


def _tokens(usage: Mapping[str, Any], key: str, default: int) -> int:
    value = usage.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def error_description(body: str, reason_phrase: str) -> tuple[str, str | None]:
    """The message and type in an Anthropic error body, ``{"type": "error", "error": {"type":
    "overloaded_error", "message": "Overloaded"}}``; else the body's text (or the reason
    phrase) and no type. The error bodies of proxies in front of the API (``{"error":
    "..."}``, ``{"message": "..."}``, ``{"detail": "..."}``) are read too."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            kind = error.get("type")
            kind = kind if isinstance(kind, str) and kind else None
            message = error.get("message")
            if isinstance(message, str) and message:
                return message, kind
            if kind is not None:
                return reason_phrase or "no error message", kind
        for candidate in (error, data.get("message"), data.get("detail")):
            if isinstance(candidate, str) and candidate:
                return candidate, None
    text = body.strip()
    return (_preview(text) if text else (reason_phrase or "no error message")), None


def error_message(body: str, reason_phrase: str = "") -> str:
    """:func:`error_description` as one line: ``"overloaded_error: Overloaded"``."""
    message, kind = error_description(body, reason_phrase)
    return f"{kind}: {message}" if kind else message
