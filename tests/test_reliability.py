"""The reliability suite: random runs of the loop with every control turned, checked after each.

Each example draws a scripted model (rounds of calls with valid, empty and broken arguments and
unknown tools), tools that succeed, raise, take their time, hang or need approval, the loop's
options (timeouts, concurrency, sequential and eager modes, budgets, the round cap and its mode),
a cancellation point (the run's cancel scope, or leaving the ``async with``), a consumer speed,
approval decisions for every pause, and text that is not valid Unicode (lone surrogates in the
model's text, in tool results as ``os.listdir`` gives them, and in replacement arguments). After
every run it checks that every assistant tool call has exactly one tool message in call order,
that no tool task outlives the run, that every ``ToolCalled`` matches a tool message and back,
that the usage adds up, and that every message converts to valid UTF-8 (exactly, for valid
text). All on a virtual clock, so thousands of cases fit in CI time (``RELIABILITY_EXAMPLES``
sets how many; 2,000 by default).
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_invoke import (
    CallNext,
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    TextDelta,
    ToolApprovalRequest,
    ToolCalled,
    ToolContext,
    Usage,
)
from trio_invoke._approval import pending_calls
from trio_invoke._text import wire_text
from trio_invoke.testing import assert_transcript_valid, scripted_rounds

USER = [ChatMessage.user("go")]


class Probe:
    """Counts tool executions that are running right now."""

    live = 0


class ChaosTool:
    """Accepts any object; then succeeds, raises, sleeps, hangs, returns text that is not valid
    Unicode (lone surrogates, as ``os.listdir`` gives for non-UTF-8 names) or raises an interrupt,
    by its name."""

    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    def __init__(self, name: str, *, requires_approval: bool = False) -> None:
        self.name = name
        self.description = f"A tool that {name}."
        self.requires_approval = requires_approval

    async def execute(self, arguments: dict[str, Any]) -> Any:
        Probe.live += 1
        try:
            if self.name == "fails":
                raise RuntimeError("boom")
            if self.name == "sleeps":
                await trio.sleep(2)
            if self.name == "hangs":
                await trio.sleep_forever()
            if self.name == "mangles":
                return f"caf\udce9 {arguments}\ud800"
            if self.name == "interrupts":
                await trio.sleep(0.5)
                raise Interrupted
            return arguments
        finally:
            Probe.live -= 1


class Interrupted(BaseException):
    """An interrupt of the test's own (a KeyboardInterrupt would also stop pytest's runner)."""


TOOLS = [
    ChaosTool("succeeds"),
    ChaosTool("mangles"),
    ChaosTool("interrupts"),
    ChaosTool("fails"),
    ChaosTool("sleeps"),
    ChaosTool("hangs"),
    ChaosTool("guarded", requires_approval=True),
]
SURROGATES = ["\udcff", "\ud83d", "\ude00", "\ud800\udbff"]


def with_surrogates(script: list[list[Any]], every: int | None) -> list[list[Any]]:
    """``script`` with a lone surrogate added to every ``every``-th text delta."""
    if every is None:
        return script
    deltas = 0
    mangled: list[list[Any]] = []
    for response in script:
        items: list[Any] = []
        for item in response:
            if isinstance(item, TextDelta):
                deltas += 1
                if deltas % every == 0:
                    item = attrs.evolve(item, text=item.text + SURROGATES[deltas % 4])  # noqa: PLW2901
            items.append(item)
        mangled.append(items)
    return mangled


async def passes(context: ToolContext, call_next: CallNext) -> ToolCalled:
    return await call_next(context)


async def tags(context: ToolContext, call_next: CallNext) -> ToolCalled:
    await trio.sleep(0.1)
    called = await call_next(context)
    return attrs.evolve(called, result=f"[tagged] {called.result}")


async def answers_succeeds_itself(context: ToolContext, call_next: CallNext) -> ToolCalled:
    if context.tool.name == "succeeds":
        return ToolCalled(context.call, "from the middleware", is_error=False)
    return await call_next(context)


async def fails_for_sleeps(context: ToolContext, call_next: CallNext) -> ToolCalled:
    if context.tool.name == "sleeps":
        raise RuntimeError("middleware failure")
    return await call_next(context)


async def stops_after_fails(context: ToolContext, call_next: CallNext) -> ToolCalled:
    called = await call_next(context)
    if context.tool.name == "fails":
        raise StopLoop("stopped by middleware")
    return called


MIDDLEWARE = [
    (),
    (passes,),
    (tags, passes),
    (answers_succeeds_itself,),
    (fails_for_sleeps, tags),
    (stops_after_fails,),
]

configs = st.fixed_dictionaries(
    {
        "max_rounds": st.integers(1, 5),
        "on_max_rounds": st.sampled_from(["finish", "answer"]),
        "tool_timeout": st.sampled_from([0.5, 3.0, 10.0]),
        "max_concurrency": st.sampled_from([None, 1, 2]),
        "sequential": st.booleans(),
        "max_tool_calls": st.sampled_from([None, 0, 2, 5]),
        "max_consecutive_errors": st.sampled_from([None, 1, 3]),
        "include_detailed_errors": st.booleans(),
        "eager_tools": st.booleans(),
        "approval": st.sampled_from(["batch", "per_call"]),
        "middleware": st.sampled_from(MIDDLEWARE),
    }
)
decisions = st.sampled_from(["approve", "reject", "replace"])


def assert_valid_or_paused(conversation: list[ChatMessage]) -> None:
    """Valid, or paused for approval: then the trailing calls without a tool message include a
    call that needs approval."""
    pending = pending_calls(conversation)
    assert not pending or any(call.name == "guarded" for call in pending), pending
    assert_transcript_valid(conversation, allow_pending_approval=True)


def usage_of(script: list[list[Any]], first: int, last: int) -> Usage | None:
    usages = [u.usage for r in script[first:last] for u in r if isinstance(u, Finish) and u.usage]
    return sum(usages[1:], usages[0]) if usages else None


@pytest.mark.slow  # 2,000 examples: about 40 s on 2 cores
@settings(
    max_examples=int(os.environ.get("RELIABILITY_EXAMPLES", "2000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    script=scripted_rounds(TOOLS, max_rounds=5),
    config=configs,
    cancel_after=st.none() | st.floats(0, 8),
    break_after=st.none() | st.integers(0, 40),
    consumer_delay=st.sampled_from([0, 0, 0.05, 0.7]),
    answers=st.lists(decisions, min_size=8, max_size=8),
    surrogate_every=st.none() | st.integers(1, 3),
)
def test_random_runs_keep_every_invariant(  # noqa: PLR0917 -- one argument per drawn dimension
    script: list[list[Any]],
    config: dict[str, Any],
    cancel_after: float | None,
    break_after: int | None,
    consumer_delay: float,
    answers: list[str],
    surrogate_every: int | None,
) -> None:
    script = with_surrogates(script, surrogate_every)

    async def one_run(
        client: FunctionInvokingChatClient,
        model: ScriptedChatClient,
        conversation: list[ChatMessage],
        options: RunOptions,
    ) -> tuple[list[ChatMessage], Any, bool]:
        """Run once, check the invariants; return the new messages, the last update and
        whether the caller left early."""
        first_call = len(model.calls)
        updates: list[Any] = []
        left = interrupted = False
        try:
            async with client.run(conversation, options) as stream:
                async for update in stream:
                    updates.append(update)
                    if break_after is not None and len(updates) > break_after:
                        left = True
                        break
                    await trio.sleep(consumer_delay)
        except Interrupted:  # bare, never in a group; only a tool that interrupts raises it
            interrupted = True
            made = [c.name for m in [*conversation, *stream.messages] for c in m.tool_calls or ()]
            assert "interrupts" in made
        assert Probe.live == 0, "a tool task outlived the run"
        assert not trio.lowlevel.current_task().child_nurseries
        added = stream.messages
        if interrupted:
            assert not any(isinstance(u, Finish | Error) for u in updates)
            return added, None, True
        if left:
            return added, None, True
        tool_messages = {m.tool_call_id: m.content for m in added if m.role is MessageRole.TOOL}
        called = [u for u in updates if isinstance(u, ToolCalled)]
        assert len({c.call.id for c in called}) == len(called)
        assert {c.call.id: c.result for c in called} == tool_messages
        last = updates[-1]
        assert isinstance(last, Finish | Error)
        if isinstance(last, Finish):
            assert last.usage == usage_of(script, first_call, len(model.calls))
        return added, last, False

    async def main() -> None:
        Probe.live = 0
        model = ScriptedChatClient([*script, "done", "done", "done", "done", "done", "done"])
        client = FunctionInvokingChatClient(model, TOOLS, **config)
        scope = trio.CancelScope()
        if cancel_after is not None:
            scope.deadline = trio.current_time() + cancel_after
        conversation = list(USER)
        options = RunOptions(cancel_scope=scope)
        with trio.fail_after(10_000):
            for answer in answers:
                added, last, left = await one_run(client, model, conversation, options)
                conversation += added
                if left or not isinstance(last, Finish):
                    break
                if last.finish_reason is not FinishReason.AWAITING_APPROVAL:
                    break
                pending = pending_calls(conversation)
                responses = []
                for call in pending:
                    if call.name != "guarded":
                        continue
                    request = ToolApprovalRequest(call)
                    if answer == "approve":
                        responses.append(request.approve())
                    elif answer == "reject":
                        responses.append(request.reject("no"))
                    else:
                        responses.append(request.approve(arguments={"edited": "\udcff"}))
                scope = trio.CancelScope()  # a scope serves one run
                options = RunOptions(cancel_scope=scope, tool_approval_responses=responses)
        assert_valid_or_paused(conversation)
        for message in conversation:  # text that is not valid Unicode survives the wire format
            data = message.to_dict()  # as it is sent: pairs joined, lone surrogates U+FFFD
            json.dumps(data, ensure_ascii=False).encode("utf-8")  # never a UnicodeEncodeError
            restored = ChatMessage.from_dict(data)
            assert restored.to_dict() == data
            assert restored.content == wire_text(message.content)
            if wire_text(message.content) is message.content and not message.tool_calls:
                assert restored == message  # valid text: exact

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
