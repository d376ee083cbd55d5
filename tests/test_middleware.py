"""Tool middleware (SPEC "Tool middleware"): what a middleware sees and each thing it may do --
change the arguments, answer without the tool, change the result, stop the loop, fail -- and
where the chain runs: after approval, inside the call's concurrency slot and time limit, never
for calls that are not run; in eager and sequential mode alike."""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_invoke import (
    ApprovalRequiredTool,
    CallNext,
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    ToolApprovalRequest,
    ToolCall,
    ToolCalled,
    ToolContext,
    ToolMiddleware,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

USER = [ChatMessage.user("go")]
MODES = [{}, {"eager_tools": True}, {"sequential": True}]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def slow(seconds: float) -> str:
    """Sleep."""
    await trio.sleep(seconds)
    return "slept"


def calls(*specs: tuple[str, str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(i, name, json.dumps(arguments)) for i, name, arguments in specs]


def script(*batch: ToolCall) -> list[Any]:
    return [tool_calls_response(*batch), "done"]


async def results_of(
    middleware: list[Any], batch: list[ToolCall], *, tools: Any = (add,), **options: Any
) -> dict[str, ToolCalled]:
    model = ScriptedChatClient(script(*batch))
    agent = FunctionInvokingChatClient(model, tools, middleware=middleware, **options)
    result = await run_to_completion(agent, USER)
    assert_transcript_valid([*USER, *result.messages])
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    tool_messages = {m.tool_call_id: m.content for m in result.messages if m.tool_call_id}
    assert {i: c.result for i, c in called.items()} == tool_messages
    return called


@pytest.mark.parametrize("mode", MODES)
async def test_a_middleware_sees_the_call_its_parsed_arguments_tool_round_and_conversation(
    mode: dict[str, Any],
) -> None:
    seen: list[ToolContext] = []

    async def record(context: ToolContext, call_next: CallNext) -> ToolCalled:
        seen.append(context)
        return await call_next(context)

    batch = calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4}))
    model = ScriptedChatClient([tool_calls_response(batch[0]), tool_calls_response(batch[1]), "x"])
    agent = FunctionInvokingChatClient(model, [add], middleware=[record], **mode)
    await run_to_completion(agent, USER)
    assert [c.call for c in seen] == batch
    assert [dict(c.arguments) for c in seen] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert [c.round for c in seen] == [1, 2]
    assert all(c.tool is add for c in seen)
    assert list(seen[0].messages) == list(model.calls[0].messages)
    assert list(seen[1].messages) == list(model.calls[1].messages)
    with pytest.raises(TypeError):
        seen[0].arguments["a"] = 5  # type: ignore[index]


async def test_the_first_middleware_is_the_outermost() -> None:
    order: list[str] = []

    def named(name: str) -> ToolMiddleware:
        async def middleware(context: ToolContext, call_next: CallNext) -> ToolCalled:
            order.append(f"{name} in")
            called = await call_next(context)
            order.append(f"{name} out")
            return attrs.evolve(called, result=f"{name}({called.result})")

        return middleware

    called = await results_of([named("a"), named("b")], calls(("c1", "add", {"a": 1, "b": 1})))
    assert order == ["a in", "b in", "b out", "a out"]
    assert called["c1"].result == "a(b(2))"


@tool
async def totals(items: list[int], limits: dict[str, int]) -> dict[str, Any]:
    """Echo what it was given."""
    return {"items": items, "limits": limits}


def append_item(arguments: Any) -> None:
    arguments["items"].append(99)


def set_limit(arguments: Any) -> None:
    arguments["limits"]["new"] = 1


def invalid_item(arguments: Any) -> None:
    arguments["items"][0] = "not an integer"


def invalid_limit(arguments: Any) -> None:
    arguments["limits"]["max"] = {"deep": []}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mutate", [append_item, set_limit, invalid_item, invalid_limit])
@pytest.mark.parametrize("then", ["call_next", "evolve tool", "evolve call"])
async def test_a_nested_value_changed_in_place_never_reaches_the_tool(
    mode: dict[str, Any], mutate: Any, then: str
) -> None:
    # ``context.arguments`` is read-only at its top level only: a middleware can change a
    # nested list or dict in place. The tool gets its own arguments, parsed from the text that
    # was validated (``ToolCalled.call.arguments``), so such a change, never validated, never
    # reaches it; ``context.evolve(arguments=...)`` is the way to change them (and validated).
    async def meddle(context: ToolContext, call_next: CallNext) -> ToolCalled:
        mutate(context.arguments)
        if then == "evolve tool":  # another tool: what was passed is checked, changes and all
            return await call_next(context.evolve(tool=totals_again))
        if then == "evolve call":  # same arguments, other text: runs what the text says
            text = json.dumps({"items": [5], "limits": {"max": 6}})
            return await call_next(context.evolve(call=attrs.evolve(context.call, arguments=text)))
        return await call_next(context)

    original = {"items": [1, 2], "limits": {"max": 3}}
    batch = calls(("c1", "totals", original))
    called = (await results_of([meddle], batch, tools=(totals,), **mode))["c1"]
    expected = {"items": [5], "limits": {"max": 6}} if then == "evolve call" else original
    if then == "evolve tool" and mutate in (invalid_item, invalid_limit):
        # The chain checks what it was passed, the changed values included: an error result.
        assert called.is_error
        assert called.result.startswith("Error: invalid arguments for tool 'totals'")
        return
    if then == "evolve tool":  # checked and valid: the tool runs what was checked
        expected = {"items": [1, 2], "limits": {"max": 3}}
        mutate(expected)
    assert not called.is_error, called.result
    assert json.loads(called.result) == expected
    assert json.loads(called.call.arguments) == expected  # what its result says it ran


@tool(name="totals")
async def totals_again(items: list[int], limits: dict[str, int]) -> dict[str, Any]:
    """Echo what it was given (another tool of the same name)."""
    return {"items": items, "limits": limits}


@pytest.mark.parametrize("mode", MODES)
async def test_changed_arguments_are_validated_and_run(mode: dict[str, Any]) -> None:
    async def double(context: ToolContext, call_next: CallNext) -> ToolCalled:
        arguments = {k: v * 2 for k, v in context.arguments.items()}
        return await call_next(context.evolve(arguments=arguments))

    async def breaks(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return await call_next(context.evolve(arguments={"a": "one"}))

    batch = calls(("c1", "add", {"a": 1, "b": 2}))
    assert (await results_of([double], batch, **mode))["c1"].result == "6"
    assert (await results_of([double], batch, **mode))["c1"].call.arguments == '{"a":2,"b":4}'
    broken = (await results_of([breaks], batch, **mode))["c1"]
    assert broken.is_error
    assert broken.result == (
        "Error: invalid arguments for tool 'add' from middleware: missing required field 'b'; "
        "field 'a': expected integer, got string"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_whose_arguments_text_was_changed_runs_what_the_text_says(
    mode: dict[str, Any],
) -> None:
    # evolve(call=...) with other arguments text, the parsed arguments left as they were: the
    # tool runs the text (validated), so that the result and its call agree.
    def rewriting(text: str) -> ToolMiddleware:
        async def rewrite(context: ToolContext, call_next: CallNext) -> ToolCalled:
            call = attrs.evolve(context.call, arguments=text)
            return await call_next(context.evolve(call=call))

        return rewrite

    batch = calls(("c1", "add", {"a": 1, "b": 2}))
    ran = (await results_of([rewriting('{"a": 100, "b": 1}')], batch, **mode))["c1"]
    assert (ran.result, json.loads(ran.call.arguments)) == ("101", {"a": 100, "b": 1})
    broken = (await results_of([rewriting('{"a": 1}')], batch, **mode))["c1"]
    assert broken.is_error
    assert broken.result == (
        "Error: invalid arguments for tool 'add' from middleware: missing required field 'b'"
    )
    not_json = (await results_of([rewriting("{a: 1")], batch, **mode))["c1"]
    assert not_json.is_error
    assert not_json.result.startswith(
        "Error: invalid arguments for tool 'add' from middleware: invalid JSON arguments"
    )


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"x": math.inf, "values": []}, "field 'x' is inf"),
        ({"x": -math.inf, "values": []}, "field 'x' is -inf"),
        ({"x": math.nan, "values": []}, "field 'x' is nan"),
        ({"x": 1.0, "values": [{"v": 2.0}, {"v": math.nan}]}, "field 'values[1].v' is nan"),
    ],
)
@pytest.mark.parametrize("swap", [False, True], ids=["arguments", "tool and arguments"])
async def test_changed_arguments_with_a_non_finite_number_never_reach_a_tool(
    arguments: dict[str, Any], where: str, swap: bool
) -> None:
    # JSON has no NaN or infinity, the model's arguments cannot hold one, and no tool gets one
    # from a middleware either: the result says where it is, and the call stays JSON.
    received: list[Any] = []

    @tool
    async def scale(x: float, values: list[dict[str, float]]) -> str:
        """Scales numbers."""
        received.append((x, values))
        return "scaled"

    @tool
    async def other(x: float, values: list[dict[str, float]]) -> str:
        """The same, elsewhere."""
        received.append((x, values))
        return "scaled elsewhere"

    async def rewrite(context: ToolContext, call_next: CallNext) -> ToolCalled:
        tool = other if swap else context.tool
        return await call_next(context.evolve(tool=tool, arguments=arguments))

    batch = calls(("c1", "scale", {"x": 1, "values": []}))
    called = (await results_of([rewrite], batch, tools=[scale, other]))["c1"]
    assert received == []
    assert called.is_error
    name = "other" if swap else "scale"
    assert called.result == (
        f"Error: invalid arguments for tool {name!r} from middleware: {where}, not a JSON number"
    )
    json.loads(called.call.arguments, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))


async def test_a_middleware_may_answer_without_the_tool() -> None:
    ran: list[int] = []

    @tool
    async def expensive(n: int) -> int:
        """Costly."""
        ran.append(n)
        return n * n

    cache: dict[int, ToolCalled] = {}

    async def cached(context: ToolContext, call_next: CallNext) -> ToolCalled:
        n = context.arguments["n"]
        if n in cache:
            return attrs.evolve(cache[n], call=context.call)
        cache[n] = await call_next(context)
        return cache[n]

    async def refuse(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return ToolCalled(context.call, "Error: not allowed by policy", is_error=True)

    batch = calls(("c1", "expensive", {"n": 3}), ("c2", "expensive", {"n": 3}))
    called = await results_of([cached], batch, tools=[expensive], sequential=True)
    assert ran == [3]
    assert called["c1"].result == called["c2"].result == "9"
    refused = await results_of([refuse], batch, tools=[expensive])
    assert ran == [3]
    assert {c.result for c in refused.values()} == {"Error: not allowed by policy"}


@pytest.mark.parametrize("mode", MODES)
async def test_stop_loop_from_a_middleware_ends_the_run_after_the_batch(
    mode: dict[str, Any],
) -> None:
    async def stop_on_big(context: ToolContext, call_next: CallNext) -> ToolCalled:
        if context.arguments["a"] > 10:
            raise StopLoop(f"stopped at {context.arguments['a']}")
        return await call_next(context)

    batch = calls(("c1", "add", {"a": 1, "b": 1}), ("c2", "add", {"a": 99, "b": 1}))
    model = ScriptedChatClient(script(*batch))
    agent = FunctionInvokingChatClient(model, [add], middleware=[stop_on_big], **mode)
    result = await run_to_completion(agent, USER)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert called["c1"].result == "2"
    assert called["c2"].result == "stopped at 99"
    assert not called["c2"].is_error
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert len(model.calls) == 1


class PolicyError(Exception):
    pass


@pytest.mark.parametrize("detailed", [False, True])
async def test_a_failing_middleware_is_that_calls_error_result(detailed: bool) -> None:
    async def fails(context: ToolContext, call_next: CallNext) -> ToolCalled:
        raise PolicyError("secret detail")

    async def after(context: ToolContext, call_next: CallNext) -> ToolCalled:
        await call_next(context)
        raise PolicyError("after the tool")

    async def returns_text(context: ToolContext, call_next: CallNext) -> Any:
        return "just text"

    async def returns_other(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return ToolCalled(ToolCall("other", "add", "{}"), "x", False)

    batch = calls(("c1", "add", {"a": 1, "b": 1}))
    options = {"include_detailed_errors": detailed}
    qualname = "test_a_failing_middleware_is_that_calls_error_result.<locals>"
    detail = ": secret detail" if detailed else ""
    got = (await results_of([fails], batch, **options))["c1"]
    assert got.result == f"Error: middleware '{qualname}.fails' raised PolicyError{detail}"
    assert isinstance(got.exception, PolicyError)
    assert got.is_error
    got = (await results_of([after], batch, **options))["c1"]
    assert got.result.startswith(f"Error: middleware '{qualname}.after' raised PolicyError")
    got = (await results_of([returns_text], batch))["c1"]
    assert got.result == (
        f"Error: middleware '{qualname}.returns_text' returned a str, not a ToolCalled"
    )
    got = (await results_of([returns_other], batch))["c1"]
    assert got.result == (
        f"Error: middleware '{qualname}.returns_other' returned the result of call 'other', "
        "not of 'c1'"
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("field", "value", "what"),
    [
        ("result", 42, "result is an int, not text"),
        ("result", None, "result is a NoneType, not text"),
        ("result", {"cached": True}, "result is a dict, not text"),
        ("result", b"raw", "result is a bytes, not text"),
        ("is_error", "no", "is_error is a str, not a bool"),
        ("is_error", None, "is_error is a NoneType, not a bool"),
        ("call", "c1", "call is a str, not a ToolCall"),
        ("call", None, "call is a NoneType, not a ToolCall"),
        ("call", {"id": "c1", "name": "add"}, "call is a dict, not a ToolCall"),
    ],
)
async def test_a_middleware_result_of_the_wrong_type_is_that_calls_error_result(
    mode: dict[str, Any], field: str, value: Any, what: str
) -> None:
    """attrs does not check what a ``ToolCalled`` is given: a middleware that hands back a raw
    cached value gets an error result saying so, and its siblings are not touched."""

    async def cache(context: ToolContext, call_next: CallNext) -> ToolCalled:
        if context.call.id == "c1":
            good = {"call": context.call, "result": "3", "is_error": False}
            return ToolCalled(**{**good, field: value})
        return await call_next(context)

    batch = calls(("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 3, "b": 4}))
    called = await results_of([cache], batch, **mode)
    qualname = "test_a_middleware_result_of_the_wrong_type_is_that_calls_error_result.<locals>"
    assert (
        called["c1"].result
        == f"Error: middleware '{qualname}.cache' returned a ToolCalled whose {what}"
    )
    assert called["c1"].is_error
    assert called["c2"].result == "7"


async def test_a_resume_is_round_1_and_the_model_round_after_it_round_2() -> None:
    seen: list[tuple[str, int]] = []

    async def record(context: ToolContext, call_next: CallNext) -> ToolCalled:
        seen.append((context.call.id, context.round))
        return await call_next(context)

    @tool(requires_approval=True)
    async def guarded(a: int) -> int:
        """Needs a human."""
        return a

    first = ScriptedChatClient([tool_calls_response(ToolCall("r", "guarded", '{"a": 1}'))])
    paused = await run_to_completion(FunctionInvokingChatClient(first, [guarded]), USER)
    (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    second = ScriptedChatClient(
        [tool_calls_response(ToolCall("m", "add", '{"a": 1, "b": 1}')), "done"]
    )
    agent = FunctionInvokingChatClient(second, [guarded, add], middleware=[record])
    options = RunOptions(tool_approval_responses=[request.approve()])
    await run_to_completion(agent, [*USER, *paused.messages], options)
    assert seen == [("r", 1), ("m", 2)]


async def test_calls_that_are_not_run_never_reach_the_middleware() -> None:
    reached: list[str] = []

    async def record(context: ToolContext, call_next: CallNext) -> ToolCalled:
        reached.append(context.call.id)
        return await call_next(context)

    batch = [
        ToolCall("unknown", "nope", "{}"),
        ToolCall("bad-json", "add", "{"),
        ToolCall("invalid", "add", '{"a": "x", "b": 1}'),
        ToolCall("ok", "add", '{"a": 1, "b": 1}'),
        ToolCall("over-budget", "add", '{"a": 1, "b": 1}'),
    ]
    called = await results_of([record], batch, max_tool_calls=4)
    assert reached == ["ok"]
    assert (
        called["over-budget"].result == "Error: not run: this run's budget of tool calls is spent"
    )
    reached.clear()
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("x", "add", '{"a": 1, "b": 1}')),
            tool_calls_response(ToolCall("w", "add", '{"a": 1, "b": 1}')),  # tools withheld
            "answer",
        ]
    )
    agent = FunctionInvokingChatClient(
        model, [add], middleware=[record], max_rounds=1, on_max_rounds="answer"
    )
    result = await run_to_completion(agent, USER)
    assert reached == ["x"]
    (withheld,) = [u for u in result.updates if isinstance(u, ToolCalled) and u.call.id == "w"]
    assert withheld.result == "Error: not run: the round limit is reached"


async def test_approval_comes_before_the_chain() -> None:
    reached: list[str] = []

    async def record(context: ToolContext, call_next: CallNext) -> ToolCalled:
        reached.append(context.call.id)
        return await call_next(context)

    guarded = ApprovalRequiredTool(add)
    batch = calls(("yes", "add", {"a": 1, "b": 1}), ("no", "add", {"a": 2, "b": 2}))
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([tool_calls_response(*batch), "done"]), [guarded], middleware=[record]
    )
    paused = await run_to_completion(agent, USER)
    assert reached == []
    requests = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
    answers = [requests[0].approve(), requests[1].reject("no thanks")]
    resumed = await run_to_completion(
        agent, [*USER, *paused.messages], RunOptions(tool_approval_responses=answers)
    )
    assert reached == ["yes"]
    called = {u.call.id: u for u in resumed.updates if isinstance(u, ToolCalled)}
    assert called["no"].result == "Error: the user rejected this call: no thanks"


async def test_the_chain_runs_inside_the_time_limit_and_the_concurrency_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    running = 0
    peak = 0

    async def slow_middleware(context: ToolContext, call_next: CallNext) -> ToolCalled:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await trio.sleep(1)
            return await call_next(context)
        finally:
            running -= 1

    batch = calls(*((f"c{i}", "slow", {"seconds": 1}) for i in range(4)))
    called = await results_of(
        [slow_middleware], batch, tools=[slow], tool_timeout=1.5, max_concurrency=2
    )
    assert peak == 2
    assert {c.result for c in called.values()} == {"Error: tool 'slow' timed out after 1.5 s"}


async def test_a_cancelled_call_cancels_the_chain(autojump_clock: trio.testing.MockClock) -> None:
    outcome: list[str] = []

    async def watch(context: ToolContext, call_next: CallNext) -> ToolCalled:
        try:
            return await call_next(context)
        except trio.Cancelled:
            outcome.append("cancelled")
            raise

    scope = trio.CancelScope()
    scope.deadline = trio.current_time() + 0.5
    model = ScriptedChatClient(script(*calls(("c1", "slow", {"seconds": 5}))))
    agent = FunctionInvokingChatClient(model, [slow], middleware=[watch])
    result = await run_to_completion(agent, USER, RunOptions(cancel_scope=scope))
    assert outcome == ["cancelled"]
    assert [m.content for m in result.messages if m.tool_call_id] == ["Error: cancelled"]


async def test_run_options_replace_the_clients_middleware() -> None:
    async def tag(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return attrs.evolve(await call_next(context), result="tagged")

    batch = calls(("c1", "add", {"a": 1, "b": 1}))
    agent = FunctionInvokingChatClient(ScriptedChatClient(script(*batch) * 2), [add])
    plain = await run_to_completion(agent, USER, RunOptions(middleware=[tag]))
    assert [m.content for m in plain.messages if m.tool_call_id] == ["tagged"]
    agent = FunctionInvokingChatClient(ScriptedChatClient(script(*batch)), [add], middleware=[tag])
    none = await run_to_completion(agent, USER, RunOptions(middleware=()))
    assert [m.content for m in none.messages if m.tool_call_id] == ["2"]


@pytest.mark.parametrize("bad", [42, "mw", [None], [1, 2]])
def test_middleware_that_is_not_callable_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="middleware"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [add], middleware=bad)


async def _lone(context: ToolContext, call_next: CallNext) -> ToolCalled:
    return await call_next(context)  # pragma: no cover


@pytest.mark.parametrize("bad", [_lone, 42, [None], ["mw"]])
async def test_run_options_middleware_that_is_not_a_sequence_of_middleware_is_a_type_error(
    bad: Any,
) -> None:
    # A single middleware where a sequence belongs is named as such (not "'function' object is
    # not iterable"), as the client's own argument is.
    agent = FunctionInvokingChatClient(ScriptedChatClient(script()), [add])
    with pytest.raises(TypeError, match="middleware"):
        await run_to_completion(agent, USER, RunOptions(middleware=bad))
