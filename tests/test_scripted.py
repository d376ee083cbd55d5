"""ScriptedChatClient, the embedded model."""

from __future__ import annotations

import math
import re
import traceback
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    RunOptions,
    ScriptedChatClient,
    ScriptExhaustedError,
    TextDelta,
    ToolCall,
)
from trio_invoke.testing import FunctionChatClient, run_to_completion

USER = [ChatMessage.user("hi")]


async def test_replays_each_response_in_turn_and_records_calls() -> None:
    model = ScriptedChatClient(["one", [TextDelta("t"), Finish(FinishReason.LENGTH)]])
    options = RunOptions()
    first = await run_to_completion(model, USER, options)
    second = await run_to_completion(model, [*USER, ChatMessage.assistant("one")])
    assert first.updates == (TextDelta("one"), Finish(FinishReason.STOP))
    assert second.updates == (TextDelta("t"), Finish(FinishReason.LENGTH))
    assert [len(c.messages) for c in model.calls] == [1, 2]
    assert model.calls[0].options is options
    assert model.calls[1].options == RunOptions()
    assert first.messages == ()  # a plain chat client has no .messages


async def test_a_call_past_the_script_is_a_clear_error() -> None:
    model = ScriptedChatClient(["only"])
    await run_to_completion(model, USER)
    with pytest.raises(ScriptExhaustedError, match="1 scripted responses and was called 2 times"):
        await run_to_completion(model, USER)
    assert len(model.calls) == 2


async def test_an_exception_in_the_script_is_raised_where_it_stands() -> None:
    model = ScriptedChatClient([[TextDelta("a"), OSError("reset"), TextDelta("b")]])
    seen = []
    with pytest.raises(OSError, match="reset"):
        async with model.run(USER) as updates:
            async for update in updates:
                seen.append(update)
    assert seen == [TextDelta("a")]


async def test_an_exception_shared_by_scripts_keeps_one_raises_traceback() -> None:
    # A module-level script is replayed once per example of a property test: each raise of its
    # exception starts a new traceback, not one that grows (and keeps every run's frames alive).
    script = [[TextDelta("a"), OSError("reset")]]
    depths = []
    for _ in range(3):
        for model in (ScriptedChatClient(script), FunctionChatClient(lambda m, o: script[0])):
            with pytest.raises(OSError, match="reset") as info:
                await run_to_completion(model, USER)
            depths.append(len(traceback.extract_tb(info.value.__traceback__)))
    assert depths == [depths[0]] * 6


async def test_delay_between_updates(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedChatClient(["x"], delay=0.5)
    start = trio.current_time()
    await run_to_completion(model, USER)
    assert trio.current_time() - start == pytest.approx(1.0)


# -- scripts that cannot be replayed: a TypeError at construction --------------------------------


BAD_ITEMS: list[object] = [
    None,
    {"text": "hi"},
    42,
    1.5,
    b"bytes",
    ["nested", "list"],
    ChatMessage.assistant("a message, not an update"),
    ToolCall("c1", "t", "{}"),
    object(),
]


@pytest.mark.parametrize("bad", BAD_ITEMS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize(
    ("script", "response", "item"),
    [
        (lambda bad: [[bad]], 0, 0),
        (lambda bad: [[TextDelta("a"), bad, Finish(FinishReason.STOP)]], 0, 1),
        (lambda bad: ["fine", [Finish(FinishReason.STOP), OSError("x"), bad]], 1, 2),
        (lambda bad: ["a", "b", ("c", bad)], 2, 1),
    ],
)
def test_an_item_that_is_not_an_update_is_a_type_error_naming_where(
    bad: object, script: Any, response: int, item: int
) -> None:
    with pytest.raises(TypeError) as info:
        ScriptedChatClient(script(bad))
    message = str(info.value)
    assert message.startswith(f"ScriptedChatClient response {response}, item {item}, is ")
    described = "None" if bad is None else f"a {type(bad).__name__} ("
    assert described in message
    assert "not an update" in message


def test_an_exception_class_in_a_script_says_to_put_an_instance() -> None:
    with pytest.raises(TypeError, match=r"item 0, is the exception class OSError; .* OSError\("):
        ScriptedChatClient([[OSError]])


@pytest.mark.parametrize(
    ("response", "kind"),
    [(None, "None"), (42, "a int"), ({"role": "assistant"}, "a dict"), (b"hi", "a bytes")],
)
def test_a_response_that_is_not_a_list_is_a_type_error(response: object, kind: str) -> None:
    with pytest.raises(TypeError, match=rf"^ScriptedChatClient response 1 is {kind}\b"):
        ScriptedChatClient(["ok", response])  # type: ignore[list-item]


def test_a_flat_list_of_updates_says_to_wrap_it() -> None:
    with pytest.raises(
        TypeError, match=r"response 0 is a TextDelta .* ScriptedChatClient\(\[\["
    ) as info:
        ScriptedChatClient([TextDelta("hi"), Finish(FinishReason.STOP)])  # type: ignore[list-item]
    assert "put its updates in a list of their own" in str(info.value)


@pytest.mark.parametrize("responses", ["hello", None, {"a": ["x"]}, 3])
def test_responses_must_be_a_list_of_responses(responses: object) -> None:
    with pytest.raises(TypeError, match="ScriptedChatClient takes a list of responses, not "):
        ScriptedChatClient(responses)  # type: ignore[arg-type]


async def test_strings_exceptions_and_every_update_kind_are_fine() -> None:
    from trio_invoke import (
        Error,
        ToolApprovalRequest,
        ToolCallArgs,
        ToolCalled,
        ToolCallEnd,
        ToolCallStart,
    )

    call = ToolCall("c1", "t", "{}")
    script = [
        TextDelta("a"),
        "b",  # short for TextDelta("b")
        ToolCallStart("c1", "t"),
        ToolCallArgs("c1", "{}"),
        ToolCallEnd("c1"),
        ToolApprovalRequest(call),
        ToolCalled(call, "r", is_error=False),
        Error("e"),
        Finish(FinishReason.STOP),
    ]
    model = ScriptedChatClient([script])
    result = await run_to_completion(model, USER)
    assert result.updates == (script[0], TextDelta("b"), *script[2:])


@pytest.mark.parametrize("delay", [-1, -0.5, math.nan, math.inf, "0.1", None, True])
def test_a_bad_delay_is_a_configuration_error(delay: object) -> None:
    with pytest.raises(ConfigurationError, match=f"delay must be a finite number .*got {delay!r}"):
        ScriptedChatClient(["x"], delay=delay)  # type: ignore[arg-type]


good_items = st.one_of(
    st.text(max_size=5),
    st.builds(TextDelta, st.text(max_size=5)),
    st.just(Finish(FinishReason.STOP)),
)
bad_items = st.sampled_from(BAD_ITEMS)


@given(
    st.lists(st.lists(good_items, max_size=5), min_size=1, max_size=4),
    bad_items,
    st.data(),
)
def test_one_bad_item_anywhere_is_found_and_named(
    script: list[list[object]], bad: object, data: st.DataObject
) -> None:
    ScriptedChatClient([list(r) for r in script])  # type: ignore[arg-type] -- all fine
    response = data.draw(st.integers(0, len(script) - 1))
    item = data.draw(st.integers(0, len(script[response])))
    script[response].insert(item, bad)
    with pytest.raises(TypeError, match=f"^ScriptedChatClient response {response}, item {item}, "):
        ScriptedChatClient(script)  # type: ignore[arg-type]


async def test_a_long_response_yields_to_the_scheduler_every_64_updates() -> None:
    # So a deadline (or a cancel) around a long stream fires; a short one has no schedule point.
    client = ScriptedChatClient([["x"] * 1000 + [Finish(FinishReason.STOP)], ["x"] * 63])
    seen = 0
    async with client.run(USER) as stream:
        with trio.CancelScope() as scope:
            scope.cancel()
            async for _ in stream:
                seen += 1
    assert scope.cancelled_caught
    assert seen == 63  # the 64th update waits for a checkpoint, which the cancel stops
    async with client.run(USER) as stream:
        with trio.testing.assert_no_checkpoints():
            assert len([u async for u in stream]) == 63


async def test_a_deadline_around_a_long_scripted_run_fires() -> None:
    client = ScriptedChatClient([["x"] * 300_000 + [Finish(FinishReason.STOP)]])
    with trio.move_on_after(0.01) as scope:  # the stream is all CPU: a real deadline
        await run_to_completion(client, USER)
    assert scope.cancelled_caught


# -- misuse a real client would refuse is refused by the doubles too ------------------------------


DOUBLES = {
    "scripted": lambda: ScriptedChatClient(["one", "two"]),
    "function": lambda: FunctionChatClient(lambda messages, options: "answer"),
}


@pytest.mark.parametrize("double", sorted(DOUBLES))
@pytest.mark.parametrize(
    ("messages", "says"),
    [
        ("hello", "for messages, not a str ('hello')"),
        (None, "for messages, not None"),
        (ChatMessage.user("hi"), "for messages, not a ChatMessage"),
        ([{"role": "user", "content": "hi"}], "messages[0] is a dict"),
    ],
)
async def test_a_call_on_what_is_no_conversation_is_a_type_error(
    double: str, messages: object, says: str
) -> None:
    client = DOUBLES[double]()
    # A str was taken as a conversation of one-letter "messages" (recorded so), which a test
    # of the user's own code would never notice: the real clients refuse it.
    with pytest.raises(TypeError, match=re.escape(says)):
        async with client.run(messages):
            pass
    assert client.calls == []


@pytest.mark.parametrize("double", sorted(DOUBLES))
async def test_a_call_with_options_that_are_no_run_options_is_a_type_error(double: str) -> None:
    client = DOUBLES[double]()
    with pytest.raises(TypeError, match=r"takes a RunOptions or None for options, not a dict"):
        async with client.run(USER, {"tool_choice": "none"}):
            pass


@pytest.mark.parametrize("double", sorted(DOUBLES))
async def test_a_stream_read_after_its_block_was_left_is_an_error(double: str) -> None:
    client = DOUBLES[double]()
    # As a real client's response is closed when its block is left, reading it then is an
    # error, not a replay that goes on as if the call were still open.
    async with client.run(USER) as stream:
        first = await stream.__anext__()
    assert first == TextDelta(first.text)
    with pytest.raises(RuntimeError, match="read after its `async with` block was left"):
        await stream.__anext__()
