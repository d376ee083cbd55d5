"""The sans-IO request side of :class:`AnthropicChatClient`: a conversation as the Messages API
takes it.

``ChatMessage`` is the OpenAI chat-completions shape; the Messages API differs at every point:

* System (and developer) messages go to the request's ``system``, as text blocks in order;
  the API has no system role inside ``messages``.
* Each message becomes a list of content blocks, and consecutive messages of one role are merged
  into one, as the API requires roles to alternate. Empty text is left out (the API refuses
  empty text blocks), and so is a message that ends up with no blocks.
* An assistant message goes as its thinking blocks (``provider_data["thinking_blocks"]``, exactly
  as the API sent them: the signatures are checked), then its text, then a ``tool_use`` block per
  call in call order (a thinking block that came after the text or after calls --
  interleaved thinking, ``provider_data["thinking_places"]`` -- goes back there: the API
  refuses the blocks of the latest assistant message moved; so does text that came after a
  call, the text cut where each call came, ``provider_data["tool_places"]``; without it, all
  the text goes before the calls), and so does each block of the
  API's own doing (``provider_data["server_blocks"]``: a server tool's use and result, ...,
  with its place, the text cut there; a cited text block's text goes as a block of its own
  with its ``citations``, ``provider_data["text_citations"]``, and a call with its ``caller``,
  ``provider_data["tool_callers"]``), the arguments as the ``input``
  object (arguments that are not a JSON object, ``NaN`` or ``Infinity`` in them included, go
  as ``{}``: the call's result tells the model what was wrong). Reasoning without thinking
  blocks (from another provider) is not sent: the API takes only signed thinking.
* The tool messages answering one batch become ``tool_result`` blocks in one user message, in
  call order (answering calls that code execution made and waits for -- programmatic tool
  calling -- that message may hold nothing else, as the API says: a user message after them
  is a :class:`ConfigurationError`), with ``is_error`` for error results: a tool message marked
  ``provider_data["is_error"]`` true, or, with no mark, one whose text is the loop's error text
  (``"Error: ..."``). The loop marks its results where the text would say otherwise (an
  error in a middleware's words is marked true, a success that reads ``"Error: ..."`` false).
  A tool's images go inside its ``tool_result``, which takes image blocks.
* Images: ``ImagePart`` data as a ``base64`` source, a URL as a ``url`` source. A ``RawPart`` goes
  as it is (an Anthropic ``document`` block, say). Keys of a part's ``provider_data``
  (``cache_control``) go on its block.
* Tools go as ``{name, description, input_schema}``; ``tool_choice`` ``"auto"``, ``"none"``,
  ``"required"`` (the API's ``"any"``) or one named tool (``{"type": "function", "function":
  {"name": ...}}``, the API's ``{"type": "tool", "name": ...}``; a choice already in the API's
  shape goes as it is), and ``parallel_tool_calls=False`` as ``disable_parallel_tool_use``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypeGuard

import attrs

from ..._content import ContentPart, ImagePart, RawPart, TextPart, json_copy
from ..._exceptions import ArgumentsError, ConfigurationError
from ..._messages import _LOOP_ERROR, ChatMessage, MessageRole
from ..._tools import ToolDefinition
from ..._validate import parse_arguments
from ._decode import (
    CONTAINER,
    SERVER_BLOCKS,
    TEXT_CITATIONS,
    THINKING_BLOCKS,
    THINKING_PLACES,
    TOOL_CALLERS,
    TOOL_PLACES,
)

__all__ = ["pending_container", "wire_conversation", "wire_tool_choice", "wire_tools"]

_THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})


def wire_conversation(
    messages: Sequence[ChatMessage],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system, messages)`` for the request: the system text blocks, and the conversation's
    other messages as the Messages API takes them (see the module docstring).

    Raises:
        ConfigurationError: an assistant message's ``thinking_blocks`` that are not a list of
            thinking blocks, or a user message after the results of calls that code execution
            made and waits for (see :func:`_check_code_waits`).
    """
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role in (MessageRole.SYSTEM, MessageRole.DEVELOPER):
            system += _blocks(message.parts)
            continue
        if message.role is MessageRole.TOOL:
            role, blocks = "user", [_tool_result(message)]
        elif message.role is MessageRole.ASSISTANT:
            role, blocks = "assistant", _assistant(message)
        else:
            role, blocks = "user", _blocks(message.parts)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    _check_code_waits(messages, out)
    return system, out


def _check_code_waits(messages: Sequence[ChatMessage], out: list[dict[str, Any]]) -> None:
    """While code execution waits for the results of calls it made (programmatic tool
    calling: the latest assistant message's calls with a ``caller`` that is not ``direct``),
    the user turn that answers them may hold ``tool_result`` blocks only, as the API says. A
    user message there would merge into it (the API combines consecutive user turns too), so
    it is refused.

    Raises:
        ConfigurationError: a user message after the latest assistant message, which made
            calls from code execution.
    """
    latest = next((m for m in reversed(messages) if m.role is MessageRole.ASSISTANT), None)
    if latest is None or not out or out[-1]["role"] != "user":
        return
    waiting = _code_calls(latest)
    if not waiting:
        return
    others = sorted({block.get("type", "?") for block in out[-1]["content"]} - {"tool_result"})
    if others:
        raise ConfigurationError(
            f"a user message ({', '.join(others)} blocks) comes after the results of calls "
            f"made from code execution ({', '.join(waiting)}): while the code waits for them "
            "(programmatic tool calling), Anthropic's API takes a user turn of tool_result "
            "blocks only; send the message after the model's answer"
        )


def _code_calls(message: ChatMessage) -> list[str]:
    """The ids of the message's calls made from code execution (a ``caller`` that is not
    ``direct``), in call order."""
    callers = _callers(message)
    return [
        call.id
        for call in message.tool_calls or ()
        if call.id in callers and callers[call.id].get("type") != "direct"
    ]


def _blocks(parts: Iterable[ContentPart]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text, **_extra(part)})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
        elif isinstance(part, RawPart):
            blocks.append(json_copy(part.data, "RawPart"))
    return blocks


def _extra(part: TextPart | ImagePart) -> dict[str, Any]:
    copied: dict[str, Any] = json_copy(part.provider_data, "provider_data")
    return copied


def _image(part: ImagePart) -> dict[str, Any]:
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    else:
        source = {"type": "url", "url": part.url}
    return {"type": "image", "source": source, **_extra(part)}


@attrs.frozen
class _Kept:
    """A thinking or server block of an assistant message, and where it goes."""

    order: tuple[int, int, int]
    """Its place among the message's kept blocks (thinking and server blocks)."""
    after_calls: int
    text_at: int | None
    """How many characters of the text came before it; ``None``: some (a thinking block
    after text), as many as came before the next block whose place is known."""
    block: dict[str, Any]


def _assistant(message: ChatMessage) -> list[dict[str, Any]]:
    thinking = _thinking(message)
    callers = _callers(message)
    calls = [
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": _input(call.arguments),
            **({"caller": callers[call.id]} if call.id in callers else {}),
        }
        for call in message.tool_calls or ()
    ]
    # Each thinking block and server block goes where it came (see _places and
    # _server_blocks): before, inside or after the text, or after the calls that came before
    # it; in the order they came.
    places = _places(message, len(thinking))
    kept = [
        _Kept((n, 1, 0), calls_before, text_at if texted else 0, block)
        for n, block in enumerate(thinking)
        for calls_before, texted, text_at in [places.get(n, (0, False, None))]
    ]
    kept += _server_blocks(message, len(thinking))
    kept.sort(key=lambda item: item.order)
    # A call goes where it came in the text (TOOL_PLACES), or after all of it; a block after
    # a call goes after it, and no earlier in the text (after all of it, after more calls than
    # the message has).
    end = len(message.content) if isinstance(message.content, str) else 1
    slots: list[list[_Kept]] = [[] for _ in range(len(calls) + 1)]
    for item in kept:
        beyond = item.after_calls > len(calls)
        slots[min(item.after_calls, len(calls))].append(
            attrs.evolve(item, text_at=end) if beyond else item
        )
    text_places = _tool_places(message)
    sequence = list(slots[0])
    for n, (call, after) in enumerate(zip(calls, slots[1:], strict=True), 1):
        sequence.append(_Kept((0, 0, 0), n, text_places.get(call["id"], end), call))
        sequence += after
    return _around_text(message, sequence)


def _around_text(message: ChatMessage, kept: list[_Kept]) -> list[dict[str, Any]]:
    """The message's text with its other blocks (in the order they came), each at its place in
    the text (text as a plain string is cut there; content parts are not: a block goes before
    them or after)."""
    text = message.content if isinstance(message.content, str) else None
    end = len(text) if text is not None else 1
    places: list[int] = []
    following = end
    for item in reversed(kept):  # a place not known: where the next known one is
        at = following if item.text_at is None else item.text_at
        following = min(max(at, 0), end)
        places.append(following)
    places.reverse()
    spans = _citations(message, end) if text is not None else []
    blocks: list[dict[str, Any]] = []
    cut = 0
    for item, place in zip(kept, places, strict=True):
        at = max(place, cut)  # (places out of order: one edited by hand, one after a call)
        if at > cut:
            blocks += _text_between(message, text, cut, at, spans)
            cut = at
        blocks.append(item.block)
    if cut < end:
        blocks += _text_between(message, text, cut, end, spans)
    return blocks


def _text_between(
    message: ChatMessage,
    text: str | None,
    start: int,
    stop: int,
    spans: list[tuple[int, int, list[Any]]],
) -> list[dict[str, Any]]:
    """The text from ``start`` to ``stop``, cut where a cited text block began and ended,
    each cited piece with its ``citations``."""
    if text is None:
        return _blocks(message.parts)
    cuts = sorted({start, stop, *(at for span in spans for at in span[:2] if start < at < stop)})
    blocks: list[dict[str, Any]] = []
    for begin, finish in itertools.pairwise(cuts):
        block: dict[str, Any] = {"type": "text", "text": text[begin:finish]}
        for span_start, span_stop, citations in spans:
            if span_start <= begin and finish <= span_stop:
                block["citations"] = json_copy(citations, TEXT_CITATIONS)
                break
        blocks.append(block)
    return blocks


def _citations(message: ChatMessage, end: int) -> list[tuple[int, int, list[Any]]]:
    """Where the message's cited text blocks are in its text (``TEXT_CITATIONS``), each
    ``(start, stop, citations)``, in order; an entry that is not one, or that overlaps one
    before it, is left out (its text goes back without them)."""
    spans: list[tuple[int, int, list[Any]]] = []
    for entry in _entries(message, TEXT_CITATIONS):
        at, length, citations = entry.get("text_at"), entry.get("length"), entry.get("citations")
        if (
            _count(at)
            and _count(length)
            and isinstance(citations, list | tuple)
            and citations
            and at + length <= end
            and length
        ):
            spans.append((at, at + length, list(citations)))
    spans.sort(key=lambda span: span[:2])
    kept: list[tuple[int, int, list[Any]]] = []
    for span in spans:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entries(message: ChatMessage, field: str) -> list[Mapping[str, Any]]:
    """The objects of the message's list ``provider_data[field]``; anything else is left out."""
    entries = message.provider_data.get(field)
    if not isinstance(entries, list | tuple):
        return []
    return [entry for entry in entries if isinstance(entry, Mapping)]


def _callers(message: ChatMessage) -> dict[str, Any]:
    """The ``caller`` of each call that had one (``TOOL_CALLERS``), by call id; an entry that
    is not one is left out."""
    callers: dict[str, Any] = {}
    for entry in _entries(message, TOOL_CALLERS):
        call_id, caller = entry.get("id"), entry.get("caller")
        if (
            isinstance(call_id, str)
            and isinstance(caller, Mapping)
            and isinstance(caller.get("type"), str)
        ):
            callers[call_id] = json_copy(caller, TOOL_CALLERS)
    return callers


def _tool_places(message: ChatMessage) -> dict[str, int]:
    """How many characters of the text came before each call that text came after
    (``TOOL_PLACES``), by call id; an entry that is not one is left out (the call goes after
    all the text)."""
    places: dict[str, int] = {}
    for entry in _entries(message, TOOL_PLACES):
        call_id, text_at = entry.get("id"), entry.get("text_at")
        if isinstance(call_id, str) and _count(text_at):
            places[call_id] = text_at
    return places


def _server_blocks(message: ChatMessage, thinking: int) -> list[_Kept]:
    """The message's ``server_blocks`` (``SERVER_BLOCKS``), each with its place; a place that
    is missing or not a count goes first, after the thinking blocks.

    Raises:
        ConfigurationError: ``server_blocks`` is not a list of ``{"block": {...}, ...}``
            objects whose blocks have a ``type``.
    """
    entries = message.provider_data.get(SERVER_BLOCKS)
    if entries is None:
        return []
    if not isinstance(entries, list | tuple) or not all(
        isinstance(entry, Mapping)
        and isinstance(entry.get("block"), Mapping)
        and isinstance(entry["block"].get("type"), str)
        for entry in entries
    ):
        raise ConfigurationError(
            f"an assistant message's provider_data[{SERVER_BLOCKS!r}] must be a list of "
            '{"block": {"type": ...}, "after_calls": n, "text_at": n, "after_thinking": n} '
            f"objects, got {json.dumps(entries)[:200]}"
        )

    def count(entry: Mapping[str, Any], key: str, default: int) -> int:
        value = entry.get(key)
        return value if _count(value) else default

    return [
        _Kept(
            (count(entry, "after_thinking", thinking), 0, n),
            count(entry, "after_calls", 0),
            count(entry, "text_at", 0),
            json_copy(entry["block"], SERVER_BLOCKS),
        )
        for n, entry in enumerate(entries)
    ]


def pending_container(messages: Sequence[ChatMessage]) -> str | None:
    """The id of the code execution container whose code waits for the conversation's last
    tool results: the latest assistant message's (``CONTAINER``), if it made a call from code
    execution (programmatic tool calling: a ``caller`` that is not ``direct``) and only tool
    messages came after it. The API refuses the results without it."""
    for message in reversed(messages):
        if message.role is MessageRole.TOOL:
            continue
        if message.role is not MessageRole.ASSISTANT or not _code_calls(message):
            return None
        containers = message.provider_data.get(CONTAINER)
        if isinstance(containers, list | tuple) and containers:
            last = containers[-1]
            if isinstance(last, Mapping) and isinstance(last.get("id"), str) and last["id"]:
                return str(last["id"])
        return None
    return None


def _places(message: ChatMessage, kept: int) -> dict[int, tuple[int, bool, int | None]]:
    """Where the thinking blocks that did not come first came (``THINKING_PLACES``), by their
    place in ``thinking_blocks``: calls before, text before, and how many characters of it
    (``None``: not known, an entry from before it was kept); an entry that is not one is left
    out."""
    out: dict[int, tuple[int, bool, int | None]] = {}
    for place in _entries(message, THINKING_PLACES):
        n, calls, texted = place.get("block"), place.get("after_calls"), place.get("after_text")
        if (
            _count(n)
            and _count(calls)
            and isinstance(texted, bool)
            and n < kept
            and (calls, texted) != (0, False)
        ):
            text_at = place.get("text_at")
            out[n] = (calls, texted, text_at if _count(text_at) else None)
    return out


def _thinking(message: ChatMessage) -> list[dict[str, Any]]:
    thinking = message.provider_data.get(THINKING_BLOCKS)
    if thinking is None:
        return []
    if not isinstance(thinking, list | tuple) or not all(
        isinstance(block, Mapping) and block.get("type") in _THINKING_TYPES for block in thinking
    ):
        raise ConfigurationError(
            f"an assistant message's provider_data[{THINKING_BLOCKS!r}] must be a list of "
            f"thinking and redacted_thinking blocks, got {json.dumps(thinking)[:200]}"
        )
    return [json_copy(block, THINKING_BLOCKS) for block in thinking]


def _input(arguments: str) -> dict[str, Any]:
    """The arguments as the loop reads them (:func:`parse_arguments`: ``NaN``, ``Infinity`` and
    ``1e400`` are not JSON), or ``{}`` where the loop answered the call with an error."""
    try:
        return parse_arguments(arguments)
    except ArgumentsError:
        return {}


def _tool_result(message: ChatMessage) -> dict[str, Any]:
    text = message.content
    content: str | list[dict[str, Any]] = text if isinstance(text, str) else _blocks(text)
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id or "",
        "content": content,
    }
    flag = message.provider_data.get("is_error")
    if flag is True or (flag is None and _LOOP_ERROR.match(message.text)):
        block["is_error"] = True
    return block


def wire_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """The request's ``tools``: ``{name, description, input_schema}`` each."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": json_copy(tool.parameters, f"the parameters of tool {tool.name!r}"),
        }
        for tool in tools
    ]


def wire_tool_choice(
    choice: str | Mapping[str, Any] | None, parallel_tool_calls: bool | None
) -> dict[str, Any] | None:
    """The request's ``tool_choice`` for ``RunOptions.tool_choice`` and
    ``RunOptions.parallel_tool_calls``; ``None`` to leave it out.

    Raises:
        ConfigurationError: a choice that is none of the forms the module docstring lists.
    """
    wire: dict[str, Any] | None
    if choice is None:
        wire = None
    elif choice == "auto":
        wire = {"type": "auto"}
    elif choice == "none":
        wire = {"type": "none"}
    elif choice in ("required", "any"):
        wire = {"type": "any"}
    elif isinstance(choice, Mapping) and choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConfigurationError(
                f"tool_choice {dict(choice)!r} names no function: "
                '{"type": "function", "function": {"name": "..."}}'
            )
        wire = {"type": "tool", "name": name}
    elif isinstance(choice, Mapping) and choice.get("type") in ("auto", "any", "tool", "none"):
        try:
            wire = json_copy(choice, "tool_choice")
        except ValueError as exc:  # NaN or an infinity in it, say
            raise ConfigurationError(str(exc)) from None
    else:
        raise ConfigurationError(
            f"tool_choice must be 'auto', 'none', 'required', a named function "
            '({"type": "function", "function": {"name": ...}}) or an Anthropic tool_choice, '
            f"got {choice!r}"
        )
    if parallel_tool_calls is False:
        wire = wire if wire is not None else {"type": "auto"}
        if wire["type"] != "none":
            wire["disable_parallel_tool_use"] = True
    return wire
