"""ScriptedChatClient, the embedded model."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    RunOptions,
    ScriptedChatClient,
    ScriptExhaustedError,
    TextDelta,
)
from trio_invoke.testing import run_to_completion

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


async def test_delay_between_updates(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedChatClient(["x"], delay=0.5)
    start = trio.current_time()
    await run_to_completion(model, USER)
    assert trio.current_time() - start == pytest.approx(1.0)
