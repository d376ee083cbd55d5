"""Property: whatever the model streams, the tools do and when the run is cancelled, every
assistant tool call is answered by exactly one tool message, in call order."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    ToolCalled,
    Usage,
)
from trio_invoke.testing import assert_transcript_valid, scripted_rounds

USER = [ChatMessage.user("go")]


class AnyArgsTool:
    """A tool that accepts any object and then succeeds, raises, or takes its time."""

    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012
    requires_approval = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = f"A tool that {name}."

    async def execute(self, arguments: dict[str, Any]) -> Any:
        if self.name == "fails":
            raise ValueError("it failed")
        if self.name == "sleeps":
            await trio.sleep(1.5)
        return arguments


TOOLS = [AnyArgsTool("succeeds"), AnyArgsTool("fails"), AnyArgsTool("sleeps")]


def expected_usage(script: list[list[Any]], rounds_used: int) -> Usage | None:
    usages = [u.usage for r in script[:rounds_used] for u in r if isinstance(u, Finish) and u.usage]
    return sum(usages[1:], usages[0]) if usages else None


@given(
    script=scripted_rounds(TOOLS),
    max_rounds=st.integers(1, 5),
    cancel_after=st.none() | st.floats(0, 6),
    break_after=st.none() | st.integers(0, 30),
    consumer_delay=st.sampled_from([0, 0, 0.05, 0.3]),
)
def test_transcript_is_valid_whatever_happens(
    script: list[list[Any]],
    max_rounds: int,
    cancel_after: float | None,
    break_after: int | None,
    consumer_delay: float,
) -> None:
    async def main() -> None:
        model = ScriptedChatClient(script, delay=0.1)
        client = FunctionInvokingChatClient(model, TOOLS, max_rounds=max_rounds)
        scope = trio.CancelScope()
        if cancel_after is not None:
            scope.deadline = trio.current_time() + cancel_after
        updates: list[Any] = []
        with trio.fail_after(1000):
            async with client.run(USER, RunOptions(cancel_scope=scope)) as stream:
                async for update in stream:
                    updates.append(update)
                    if break_after is not None and len(updates) > break_after:
                        break
                    await trio.sleep(consumer_delay)
        messages = stream.messages
        assert_transcript_valid([*USER, *messages])
        if break_after is not None and len(updates) > break_after:
            return  # left early: the updates were cut, the transcript must still hold
        tool_messages = {m.tool_call_id: m.content for m in messages if m.role is MessageRole.TOOL}
        called = [u for u in updates if isinstance(u, ToolCalled)]
        assert len({c.call.id for c in called}) == len(called)  # one ToolCalled per call
        assert {c.call.id: c.result for c in called} == tool_messages
        last = updates[-1]
        if scope.cancelled_caught:
            assert last == Error("cancelled")
            return
        assert isinstance(last, Finish)
        assert last.usage == expected_usage(script, len(model.calls))
        if len(script) > max_rounds:
            assert last.finish_reason is FinishReason.MAX_ROUNDS
        else:
            assert last.finish_reason is script[-1][-1].finish_reason
            final = "".join(u.text for u in script[-1] if hasattr(u, "text"))
            if final:  # an empty answer adds no message
                assert messages[-1] == ChatMessage.assistant(final)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
