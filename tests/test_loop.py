"""Scenario tests: one (or a few) per rule of "The loop" in SPEC.md."""

from __future__ import annotations

import enum
import inspect
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_invoke import (
    AgentResponseUpdate,
    ApprovalError,
    ApprovalRequiredTool,
    CallNext,
    ChatClientError,
    ChatMessage,
    ConfigurationError,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    ScriptExhaustedError,
    StopLoop,
    StreamProtocolError,
    TextDelta,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    ToolCallArgs,
    ToolCalled,
    ToolCallEnd,
    ToolCallStart,
    ToolContext,
    Usage,
    tool,
)
from trio_invoke._loop._client import _SETTINGS
from trio_invoke.testing import (
    assert_transcript_valid,
    run_to_completion,
    tool_call_updates,
    tool_calls_response,
)

USER = [ChatMessage.user("hi")]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool
async def boom() -> str:
    """Always fails."""
    raise RuntimeError("kaput")


@tool
async def nap(seconds: float) -> str:
    """Sleep for a while."""
    await trio.sleep(seconds)
    return f"slept {seconds:g}"


def of_type(updates: Any, kind: type) -> list[Any]:
    return [u for u in updates if isinstance(u, kind)]


def json_error(text: str) -> str:
    """Python's own explanation of why ``text`` is not JSON (the oracle for error results)."""
    try:
        json.loads(text)
    except ValueError as exc:
        return str(exc)
    raise AssertionError(f"{text!r} is JSON")


# -- end of stream without tool calls -------------------------------------------------------------


async def test_answer_without_tools_finishes_with_stop() -> None:
    model = ScriptedChatClient([[TextDelta("Hel"), TextDelta("lo"), Finish(FinishReason.STOP)]])
    result = await run_to_completion(FunctionInvokingChatClient(model, [add]), USER)
    assert result.updates == (TextDelta("Hel"), TextDelta("lo"), Finish(FinishReason.STOP))
    assert result.messages == (ChatMessage.assistant("Hello"),)


@pytest.mark.parametrize("reason", [FinishReason.LENGTH, FinishReason.CONTENT_FILTER])
async def test_length_and_content_filter_pass_through(reason: FinishReason) -> None:
    model = ScriptedChatClient([[TextDelta("cut"), Finish(reason, Usage(1, 2))]])
    result = await run_to_completion(FunctionInvokingChatClient(model), USER)
    assert result.updates[-1] == Finish(reason, Usage(1, 2))


async def test_stream_without_finish_counts_as_stop() -> None:
    model = ScriptedChatClient([[TextDelta("x")]])
    result = await run_to_completion(FunctionInvokingChatClient(model), USER)
    assert result.updates[-1] == Finish(FinishReason.STOP, None)


# -- tools run, results go back, the loop goes round ----------------------------------------------


async def test_tool_round_then_answer() -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "echo", '{"text": "hi"}')
            ),
            "done",
        ]
    )
    result = await run_to_completion(FunctionInvokingChatClient(model, [add, echo]), USER)
    calls = (ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "echo", '{"text": "hi"}'))
    assert result.messages == (
        ChatMessage.assistant("", calls),
        ChatMessage.tool_result(calls[0], "3"),
        ChatMessage.tool_result(calls[1], "hi"),
        ChatMessage.assistant("done"),
    )
    assert {u.result for u in of_type(result.updates, ToolCalled)} == {"3", "hi"}
    # the second model call saw the first round's messages
    assert model.calls[1].messages == (*USER, *result.messages[:3])
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert_transcript_valid([*USER, *result.messages])


async def test_model_stream_is_forwarded_as_it_arrives() -> None:
    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "echo", '{"text": "x"}')), "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [echo]), USER)
    kinds = [type(u).__name__ for u in result.updates]
    assert kinds == [
        "ToolCallStart", "ToolCallArgs", "ToolCallEnd", "ToolCalled", "TextDelta", "Finish"
    ]  # fmt: skip


async def test_calls_run_concurrently_and_report_in_completion_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    order: list[str] = []

    @tool
    async def wait(seconds: float, name: str) -> str:
        """Sleep, then answer."""
        await trio.sleep(seconds)
        order.append(name)
        return name

    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("slow", "wait", '{"seconds": 3, "name": "slow"}'),
                ToolCall("fast", "wait", '{"seconds": 1, "name": "fast"}'),
            ),
            "done",
        ]
    )
    start = trio.current_time()
    with trio.fail_after(60):
        result = await run_to_completion(FunctionInvokingChatClient(model, [wait]), USER)
    assert trio.current_time() - start == pytest.approx(3)  # concurrent: 3 s, not 4
    called = of_type(result.updates, ToolCalled)
    assert [c.call.id for c in called] == ["fast", "slow"]  # completion order
    assert [c.duration for c in called] == pytest.approx([1, 3])
    assert [m.tool_call_id for m in result.messages if m.role is MessageRole.TOOL] == [
        "slow",
        "fast",
    ]  # call order


@pytest.mark.parametrize("calls", [1, 2, 5])
@pytest.mark.parametrize("eager", [False, True])
async def test_every_call_of_a_round_runs_at_once_each_in_its_own_task(
    calls: int, eager: bool, autojump_clock: trio.testing.MockClock
) -> None:
    # Each call waits until all of them have started: a call that only started after another
    # one finished (run in line before its siblings were started) would hang here.
    started: list[trio.lowlevel.Task] = []
    everyone = trio.Event()

    @tool
    async def meet(i: int) -> str:
        """Wait for the others."""
        started.append(trio.lowlevel.current_task())
        if len(started) == calls:
            everyone.set()
        await everyone.wait()
        return f"met {i}"

    model = ScriptedChatClient(
        [
            tool_calls_response(
                *(ToolCall(f"c{i}", "meet", json.dumps({"i": i})) for i in range(calls))
            ),
            "done",
        ]
    )
    agent = FunctionInvokingChatClient(model, [meet], eager_tools=eager)
    with trio.fail_after(10):
        result = await run_to_completion(agent, USER)
    assert len(set(started)) == calls  # one task per call
    assert trio.lowlevel.current_task() not in started
    assert [m.content for m in result.messages if m.role is MessageRole.TOOL] == [
        f"met {i}" for i in range(calls)
    ]


async def test_call_order_is_order_of_first_start_with_interleaved_streams() -> None:
    updates = [
        ToolCallStart("b", "echo"),
        ToolCallStart("a", "echo"),
        ToolCallArgs("a", '{"text":'),
        ToolCallArgs("b", '{"text": "B"}'),
        ToolCallArgs("a", ' "A"}'),
        ToolCallEnd("a"),
        ToolCallEnd("b"),
        Finish(FinishReason.TOOL_CALLS),
    ]
    model = ScriptedChatClient([updates, "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [echo]), USER)
    assistant = result.messages[0]
    assert assistant.tool_calls is not None
    assert [c.id for c in assistant.tool_calls] == ["b", "a"]
    assert [m.content for m in result.messages[1:3]] == ["B", "A"]


async def test_one_failing_tool_does_not_cancel_its_siblings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool
    async def slow_echo(text: str) -> str:
        """Sleep, then echo."""
        await trio.sleep(5)
        return text

    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("c1", "boom", "{}"), ToolCall("c2", "slow_echo", '{"text": "alive"}')
            ),
            "ok",
        ]
    )
    with trio.fail_after(60):
        result = await run_to_completion(FunctionInvokingChatClient(model, [boom, slow_echo]), USER)
    results = {c.call.id: c for c in of_type(result.updates, ToolCalled)}
    assert results["c1"].is_error
    assert results["c1"].result == "Error: tool 'boom' raised RuntimeError"
    assert isinstance(results["c1"].exception, RuntimeError)
    assert results["c2"] == ToolCalled(results["c2"].call, "alive", is_error=False)
    assert results["c2"].exception is None


async def test_text_and_tool_calls_share_the_assistant_message() -> None:
    model = ScriptedChatClient(
        [
            [
                TextDelta("Let me add. "),
                *tool_calls_response(ToolCall("c1", "add", '{"a": 1, "b": 1}')),
            ],
            "2",
        ]
    )
    result = await run_to_completion(FunctionInvokingChatClient(model, [add]), USER)
    assert result.messages[0].content == "Let me add. "
    assert result.messages[0].tool_calls == (ToolCall("c1", "add", '{"a": 1, "b": 1}'),)


# -- per call: parse, validate, find, execute -----------------------------------------------------


INVALID = "Error: invalid arguments for tool 'add': "


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("add", '{"a": 1, ', INVALID + "invalid JSON arguments: " + json_error('{"a": 1, ')),
        ("add", "[1, 2]", INVALID + "arguments must be a JSON object, got array"),
        ("add", '{"a": 1}', INVALID + "missing required field 'b'"),
        ("add", '{"a": 1, "b": "two"}', INVALID + "field 'b': expected integer, got string"),
        ("nope", "{}", "Error: unknown tool 'nope'. Available tools: add, boom"),
        ("boom", "{}", "Error: tool 'boom' raised RuntimeError"),
    ],
)
async def test_bad_calls_become_error_results_naming_the_problem(
    name: str, arguments: str, expected: str
) -> None:
    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", name, arguments)), "sorry"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [add, boom]), USER)
    (called,) = of_type(result.updates, ToolCalled)
    assert called.is_error
    assert called.result == expected
    assert result.messages[1].content == called.result
    assert result.updates[-1] == Finish(FinishReason.STOP)  # the model got to answer


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "Error: 3 lines matched in app.log" if key == "log" else "found"


async def refuse(context: ToolContext, call_next: CallNext) -> ToolCalled:
    """Refuses some keys itself: in its own words, or in the loop's."""
    if context.arguments.get("key") == "secret":
        return ToolCalled(context.call, "Denied by policy.", is_error=True)
    if context.arguments.get("key") == "other":
        return ToolCalled(context.call, "Error: denied by policy", is_error=True)
    return await call_next(context)


async def test_a_tool_message_is_marked_is_error_only_where_its_text_says_otherwise() -> None:
    # A tool message that reads "Error: ..." is an error result to a provider that takes the
    # flag (Anthropic's tool_result is_error) unless it is marked otherwise. The loop marks the
    # results whose text misleads -- an error in a middleware's own words, a success that reads
    # "Error: ..." -- and no other: the rest are the messages a user would build by hand.
    calls = {
        "plain": ToolCall("c1", "lookup", '{"key": "plain"}'),
        "success that reads as an error": ToolCall("c2", "lookup", '{"key": "log"}'),
        "error in the middleware's words": ToolCall("c3", "lookup", '{"key": "secret"}'),
        "error in the loop's words": ToolCall("c4", "lookup", '{"key": "other"}'),
        "unknown tool": ToolCall("c5", "nope", "{}"),
        "invalid arguments": ToolCall("c6", "lookup", "{}"),
        "the tool raised": ToolCall("c7", "boom", "{}"),
    }
    model = ScriptedChatClient([tool_calls_response(*calls.values()), "done"])
    agent = FunctionInvokingChatClient(model, [lookup, boom], middleware=[refuse])
    result = await run_to_completion(agent, USER)
    called = {c.call.id: c for c in of_type(result.updates, ToolCalled)}
    marks = {
        "success that reads as an error": {"is_error": False},
        "error in the middleware's words": {"is_error": True},
    }
    messages = {m.tool_call_id: m for m in result.messages if m.role is MessageRole.TOOL}
    for what, call in calls.items():
        expected = ChatMessage.tool_result(call, called[call.id].result)
        if what in marks:
            expected = attrs.evolve(expected, provider_data=marks[what])
        assert messages[call.id] == expected, what
        assert messages[call.id].provider_data == marks.get(what, {}), what
    assert [called[c.id].is_error for c in calls.values()] == [False, False, *[True] * 5]
    assert_transcript_valid([*USER, *result.messages])


async def test_empty_arguments_mean_empty_object() -> None:
    @tool
    async def now() -> str:
        """The time."""
        return "noon"

    model = ScriptedChatClient(
        [[ToolCallStart("c1", "now"), ToolCallEnd("c1"), Finish(FinishReason.TOOL_CALLS)], "ok"]
    )
    result = await run_to_completion(FunctionInvokingChatClient(model, [now]), USER)
    assert result.messages[1].content == "noon"
    assert result.messages[0].tool_calls == (ToolCall("c1", "now", "{}"),)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        ({"b": [1, 2], "a": "é"}, '{"b":[1,2],"a":"é"}'),
        (None, "null"),
        (3.5, "3.5"),
    ],
)
async def test_results_are_strings_or_compact_json(value: Any, text: str) -> None:
    @tool
    async def give() -> Any:
        """Give the value."""
        return value

    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "give", "{}")), "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [give]), USER)
    assert result.messages[1].content == text


class Unit(str, enum.Enum):  # noqa: UP042 -- the mixin: its str() is its name
    """A str enum, whose ``str()`` is ``"Unit.CELSIUS"``, not its value."""

    CELSIUS = "celsius"


class Tagged(str):
    def __str__(self) -> str:
        return "<tagged>"


@pytest.mark.parametrize("value", [Unit.CELSIUS, Tagged("celsius")])
async def test_a_str_result_goes_to_the_model_as_it_is_whatever_its_class(value: str) -> None:
    # A str subclass is text: the model reads its characters, not its __str__, and the
    # ToolCalled update says what the tool message says.
    @tool
    async def unit() -> str:
        """The unit."""
        return value

    @tool
    async def stop() -> str:
        """Stop with the unit."""
        raise StopLoop(value)

    for name in ("unit", "stop"):
        model = ScriptedChatClient([tool_calls_response(ToolCall("c1", name, "{}")), "ok"])
        result = await run_to_completion(FunctionInvokingChatClient(model, [unit, stop]), USER)
        (called,) = of_type(result.updates, ToolCalled)
        message = result.messages[1]
        assert message.content == called.result == "celsius"
        assert type(message.content) is str
        assert type(called.result) is str
    assert ChatMessage.user(value).content == "celsius"


async def test_unserialisable_result_is_an_error_result() -> None:
    @tool
    async def give() -> Any:
        """Give an object."""
        return object()

    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "give", "{}")), "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [give]), USER)
    (called,) = of_type(result.updates, ToolCalled)
    assert called.is_error
    assert called.result == "Error: tool 'give' returned an object, which is not JSON-serialisable"


async def test_a_result_too_deep_for_json_is_an_error_result_not_a_crash() -> None:
    @tool
    async def deep() -> Any:
        """A very nested value."""
        value: list[Any] = []
        for _ in range(100_000):
            value = [value]
        return value

    model = ScriptedChatClient([tool_calls_response(ToolCall("a", "deep", "{}")), "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [deep]), USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert called.is_error
    assert called.result == "Error: tool 'deep' returned a list, which is not JSON-serialisable"
    assert result.updates[-1] == Finish(FinishReason.STOP)


async def test_sync_tools_run_in_a_worker_thread() -> None:
    import threading

    main = threading.get_ident()

    @tool
    def where() -> bool:
        """Whether this runs off the main thread."""
        return threading.get_ident() != main

    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "where", "{}")), "ok"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [where]), USER)
    assert result.messages[1].content == "true"


# -- max_rounds, and what construction refuses ----------------------------------------------------


@pytest.mark.parametrize("max_rounds", [1, 3])
async def test_round_cap_finishes_with_max_rounds(max_rounds: int) -> None:
    rounds = [
        tool_calls_response(ToolCall(f"c{i}", "add", '{"a": 1, "b": 1}'), usage=Usage(1, 1))
        for i in range(5)
    ]
    model = ScriptedChatClient(rounds)
    client = FunctionInvokingChatClient(model, [add], max_rounds=max_rounds)
    result = await run_to_completion(client, USER)
    assert len(model.calls) == max_rounds
    assert result.updates[-1] == Finish(FinishReason.MAX_ROUNDS, Usage(max_rounds, max_rounds))
    assert len(of_type(result.updates, ToolCalled)) == max_rounds
    assert_transcript_valid([*USER, *result.messages])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_max_rounds_below_one_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_rounds must be an integer >= 1") as info:
        FunctionInvokingChatClient(ScriptedChatClient([]), max_rounds=bad)
    assert isinstance(info.value, ConfigurationError)


def test_duplicate_tool_names_are_a_value_error() -> None:
    @tool(name="add")
    async def other(a: int) -> int:
        """Another add."""
        return a

    with pytest.raises(ValueError, match="two tools are named 'add'"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [add, other])


def test_a_loop_inside_a_loop_is_refused() -> None:
    inner = FunctionInvokingChatClient(ScriptedChatClient([]))
    with pytest.raises(ConfigurationError, match="run its tool calls again"):
        FunctionInvokingChatClient(inner)


@pytest.mark.parametrize(
    ("setting", "value", "match"),
    [
        ("max_rounds", 0, "max_rounds must be an integer >= 1"),
        ("on_max_rounds", "stop", "on_max_rounds"),
        ("tool_timeout", -1, "tool_timeout"),
        ("max_concurrency", 0, "max_concurrency"),
        ("max_tool_calls", -1, "max_tool_calls"),
        ("max_consecutive_errors", 0, "max_consecutive_errors"),
        ("sequential", "false", "sequential must be True or False"),
        ("eager_tools", 1, "eager_tools must be True or False"),
        ("include_detailed_errors", None, "include_detailed_errors"),
        ("approval", "each", "approval"),
        ("inner", FunctionInvokingChatClient(ScriptedChatClient([])), "run its tool calls again"),
        ("max_tool_threads", 0, "max_tool_threads"),
    ],
)
def test_a_setting_assigned_later_is_checked_as_at_construction(
    setting: str, value: Any, match: str
) -> None:
    arguments = set(inspect.signature(FunctionInvokingChatClient).parameters)
    assert arguments - {"tools"} == _SETTINGS  # every setting is checked when assigned
    client = FunctionInvokingChatClient(ScriptedChatClient([]), [add])
    before = getattr(client, setting)
    with pytest.raises(ConfigurationError, match=match):
        setattr(client, setting, value)
    assert getattr(client, setting) is before
    with pytest.raises(TypeError, match=r"middleware\[0\] is a int"):
        client.middleware = [1]  # type: ignore[list-item]
    assert client.middleware == ()


def test_a_subclass_may_set_a_setting_before_the_constructor_runs() -> None:
    """A setting assigned before ``__init__`` has set them all is not checked against the
    others yet (they are not there): the constructor checks and sets it."""

    class Preset(FunctionInvokingChatClient):
        def __init__(self, inner: ScriptedChatClient) -> None:
            self.max_rounds = 4
            super().__init__(inner, [add], max_rounds=self.max_rounds)

    client = Preset(ScriptedChatClient([]))
    assert client.max_rounds == 4
    with pytest.raises(ConfigurationError, match="max_rounds"):
        client.max_rounds = 0
    client.max_rounds = 2
    assert client.max_rounds == 2


async def test_settings_assigned_later_take_effect_from_the_next_run() -> None:
    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "add", '{"a": 1, "b": 1}'))])
    client = FunctionInvokingChatClient(model, [add], max_rounds=5)
    client.max_rounds = 1
    result = await run_to_completion(client, USER)
    assert result.updates[-1].finish_reason is FinishReason.MAX_ROUNDS  # type: ignore[union-attr]
    assert len(model.calls) == 1


async def test_sequential_assigned_later_turns_eager_tools_off() -> None:
    """Each call runs once: eager start and the sequential batch never both take a call."""
    counted: list[int] = []

    @tool
    async def count(n: int) -> int:
        """Count a call."""
        counted.append(n)
        return n

    calls = [ToolCall(f"c{n}", "count", json.dumps({"n": n})) for n in range(3)]
    model = ScriptedChatClient([tool_calls_response(*calls), "done"])
    client = FunctionInvokingChatClient(model, [count], eager_tools=True)
    client.sequential = True
    result = await run_to_completion(client, USER)
    assert counted == [0, 1, 2]
    assert len(of_type(result.updates, ToolCalled)) == 3
    assert_transcript_valid([*USER, *result.messages])
    client.sequential = False  # eager again, as it was built
    assert client.eager_tools


# -- Finish, usage, what the inner client is given ------------------------------------------------


async def test_tool_calls_finish_is_hidden_and_usage_is_summed() -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("c1", "add", '{"a": 1, "b": 2}'), usage=Usage(10, 2)),
            [TextDelta("3"), Finish(FinishReason.STOP, Usage(15, 1))],
        ]
    )
    result = await run_to_completion(FunctionInvokingChatClient(model, [add]), USER)
    finishes = of_type(result.updates, Finish)
    assert finishes == [Finish(FinishReason.STOP, Usage(25, 3))]
    assert finishes[0].usage is not None
    assert finishes[0].usage.total_tokens == 28


async def test_usage_is_summed_over_rounds_that_report_it() -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("c1", "add", '{"a": 1, "b": 2}')),
            [Finish(FinishReason.STOP, Usage(3, 4))],
        ]
    )
    result = await run_to_completion(FunctionInvokingChatClient(model, [add]), USER)
    assert result.updates[-1] == Finish(FinishReason.STOP, Usage(3, 4))


async def test_inner_client_is_offered_the_tool_definitions() -> None:
    model = ScriptedChatClient(["hi"])
    await run_to_completion(FunctionInvokingChatClient(model, [add, echo]), USER)
    offered = model.calls[0].options.tools
    assert [d.name for d in offered] == ["add", "echo"]
    assert offered[0].parameters == add.parameters
    assert offered[0].description == "Add two integers."
    assert model.calls[0].options.cancel_scope is None


async def test_the_inner_client_gets_a_snapshot_of_the_conversation() -> None:
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("a", "nap", '{"seconds": 0}')), "done"]
    )
    await run_to_completion(FunctionInvokingChatClient(model, [nap]), USER)
    assert [len(call.messages) for call in model.calls] == [1, 3]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "nap"}}])
async def test_a_forcing_tool_choice_applies_to_the_first_round_only(choice: Any) -> None:
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("a", "nap", '{"seconds": 0}')), "done"]
    )
    client = FunctionInvokingChatClient(model, [nap])
    result = await run_to_completion(client, USER, RunOptions(tool_choice=choice))
    assert model.calls[0].options.tool_choice == choice
    assert model.calls[1].options.tool_choice is None
    assert result.messages[-1] == ChatMessage.assistant("done")


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "nap"}}])
async def test_a_forcing_tool_choice_does_not_apply_after_a_resume(choice: Any) -> None:
    """A resume is the run's first round: the model call after it may answer (the same options
    given again for the resume would otherwise force a call, and so pause, for ever)."""
    model = ScriptedChatClient(["done"])
    client = FunctionInvokingChatClient(model, [ApprovalRequiredTool(nap)])
    call = ToolCall("a", "nap", '{"seconds": 0}')
    conversation = [*USER, ChatMessage.assistant("", tool_calls=[call])]
    answer = ToolApprovalRequest(call).approve()
    options = RunOptions(tool_choice=choice, tool_approval_responses=[answer])
    result = await run_to_completion(client, conversation, options)
    assert [call.options.tool_choice for call in model.calls] == [None]
    assert result.messages[-1] == ChatMessage.assistant("done")


@pytest.mark.parametrize(
    "choice",
    ["auto", "none", {"type": "auto", "disable_parallel_tool_use": True}, {"type": "none"}],
)
async def test_a_tool_choice_that_forces_no_call_holds_for_every_round(choice: Any) -> None:
    """Anthropic's mapping forms of "auto" and "none" force no call: dropping them after the
    first round would lose what they carry (``disable_parallel_tool_use``)."""
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("a", "nap", '{"seconds": 0}')),
            tool_calls_response(ToolCall("b", "nap", '{"seconds": 0}')),
            "done",
        ]
    )
    client = FunctionInvokingChatClient(model, [nap])
    await run_to_completion(client, USER, RunOptions(tool_choice=choice))
    assert [call.options.tool_choice for call in model.calls] == [choice, choice, choice]


# -- provider tools -------------------------------------------------------------------------------


async def test_provider_tools_add_new_names_and_replace_only_with_approval_versions() -> None:
    @tool(name="add")
    async def other_add(a: int, b: int) -> int:
        """A provider's add that does not need approval."""
        return 0

    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "echo", '{"text": "p"}')
            ),
            "ok",
        ]
    )
    client = FunctionInvokingChatClient(model, [add])
    options = RunOptions(provider_tools=[other_add, echo])
    result = await run_to_completion(client, USER, options)
    assert [m.content for m in result.messages[1:3]] == ["3", "p"]  # static add kept
    assert [d.name for d in model.calls[0].options.tools] == ["add", "echo"]

    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "add", '{"a": 1, "b": 2}'))])
    client = FunctionInvokingChatClient(model, [add])
    options = RunOptions(provider_tools=[ApprovalRequiredTool(other_add)])
    result = await run_to_completion(client, USER, options)
    assert result.updates[-1].finish_reason is FinishReason.AWAITING_APPROVAL


# -- approval -------------------------------------------------------------------------------------


def approval_client(*rounds: Any, executed: list[str]) -> FunctionInvokingChatClient:
    @tool
    async def delete(path: str) -> str:
        """Delete a file."""
        executed.append(path)
        return f"deleted {path}"

    @tool
    async def look(path: str) -> str:
        """Look at a file."""
        executed.append(f"look {path}")
        return "a file"

    model = ScriptedChatClient(list(rounds))
    return FunctionInvokingChatClient(model, [ApprovalRequiredTool(delete), look])


async def test_approval_pauses_the_batch_and_runs_nothing() -> None:
    executed: list[str] = []
    client = approval_client(
        tool_calls_response(
            ToolCall("c1", "look", '{"path": "a"}'),
            ToolCall("c2", "delete", '{"path": "a"}'),
            ToolCall("c3", "delete", '{"path": "b"}'),
        ),
        executed=executed,
    )
    result = await run_to_completion(client, USER)
    requests = of_type(result.updates, ToolApprovalRequest)
    assert [r.call.id for r in requests] == ["c2", "c3"]
    assert result.updates[-1] == Finish(FinishReason.AWAITING_APPROVAL)
    assert executed == []
    assert len(result.messages) == 1
    assert result.messages[0].tool_calls is not None
    assert [c.id for c in result.messages[0].tool_calls] == ["c1", "c2", "c3"]


async def test_resume_runs_approved_rejects_rejected_and_runs_the_rest() -> None:
    executed: list[str] = []
    first = tool_calls_response(
        ToolCall("c1", "look", '{"path": "a"}'),
        ToolCall("c2", "delete", '{"path": "a"}'),
        ToolCall("c3", "delete", '{"path": "b"}'),
    )
    client = approval_client(first, "all done", executed=executed)
    paused = await run_to_completion(client, USER)
    conversation = [*USER, *paused.messages]
    options = RunOptions(
        tool_approval_responses=[
            ToolApprovalResponse("c2", approved=True),
            ToolApprovalResponse("c3", approved=False, reason="keep b"),
        ]
    )
    resumed = await run_to_completion(client, conversation, options)
    assert sorted(executed) == ["a", "look a"]
    contents = [m.content for m in resumed.messages]
    assert contents == [
        "a file",
        "deleted a",
        "Error: the user rejected this call: keep b",
        "all done",
    ]
    called = {c.call.id: c for c in of_type(resumed.updates, ToolCalled)}
    assert called["c3"].is_error
    assert not called["c2"].is_error
    assert resumed.updates[-1] == Finish(FinishReason.STOP)
    assert_transcript_valid([*conversation, *resumed.messages])


async def test_resume_is_json_serialisable_across_processes() -> None:
    executed: list[str] = []
    client = approval_client(
        tool_calls_response(ToolCall("c1", "delete", '{"path": "x"}')), "ok", executed=executed
    )
    paused = await run_to_completion(client, USER)
    wire = json.dumps([m.to_dict() for m in [*USER, *paused.messages]])
    restored = [ChatMessage.from_dict(d) for d in json.loads(wire)]
    options = RunOptions(tool_approval_responses=[ToolApprovalResponse("c1", approved=True)])
    resumed = await run_to_completion(client, restored, options)
    assert executed == ["x"]
    assert resumed.messages[0].content == "deleted x"


@pytest.mark.parametrize(
    ("responses", "match"),
    [
        ([], r"no approval response: 'c2' \(delete\)"),
        ([ToolApprovalResponse("c2", True), ToolApprovalResponse("zz", True)], "'zz'"),
        ([ToolApprovalResponse("c1", True), ToolApprovalResponse("c2", True)], "'c1'.*not waiting"),
        ([ToolApprovalResponse("c2", True), ToolApprovalResponse("c2", False)], "two approval"),
    ],
)
async def test_approval_responses_must_match_pending_calls(
    responses: list[ToolApprovalResponse], match: str
) -> None:
    executed: list[str] = []
    client = approval_client(
        tool_calls_response(
            ToolCall("c1", "look", '{"path": "a"}'), ToolCall("c2", "delete", '{"path": "a"}')
        ),
        executed=executed,
    )
    paused = await run_to_completion(client, USER)
    with pytest.raises(ValueError, match=match) as info:
        await run_to_completion(
            client, [*USER, *paused.messages], RunOptions(tool_approval_responses=responses)
        )
    assert isinstance(info.value, ApprovalError)
    assert executed == []


async def test_approval_responses_without_pending_calls_are_an_error() -> None:
    client = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    options = RunOptions(tool_approval_responses=[ToolApprovalResponse("c1", approved=True)])
    with pytest.raises(ApprovalError, match="'c1'"):
        await run_to_completion(client, USER, options)


async def test_pending_calls_without_approval_need_run_on_resume() -> None:
    call = ToolCall("c1", "add", '{"a": 2, "b": 2}')
    conversation = [*USER, ChatMessage.assistant("", [call])]
    model = ScriptedChatClient(["4"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [add]), conversation)
    assert [m.content for m in result.messages] == ["4", "4"]
    assert_transcript_valid([*conversation, *result.messages])


# -- the inner client fails -----------------------------------------------------------------------


async def test_inner_exception_propagates_chained_after_earlier_updates() -> None:
    cause = OSError("connection reset")
    model = ScriptedChatClient([[TextDelta("partial"), cause]])
    seen: list[Any] = []
    client = FunctionInvokingChatClient(model)
    with pytest.raises(ChatClientError, match="connection reset") as info:
        async with client.run(USER) as stream:
            async for update in stream:
                seen.append(update)
    assert info.value.__cause__ is cause
    assert seen == [TextDelta("partial")]
    assert stream.messages == [ChatMessage.assistant("partial")]


async def test_library_errors_from_the_inner_client_are_not_rewrapped() -> None:
    client = FunctionInvokingChatClient(ScriptedChatClient([]))
    with pytest.raises(ScriptExhaustedError, match="0 scripted responses"):
        await run_to_completion(client, USER)


async def test_inner_failure_after_tool_calls_answers_them() -> None:
    model = ScriptedChatClient(
        [[*tool_call_updates("c1", "add", '{"a": 1, "b": 1}'), ValueError("bad chunk")]]
    )
    seen: list[Any] = []
    client = FunctionInvokingChatClient(model, [add])
    with pytest.raises(ChatClientError) as info:
        async with client.run(USER) as stream:
            async for update in stream:
                seen.append(update)
    assert isinstance(info.value.__cause__, ValueError)
    (called,) = of_type(seen, ToolCalled)
    assert called.is_error
    assert called.result == "Error: not run: the chat client failed (ChatClientError)"
    assert_transcript_valid([*USER, *stream.messages])


class TwoTasksFail:
    """A chat client whose stream runs a nursery of its own, two of whose tasks fail."""

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        yield self._stream()

    async def _stream(self) -> AsyncIterator[AgentResponseUpdate]:
        yield TextDelta("partial")

        async def fail(exc: Exception) -> None:
            raise exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail, ValueError("first"))
            nursery.start_soon(fail, KeyError("second"))


async def test_a_group_of_errors_from_the_inner_client_is_the_cause_whole() -> None:
    with trio.fail_after(5), pytest.raises(ChatClientError, match="2 sub-exceptions") as info:
        await run_to_completion(FunctionInvokingChatClient(TwoTasksFail()), USER)
    cause = info.value.__cause__
    assert isinstance(cause, ExceptionGroup)
    assert sorted(type(e).__name__ for e in cause.exceptions) == ["KeyError", "ValueError"]


@pytest.mark.parametrize("single", [False, True])
async def test_a_scripted_group_from_the_inner_client(single: bool) -> None:
    """Several errors: the group is the cause, as raised; one error: that error."""
    errors: list[Exception] = [OSError("reset")] if single else [OSError("reset"), KeyError("k")]
    group = ExceptionGroup("mine", errors)
    model = ScriptedChatClient([[TextDelta("partial"), group]])
    with pytest.raises(ChatClientError) as info:
        await run_to_completion(FunctionInvokingChatClient(model), USER)
    assert info.value.__cause__ is (errors[0] if single else group)


async def test_a_group_of_one_library_error_from_the_inner_client_is_that_error() -> None:
    error = ScriptExhaustedError("gone")
    model = ScriptedChatClient([[TextDelta("partial"), ExceptionGroup("mine", [error])]])
    with pytest.raises(ScriptExhaustedError) as info:
        await run_to_completion(FunctionInvokingChatClient(model), USER)
    assert info.value is error


@pytest.mark.parametrize(
    ("updates", "match"),
    [
        ([ToolCallArgs("x", "{}")], "ToolCallArgs for tool call id 'x', which never started"),
        ([ToolCallEnd("x")], "ToolCallEnd for tool call id 'x', which never started"),
        ([ToolCallStart("x", "add"), ToolCallStart("x", "add")], "second ToolCallStart.*'x'"),
        (
            [ToolCallStart("x", "add"), ToolCallEnd("x"), ToolCallArgs("x", "1")],
            "ToolCallArgs for tool call id 'x' after its ToolCallEnd",
        ),
        ([ToolCallStart("x", "add"), Finish(FinishReason.TOOL_CALLS)], "'x' still open"),
        ([Finish(FinishReason.STOP), TextDelta("late")], "TextDelta after the response's Finish"),
    ],
)
async def test_inconsistent_inner_streams_are_protocol_errors(updates: Any, match: str) -> None:
    client = FunctionInvokingChatClient(ScriptedChatClient([updates]), [add])
    with pytest.raises(StreamProtocolError, match=match):
        await run_to_completion(client, USER)


async def test_exception_in_the_callers_block_is_not_wrapped() -> None:
    client = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    with pytest.raises(KeyError):
        async with client.run(USER) as stream:
            async for _ in stream:
                raise KeyError("mine")


async def test_a_users_own_exception_group_stays_whole() -> None:
    group = ExceptionGroup("mine", [KeyError("k")])
    client = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    with pytest.raises(ExceptionGroup) as info:
        async with client.run(USER) as stream:
            async for _ in stream:
                raise group
    assert info.value.message == "mine"  # not unwrapped to the bare KeyError
    assert [type(e) for e in info.value.exceptions] == [KeyError]


# -- cancellation ---------------------------------------------------------------------------------


class GatedModel:
    """A chat client that streams its script, then waits on a gate forever (until cancelled)."""

    def __init__(self, *updates: Any) -> None:
        self.updates = updates
        self.reached = trio.Event()

    def run(self, messages: Any, options: Any = None) -> Any:
        return _Gated(self)


class _Gated:
    def __init__(self, model: GatedModel) -> None:
        self.model = model

    async def __aenter__(self) -> Any:
        return self._iterate()

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def _iterate(self) -> Any:
        for update in self.model.updates:
            yield update
        self.model.reached.set()
        await trio.sleep_forever()
        yield TextDelta("never")  # pragma: no cover


async def test_a_caller_cancelled_while_waiting_for_an_update_gets_a_bare_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The stream waits for the next update outside its ``except WouldBlock``: an exception that
    # ends the wait has no internal WouldBlock as its context (nor is one kept alive meanwhile).
    contexts: list[BaseException | None] = []
    client = FunctionInvokingChatClient(GatedModel(TextDelta("one")), [add])
    with trio.fail_after(10):
        async with client.run(USER) as stream:
            assert await stream.__anext__() == TextDelta("one")
            with trio.move_on_after(1):
                try:
                    await stream.__anext__()
                except trio.Cancelled as exc:
                    contexts.append(exc.__context__)
                    raise
    assert contexts == [None]


async def test_cancel_mid_stream_keeps_text_and_answers_completed_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = GatedModel(
        TextDelta("Working"),
        *tool_call_updates("done", "add", '{"a": 1, "b": 2}'),
        ToolCallStart("half", "add"),
        ToolCallArgs("half", '{"a": '),
    )
    scope = trio.CancelScope()
    seen: list[Any] = []
    client = FunctionInvokingChatClient(model, [add])
    with trio.fail_after(10):
        async with client.run(USER, RunOptions(cancel_scope=scope)) as stream:
            async for update in stream:
                seen.append(update)
                if isinstance(update, ToolCallArgs) and update.id == "half":
                    scope.cancel()
    assert seen[-1] == Error("cancelled")
    assert stream.messages == [
        ChatMessage.assistant("Working", [ToolCall("done", "add", '{"a": 1, "b": 2}')]),
        ChatMessage.tool_result(ToolCall("done", "add", '{"a": 1, "b": 2}'), "Error: cancelled"),
    ]
    (called,) = of_type(seen, ToolCalled)
    assert called.is_error
    assert called.call.id == "done"
    assert_transcript_valid([*USER, *stream.messages])


async def test_cancel_while_tools_run_keeps_finished_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cancelled: list[str] = []

    @tool
    async def wait(seconds: float) -> str:
        """Sleep."""
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            cancelled.append(str(seconds))
            raise
        return f"slept {seconds:g}"

    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("fast", "wait", '{"seconds": 1}'),
                ToolCall("slow", "wait", '{"seconds": 100}'),
            )
        ]
    )
    scope = trio.CancelScope()
    scope.deadline = trio.current_time() + 5
    with trio.fail_after(50):
        result = await run_to_completion(
            FunctionInvokingChatClient(model, [wait]), USER, RunOptions(cancel_scope=scope)
        )
    assert cancelled == ["100"]
    assert [m.content for m in result.messages[1:]] == ["slept 1", "Error: cancelled"]
    called = of_type(result.updates, ToolCalled)
    assert [(c.call.id, c.is_error) for c in called] == [("fast", False), ("slow", True)]
    assert result.updates[-1] == Error("cancelled")


async def test_usage_counts_even_when_the_run_is_cancelled_during_the_tools(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scope = trio.CancelScope()
    scope.deadline = trio.current_time() + 5
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("a", "nap", '{"seconds": 100}'), usage=Usage(100, 50))]
    )
    async with FunctionInvokingChatClient(model, [nap]).run(
        USER, RunOptions(cancel_scope=scope)
    ) as stream:
        async for _ in stream:
            pass
    assert stream.usage == Usage(100, 50)


async def test_cancel_before_start_ends_with_cancelled_and_adds_nothing() -> None:
    scope = trio.CancelScope()
    scope.cancel()
    model = ScriptedChatClient(["hi"])
    result = await run_to_completion(
        FunctionInvokingChatClient(model), USER, RunOptions(cancel_scope=scope)
    )
    assert result.updates == (Error("cancelled"),)
    assert result.messages == ()


async def test_leaving_the_block_early_cancels_tools_before_it_exits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    state: list[str] = []

    @tool
    async def hang() -> str:
        """Wait forever."""
        state.append("started")
        try:
            await trio.sleep_forever()
        finally:
            state.append("cleaned up")
        return "never"  # pragma: no cover

    model = ScriptedChatClient(
        [[TextDelta("go"), *tool_calls_response(ToolCall("c1", "hang", "{}"))]]
    )
    client = FunctionInvokingChatClient(model, [hang])
    with trio.fail_after(10):
        async with client.run(USER) as stream:
            async for update in stream:
                if isinstance(update, ToolCallEnd):
                    await trio.sleep(1)  # let the tool start
                    break
        assert state == ["started", "cleaned up"]  # no task outlived the block
    assert_transcript_valid([*USER, *stream.messages])
    assert stream.messages[1].content == "Error: cancelled"


async def test_a_stream_left_early_hands_out_nothing_after_its_block() -> None:
    # What the run's channels still held when the block was left went with the run: iterating
    # after the block never shows updates that .messages contradicts (calls with no ToolCalled).
    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "add", "{}")
            )
        ]
    )
    with trio.fail_after(10):
        async with FunctionInvokingChatClient(model, [add]).run(USER) as stream:
            async for update in stream:
                if isinstance(update, ToolCallEnd):
                    break
        for _ in range(2):
            with pytest.raises(trio.ClosedResourceError, match="async with was left"):
                await stream.__anext__()
    assert_transcript_valid([*USER, *stream.messages])
    assert [m.role for m in stream.messages] == [MessageRole.ASSISTANT, *[MessageRole.TOOL] * 2]


async def test_an_exhausted_stream_stays_exhausted_after_its_block() -> None:
    model = ScriptedChatClient(["hello"])
    with trio.fail_after(10):
        async with FunctionInvokingChatClient(model, [add]).run(USER) as stream:
            assert [u async for u in stream][-1] == Finish(FinishReason.STOP)
            assert [u async for u in stream] == []
        assert [u async for u in stream] == []
    assert stream.messages == [ChatMessage.assistant("hello")]


async def test_an_outer_cancellation_leaves_as_a_bare_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    caught: list[type[BaseException]] = []
    model = ScriptedChatClient([tool_calls_response(ToolCall("a", "nap", '{"seconds": 100}'))])
    with trio.move_on_after(5):
        try:
            async with FunctionInvokingChatClient(model, [nap]).run(USER) as stream:
                async for _ in stream:
                    pass
        except trio.Cancelled as exc:
            caught.append(type(exc))
            raise
    assert caught == [trio.Cancelled]
    assert_transcript_valid([*USER, *stream.messages])


async def test_get_response_collects_a_run() -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("c1", "add", '{"a": 2, "b": 3}'), usage=Usage(1, 1)),
            "It is 5.",
        ]
    )
    response = await FunctionInvokingChatClient(model, [add]).get_response(USER)
    assert response.text == "It is 5."
    assert response.finish_reason is FinishReason.STOP
    assert response.usage == Usage(1, 1)
    assert len(response.messages) == 3
    assert response.error is None


async def test_get_response_reports_cancellation_and_approvals() -> None:
    scope = trio.CancelScope()
    scope.cancel()
    client = FunctionInvokingChatClient(ScriptedChatClient(["x"]))
    response = await client.get_response(USER, RunOptions(cancel_scope=scope))
    assert response.finish_reason is None
    assert response.error == "cancelled"

    executed: list[str] = []
    client = approval_client(
        tool_calls_response(ToolCall("c1", "delete", '{"path": "p"}')), executed=executed
    )
    response = await client.get_response(USER)
    assert response.finish_reason is FinishReason.AWAITING_APPROVAL
    assert [r.call.id for r in response.approval_requests] == ["c1"]


@pytest.mark.parametrize("mode", ["concurrent", "sequential", "eager"])
async def test_a_cancelled_call_reports_how_long_it_ran(
    mode: str, autojump_clock: trio.testing.MockClock
) -> None:
    """``ToolCalled.duration`` is the time from the call's start to its result; only a call that
    never ran has 0, also when the run's cancel scope cut it short."""

    @tool
    async def wait(seconds: float) -> str:
        """Sleep, then answer."""
        await trio.sleep(seconds)
        return "woke"

    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("quick", "wait", '{"seconds": 1}'),
                ToolCall("slow", "wait", '{"seconds": 60}'),
                ToolCall("later", "wait", '{"seconds": 1}'),
            )
        ]
    )
    agent = FunctionInvokingChatClient(
        model, [wait], sequential=mode == "sequential", eager_tools=mode == "eager"
    )
    scope = trio.CancelScope(deadline=trio.current_time() + 5)
    with trio.fail_after(60):
        result = await run_to_completion(agent, USER, RunOptions(cancel_scope=scope))
    durations = {c.call.id: (c.result, c.duration) for c in of_type(result.updates, ToolCalled)}
    assert durations["quick"] == ("woke", pytest.approx(1))
    if mode == "sequential":  # the slow call started after the quick one; the last never ran
        assert durations["slow"] == ("Error: cancelled", pytest.approx(4))
        assert durations["later"] == ("Error: cancelled", 0)
    else:
        assert durations["slow"] == ("Error: cancelled", pytest.approx(5))
        assert durations["later"] == ("woke", pytest.approx(1))
    assert_transcript_valid(result.messages)
