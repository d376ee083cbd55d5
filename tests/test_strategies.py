"""The Hypothesis strategies of trio_invoke.testing: what they promise about what they draw.

Each promise is checked both ways: every example keeps it (``@given``), and the strategy does
draw the interesting cases it promises (``find``), so a strategy that only ever drew ``{}``, one
round or no interleaving would fail here. (``json_values`` and ``schemas_with_arguments`` are
checked in test_validate.py; that any ``tool_call_streams`` example accumulates back to its calls
in test_accumulate.py.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import Phase, given, settings
from hypothesis import find as hypothesis_find
from hypothesis import strategies as st

from trio_invoke import (
    AgentResponseUpdate,
    Finish,
    FinishReason,
    TextDelta,
    ToolCall,
    ToolCallAccumulator,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    tool,
)
from trio_invoke.testing import (
    json_values,
    scripted_rounds,
    tool_arguments,
    tool_call_streams,
)

T = TypeVar("T")


def find(strategy: st.SearchStrategy[T], condition: Callable[[T], object]) -> T:
    """An example of ``strategy`` that meets ``condition`` (the first one drawn: no shrinking);
    Hypothesis raises ``NoSuchExample`` if 2,000 draws have none."""
    return hypothesis_find(
        strategy,
        condition,
        settings=settings(phases=[Phase.generate], max_examples=2000, database=None),
    )


@tool
def search(query: str) -> str:
    """Search."""
    return query


# -- tool_arguments -----------------------------------------------------------------------------


@given(tool_arguments())
def test_tool_arguments_are_json_objects(arguments: dict[str, Any]) -> None:
    assert isinstance(arguments, dict)
    assert all(isinstance(key, str) for key in arguments)
    assert len(arguments) <= 5
    assert json.loads(json.dumps(arguments)) == arguments


JSON_KINDS: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, float),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list) and len(v) > 0,
    "object": lambda v: isinstance(v, dict) and len(v) > 0,
}


@pytest.mark.parametrize("kind", sorted(JSON_KINDS))
def test_tool_arguments_draw_values_of_every_json_kind(kind: str) -> None:
    is_kind = JSON_KINDS[kind]
    found = find(tool_arguments(), lambda args: any(is_kind(v) for v in args.values()))
    assert any(is_kind(v) for v in found.values())


def test_tool_arguments_draw_several_keys() -> None:
    assert len(find(tool_arguments(), lambda args: len(args) >= 4)) >= 4


# -- tool_call_streams ----------------------------------------------------------------------------

CALLS = [
    ToolCall("a", "search", '{"query": "trio"}'),
    ToolCall("b", "add", '{"a": 1, "b": 2}'),
    ToolCall("c", "now", ""),
]


def own_updates(stream: Sequence[AgentResponseUpdate], call_id: str) -> list[AgentResponseUpdate]:
    return [u for u in stream if getattr(u, "id", None) == call_id]


def positions(stream: Sequence[AgentResponseUpdate], call_id: str) -> list[int]:
    return [i for i, u in enumerate(stream) if getattr(u, "id", None) == call_id]


@given(tool_call_streams(CALLS))
def test_tool_call_streams_keep_each_calls_own_order(stream: list[AgentResponseUpdate]) -> None:
    assert len(stream) == sum(len(own_updates(stream, c.id)) for c in CALLS)
    for call in CALLS:
        start, *pieces, end = own_updates(stream, call.id)
        assert start == ToolCallStart(call.id, call.name)
        assert all(isinstance(piece, ToolCallArgs) for piece in pieces)
        assert "".join(p.args_delta for p in pieces if isinstance(p, ToolCallArgs)) == (
            call.arguments
        )
        assert end == ToolCallEnd(call.id)


@given(tool_call_streams(CALLS))
def test_tool_call_streams_accumulate_to_the_calls_empty_arguments_as_an_object(
    stream: list[AgentResponseUpdate],
) -> None:
    # As its docstring says (and not "exactly calls"): the accumulator reads "" as "{}".
    assert '"{}"' in (tool_call_streams.__doc__ or "")
    accumulator = ToolCallAccumulator()
    for update in stream:
        accumulator.add(update)
    expected = [attrs.evolve(call, arguments=call.arguments or "{}") for call in CALLS]
    assert sorted(accumulator.finish(), key=lambda call: call.id) == expected


SIGNED = ToolCall(
    "s", "f", "{}", provider_data={"extra_content": {"google": {"thought_signature": "sig"}}}
)


@given(tool_call_streams([SIGNED, *CALLS]))
def test_tool_call_streams_keep_a_calls_provider_data(stream: list[AgentResponseUpdate]) -> None:
    # Gemini's thought signature rides on ToolCallStart.provider_data: accumulating the stream
    # gives back the call with it, as the docstring promises of ``calls``.
    accumulator = ToolCallAccumulator()
    for update in stream:
        accumulator.add(update)
    assert [call for call in accumulator.finish() if call.id == "s"] == [SIGNED]


def test_tool_call_streams_may_bring_a_calls_provider_data_with_its_end() -> None:
    # Some providers send a call's keys on a later piece (Gemini's signature, reportedly): the
    # strategy puts them on the call's ToolCallEnd too, and the accumulated call is the same.
    def late(stream: Sequence[AgentResponseUpdate]) -> bool:
        return any(isinstance(u, ToolCallEnd) and u.provider_data for u in stream)

    assert late(find(tool_call_streams([SIGNED, *CALLS]), late))


def interleaved(stream: Sequence[AgentResponseUpdate]) -> bool:
    """Some call's updates are not all next to each other: another call's come between."""
    return any(
        (spots := positions(stream, call.id)) and spots[-1] - spots[0] + 1 != len(spots)
        for call in CALLS
    )


def test_tool_call_streams_interleave_calls() -> None:
    assert interleaved(find(tool_call_streams(CALLS), interleaved))

    def all_open_at_once(stream: list[AgentResponseUpdate]) -> bool:
        last_start = max(positions(stream, c.id)[0] for c in CALLS)
        return all(positions(stream, c.id)[-1] > last_start for c in CALLS)

    assert all_open_at_once(find(tool_call_streams(CALLS), all_open_at_once))


def starts_in(order: list[str]) -> Callable[[list[AgentResponseUpdate]], bool]:
    return lambda stream: [u.id for u in stream if isinstance(u, ToolCallStart)] == order


@pytest.mark.parametrize("order", [["c", "b", "a"], ["b", "a", "c"], ["a", "b", "c"]])
def test_tool_call_streams_start_calls_in_any_order(order: list[str]) -> None:
    assert starts_in(order)(find(tool_call_streams(CALLS), starts_in(order)))


def test_tool_call_streams_cut_arguments_into_any_pieces() -> None:
    def pieces(stream: list[AgentResponseUpdate]) -> list[str]:
        return [u.args_delta for u in stream if isinstance(u, ToolCallArgs) and u.id == "a"]

    assert len(pieces(find(tool_call_streams(CALLS), lambda s: len(pieces(s)) >= 3))) >= 3
    assert "" in pieces(find(tool_call_streams(CALLS), lambda s: "" in pieces(s)))
    assert pieces(find(tool_call_streams(CALLS), lambda s: pieces(s) == [CALLS[0].arguments]))


def test_tool_call_streams_cut_arguments_as_finely_as_a_character_each() -> None:
    # A model streams arguments a token at a time (OpenAI: often a few characters).
    call = ToolCall("c1", "weather", '{"city": "Paris"}')  # 17 characters

    def pieces(stream: list[AgentResponseUpdate]) -> list[str]:
        return [u.args_delta for u in stream if isinstance(u, ToolCallArgs) and u.args_delta]

    assert len(pieces(find(tool_call_streams([call]), lambda s: len(pieces(s)) >= 12))) >= 12


def test_tool_call_streams_send_empty_arguments_in_no_pieces_too() -> None:
    # A tool with no parameters: Start then End, no ToolCallArgs at all (as Anthropic streams
    # a tool_use with no input_json_delta).
    def no_pieces(stream: list[AgentResponseUpdate]) -> bool:
        return not any(isinstance(u, ToolCallArgs) and u.id == "c" for u in stream)

    stream = find(tool_call_streams(CALLS), no_pieces)
    assert [u for u in stream if getattr(u, "id", None) == "c"] == [
        ToolCallStart("c", "now"),
        ToolCallEnd("c"),
    ]


# -- scripted_rounds ------------------------------------------------------------------------------


def calls_of(round_: list[AgentResponseUpdate]) -> list[ToolCall]:
    accumulator = ToolCallAccumulator()
    for update in round_[:-1]:
        accumulator.add(update)
    return accumulator.finish()


def called_names(script: list[list[AgentResponseUpdate]]) -> set[str]:
    return {call.name for round_ in script[:-1] for call in calls_of(round_)}


@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(st.just(n), scripted_rounds([search], max_rounds=n))
    )
)
def test_scripted_rounds_call_the_tools_then_answer(case: tuple[int, list[list[Any]]]) -> None:
    max_rounds, script = case
    assert 1 <= len(script) <= max_rounds
    *calling, final = script
    ids: list[str] = []
    for round_ in calling:
        calls = calls_of(round_)
        assert 1 <= len(calls) <= 4
        assert {c.name for c in calls} <= {"search", "no_such_tool"}
        ids += [c.id for c in calls]
        assert isinstance(round_[-1], Finish)
        assert round_[-1].finish_reason is FinishReason.TOOL_CALLS
    assert len(set(ids)) == len(ids)  # unique across the rounds
    assert not any(isinstance(u, ToolCallStart) for u in final)
    assert final[-1].finish_reason in {FinishReason.STOP, FinishReason.LENGTH}


@given(scripted_rounds(["a", "b"], max_rounds=3))
def test_scripted_rounds_take_names_too(script: list[list[Any]]) -> None:
    assert called_names(script) <= {"a", "b", "no_such_tool"}


def raw_arguments(script: list[list[AgentResponseUpdate]]) -> list[str]:
    """Each call's arguments as streamed (``""`` when the model sent none), in call order."""
    sent: dict[str, str] = {}
    for round_ in script[:-1]:
        for update in round_:
            if isinstance(update, ToolCallStart):
                sent[update.id] = ""
            elif isinstance(update, ToolCallArgs):
                sent[update.id] += update.args_delta
    return list(sent.values())


def json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


PROMISES: dict[str, Callable[[list[list[Any]]], bool]] = {
    "the most rounds": lambda s: len(s) == 4,
    "an answer at once": lambda s: len(s) == 1,
    "a round of four calls": lambda s: any(len(calls_of(r)) == 4 for r in s[:-1]),
    "every name it was given": lambda s: called_names(s) >= {"a", "b"},
    "an unknown tool": lambda s: "no_such_tool" in called_names(s),
    "a call without arguments": lambda s: "" in raw_arguments(s),
    "arguments that are not a JSON object": lambda s: any(
        a and json_object(a) is None for a in raw_arguments(s)
    ),
    "arguments with fields": lambda s: any(json_object(a) for a in raw_arguments(s)),
    "text before the calls": lambda s: any(isinstance(r[0], TextDelta) for r in s[:-1]),
    "an answer cut at LENGTH": lambda s: s[-1][-1].finish_reason is FinishReason.LENGTH,
    "usage": lambda s: any(r[-1].usage is not None for r in s),
}


@pytest.mark.parametrize("promise", sorted(PROMISES))
def test_scripted_rounds_draw_what_they_promise(promise: str) -> None:
    holds = PROMISES[promise]
    assert holds(find(scripted_rounds(["a", "b"], max_rounds=4), holds))


# -- misuse is an error at once, naming it ------------------------------------------------------


def test_tool_call_streams_refuse_calls_that_share_an_id() -> None:
    # Two streams under one id would accumulate as one broken call, not as ``calls``.
    twins = [ToolCall("a", "f", "{}"), ToolCall("b", "g", ""), ToolCall("a", "h", "[]")]
    with pytest.raises(ValueError, match=r"unique ids; repeated: \['a'\]"):
        tool_call_streams(twins)


@pytest.mark.parametrize("item", [{"id": "a", "name": "f", "arguments": ""}, ("a", "f", "")])
def test_tool_call_streams_take_tool_calls_only(item: object) -> None:
    with pytest.raises(TypeError, match="takes ToolCalls, got"):
        tool_call_streams([item])  # type: ignore[list-item]


def test_scripted_rounds_refuse_a_bare_name() -> None:
    # A str is a sequence of names too: "search" would call tools named "s", "e", "a", ...
    with pytest.raises(TypeError, match=r"not a str: scripted_rounds\(\['search'\]\)"):
        scripted_rounds("search")


@pytest.mark.parametrize("max_rounds", [0, -1])
def test_scripted_rounds_need_a_round(max_rounds: int) -> None:
    with pytest.raises(ValueError, match=f"max_rounds >= 1, got {max_rounds}"):
        scripted_rounds(["search"], max_rounds=max_rounds)


# -- sizes a user may ask for pass Hypothesis's health checks under its default settings ---------

# Hypothesis's own defaults, not this suite's profiles (whose deadline=None gives the too_slow
# check 30 s instead of 1 s, and whose "ci" profile suppresses it): the settings of a user's plain
# ``@given``. Ten valid examples are as many as the health checks look at.
USER_DEFAULTS = settings(
    deadline=timedelta(milliseconds=200),
    suppress_health_check=(),
    max_examples=10,
    database=None,
    phases=[Phase.generate],
)

MANY_CALLS = [
    ToolCall(f"call_{i}", "search", json.dumps({"query": f"trio {i} " * 24, "page": i}))
    for i in range(250)
]


def accumulated(stream: Sequence[AgentResponseUpdate]) -> list[ToolCall]:
    accumulator = ToolCallAccumulator()
    for update in stream:
        accumulator.add(update)
    return accumulator.finish()


def test_tool_call_streams_of_250_calls_pass_the_health_checks() -> None:
    @USER_DEFAULTS
    @given(tool_call_streams(MANY_CALLS))
    def user_test(stream: list[AgentResponseUpdate]) -> None:
        assert sorted(accumulated(stream), key=lambda c: int(c.id[5:])) == MANY_CALLS

    user_test()


@pytest.mark.parametrize("max_rounds", [50, 200])
def test_long_scripted_rounds_pass_the_health_checks(max_rounds: int) -> None:
    @USER_DEFAULTS
    @given(scripted_rounds([search], max_rounds=max_rounds))
    def user_test(script: list[list[AgentResponseUpdate]]) -> None:
        assert 1 <= len(script) <= max_rounds

    user_test()


def find_shrunk(strategy: st.SearchStrategy[T], condition: Callable[[T], object]) -> T:
    """The smallest example of ``strategy`` that meets ``condition`` that Hypothesis finds:
    what a user's failing property would report."""
    return hypothesis_find(strategy, condition, settings=settings(max_examples=2000, database=None))


def arguments_of(stream: Sequence[AgentResponseUpdate], call_id: str) -> list[str]:
    return [u.args_delta for u in stream if isinstance(u, ToolCallArgs) and u.id == call_id]


def start_order(stream: Sequence[AgentResponseUpdate]) -> list[str]:
    return [u.id for u in stream if isinstance(u, ToolCallStart)]


def in_place(stream: Sequence[AgentResponseUpdate], calls: Sequence[ToolCall]) -> bool:
    """Each call's updates next to each other, the calls in the order of ``calls``."""
    return start_order(stream) == [c.id for c in calls] and all(
        (spots := positions(stream, c.id))[-1] - spots[0] + 1 == len(spots) for c in calls
    )


# find() shows the example it returns, and a stream of 200 calls makes Hypothesis warn of the
# size of that repr.
big_repr = pytest.mark.filterwarnings("ignore:Generating overly large repr")


SHRINKING_CALLS = MANY_CALLS[:40]  # past the 32 calls whose every cut is a draw of its own


@big_repr
def test_a_stream_of_many_calls_shrinks_to_the_call_that_fails() -> None:
    # A failure that needs call_7 cut in two: the shrunk stream has every other call whole and
    # in its place, and call_7 in two pieces.
    stream = find_shrunk(
        tool_call_streams(SHRINKING_CALLS), lambda s: len(arguments_of(s, "call_7")) >= 2
    )
    assert len(arguments_of(stream, "call_7")) == 2
    assert all(len(arguments_of(stream, c.id)) == 1 for c in SHRINKING_CALLS if c.id != "call_7")
    assert start_order(stream) == [c.id for c in SHRINKING_CALLS]
    assert in_place(stream, SHRINKING_CALLS)


@big_repr
def test_a_stream_of_many_calls_shrinks_to_the_call_that_moved() -> None:
    stream = find_shrunk(
        tool_call_streams(SHRINKING_CALLS), lambda s: start_order(s)[0] == "call_9"
    )
    assert all(len(arguments_of(stream, c.id)) == 1 for c in SHRINKING_CALLS)
    # call_9 first, whole, and every other call whole, in its place.
    assert in_place(stream, [SHRINKING_CALLS[9], *SHRINKING_CALLS[:9], *SHRINKING_CALLS[10:]])


def test_a_long_script_shrinks_to_the_rounds_the_failure_needs() -> None:
    script = find_shrunk(scripted_rounds([search], max_rounds=30), lambda s: len(s) >= 12)
    assert len(script) == 12


# Many calls (past the per-draw regime), some without arguments, some with provider data and
# non-ASCII arguments.
VARIED_CALLS = [
    ToolCall(
        f"v{i}",
        "f",
        "" if i % 5 == 0 else json.dumps({"q": 'é✓😀"\\' * (i % 7), "n": i}, ensure_ascii=False),
        provider_data={"extra_content": {"i": i}} if i % 11 == 0 else None,
    )
    for i in range(120)
]


@given(tool_call_streams(VARIED_CALLS))
def test_a_stream_of_many_calls_accumulates_to_the_calls(
    stream: list[AgentResponseUpdate],
) -> None:
    expected = {c.id: attrs.evolve(c, arguments=c.arguments or "{}") for c in VARIED_CALLS}
    got = accumulated(stream)
    assert [c.id for c in got] == start_order(stream)
    assert sorted(got, key=lambda c: int(c.id[1:])) == list(expected.values())


MANY_PROMISES: dict[str, Callable[[list[AgentResponseUpdate]], bool]] = {
    "every call whole, in order": lambda s: in_place(s, VARIED_CALLS),
    "calls started out of order": lambda s: start_order(s) != [c.id for c in VARIED_CALLS],
    "calls overlapping": lambda s: any(
        (spots := positions(s, c.id))[-1] - spots[0] + 1 != len(spots) for c in VARIED_CALLS
    ),
    "a call cut a character a piece": lambda s: any(
        len(arguments_of(s, c.id)) == len(c.arguments) > 20 for c in VARIED_CALLS
    ),
    "an empty piece": lambda s: "" in [u.args_delta for u in s if isinstance(u, ToolCallArgs)],
    "a call without arguments sent with none": lambda s: not arguments_of(s, "v0"),
    "a call without arguments sent as empty pieces": lambda s: arguments_of(s, "v0") == ["", ""],
}


@pytest.mark.parametrize("promise", sorted(MANY_PROMISES))
@big_repr
def test_streams_of_many_calls_draw_what_they_promise(promise: str) -> None:
    holds = MANY_PROMISES[promise]
    assert holds(find(tool_call_streams(VARIED_CALLS), holds))


LONG_SCRIPT_PROMISES: dict[str, Callable[[list[list[Any]]], bool]] = {
    "a late round of four calls": lambda s: any(len(calls_of(r)) == 4 for r in s[9:-1]),
    "a late unknown tool": lambda s: any(
        c.name == "no_such_tool" for r in s[9:-1] for c in calls_of(r)
    ),
    "late broken arguments": lambda s: any(
        c.arguments and json_object(c.arguments) is None for r in s[9:-1] for c in calls_of(r)
    ),
    "late arguments with fields": lambda s: any(
        json_object(c.arguments) for r in s[9:-1] for c in calls_of(r)
    ),
    "late text before the calls": lambda s: any(isinstance(r[0], TextDelta) for r in s[9:-1]),
    "late usage": lambda s: any(r[-1].usage is not None for r in s[9:-1]),
}


@pytest.mark.parametrize("promise", sorted(LONG_SCRIPT_PROMISES))
@big_repr
def test_long_scripts_draw_what_they_promise_in_every_round(promise: str) -> None:
    holds = LONG_SCRIPT_PROMISES[promise]
    assert holds(find(scripted_rounds(["a", "b"], max_rounds=20), holds))


def test_long_scripts_draw_the_most_rounds() -> None:
    assert len(find(scripted_rounds(["a"], max_rounds=12), lambda s: len(s) == 12)) == 12


@given(scripted_rounds(["a", "b"], max_rounds=30))
def test_long_scripts_are_valid_in_every_round(script: list[list[AgentResponseUpdate]]) -> None:
    ids: list[str] = []
    for round_ in script[:-1]:
        assert isinstance(round_[-1], Finish)
        assert round_[-1].finish_reason is FinishReason.TOOL_CALLS
        calls = calls_of(round_)  # the accumulator accepts the round
        assert 1 <= len(calls) <= 4
        assert {c.name for c in calls} <= {"a", "b", "no_such_tool"}
        ids += [c.id for c in calls]
    assert len(set(ids)) == len(ids)
    assert script[-1][-1].finish_reason in {FinishReason.STOP, FinishReason.LENGTH}


# -- every parameter is checked at once, the error naming it ------------------------------------


@pytest.mark.parametrize(
    ("max_leaves", "error", "says"),
    [
        (0, ValueError, "json_values needs max_leaves >= 1, got 0"),
        (-3, ValueError, "json_values needs max_leaves >= 1, got -3"),
        ("3", TypeError, "json_values takes an int for max_leaves, got a str"),
        (2.5, TypeError, "json_values takes an int for max_leaves, got a float"),
        (True, TypeError, "json_values takes an int for max_leaves, got a bool"),
    ],
)
def test_json_values_check_max_leaves_at_once(
    max_leaves: object, error: type[Exception], says: str
) -> None:
    # Hypothesis itself would complain only when a test draws from it (or, for "3", with a
    # bare comparison error), far from the call that was wrong.
    with pytest.raises(error, match=re.escape(says)):
        json_values(max_leaves=max_leaves)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("calls", "says"),
    [
        (None, "takes a list of ToolCalls for calls, not None"),
        (ToolCall("a", "f", ""), "not a ToolCall (ToolCall(id='a'"),
        ("abc", "takes a list of ToolCalls for calls, not a str"),
    ],
)
def test_tool_call_streams_name_calls_that_are_no_list(calls: object, says: str) -> None:
    with pytest.raises(TypeError, match=re.escape(says)):
        tool_call_streams(calls)  # type: ignore[arg-type]


def test_tool_call_streams_take_any_iterable_of_calls() -> None:
    calls = [ToolCall(str(i), "f", "{}") for i in range(3)]
    stream = find(tool_call_streams(c for c in calls), lambda s: True)
    assert sorted(accumulated(stream), key=lambda c: c.id) == calls


@pytest.mark.parametrize(
    ("max_rounds", "error", "says"),
    [
        (4.5, TypeError, "scripted_rounds takes an int for max_rounds, got a float (4.5)"),
        ("4", TypeError, "scripted_rounds takes an int for max_rounds, got a str"),
        (None, TypeError, "scripted_rounds takes an int for max_rounds, got None"),
        (True, TypeError, "scripted_rounds takes an int for max_rounds, got a bool"),
        (1_001, ValueError, "scripted_rounds needs max_rounds <= 1,000, got 1001"),
        (10**100, ValueError, "scripted_rounds needs max_rounds <= 1,000"),
    ],
)
def test_scripted_rounds_check_max_rounds_at_once(
    max_rounds: object, error: type[Exception], says: str
) -> None:
    # 4.5 used to pass here and fail in the middle of drawing, with an AttributeError.
    with pytest.raises(error, match=re.escape(says)):
        scripted_rounds(["search"], max_rounds=max_rounds)  # type: ignore[arg-type]


def test_scripted_rounds_take_the_most_rounds_they_allow() -> None:
    @USER_DEFAULTS
    @given(scripted_rounds(["search"], max_rounds=1_000))
    def user_test(script: list[list[AgentResponseUpdate]]) -> None:
        assert 1 <= len(script) <= 1_000

    user_test()


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        (None, "for tools, not None"),
        (search, "for tools, not a FunctionTool (<FunctionTool 'search'"),
        ([search, 3], "item 1 of tools is a int (3)"),
        (["a", None], "item 1 of tools is None"),
    ],
)
def test_scripted_rounds_name_tools_that_are_neither_tools_nor_names(
    tools: object, says: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(says)):
        scripted_rounds(tools)  # type: ignore[arg-type]


def test_scripted_rounds_draw_a_short_script_as_often_as_a_long_one() -> None:
    # With the default max_rounds=4, 1 to 4 rounds alike: a script that answers at once (no
    # tool call at all) is about one in four, not most of them.
    lengths: list[int] = []

    @settings(max_examples=400, derandomize=True, database=None, phases=[Phase.generate])
    @given(scripted_rounds(["a"]))
    def user_test(script: list[list[AgentResponseUpdate]]) -> None:
        lengths.append(len(script))

    user_test()
    answered_at_once = lengths.count(1) / len(lengths)
    assert answered_at_once < 0.4
    assert lengths.count(4) / len(lengths) > 0.15
