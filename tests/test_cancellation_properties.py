"""Property: the loop's promise under cancellation and failure.

Whatever the model streams (text, reasoning, interleaved calls, unknown tools, broken arguments,
calls that never end, a failure mid-stream), whatever the tools do (return, raise, sleep, hang,
stop the loop, raise a ``ToolError``, a ``Cancelled`` of their own, or a group from a nursery of
their own), whatever the client's options, and wherever the run is cut short (its cancel scope's
deadline, an outer cancellation, a ``break``, an exception of the caller's):

* every tool call in ``stream.messages`` is answered by exactly one tool message, in call order
  (checked by ``assert_transcript_valid`` and by an independent check written here);
* every tool message has one ``ToolCalled``, and every ``ToolCalled`` the caller saw matches one;
* ``Finish`` or ``Error`` comes once, last;
* no task of the run outlives its ``async with``;
* an inner client's exception comes out as a library exception chained to it, never a group;
* a ``KeyboardInterrupt`` always reaches the caller.

And a resume that is cut short leaves a conversation that can be resumed, or sent, again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, note
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from strays import stray_cancelled

from trio_invoke import (
    ApprovalRequiredTool,
    ChatClientError,
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    ReasoningDelta,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCalled,
    ToolCallEnd,
    ToolError,
    TrioInvokeError,
    Usage,
)
from trio_invoke._approval import pending_calls
from trio_invoke.otel import Telemetry
from trio_invoke.testing import assert_transcript_valid, tool_call_streams, tool_call_updates

USER = [ChatMessage.user("go")]


class CallerError(Exception):
    """What the caller raises from inside its ``async for``."""


class ModelFailureError(OSError):
    """What the model raises mid-stream."""


class StrayMarker(Exception):  # noqa: N818 -- a marker, not an error
    """Replaced, in the script, by a Cancelled of the model's own making."""


@attrs.define
class Tally:
    """What the tools of one example did."""

    live: int = 0
    interrupted: bool = False


class BehaviourTool:
    """A tool whose name says what it does."""

    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012
    requires_approval = False

    def __init__(self, name: str, tally: Tally) -> None:
        self.name = name
        self.description = f"A tool that {name}."
        self.tally = tally

    async def execute(self, arguments: dict[str, Any]) -> Any:
        self.tally.live += 1
        try:
            return await self._behave(arguments)
        finally:
            self.tally.live -= 1

    async def _behave(self, arguments: dict[str, Any]) -> Any:
        match self.name:
            case "returns" | "approve":
                return arguments
            case "raises":
                raise ValueError("it failed")
            case "sleeps":
                await trio.sleep(1.5)
                return "slept"
            case "hangs":
                await trio.sleep_forever()
            case "stops":
                raise StopLoop("stopped")
            case "tool_error":
                raise ToolError("try again")
            case "stray":
                raise await stray_cancelled()
            case "nursery_fails":

                async def fail() -> None:
                    await trio.sleep(0.2)
                    raise ValueError("child failed")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(fail)
                    await trio.sleep_forever()
            case "fails_when_cancelled":

                async def child() -> None:
                    try:
                        await trio.sleep_forever()
                    finally:
                        raise ValueError("child failed while cancelled")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(child)
                    await trio.sleep(2.5)
                    nursery.cancel_scope.cancel()
                return "finished"
            case "interrupts":
                self.tally.interrupted = True
                raise KeyboardInterrupt
        raise AssertionError(self.name)


BEHAVIOURS = [
    "returns",
    "raises",
    "sleeps",
    "hangs",
    "stops",
    "tool_error",
    "stray",
    "nursery_fails",
    "fails_when_cancelled",
]


def make_tools(tally: Tally, interrupts: bool) -> list[Any]:
    tools: list[Any] = [BehaviourTool(name, tally) for name in BEHAVIOURS]
    tools.append(ApprovalRequiredTool(BehaviourTool("approve", tally)))
    if interrupts:
        tools.append(BehaviourTool("interrupts", tally))
    return tools


# -- the scripts ----------------------------------------------------------------------------------

_ARGUMENTS = st.sampled_from(['{"a": 1}', "", "{}", '{"a": ', "[1]", '{"x": "\\u00e9"}'])


@st.composite
def tool_round(
    draw: st.DrawFn, names: list[str], serial: Iterator[int], *, unended: bool = True
) -> list[Any]:
    calls = [
        ToolCall(f"call_{next(serial)}", draw(st.sampled_from(names)), draw(_ARGUMENTS))
        for _ in range(draw(st.integers(1, 4)))
    ]
    stream: list[Any] = draw(tool_call_streams(calls))
    if (
        unended and draw(st.integers(0, 5)) == 0
    ):  # a call that never ends: a failing client at Finish
        ends = [i for i, u in enumerate(stream) if isinstance(u, ToolCallEnd)]
        del stream[draw(st.sampled_from(ends))]
    for _ in range(draw(st.integers(0, 2))):
        piece = draw(
            st.builds(TextDelta, st.text(max_size=5))
            | st.builds(ReasoningDelta, st.text(min_size=1, max_size=5))
        )
        stream.insert(draw(st.integers(0, len(stream))), piece)
    usage = draw(st.none() | st.builds(Usage, st.integers(0, 9), st.integers(0, 9)))
    return [*stream, Finish(FinishReason.TOOL_CALLS, usage)]


@st.composite
def scripts(draw: st.DrawFn, names: list[str], interrupts: bool) -> list[list[Any]]:
    serial = iter(range(1, 1000))
    rounds = [draw(tool_round(names, serial)) for _ in range(draw(st.integers(0, 3)))]
    final: list[Any] = [TextDelta(t) for t in draw(st.lists(st.text(max_size=4), max_size=2))]
    rounds.append([*final, Finish(draw(st.sampled_from([FinishReason.STOP, FinishReason.LENGTH])))])
    if draw(st.integers(0, 3)) == 0:  # the model fails mid-stream in some round
        failing = draw(st.sampled_from(rounds))
        kinds = [ModelFailureError, StrayMarker] + ([KeyboardInterrupt] if interrupts else [])
        failure = draw(st.sampled_from(kinds))("connection reset")
        failing.insert(draw(st.integers(0, len(failing) - 1)), failure)
    return rounds


# -- options --------------------------------------------------------------------------------------


async def passthrough(context: Any, call_next: Any) -> ToolCalled:
    called: ToolCalled = await call_next(context)
    return called


async def slow_middleware(context: Any, call_next: Any) -> ToolCalled:
    await trio.sleep(0.3)
    called: ToolCalled = await call_next(context)
    return called


async def raising_middleware(context: Any, call_next: Any) -> ToolCalled:
    if context.call.name == "returns":
        raise RuntimeError("middleware failed")
    called: ToolCalled = await call_next(context)
    return called


class Opened(SpanProcessor):
    """Keeps the spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.open.pop(span.context.span_id, None)


OPTIONS = st.fixed_dictionaries(
    {
        "eager_tools": st.booleans(),
        "sequential": st.booleans(),
        "tool_timeout": st.sampled_from([None, None, 0.5, 3.0]),
        "max_concurrency": st.sampled_from([None, None, 1, 2]),
        "middleware": st.sampled_from(
            [(), (), (passthrough,), (slow_middleware, passthrough), (raising_middleware,)]
        ),
        "approval": st.sampled_from(["batch", "per_call"]),
        "max_rounds": st.integers(1, 4),
        "on_max_rounds": st.sampled_from(["finish", "answer"]),
        "max_consecutive_errors": st.sampled_from([None, 1, 3]),
    }
)

CUTS = st.one_of(
    st.just(("none", 0.0)),
    st.tuples(st.just("deadline"), st.floats(0, 8)),
    st.tuples(st.just("outer"), st.floats(0, 8)),
    st.tuples(st.just("break"), st.integers(0, 40)),
    st.tuples(st.just("raise"), st.integers(0, 40)),
)


# -- the checks -----------------------------------------------------------------------------------


def check_transcript(messages: list[ChatMessage], *, paused: bool) -> None:
    """The invariant, checked independently of ``assert_transcript_valid``: each assistant
    message's calls are answered, each once, by the tool messages right after it, in call order
    (the last one's may stay open when the run paused for approval)."""
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message.role is not MessageRole.TOOL, f"tool message {i} answers nothing"
        i += 1
        ids = [c.id for c in message.tool_calls or ()]
        assert len(ids) == len(set(ids)), ids
        answers = []
        while i < len(messages) and messages[i].role is MessageRole.TOOL:
            answers.append(messages[i].tool_call_id)
            i += 1
        if paused and i == len(messages) and ids:
            it = iter(ids)
            assert all(a in it for a in answers), (ids, answers)  # a subsequence, in order
        else:
            assert answers == ids, (ids, answers)
    json.dumps([m.to_dict() for m in messages])  # can be stored and sent again


def tasks_under(task: trio.lowlevel.Task) -> int:
    return sum(1 + tasks_under(t) for n in task.child_nurseries for t in n.child_tasks)


def check_updates(updates: list[Any], messages: list[ChatMessage], *, whole: bool) -> None:
    """What the caller saw matches the transcript; ``whole``: the caller saw every update."""
    tool_messages = {m.tool_call_id: m.content for m in messages if m.role is MessageRole.TOOL}
    called = [u for u in updates if isinstance(u, ToolCalled)]
    ids = [c.call.id for c in called]
    assert len(ids) == len(set(ids)), f"a call has two ToolCalled: {ids}"
    for c in called:
        assert c.call.id in tool_messages, f"ToolCalled {c.call.id} has no tool message"
        assert tool_messages[c.call.id] == c.content
    if whole:
        assert set(ids) == set(tool_messages), (ids, list(tool_messages))
    ends = [i for i, u in enumerate(updates) if isinstance(u, Finish | Error)]
    assert len(ends) <= 1, ends
    if ends:
        assert ends[0] == len(updates) - 1, "an update came after the run's Finish or Error"
    for update in updates:
        if isinstance(update, Finish):
            assert update.finish_reason is not FinishReason.TOOL_CALLS


@given(
    data=st.data(),
    options=OPTIONS,
    cut=CUTS,
    consumer_delay=st.sampled_from([0, 0, 0.05, 0.7]),
    telemetry=st.booleans(),
    interrupts=st.integers(0, 5).map(lambda n: n == 0),
)
def test_the_loop_keeps_its_promise_whatever_happens(  # noqa: PLR0917 -- one per drawn dimension
    data: st.DataObject,
    options: dict[str, Any],
    cut: tuple[str, float],
    consumer_delay: float,
    telemetry: bool,
    interrupts: bool,
) -> None:
    tally = Tally()
    tools = make_tools(tally, interrupts)
    script = data.draw(
        scripts([t.name for t in tools] + ["no_such_tool"], interrupts), label="script"
    )
    kind, at = cut
    opened = Opened()
    provider = TracerProvider()
    provider.add_span_processor(opened)

    async def main() -> None:
        stray = await stray_cancelled()
        for response in script:
            response[:] = [stray if isinstance(i, StrayMarker) else i for i in response]
        model_interrupt = next(
            (i for r in script for i in r if isinstance(i, KeyboardInterrupt)), None
        )
        model = ScriptedChatClient(script, delay=0.1)
        client = FunctionInvokingChatClient(
            model,
            tools,
            telemetry=Telemetry(tracer_provider=provider) if telemetry else None,
            **options,
        )
        # A tool that hangs is stopped by the run's scope when nothing else cuts the run.
        scope = trio.CancelScope(deadline=trio.current_time() + (at if kind == "deadline" else 500))
        me = trio.lowlevel.current_task()
        before = tasks_under(trio.lowlevel.current_root_task())
        updates: list[Any] = []
        raised: BaseException | None = None
        stream = None
        outer = trio.CancelScope(deadline=trio.current_time() + at if kind == "outer" else 1e9)
        try:
            with trio.fail_after(1000), outer:
                async with client.run(USER, RunOptions(cancel_scope=scope)) as stream:
                    async for update in stream:
                        updates.append(update)
                        if kind == "break" and len(updates) > at:
                            break
                        if kind == "raise" and len(updates) > at:
                            raise CallerError("the caller failed")
                        await trio.sleep(consumer_delay)
        except BaseException as exc:  # checked below
            raised = exc
        note(f"updates={updates!r}")
        note(f"raised={raised!r}")
        # No task of the run outlives the ``async with``, nor does any tool.
        assert not me.child_nurseries
        assert tasks_under(trio.lowlevel.current_root_task()) == before
        assert tally.live == 0
        assert not opened.open, f"spans left open: {opened.open}"
        assert not isinstance(raised, BaseExceptionGroup), repr(raised)
        if tally.interrupted or (model_interrupt and model_interrupt.__traceback__):
            assert isinstance(raised, KeyboardInterrupt), repr(raised)
        elif isinstance(raised, CallerError):
            assert kind == "raise"
        elif isinstance(raised, ChatClientError) and isinstance(
            raised.__cause__, ModelFailureError
        ):
            assert str(raised.__cause__) == "connection reset"
        elif raised is not None:
            assert isinstance(raised, TrioInvokeError), repr(raised)  # StreamProtocolError
        if stream is None:
            return
        messages = stream.messages
        note(f"messages={messages!r}")
        left = kind in ("break", "raise") and len(updates) > at  # the caller left early
        finish = next((u for u in updates if isinstance(u, Finish)), None)
        paused = finish is not None and finish.finish_reason is FinishReason.AWAITING_APPROVAL
        if not paused and (left or outer.cancelled_caught):
            # The run may have paused for approval before the caller left without reading its
            # Finish: a paused transcript then, its pending calls waiting for approval.
            paused = bool(pending_calls(messages)) and any(
                c.name == "approve" for c in pending_calls(messages)
            )
        assert_transcript_valid([*USER, *messages], allow_pending_approval=paused)
        check_transcript([*USER, *messages], paused=paused)
        whole = not left and not outer.cancelled_caught
        whole = whole and (raised is None or isinstance(raised, TrioInvokeError))
        check_updates(updates, messages, whole=whole)
        if whole and raised is None:
            assert isinstance(updates[-1], Finish | Error), updates[-1:]
            if isinstance(updates[-1], Error):
                assert updates[-1] == Error("cancelled")
                assert scope.cancelled_caught
        if raised is not None and not isinstance(raised, CallerError):
            assert not any(isinstance(u, Finish | Error) for u in updates), updates
        if paused:
            requested = [u.call.id for u in updates if isinstance(u, ToolApprovalRequest)]
            waiting = [c.id for c in pending_calls(messages)]
            assert set(requested) <= set(waiting), (requested, waiting)

    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        provider.shutdown()


# -- resume ---------------------------------------------------------------------------------------


@given(
    data=st.data(),
    approval=st.sampled_from(["batch", "per_call"]),
    eager=st.booleans(),
    cut=CUTS,
    later_rounds=st.integers(0, 2),
    telemetry=st.booleans(),
)
def test_a_resume_cut_short_can_be_resumed_or_sent_again(  # noqa: PLR0917 -- one per dimension
    data: st.DataObject,
    approval: str,
    eager: bool,
    cut: tuple[str, float],
    later_rounds: int,
    telemetry: bool,
) -> None:
    tally = Tally()
    tools = make_tools(tally, interrupts=False)
    names = ["approve", "approve", "returns", "sleeps", "raises", "no_such_tool"]
    calls = [
        ToolCall(f"p{i}", data.draw(st.sampled_from(names)), '{"a": 1}')
        for i in range(data.draw(st.integers(1, 4)))
    ]
    calls[data.draw(st.integers(0, len(calls) - 1))] = ToolCall("p_ap", "approve", "{}")
    first_round = [*data.draw(tool_call_streams(calls)), Finish(FinishReason.TOOL_CALLS)]
    serial = iter(range(1, 1000))
    later = [
        data.draw(tool_round(["returns", "sleeps", "raises"], serial, unended=False))
        for _ in range(later_rounds)
    ]
    verdicts = data.draw(st.lists(st.booleans(), min_size=4, max_size=4))
    kind, at = cut

    async def main() -> None:
        # The pause, uncut.
        model = ScriptedChatClient([first_round], delay=0.1)
        client = FunctionInvokingChatClient(
            model,
            tools,
            approval=approval,
            eager_tools=eager,  # type: ignore[arg-type]
        )
        requests: list[ToolApprovalRequest] = []
        async with client.run(USER) as stream:
            async for update in stream:
                if isinstance(update, ToolApprovalRequest):
                    requests.append(update)
        paused = [*USER, *stream.messages]
        assert_transcript_valid(paused, allow_pending_approval=True)
        assert requests
        responses = tuple(
            r.approve() if verdict else r.reject("no")
            for r, verdict in zip(requests, verdicts, strict=False)
        )

        # The resume, cut where drawn.
        resume_model = ScriptedChatClient([*later, ["done", Finish(FinishReason.STOP)]], delay=0.1)
        opened = Opened()
        provider = TracerProvider()
        provider.add_span_processor(opened)
        resumer = FunctionInvokingChatClient(
            resume_model,
            tools,
            approval=approval,  # type: ignore[arg-type]
            eager_tools=eager,
            telemetry=Telemetry(tracer_provider=provider) if telemetry else None,
        )
        scope = trio.CancelScope(deadline=trio.current_time() + (at if kind == "deadline" else 500))
        outer = trio.CancelScope(deadline=trio.current_time() + at if kind == "outer" else 1e9)
        updates: list[Any] = []
        stream = None
        try:
            with trio.fail_after(1000), outer:
                async with resumer.run(
                    paused, RunOptions(tool_approval_responses=responses, cancel_scope=scope)
                ) as stream:
                    async for update in stream:
                        updates.append(update)
                        if kind == "break" and len(updates) > at:
                            break
                        if kind == "raise" and len(updates) > at:
                            raise CallerError("the caller failed")
        except CallerError:
            assert kind == "raise"
        assert tally.live == 0
        assert not opened.open, f"spans left open: {opened.open}"
        provider.shutdown()
        added = stream.messages if stream is not None else []
        note(f"added={added!r}")
        conversation = [*paused, *added]
        if not added:
            # Nothing was answered: the same responses resume it.
            assert_transcript_valid(conversation, allow_pending_approval=True)
            again = FunctionInvokingChatClient(
                ScriptedChatClient([["ok", Finish(FinishReason.STOP)]] * 4), tools
            )
            result = await again.get_response(
                conversation, RunOptions(tool_approval_responses=responses)
            )
            conversation += result.messages
        assert_transcript_valid(conversation)
        check_transcript(conversation, paused=False)
        whole = kind not in ("break", "outer", "raise") or (
            kind == "outer" and not outer.cancelled_caught
        )
        check_updates(updates, added, whole=whole)
        # Complete: it can be sent again, with no approval responses.
        if conversation[-1].role is MessageRole.ASSISTANT and conversation[-1].tool_calls:
            return  # (a round cut while the model was answering, calls complete: sent again below)
        plain = FunctionInvokingChatClient(ScriptedChatClient([["ok", Finish(FinishReason.STOP)]]))
        result = await plain.get_response(conversation)
        assert result.text == "ok"

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("where", ["model", "tool"])
def test_keyboard_interrupt_reaches_the_caller(where: str) -> None:
    """Sanity check of the property's interrupt branch."""
    tally = Tally()
    tools = make_tools(tally, interrupts=True)
    script: list[Any]
    if where == "model":
        script = [["hi", KeyboardInterrupt(), Finish(FinishReason.STOP)]]
    else:
        script = [
            [
                *tool_call_updates("c1", "interrupts", "{}"),
                *tool_call_updates("c2", "hangs", "{}"),
                Finish(FinishReason.TOOL_CALLS),
            ],
            "done",
        ]

    async def main() -> None:
        client = FunctionInvokingChatClient(ScriptedChatClient(script), tools)
        with pytest.raises(KeyboardInterrupt):
            async with client.run(USER) as stream:
                async for _ in stream:
                    pass
        assert_transcript_valid([*USER, *stream.messages])
        assert tally.live == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
