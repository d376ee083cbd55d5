"""FunctionChatClient: a chat client whose responses come from a function of the messages."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from types import MappingProxyType
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ChatClient,
    ChatClientError,
    ChatMessage,
    ConfigurationError,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    TextDelta,
    ToolCall,
    ToolCalled,
    Usage,
    tool,
)
from trio_invoke.testing import (
    FunctionChatClient,
    ScriptedChatClient,
    assert_transcript_valid,
    run_to_completion,
    scripted_rounds,
    tool_calls_response,
)

USER = [ChatMessage.user("hi")]


async def test_a_string_is_a_text_answer_and_calls_are_recorded() -> None:
    model = FunctionChatClient(lambda messages, options: f"{len(messages)} messages")
    options = RunOptions(model_options={"seed": 1})
    first = await run_to_completion(model, USER, options)
    second = await run_to_completion(model, [*USER, ChatMessage.assistant("1 messages")])
    assert first.updates == (TextDelta("1 messages"), Finish(FinishReason.STOP))
    assert second.updates == (TextDelta("2 messages"), Finish(FinishReason.STOP))
    assert first.messages == ()
    assert model.calls[0].messages == tuple(USER)
    assert type(model.calls[0].messages) is tuple
    assert model.calls[0].options is options
    assert model.calls[1].options == RunOptions()
    assert isinstance(model, ChatClient)


async def test_an_async_function_returning_updates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> list[Any]:
        await trio.sleep(2)
        return [TextDelta("a"), TextDelta("b"), Finish(FinishReason.LENGTH, Usage(1, 2))]

    start = trio.current_time()
    result = await run_to_completion(FunctionChatClient(respond), USER)
    assert trio.current_time() - start == pytest.approx(2)
    assert result.updates == (
        TextDelta("a"),
        TextDelta("b"),
        Finish(FinishReason.LENGTH, Usage(1, 2)),
    )


async def test_an_async_function_returning_a_string() -> None:
    async def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> str:
        await trio.lowlevel.checkpoint()
        return "ok"

    result = await run_to_completion(FunctionChatClient(respond), USER)
    assert result.updates == (TextDelta("ok"), Finish(FinishReason.STOP))


async def test_a_generator_is_read_as_the_stream_is() -> None:
    produced: list[str] = []

    def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> Iterator[Any]:
        for text in ("one", "two"):
            produced.append(text)
            yield TextDelta(text)

    async with FunctionChatClient(respond).run(USER) as stream:
        iterator = aiter(stream)
        assert await anext(iterator) == TextDelta("one")
        assert produced == ["one"]


async def test_an_exception_among_the_updates_is_raised_where_it_stands() -> None:
    model = FunctionChatClient(lambda m, o: [TextDelta("a"), OSError("reset"), TextDelta("b")])
    seen = []
    with pytest.raises(OSError, match="reset"):
        async with model.run(USER) as updates:
            async for update in updates:
                seen.append(update)
    assert seen == [TextDelta("a")]


async def test_a_raising_function_is_a_failing_model() -> None:
    def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> str:
        raise ConnectionError("model down")

    model = FunctionChatClient(respond)
    with pytest.raises(ConnectionError, match="model down"):
        await run_to_completion(model, USER)
    assert len(model.calls) == 1  # recorded before the function ran
    with pytest.raises(ChatClientError, match="model down") as info:
        await run_to_completion(FunctionInvokingChatClient(model), USER)
    assert isinstance(info.value.__cause__, ConnectionError)


@pytest.mark.parametrize("value", [None, 42, TextDelta("x")])
async def test_a_response_of_the_wrong_type_is_a_clear_error(value: object) -> None:
    model = FunctionChatClient(lambda messages, options: value)  # type: ignore[arg-type,return-value]
    expected = f"must return a str or an iterable .* not {type(value).__name__}: it returned "
    with pytest.raises(TypeError, match=expected):
        await run_to_completion(model, USER)


async def test_delay_between_updates(autojump_clock: trio.testing.MockClock) -> None:
    model = FunctionChatClient(lambda messages, options: "x", delay=0.5)
    start = trio.current_time()
    await run_to_completion(model, USER)
    assert trio.current_time() - start == pytest.approx(1.0)


async def test_cancelling_an_async_function_keeps_the_call_recorded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    model = FunctionChatClient(respond)
    with trio.move_on_after(5) as scope:
        await run_to_completion(model, USER)
    assert scope.cancelled_caught
    assert len(model.calls) == 1


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return {"door": "found: under the mat"}.get(key, "nothing")


async def test_conditional_answers_under_the_loop() -> None:
    def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> Any:
        assert [t.name for t in options.tools] == ["lookup"]
        last = messages[-1]
        if last.role is MessageRole.TOOL:
            return "It is under the mat." if last.content.startswith("found") else "No idea."
        key = "door" if "door" in last.content else "car"
        return tool_calls_response(ToolCall("c1", "lookup", f'{{"key": "{key}"}}'))

    agent = FunctionInvokingChatClient(FunctionChatClient(respond), [lookup])
    for question, answer in [("door key?", "It is under the mat."), ("car key?", "No idea.")]:
        conversation = [ChatMessage.user(question)]
        result = await run_to_completion(agent, conversation)
        assert result.messages[-1] == ChatMessage.assistant(answer)
        assert [u.call.name for u in result.updates if isinstance(u, ToolCalled)] == ["lookup"]
        assert_transcript_valid([*conversation, *result.messages])


# -- what the function returns must be a response ------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"role": "assistant", "content": "hi"}, "dict"),
        ({}, "dict"),
        (MappingProxyType({"a": 1}), "mappingproxy"),
        (b"bytes", "bytes"),
        (bytearray(b"x"), "bytearray"),
        (3.5, "float"),
        (Finish(FinishReason.STOP), "Finish"),
    ],
)
async def test_a_dict_or_other_non_response_is_a_type_error_naming_it(
    value: object, kind: str
) -> None:
    for function in (lambda m, o: value, _async_returning(value)):
        model = FunctionChatClient(function)  # type: ignore[arg-type]
        seen: list[object] = []
        with pytest.raises(TypeError, match=f"not {kind}: it returned ") as info:
            async with model.run(USER) as updates:
                seen.extend([u async for u in updates])
        assert seen == []  # a dict's keys are never streamed
        assert repr(value)[:20] in str(info.value)


def _async_returning(value: object) -> Any:
    async def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> object:
        await trio.lowlevel.checkpoint()
        return value

    return respond


@pytest.mark.parametrize(
    ("items", "index", "kind"),
    [
        ([None], 0, "None"),
        ([TextDelta("a"), {"text": "b"}], 1, "a dict ("),
        ((TextDelta("a"), Finish(FinishReason.STOP), 7), 2, "a int ("),
        ([TextDelta("a"), [TextDelta("b")]], 1, "a list ("),
        ([ValueError], 0, "the exception class ValueError"),
    ],
)
async def test_an_item_that_is_not_an_update_is_a_type_error_before_streaming(
    items: Sequence[object], index: int, kind: str
) -> None:
    model = FunctionChatClient(lambda m, o: items)  # type: ignore[arg-type,return-value]
    seen: list[object] = []
    with pytest.raises(TypeError) as info:
        async with model.run(USER) as updates:
            seen.extend([u async for u in updates])
    assert seen == []
    message = str(info.value)
    assert message.startswith(f"item {index} of what the FunctionChatClient's function returned")
    assert kind in message


async def test_a_generator_item_that_is_not_an_update_fails_where_it_stands() -> None:
    def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> Iterator[object]:
        yield TextDelta("a")
        yield "b"  # short for TextDelta("b")
        yield None  # would once have ended the stream silently
        yield Finish(FinishReason.STOP)

    model = FunctionChatClient(respond)  # type: ignore[arg-type]
    seen: list[object] = []
    with pytest.raises(TypeError, match=r"^item 2 of what .* returned is None, not an update"):
        async with model.run(USER) as updates:
            async for update in updates:
                seen.append(update)
    assert seen == [TextDelta("a"), TextDelta("b")]


async def test_under_the_loop_a_dict_is_a_failing_model_naming_the_dict() -> None:
    model = FunctionChatClient(lambda m, o: {"content": "hi"})  # type: ignore[arg-type,return-value]
    with pytest.raises(ChatClientError) as info:
        await run_to_completion(FunctionInvokingChatClient(model), USER)
    assert isinstance(info.value.__cause__, TypeError)
    assert "not dict" in str(info.value.__cause__)


@pytest.mark.parametrize("function", [None, "respond", 42])
def test_the_function_must_be_callable(function: object) -> None:
    with pytest.raises(TypeError, match="FunctionChatClient needs a function of"):
        FunctionChatClient(function)  # type: ignore[arg-type]


@pytest.mark.parametrize("delay", [-1, math.nan, math.inf, "1"])
def test_a_bad_delay_is_a_configuration_error(delay: object) -> None:
    with pytest.raises(ConfigurationError, match="FunctionChatClient delay must be a finite"):
        FunctionChatClient(lambda m, o: "x", delay=delay)  # type: ignore[arg-type]


async def test_a_long_generator_yields_to_the_scheduler_every_64_updates() -> None:
    # So a deadline around a long (or endless) one -- trio.fail_after in a user's test -- fires.
    def long(messages: object, options: object) -> Iterator[TextDelta]:
        for _ in range(10_000):
            yield TextDelta("x")

    seen = 0
    async with FunctionChatClient(long).run([ChatMessage.user("hi")]) as stream:
        with trio.CancelScope() as scope:
            scope.cancel()
            async for _ in stream:
                seen += 1
    assert (scope.cancelled_caught, seen) == (True, 63)


async def test_a_short_function_response_has_no_schedule_point() -> None:
    client = FunctionChatClient(lambda messages, options: ["x"] * 63)
    async with client.run([ChatMessage.user("hi")]) as stream:
        with trio.testing.assert_no_checkpoints():
            assert len([u async for u in stream]) == 63


def _generator_model(log: list[str]) -> Any:
    def respond(messages: tuple[ChatMessage, ...], options: RunOptions) -> Iterator[Any]:
        try:
            yield TextDelta("one")
            yield TextDelta("two")
            log.append("read to the end")
            yield Finish(FinishReason.STOP)
        finally:
            log.append("closed")

    return respond


async def test_a_generator_left_early_is_closed_on_leaving_run() -> None:
    log: list[str] = []
    async with FunctionChatClient(_generator_model(log)).run(USER) as stream:
        async for _ in stream:
            break
        assert log == []
    assert log == ["closed"]  # now, not when the garbage collector gets to it
    log.clear()
    await run_to_completion(FunctionChatClient(_generator_model(log)), USER)
    assert log == ["read to the end", "closed"]


async def test_a_generator_cancelled_under_the_loop_is_closed_with_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    model = FunctionChatClient(_generator_model(log), delay=1)
    agent = FunctionInvokingChatClient(model)
    scope = trio.CancelScope(deadline=trio.current_time() + 1.5)  # after the first update
    with trio.fail_after(10):
        async with agent.run(USER, RunOptions(cancel_scope=scope)) as stream:
            updates = [update async for update in stream]
            assert log == ["closed"]
    assert updates[-1] == Error("cancelled")


@given(script=scripted_rounds([lookup], max_rounds=4), as_generator=st.booleans())
def test_a_function_replaying_a_script_is_the_scripted_client(
    script: list[list[Any]], as_generator: bool
) -> None:
    # Under the loop, whatever the script: the same updates, messages and calls seen.
    def replay(messages: tuple[ChatMessage, ...], options: RunOptions) -> Any:
        response = script[len(function_model.calls) - 1]
        return iter(response) if as_generator else response

    function_model = FunctionChatClient(replay)
    scripted_model = ScriptedChatClient(script)

    async def main() -> list[Any]:
        return [
            await run_to_completion(FunctionInvokingChatClient(model, [lookup]), USER)
            for model in (function_model, scripted_model)
        ]

    def seen(result: Any) -> tuple[list[Any], list[Any]]:
        # Results come in completion order, which Trio's scheduler may vary; a result's time
        # and exception object are its own.
        called = [
            (u.call.id, u.result, u.is_error) for u in result.updates if type(u) is ToolCalled
        ]
        return [u for u in result.updates if type(u) is not ToolCalled], sorted(called)

    by_function, by_script = trio.run(main)
    assert seen(by_function) == seen(by_script)
    assert by_function.messages == by_script.messages
    assert function_model.calls == scripted_model.calls
    assert_transcript_valid([*USER, *by_function.messages])
