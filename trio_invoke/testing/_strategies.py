"""Hypothesis strategies for JSON values, tool arguments and tool schemas.

For property tests of tools, chat clients and agents; trio_invoke's own tests use them. Sizes are
bounded so that a test with the default ``max_examples`` stays fast. Public as
``trio_invoke.testing.json_values`` and so on (imported on first use: this module needs
Hypothesis, the extra ``trio_invoke[testing]``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - tests/test_extras.py imports it without Hypothesis
    raise ImportError(
        "trio_invoke.testing's strategies need Hypothesis, which is not installed: "
        'pip install "trio-invoke[testing] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[testing]")'
    ) from exc

from .._messages import FinishReason, ToolCall, Usage
from .._updates import (
    AgentResponseUpdate,
    Finish,
    TextDelta,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = [
    "json_values",
    "schemas_with_arguments",
    "scripted_rounds",
    "tool_arguments",
    "tool_call_streams",
]

_TYPES = ("string", "number", "integer", "boolean", "null", "array", "object")


def _json_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    )


def json_values(*, max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers, floats, strings, arrays and objects.

    Floats are finite (no NaN or infinity, which JSON cannot carry); strings, arrays and objects
    are short.

    Args:
        max_leaves: Roughly how many scalars one value holds at most.

    Returns:
        A strategy of values that ``json.dumps`` accepts and ``json.loads`` gives back equal.
    """
    return st.recursive(
        _json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def tool_arguments() -> st.SearchStrategy[dict[str, Any]]:
    """Any JSON object with string keys, as a model may send for a tool call.

    Returns:
        A strategy of dicts of up to five keys with :func:`json_values` values.
    """
    return st.dictionaries(st.text(max_size=10), json_values(max_leaves=4), max_size=5)


def _values_of(json_type: str) -> st.SearchStrategy[Any]:
    """Values of one JSON type, as ``json.loads`` produces them."""
    if json_type == "string":
        return st.text(max_size=12)
    if json_type == "number":
        return st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False))
    if json_type == "integer":
        return st.integers()
    if json_type == "boolean":
        return st.booleans()
    if json_type == "null":
        return st.none()
    if json_type == "array":
        return st.lists(json_values(max_leaves=3), max_size=3)
    return st.dictionaries(st.text(max_size=6), json_values(max_leaves=3), max_size=3)


_names = st.from_regex(r"[a-z_][a-z0-9_]{0,9}", fullmatch=True)


@st.composite
def _property(draw: st.DrawFn) -> tuple[dict[str, Any], st.SearchStrategy[Any]]:
    """One property's schema and a strategy of values valid for it."""
    types = draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=2, unique=True))
    values = st.one_of([_values_of(t) for t in types])
    schema: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
    if types == ["array"] and draw(st.booleans()):
        item_type = draw(st.sampled_from(_TYPES))
        schema["items"] = {"type": item_type}
        values = st.lists(_values_of(item_type), max_size=3)
    if draw(st.booleans()):
        schema["description"] = draw(st.text(max_size=20))
    return schema, values


@st.composite
def _schema_with_arguments(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    names = draw(st.lists(_names, max_size=5, unique=True))
    properties: dict[str, Any] = {}
    arguments: dict[str, Any] = {}
    required: list[str] = []
    for name in names:
        schema, values = draw(_property())
        properties[name] = schema
        is_required = draw(st.booleans())
        if is_required:
            required.append(name)
        if is_required or draw(st.booleans()):
            arguments[name] = draw(values)
    schema = {"type": "object", "properties": properties, "required": required}
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema, arguments


def schemas_with_arguments() -> st.SearchStrategy[tuple[dict[str, Any], dict[str, Any]]]:
    """A tool's parameters schema, paired with arguments that are valid for it.

    The schema is ``{"type": "object", "properties": ..., "required": [...]}`` (sometimes with
    ``"additionalProperties": false``) with up to five properties named like Python identifiers.
    Each property has a ``type`` (one of string, number, integer, boolean, null, array, object, or
    a list of two), an ``items`` schema for some arrays, and sometimes a description. Every
    required field is in the arguments; each optional one sometimes is.

    Returns:
        A strategy of ``(schema, arguments)``.
    """
    return _schema_with_arguments()


@st.composite
def _split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at any points (empty pieces included), into as many as one piece per
    character; ``""`` into any few pieces, none included (a call with no ``ToolCallArgs``).
    Few pieces are drawn more often than many, and shrink to one."""
    if not text:
        return [""] * draw(st.integers(0, 2))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=len(text))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def _interleave(
    draw: st.DrawFn, sequences: list[list[AgentResponseUpdate]]
) -> list[AgentResponseUpdate]:
    """Any merge of ``sequences`` that keeps each one's own order."""
    queues = [list(reversed(seq)) for seq in sequences if seq]
    merged: list[AgentResponseUpdate] = []
    while queues:
        index = draw(st.integers(0, len(queues) - 1))
        merged.append(queues[index].pop())
        if not queues[index]:
            del queues[index]
    return merged


@st.composite
def _tool_call_stream(draw: st.DrawFn, calls: Sequence[ToolCall]) -> list[AgentResponseUpdate]:
    sequences: list[list[AgentResponseUpdate]] = [
        [
            ToolCallStart(call.id, call.name, provider_data=call.provider_data),
            *(ToolCallArgs(call.id, piece) for piece in draw(_split(call.arguments))),
            ToolCallEnd(call.id),
        ]
        for call in calls
    ]
    return draw(_interleave(sequences))


def tool_call_streams(calls: Sequence[ToolCall]) -> st.SearchStrategy[list[AgentResponseUpdate]]:
    """The streamed form of ``calls``, as a model may send it.

    Each call becomes ``ToolCallStart`` (with the call's ``provider_data``), its arguments cut
    into any pieces (empty pieces included, up to one per character) as ``ToolCallArgs``, and
    ``ToolCallEnd``; empty arguments may have no ``ToolCallArgs`` at all. The calls are
    interleaved in any order that keeps each call's own order. Call order (the order of the
    starts) may therefore differ from the order of ``calls``. Ids in ``calls`` must be unique.

    Returns:
        A strategy of update lists; accumulating one gives back ``calls``, in call order, except
        that a call whose ``arguments`` are ``""`` comes back with ``"{}"`` (the accumulator
        reads empty arguments as no arguments).

    Raises:
        TypeError: an item of ``calls`` is not a :class:`ToolCall`.
        ValueError: two calls have the same id (their streams could not be told apart).
    """
    calls = list(calls)
    for call in calls:
        if not isinstance(call, ToolCall):
            raise TypeError(f"tool_call_streams takes ToolCalls, got {call!r}")
    ids = [call.id for call in calls]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"tool_call_streams needs calls with unique ids; repeated: {repeated}")
    return _tool_call_stream(calls)


_BAD_ARGUMENTS = ('{"a": ', "[1, 2]", '"text"', "nul", "{}}")


@st.composite
def _call_arguments(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(("object", "object", "empty", "invalid")))
    if kind == "object":
        return json.dumps(draw(tool_arguments()))
    if kind == "empty":
        return ""
    return draw(st.sampled_from(_BAD_ARGUMENTS))


@st.composite
def _scripted_rounds(
    draw: st.DrawFn, names: list[str], max_rounds: int
) -> list[list[AgentResponseUpdate]]:
    rounds: list[list[AgentResponseUpdate]] = []
    serial = 0
    usage = st.none() | st.builds(Usage, st.integers(0, 1000), st.integers(0, 1000))
    for _ in range(draw(st.integers(0, max_rounds - 1))):
        calls = []
        for _ in range(draw(st.integers(1, 4))):
            serial += 1
            name = draw(st.sampled_from([*names, "no_such_tool"]))
            calls.append(ToolCall(f"call_{serial}", name, draw(_call_arguments())))
        stream = draw(tool_call_streams(calls))
        if draw(st.booleans()):
            stream.insert(0, TextDelta(draw(st.text(max_size=10))))
        rounds.append([*stream, Finish(FinishReason.TOOL_CALLS, draw(usage))])
    deltas = draw(st.lists(st.text(min_size=1, max_size=8), max_size=4))
    reason = draw(st.sampled_from([FinishReason.STOP, FinishReason.LENGTH]))
    rounds.append([*(TextDelta(d) for d in deltas), Finish(reason, draw(usage))])
    return rounds


def scripted_rounds(
    tools: Sequence[str] | Sequence[Any], *, max_rounds: int = 4
) -> st.SearchStrategy[list[list[AgentResponseUpdate]]]:
    """Whole scripted model rounds for a :class:`ScriptedChatClient`.

    Up to ``max_rounds - 1`` rounds that call 1 to 4 tools each (names from ``tools``, plus an
    unknown one), with arguments that are valid JSON objects, empty, or broken (invalid JSON,
    not an object), streamed in any chunking and interleaving, sometimes after some text, each
    closed by ``Finish(TOOL_CALLS)`` with or without usage; then one final text round (``STOP``
    or ``LENGTH``). Call ids are unique across the rounds.

    Args:
        tools: Tools, or their names.
        max_rounds: The most rounds in one script.

    Returns:
        A strategy of scripts: pass one to ``ScriptedChatClient``.

    Raises:
        TypeError: ``tools`` is a single str, not a list of tools or names.
        ValueError: ``max_rounds`` is less than 1.
    """
    if isinstance(tools, str):
        raise TypeError(
            f"scripted_rounds takes a list of tools or of their names, not a str: "
            f"scripted_rounds([{tools!r}])"
        )
    if max_rounds < 1:
        raise ValueError(f"scripted_rounds needs max_rounds >= 1, got {max_rounds!r}")
    names = [t if isinstance(t, str) else t.name for t in tools]
    return _scripted_rounds(names, max_rounds)
