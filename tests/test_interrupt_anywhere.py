"""Ctrl-C wherever it lands: at every line of the library a run executes, Trio's own SIGINT
handler is called there (what a real Ctrl-C does), and the run must still end well.

Trio raises ``KeyboardInterrupt`` at once in code that is not protected from it, and delivers
it at the next checkpoint in code that is (its own, and the loop's: the run's driver, its
rounds' tasks, the caller's stream); a tool's or middleware's own code is interrupted at once.
Whatever line it lands on: the interrupt reaches the caller (never a hang, never another
error), the transcript is valid, every ``ToolCalled`` the caller got is one of a kind and has
its tool message.

A tracer counts the lines the library executes in a run and fires the handler at the n-th;
the runs use Trio's virtual clock, so a run that would hang fails at once instead.
"""

from __future__ import annotations

import signal
import sys
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_invoke
from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    TextDelta,
    ToolCalled,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, tool_call_updates

LIBRARY = trio_invoke.__file__.rsplit("/", 1)[0] + "/"
USER = [ChatMessage.user("go")]


@tool
async def lookup(i: int) -> str:
    """Answers, every other call after a checkpoint."""
    if i % 2 == 0:
        await trio.lowlevel.checkpoint()
    return f"found {i}"


async def passing(context: Any, call_next: Any) -> Any:
    return await call_next(context)


def script() -> list[Any]:
    """Two rounds of two parallel calls, with text, then an answer."""
    rounds: list[Any] = []
    for r in range(2):
        updates: list[Any] = [TextDelta("thinking ")]
        for k in range(2):
            updates += tool_call_updates(f"c{r}{k}", "lookup", f'{{"i": {2 * r + k}}}')
        rounds.append([*updates, Finish(FinishReason.TOOL_CALLS)])
    return [*rounds, "done"]


VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "eager": {"eager_tools": True},
    "sequential": {"sequential": True},
    "limited, timed, with middleware": {
        "max_concurrency": 1,
        "tool_timeout": 30,
        "middleware": [passing],
    },
}


def run_interrupted(options: dict[str, Any], at: int | None) -> dict[str, Any]:
    """One run, with Trio's SIGINT handler called at the ``at``-th library line (``None``:
    never); what came of it."""
    state: dict[str, Any] = {"lines": 0, "where": None, "updates": [], "hung": False}

    def local(frame: types.FrameType, event: str, arg: object) -> Callable[..., Any] | None:
        if event == "line" and state["where"] is None:
            state["lines"] += 1
            if state["lines"] == at:
                code = frame.f_code
                state["where"] = f"{code.co_filename.removeprefix(LIBRARY)}:{frame.f_lineno}"
                signal.getsignal(signal.SIGINT)(signal.SIGINT, frame)  # type: ignore[operator]
        return local

    def tracer(frame: types.FrameType, event: str, arg: object) -> Callable[..., Any] | None:
        if state["where"] is None and frame.f_code.co_filename.startswith(LIBRARY):
            return local
        return None

    async def main() -> None:
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # Trio's
        client = FunctionInvokingChatClient(ScriptedChatClient(script()), [lookup], **options)
        previous = sys.gettrace()  # (coverage's, under coverage)
        sys.settrace(tracer)
        try:
            with trio.fail_after(1000):
                async with client.run(USER) as stream:
                    state["stream"] = stream
                    async for update in stream:
                        state["updates"].append(update)
        except trio.TooSlowError:
            state["hung"] = True
            raise
        finally:
            sys.settrace(previous)

    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        state["outcome"] = "finished"
    except KeyboardInterrupt:
        state["outcome"] = "interrupted"
    except BaseException as exc:  # what must never come of a Ctrl-C
        state["outcome"] = f"{type(exc).__name__}: {exc}"
    return state


def problems(state: dict[str, Any]) -> list[str]:
    found = []
    if state["outcome"] != "interrupted":
        found.append(f"the run ended with {state['outcome']}, not KeyboardInterrupt")
    if state["hung"]:
        found.append("the run hung")
    stream = state.get("stream")
    if stream is not None:
        messages = stream.messages
        try:
            assert_transcript_valid([*USER, *messages])
        except AssertionError as exc:
            found.append(f"invalid transcript: {exc}")
        called = [u.call.id for u in state["updates"] if isinstance(u, ToolCalled)]
        twice = [i for i, n in Counter(called).items() if n > 1]
        if twice:
            found.append(f"calls with two ToolCalled: {twice}")
        answered = {m.tool_call_id for m in messages if m.tool_call_id is not None}
        lost = [i for i in called if i not in answered]
        if lost:
            found.append(f"ToolCalled without a tool message: {lost}")
    return found


@pytest.mark.slow  # (every line of four runs: about ten seconds each)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_ctrl_c_on_any_line_of_a_run_reaches_the_caller_and_keeps_the_transcript(
    variant: str,
) -> None:
    options = VARIANTS[variant]
    clean = run_interrupted(options, None)
    assert clean["outcome"] == "finished"
    lines = clean["lines"]
    assert lines > 500  # the tracer sees the library
    failures: dict[str, list[str]] = {}
    fired = 0
    for at in range(1, lines + lines // 10):  # (Trio's scheduling varies the path a little)
        state = run_interrupted(options, at)
        if state["where"] is None:
            continue  # the run ended before its at-th line
        fired += 1
        found = problems(state)
        if found and state["where"] not in failures:
            failures[state["where"]] = found
    assert fired > lines * 0.9
    assert not failures, "\n".join(f"{where}: {found}" for where, found in failures.items())


def ctrl_c_here() -> None:
    """What a Ctrl-C does in the code that calls this: Trio's SIGINT handler, called there."""
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler)
    assert handler is not signal.default_int_handler  # Trio's
    handler(signal.SIGINT, sys._getframe(1))


@pytest.mark.parametrize("where", ["tool", "middleware"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_ctrl_c_in_a_tools_or_middlewares_own_code_interrupts_it_at_once(
    where: str, variant: str
) -> None:
    """The loop's code waits for a checkpoint; a tool's or a middleware's does not (a tool
    that never checkpoints can still be stopped)."""
    went_on: list[str] = []

    @tool
    async def spin(i: int) -> str:
        """Busy."""
        if where == "tool":
            ctrl_c_here()
            went_on.append("tool")  # never, if the interrupt was raised where it landed
        return "spun"

    async def middleware(context: Any, call_next: Any) -> Any:
        if where == "middleware":
            ctrl_c_here()
            went_on.append("middleware")
        return await call_next(context)

    options = {**VARIANTS[variant], "middleware": [middleware]}
    responses = [[*tool_call_updates("c1", "spin", '{"i": 1}'), Finish(FinishReason.TOOL_CALLS)]]

    async def main() -> None:
        model = ScriptedChatClient([*responses, "ok"])
        client = FunctionInvokingChatClient(model, [spin], **options)
        with trio.fail_after(10):
            async with client.run(USER) as stream:
                async for _ in stream:
                    pass

    with pytest.raises(KeyboardInterrupt):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert went_on == []
