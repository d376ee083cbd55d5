"""Hypothesis strategies for JSON values, tool arguments and tool schemas.

For property tests of tools, chat clients and agents; trio_invoke's own tests use them. Sizes are
bounded so that a test with the default ``max_examples`` stays fast. Public as
``trio_invoke.testing.json_values`` and so on (imported on first use: this module needs
Hypothesis, the extra ``trio_invoke[testing]``).
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - tests/test_extras.py imports it without Hypothesis
    raise ImportError(
        "trio_invoke.testing's strategies need Hypothesis, which is not installed: "
        'pip install "trio-invoke[testing] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[testing]")'
    ) from exc

from .._messages import FinishReason, ToolCall, Usage
from .._scripted import _describe
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


def _whole_number(value: object, name: str, where: str, least: int, most: int | None = None) -> int:
    """``value``, an int from ``least`` to ``most``; else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} takes an int for {name}, got {_describe(value)}")
    if value < least:
        raise ValueError(f"{where} needs {name} >= {least}, got {value!r}")
    if most is not None and value > most:
        raise ValueError(f"{where} needs {name} <= {most:,}, got {value!r}")
    return value


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

    Raises:
        TypeError: ``max_leaves`` is not an int.
        ValueError: ``max_leaves`` is less than 1.
    """
    _whole_number(max_leaves, "max_leaves", "json_values", 1)
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


@functools.lru_cache(maxsize=1024)
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    """``st.integers(low, high)``, built once (a draw costs about half as much as with a new
    strategy each time)."""
    return st.integers(low, high)


def _few_or_many(draw: st.DrawFn, low: int, high: int) -> int:
    """An int from ``low`` to ``high``: any of the first 16 alike; beyond, first a bound
    (``low`` plus one of 15, 31, 63, ... or ``high``), then an int up to it. So a few are drawn
    far more often than many (but no more often than a few more), ``high`` is still reachable,
    and the int shrinks to ``low`` by steps of one. One or two draws."""
    span = high - low
    if span < 16:
        return low + draw(_ints(0, max(span, 0)))
    bits = draw(_ints(4, span.bit_length()))
    return low + draw(_ints(0, min(span, (1 << bits) - 1)))


_EXPLICIT_CUTS: Final = 3
"""Up to this many cuts are drawn one by one (the shrinker moves each); more come from one
drawn seed, so a long text cut finely costs a few draws, not one per piece."""


def _split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at any points (empty pieces included), into as many as one piece per
    character; ``""`` into any few pieces, none included (a call with no ``ToolCallArgs``).
    Few pieces are drawn more often than many, and shrink to one.

    (A plain function given ``draw``, not an ``st.composite``: a nested composite costs several
    times a draw, once per call.)"""
    if not text:
        return [""] * draw(_ints(0, 2))
    count = _few_or_many(draw, 0, len(text))
    if count <= _EXPLICIT_CUTS:
        cuts = sorted(draw(_ints(0, len(text))) for _ in range(count))
    else:
        seed = draw(_ints(0, 2**32 - 1))
        rng = random.Random(seed)
        if seed % 2:  # distinct inner cuts: no empty piece, down to one a character
            cuts = sorted(rng.sample(range(1, len(text)), min(count, len(text) - 1)))
        else:  # any cuts, repeats included: empty pieces too
            cuts = sorted(rng.choices(range(len(text) + 1), k=count))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


_FREE_MERGE: Final = 256
"""Streams of up to this many updates are merged one draw per update (any merge, each step
shrinkable); longer ones by a start and a pace per call, so their cost grows with the calls
and not with the pieces."""


def _interleave(
    draw: st.DrawFn, sequences: list[list[AgentResponseUpdate]]
) -> list[AgentResponseUpdate]:
    """A merge of ``sequences`` that keeps each one's own order: any merge for a short
    stream; for a long one, each sequence spread from its own start at its own pace (so calls
    still start in any order, overlap, nest or run one after another). Shrinks to
    ``sequences`` one after another, in order."""
    total = sum(len(seq) for seq in sequences)
    if total > _FREE_MERGE:
        order: list[tuple[int, int, int]] = []
        for which, seq in enumerate(sequences):
            start = draw(_ints(0, total))
            pace = _few_or_many(draw, 0, max(1, total // len(seq)))
            order += ((start + i * pace, which, i) for i in range(len(seq)))
        order.sort()
        return [sequences[which][i] for _, which, i in order]
    queues = [list(reversed(seq)) for seq in sequences if seq]
    merged: list[AgentResponseUpdate] = []
    while queues:
        index = draw(_ints(0, len(queues) - 1)) if len(queues) > 1 else 0
        merged.append(queues[index].pop())
        if not queues[index]:
            del queues[index]
    return merged


_FREE_CALLS: Final = 32
"""Up to this many calls, each call's cuts (and a short stream's every merge step) are draws
of their own. More calls are shaped by four draws for the whole stream and one for each call
(zero: the call whole, in its place), so a failing example still shrinks call by call."""
_SHAPED_CALLS: Final = 1000
"""Beyond this many calls, the calls' shapes come from one drawn seed instead (a draw each
would pass Hypothesis's limit on how much one example may draw)."""


def _stream_of(draw: st.DrawFn, calls: Sequence[ToolCall]) -> list[AgentResponseUpdate]:
    if len(calls) > _FREE_CALLS:
        return _seeded_stream(draw, calls)
    sequences: list[list[AgentResponseUpdate]] = []
    for call in calls:
        first, late = _split_data(call, lambda _: draw(st.booleans()))
        sequences.append(
            [
                ToolCallStart(call.id, call.name, provider_data=first),
                *(ToolCallArgs(call.id, piece) for piece in _split(draw, call.arguments)),
                ToolCallEnd(call.id, provider_data=late),
            ]
        )
    return _interleave(draw, sequences)


_NO_DATA: Final[Mapping[str, Any]] = {}


def _coin(rng: random.Random) -> Callable[[str], bool]:
    """Heads or tails for each key, from ``rng``."""
    return lambda _: rng.random() < 0.5


def _split_data(
    call: ToolCall, late: Callable[[str], bool]
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The call's provider data, as its start and its end carry it: the keys for which
    ``late(key)`` holds come with its end (as some providers send a call's signature on a
    later piece), the others with its start; accumulated, they are the call's again."""
    data = call.provider_data
    if not data:
        return data, {}
    moved = {key for key in data if late(key)}
    return (
        {key: value for key, value in data.items() if key not in moved},
        {key: value for key, value in data.items() if key in moved},
    )


def _seeded_stream(draw: st.DrawFn, calls: Sequence[ToolCall]) -> list[AgentResponseUpdate]:
    """The stream of many calls: three draws say how finely calls may be cut (none, ...,
    one piece a character), how they move (not at all, to any spot whole, overlapping at a
    slow pace, at any pace) and whether pieces may be empty; then one draw per call seeds its
    own cuts, start and pace (0: the call whole, in its place). Shrinks to each call whole,
    in order, but for the calls the failure needs."""
    most_bits = draw(_ints(0, 16))  # a call is cut at up to 2**most_bits - 1 points
    mixing = draw(_ints(0, 3))
    empty_pieces = draw(st.booleans())
    if len(calls) <= _SHAPED_CALLS:
        shapes = [draw(_SHAPES) for _ in calls]
    else:
        rng = random.Random(draw(_ints(0, 2**32 - 1)))
        shapes = [rng.getrandbits(16) for _ in calls]
    return _shaped_stream(calls, shapes, most_bits, mixing, empty_pieces=empty_pieces)


_SHAPES = st.integers(0, 2**16 - 1)


def _shaped_stream(
    calls: Sequence[ToolCall],
    shapes: Sequence[int],
    most_bits: int,
    mixing: int,
    *,
    empty_pieces: bool,
) -> list[AgentResponseUpdate]:
    """The stream of ``calls``: a call whose shape is 0 whole, in its place; any other cut at
    up to ``2**most_bits - 1`` points and moved as ``mixing`` says (0: not; 1: whole, to any
    spot; 2: overlapping others at a slow pace; 3: at any pace), at random from its shape."""
    sequences: list[list[AgentResponseUpdate]] = []
    moves: list[tuple[float, float] | None] = []
    for index, (call, shape) in enumerate(zip(calls, shapes, strict=True)):
        text = call.arguments
        rng = random.Random(shape << 20 | index) if shape else None
        # Where the call goes: from the shape's high bits, so that a smaller shape moves it
        # nearer the front (the shrinker can walk it there), and before its cuts are drawn,
        # so that how it is cut does not move it.
        moves.append((shape / 2**16, rng.random()) if rng else None)
        if rng is None:
            pieces = [text] if text else []
        elif not text:
            pieces = [""] * (rng.randint(0, 2) if most_bits else 0)
        else:
            bits = rng.randint(0, min(most_bits, len(text).bit_length()))
            count = rng.randint(1 << (bits - 1), min(len(text), (1 << bits) - 1)) if bits else 0
            if empty_pieces:
                cuts = sorted(rng.choices(range(len(text) + 1), k=count))
            else:
                cuts = sorted(rng.sample(range(1, len(text)), min(count, len(text) - 1)))
            pieces = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]
        first, late = call.provider_data, _NO_DATA  # a call whole, in its place
        if rng is not None:
            first, late = _split_data(call, _coin(rng))
        sequences.append(
            [
                ToolCallStart(call.id, call.name, provider_data=first),
                *(ToolCallArgs(call.id, piece) for piece in pieces),
                ToolCallEnd(call.id, provider_data=late),
            ]
        )
    if not mixing or not any(moves):
        return [update for seq in sequences for update in seq]
    total = sum(len(seq) for seq in sequences)
    order: list[tuple[int, int, int]] = []
    offset = 0
    for which, (seq, move) in enumerate(zip(sequences, moves, strict=True)):
        # Calls in their place on odd keys, moved ones on even: a moved call can go first.
        if move is None:
            start, pace = 2 * offset + 1, 2
        else:
            most_pace = (0, 0, 4, max(1, total // len(seq)))[mixing]
            start, pace = 2 * int(move[0] * (total + 1)), 2 * int(move[1] * (most_pace + 1))
        order += ((start + i * pace, which, i) for i in range(len(seq)))
        offset += len(seq)
    order.sort()
    return [sequences[which][i] for _, which, i in order]


@st.composite
def _tool_call_stream(draw: st.DrawFn, calls: Sequence[ToolCall]) -> list[AgentResponseUpdate]:
    return _stream_of(draw, calls)


def tool_call_streams(calls: Sequence[ToolCall]) -> st.SearchStrategy[list[AgentResponseUpdate]]:
    """The streamed form of ``calls``, as a model may send it.

    Each call becomes ``ToolCallStart`` (with the call's ``provider_data``, but for the keys
    that may come with its ``ToolCallEnd`` instead, as a provider may send a call's signature
    on a later piece), its arguments cut
    into any pieces (empty pieces included, up to one per character) as ``ToolCallArgs``, and
    ``ToolCallEnd``; empty arguments may have no ``ToolCallArgs`` at all. The calls are
    interleaved in any order that keeps each call's own order. Call order (the order of the
    starts) may therefore differ from the order of ``calls``. Ids in ``calls`` must be unique.

    Sizes: with up to 32 calls and 256 updates every cut and every step of the interleaving is
    a draw of its own, so any interleaving can be drawn. More calls are cut and moved call by
    call from a few draws each (each call stays in its place or moves to any spot, whole or
    overlapping others at any pace), so 200 calls draw in a few milliseconds, and up to about
    2,000 pass Hypothesis's health checks under its default settings (drawing grows with the
    updates made: 5,000 calls take over 100 ms an example, which its ``too_slow`` check
    fails).
    Failing examples shrink towards each call whole and in the order of ``calls``, but for
    the calls the failure needs.

    Returns:
        A strategy of update lists; accumulating one gives back ``calls``, in call order, except
        that a call whose ``arguments`` are ``""`` comes back with ``"{}"`` (the accumulator
        reads empty arguments as no arguments).

    Raises:
        TypeError: ``calls`` is not an iterable of :class:`ToolCall` (a single call, a str,
            ``None``), or an item of it is not a :class:`ToolCall`.
        ValueError: two calls have the same id (their streams could not be told apart).
    """
    if isinstance(calls, ToolCall | str) or not isinstance(calls, Iterable):
        hint = ": tool_call_streams([call])" if isinstance(calls, ToolCall) else ""
        raise TypeError(
            f"tool_call_streams takes a list of ToolCalls for calls, not {_describe(calls)}{hint}"
        )
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


_KINDS = st.sampled_from(("object", "object", "empty", "invalid"))
_BAD = st.sampled_from(_BAD_ARGUMENTS)
_USAGE = st.none() | st.builds(Usage, st.integers(0, 1000), st.integers(0, 1000))
_PREAMBLE = st.text(max_size=10)
_ANSWER = st.lists(st.text(min_size=1, max_size=8), max_size=4)
_ANSWER_REASON = st.sampled_from([FinishReason.STOP, FinishReason.LENGTH])


@functools.cache
def _arguments() -> st.SearchStrategy[dict[str, Any]]:
    """``tool_arguments()``, built once: building it anew for each call (its recursion, then
    validation) costs more than drawing from it."""
    return tool_arguments()


def _call_arguments(draw: st.DrawFn) -> str:
    kind = draw(_KINDS)
    if kind == "object":
        return json.dumps(draw(_arguments()))
    if kind == "empty":
        return ""
    return draw(_BAD)


_FREE_ROUNDS: Final = 4
"""The first this many rounds of a script draw each call, argument, cut and merge step; each
later one comes from one drawn seed (the same kinds of calls, from smaller arguments), so a
long script costs a draw or two a round and still shrinks to fewer rounds."""


@st.composite
def _scripted_rounds(
    draw: st.DrawFn, names: list[str], max_rounds: int
) -> list[list[AgentResponseUpdate]]:
    rounds: list[list[AgentResponseUpdate]] = []
    serial = 0
    tool_names = st.sampled_from([*names, "no_such_tool"])
    for number in range(_few_or_many(draw, 0, max_rounds - 1)):
        if number >= _FREE_ROUNDS:
            rng = random.Random(draw(_SHAPES))
            round_, serial = _random_round(rng, [*names, "no_such_tool"], serial)
            rounds.append(round_)
            continue
        calls = []
        for _ in range(draw(_ints(1, 4))):
            serial += 1
            name = draw(tool_names)
            calls.append(ToolCall(f"call_{serial}", name, _call_arguments(draw)))
        stream = _stream_of(draw, calls)
        if draw(st.booleans()):
            stream.insert(0, TextDelta(draw(_PREAMBLE)))
        rounds.append([*stream, Finish(FinishReason.TOOL_CALLS, draw(_USAGE))])
    deltas = draw(_ANSWER)
    reason = draw(_ANSWER_REASON)
    rounds.append([*(TextDelta(d) for d in deltas), Finish(reason, draw(_USAGE))])
    return rounds


_CHARACTERS = 'aZ09 _-"\\/\n\t\x00\x7fé✓😀\u2028'
"""Characters of seeded strings: quotes, backslashes and controls that JSON escapes, and
non-ASCII up to the astral plane."""


def _random_text(rng: random.Random, most: int) -> str:
    return "".join(rng.choices(_CHARACTERS, k=rng.randint(0, most)))


def _random_json(rng: random.Random, depth: int) -> Any:
    """A small JSON value: a scalar, or (``depth`` permitting) a short array or object."""
    kind = rng.randrange(8 if depth else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice((0, -1, 2**53 + 1, -(2**63), 2**63, rng.randint(-1000, 1000)))
    if kind == 3:
        return rng.choice((0.5, -0.0, 1e-300, 1.7976931348623157e308, rng.uniform(-1e6, 1e6)))
    if kind in (4, 5):
        return _random_text(rng, 8)
    if kind == 6:
        return [_random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {_random_text(rng, 6): _random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))}


def _random_round(
    rng: random.Random, names: list[str], serial: int
) -> tuple[list[AgentResponseUpdate], int]:
    """One calling round, all from ``rng``, and the last call number it used."""
    calls = []
    for _ in range(rng.randint(1, 4)):
        serial += 1
        kind = rng.choice(("object", "object", "empty", "invalid"))
        if kind == "object":
            fields = rng.randint(0, 5)
            arguments = json.dumps(
                {_random_text(rng, 6): _random_json(rng, 2) for _ in range(fields)}
            )
        else:
            arguments = "" if kind == "empty" else rng.choice(_BAD_ARGUMENTS)
        calls.append(ToolCall(f"call_{serial}", rng.choice(names), arguments))
    stream = _shaped_stream(
        calls,
        [rng.getrandbits(16) for _ in calls],
        rng.randint(0, 6),
        rng.randint(0, 3),
        empty_pieces=rng.random() < 0.5,
    )
    if rng.random() < 0.5:
        stream.insert(0, TextDelta(_random_text(rng, 10)))
    usage = Usage(rng.randint(0, 1000), rng.randint(0, 1000)) if rng.random() < 0.5 else None
    return [*stream, Finish(FinishReason.TOOL_CALLS, usage)], serial


def scripted_rounds(
    tools: Sequence[str] | Sequence[Any], *, max_rounds: int = 4
) -> st.SearchStrategy[list[list[AgentResponseUpdate]]]:
    """Whole scripted model rounds for a :class:`ScriptedChatClient`.

    Up to ``max_rounds - 1`` rounds that call 1 to 4 tools each (names from ``tools``, plus an
    unknown one), with arguments that are valid JSON objects, empty, or broken (invalid JSON,
    not an object), streamed in any chunking and interleaving, sometimes after some text, each
    closed by ``Finish(TOOL_CALLS)`` with or without usage; then one final text round (``STOP``
    or ``LENGTH``). Call ids are unique across the rounds. Up to 16 rounds, every number of
    rounds is drawn alike; beyond, short scripts more often than long ones (a bound of 16, 32,
    64, ... rounds or ``max_rounds`` alike, then any number up to it). Failing scripts shrink
    to fewer rounds.

    Sizes: the first four calling rounds draw each of their parts; each later one comes from
    one draw (the same kinds of calls, with smaller arguments), so ``max_rounds`` up to its
    most, 1,000, passes Hypothesis's health checks under its default settings.

    Args:
        tools: Tools, or their names.
        max_rounds: The most rounds in one script.

    Returns:
        A strategy of scripts: pass one to ``ScriptedChatClient``.

    Raises:
        TypeError: ``tools`` is a single str or tool, not a list of tools or names, or an
            item of it is neither a str nor a tool; ``max_rounds`` is not an int.
        ValueError: ``max_rounds`` is less than 1 or more than 1,000.
    """
    if isinstance(tools, str):
        raise TypeError(
            f"scripted_rounds takes a list of tools or of their names, not a str: "
            f"scripted_rounds([{tools!r}])"
        )
    given: object = tools  # checked at run time, whatever the annotations say
    if not isinstance(given, Iterable):
        hint = ": scripted_rounds([tool])" if isinstance(getattr(tools, "name", None), str) else ""
        raise TypeError(
            f"scripted_rounds takes a list of tools or of their names for tools, not "
            f"{_describe(tools)}{hint}"
        )
    _whole_number(max_rounds, "max_rounds", "scripted_rounds", 1, _MOST_ROUNDS)
    names = []
    for index, item in enumerate(tools):
        name = item if isinstance(item, str) else getattr(item, "name", None)
        if not isinstance(name, str):
            raise TypeError(
                f"scripted_rounds takes tools (with a str name) or names, but item {index} of "
                f"tools is {_describe(item)}"
            )
        names.append(name)
    return _scripted_rounds(names, max_rounds)


_MOST_ROUNDS: Final = 1_000
"""The most ``max_rounds`` scripted_rounds takes: scripts of thousands of rounds take Hypothesis's
``too_slow`` health check's second to draw, and past about 10,000 more than it lets one example
draw."""
