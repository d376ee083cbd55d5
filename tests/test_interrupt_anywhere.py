"""Ctrl-C wherever it lands: at every line of the library a run executes, Trio's own SIGINT
handler is called there (what a real Ctrl-C does), and the run must still end well.

Trio raises ``KeyboardInterrupt`` at once in code that is not protected from it, and delivers
it at the next checkpoint in code that is (its own, and the loop's: the run's driver, its
rounds' tasks, the caller's stream and ``get_response``); a tool's or middleware's own code is
interrupted at once. Whatever line it lands on: the interrupt reaches the caller (never a hang,
never another error), the transcript is valid, every ``ToolCalled`` the caller got is one of a
kind and has its tool message, and with telemetry on every span started was ended.

A tracer counts the lines the library executes in a run and fires the handler at the n-th;
the runs use Trio's virtual clock, so a run that would hang fails at once instead. The kinds of
run: the loop's modes, approval pauses and resumes, failing, timed-out, unknown and stopping
calls, a budget, provider tools, ``get_response``, telemetry, a model whose stream breaks in the
middle of a response (the run fails), and the OpenAI and Anthropic clients over httpx2's
in-memory ``MockTransport`` (answering HTTP 429 once, then retried). Long ones are sampled
(every k-th line), but every line a run executes is interrupted the first time it runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx2
import pytest
import trio
import trio.lowlevel
import trio.testing
from anthropic_streams import message_end, message_start, text_block, tool_block
from ctrl_c import ctrl_c_at, tracing
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trio_invoke
from trio_invoke import (
    AnthropicChatClient,
    ApprovalRequiredTool,
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ModelResponseError,
    OpenAIChatClient,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    TextDelta,
    ToolApprovalResponse,
    ToolCalled,
    ToolCallStart,
    tool,
)
from trio_invoke.otel import Telemetry
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


@tool
async def failing(i: int) -> str:
    """Raises."""
    raise ValueError(f"no {i}")


@tool
async def sleepy(i: int) -> str:
    """Sleeps past the run's time limit."""
    await trio.sleep(100)
    return "woke"


@tool
async def stopper(i: int) -> str:
    """Stops the loop."""
    await trio.lowlevel.checkpoint()
    raise StopLoop(f"stopped {i}")


@tool
async def extra(i: int) -> str:
    """A provider's tool."""
    await trio.lowlevel.checkpoint()
    return f"extra {i}"


@tool
async def guarded(i: int) -> str:
    """Needs approval."""
    await trio.lowlevel.checkpoint()
    return f"guarded {i}"


GUARDED = ApprovalRequiredTool(guarded)

Call = tuple[str, str, str]
"""A call the model makes: its id, its tool's name, its arguments."""


@dataclasses.dataclass(frozen=True)
class Broken:
    """A response whose stream breaks: its text, its first call whole, the start of the
    second, then the model's failure (the run fails with it)."""

    calls: tuple[Call, ...]


class Busy:
    """An HTTP 429 with ``Retry-After: 1``: the client waits and sends the request again."""


Response = str | tuple[Call, ...] | Broken | Busy
"""A model response: the final text, text and calls, a stream that breaks, or a refusal."""

TWO_ROUNDS: tuple[Response, ...] = (
    (("c00", "lookup", '{"i": 0}'), ("c01", "lookup", '{"i": 1}')),
    (("c10", "lookup", '{"i": 2}'), ("c11", "lookup", '{"i": 3}')),
    "done",
)
APPROVAL: tuple[Response, ...] = (
    (
        ("a0", "lookup", '{"i": 0}'),
        ("a1", "guarded", '{"i": 1}'),
        ("a2", "lookup", '{"i": 2}'),
        ("a3", "guarded", '{"i": 3}'),
        ("a4", "guarded", '{"i": 4}'),
    ),
)
ANSWERS = (
    ToolApprovalResponse("a1", True),
    ToolApprovalResponse("a3", False, "not that one"),
    ToolApprovalResponse("a4", True, arguments={"i": 40}),
)
AFTER_APPROVAL: tuple[Response, ...] = ((("r0", "lookup", '{"i": 5}'),), "done")
ERRORS: tuple[Response, ...] = (
    (
        ("e0", "failing", '{"i": 0}'),
        ("e1", "sleepy", '{"i": 1}'),
        ("e2", "nope", '{"i": 2}'),
        ("e3", "lookup", '{"i": '),
        ("e4", "lookup", '{"i": "four"}'),
    ),
    (("s0", "stopper", '{"i": 0}'), ("s1", "lookup", '{"i": 1}')),
)
BROKEN: tuple[Response, ...] = (TWO_ROUNDS[0], Broken(TWO_ROUNDS[1]))  # type: ignore[arg-type]
PROVIDED: tuple[Response, ...] = (
    (("p0", "extra", '{"i": 0}'), ("p1", "lookup", '{"i": 1}')),
    "done",
)


def scripted(responses: Sequence[Response]) -> list[Any]:
    """The responses as a ``ScriptedChatClient`` replays them."""
    script: list[Any] = []
    for response in responses:
        if isinstance(response, str):
            script.append(response)
            continue
        assert not isinstance(response, Busy)  # (HTTP only)
        updates: list[Any] = [TextDelta("thinking ")]
        if isinstance(response, Broken):
            first, second = response.calls[:2]
            updates += [*tool_call_updates(*first), ToolCallStart(second[0], second[1])]
            script.append([*updates, ModelResponseError("the model's stream broke")])
            continue
        for call in response:
            updates += tool_call_updates(*call)
        script.append([*updates, Finish(FinishReason.TOOL_CALLS)])
    return script


def openai_body(response: Response) -> bytes:
    """The response as an OpenAI-compatible server streams it."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    assert not isinstance(response, Busy)
    if isinstance(response, str):
        body = chunk({"role": "assistant", "content": response}) + chunk({}, "stop")
    else:
        body = chunk({"role": "assistant", "content": "thinking "})
        calls = response.calls[:2] if isinstance(response, Broken) else response
        for index, (call_id, name, arguments) in enumerate(calls):
            function = {"name": name, "arguments": ""}
            start = {"index": index, "id": call_id, "type": "function", "function": function}
            body += chunk({"tool_calls": [start]})
            if isinstance(response, Broken) and index:
                return body  # (cut off: no finish_reason, no [DONE])
            more = {"index": index, "function": {"arguments": arguments}}
            body += chunk({"tool_calls": [more]})
        body += chunk({}, "tool_calls")
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    last = {"id": "x", "object": "chat.completion.chunk", "choices": [], "usage": usage}
    return body + b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"


def anthropic_body(response: Response) -> bytes:
    """The response as the Messages API streams it."""
    assert not isinstance(response, Busy)
    if isinstance(response, str):
        return message_start() + text_block(0, response) + message_end()
    body = message_start() + text_block(0, "thinking ")
    if isinstance(response, Broken):  # (cut off in its second call: no message_stop)
        (call_id, name, arguments), (second_id, second_name, _) = response.calls[:2]
        body += tool_block(1, call_id, name, arguments)
        return body + tool_block(2, second_id, second_name, stop=False)
    for index, (call_id, name, arguments) in enumerate(response, 1):
        body += tool_block(index, call_id, name, arguments)
    return body + message_end("tool_use")


class _Body(httpx2.AsyncByteStream):
    """A response body that comes in pieces, a checkpoint before each."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for at in range(0, len(self._data), 256):
            await trio.lowlevel.checkpoint()
            yield self._data[at : at + 256]


def http_model(kind: str, responses: Sequence[Response]) -> tuple[Any, httpx2.AsyncClient]:
    """An HTTP chat client whose server is an in-memory transport (httpx2's
    ``MockTransport``, whose handler may be async): ``responses`` in turn."""
    encode = openai_body if kind == "openai" else anthropic_body
    bodies = iter([None if type(r) is Busy else encode(r) for r in responses])

    async def handler(request: httpx2.Request) -> httpx2.Response:
        await trio.lowlevel.checkpoint()
        body = next(bodies)
        if body is None:
            refusal = b'{"error": {"message": "slow down", "type": "rate_limit_error"}}'
            headers = {"content-type": "application/json", "retry-after": "1"}
            return httpx2.Response(429, headers=headers, content=refusal)
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, stream=_Body(body))

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    url = "http://127.0.0.1:9"
    if kind == "openai":
        return OpenAIChatClient("m", base_url=f"{url}/v1", api_key="k", http_client=http), http
    return AnthropicChatClient("m", base_url=url, api_key="k", http_client=http), http


class _Spans(SpanProcessor):
    """Which spans were started and which of them ended."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.ended: list[int] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.context.span_id)

    def on_end(self, span: Any) -> None:
        self.ended.append(span.context.span_id)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One kind of run to interrupt everywhere."""

    responses: tuple[Response, ...] = TWO_ROUNDS
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The loop's (``FunctionInvokingChatClient``'s) arguments."""
    tools: tuple[Any, ...] = (lookup,)
    provider_tools: tuple[Any, ...] = ()
    resumes: Mapping[str, Any] | None = None
    """Resume the batch that this loop's settings paused for approval (``APPROVAL``), with
    ``ANSWERS``."""
    inner: str = "scripted"
    collect: bool = False
    """``await client.get_response(...)``, not ``async for``."""
    telemetry: bool = False
    every: int = 8
    """Interrupt at every this-many-th line (and at the first time each line runs)."""
    pauses: bool = False
    """The run ends paused for approval."""

    @property
    def fails(self) -> bool:
        """The run fails: the model's stream breaks (``Broken``)."""
        return any(isinstance(response, Broken) for response in self.responses)


APPROVING = (lookup, GUARDED)
VARIANTS: dict[str, Variant] = {
    "plain": Variant(every=2),
    "eager": Variant(settings={"eager_tools": True}, every=2),
    "sequential": Variant(settings={"sequential": True}, every=2),
    "limited, timed, with middleware": Variant(
        settings={"max_concurrency": 1, "tool_timeout": 30, "middleware": [passing]}, every=2
    ),
    "approval, batch": Variant(APPROVAL, tools=APPROVING, pauses=True),
    "approval, per call, eager": Variant(
        APPROVAL,
        tools=APPROVING,
        settings={"approval": "per_call", "eager_tools": True},
        pauses=True,
    ),
    "resume, batch": Variant(AFTER_APPROVAL, tools=APPROVING, resumes={}),
    "resume, per call, limited": Variant(
        AFTER_APPROVAL,
        tools=APPROVING,
        resumes={"approval": "per_call"},
        settings={"max_concurrency": 2},
    ),
    "errors, timeout, unknown tool, bad arguments, StopLoop": Variant(
        ERRORS,
        tools=(lookup, failing, sleepy, stopper),
        settings={"tool_timeout": 1},
    ),
    "budget spent": Variant(settings={"max_tool_calls": 3}),
    "provider tools": Variant(PROVIDED, provider_tools=(extra,)),
    "get_response": Variant(collect=True),
    "telemetry, errors, middleware": Variant(
        ERRORS,
        tools=(lookup, failing, sleepy, stopper),
        settings={"tool_timeout": 1, "middleware": [passing]},
        telemetry=True,
        every=16,
    ),
    "telemetry, resume": Variant(
        AFTER_APPROVAL, tools=APPROVING, resumes={}, telemetry=True, every=16
    ),
    "OpenAI": Variant(inner="openai", every=16),
    "Anthropic": Variant(inner="anthropic", every=16),
    "model fails mid-stream, eager": Variant(BROKEN, settings={"eager_tools": True}, every=2),
    "model fails mid-stream, telemetry, middleware": Variant(
        BROKEN, settings={"middleware": [passing]}, telemetry=True, every=8
    ),
    "OpenAI, retried, then fails mid-stream": Variant((Busy(), *BROKEN), inner="openai", every=16),
    "Anthropic, retried, then fails mid-stream": Variant(
        (Busy(), *BROKEN), inner="anthropic", every=16
    ),
}

_paused: dict[str, list[ChatMessage]] = {}


def paused(settings: Mapping[str, Any]) -> list[ChatMessage]:
    """The conversation of ``APPROVAL`` run to its pause by a loop with ``settings``."""
    key = repr(sorted(settings.items()))
    if key not in _paused:

        async def main() -> list[ChatMessage]:
            model = ScriptedChatClient(scripted(APPROVAL))
            client = FunctionInvokingChatClient(model, APPROVING, **settings)
            response = await client.get_response(USER)
            assert response.finish_reason is FinishReason.AWAITING_APPROVAL
            return [*USER, *response.messages]

        _paused[key] = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return _paused[key]


class _Capture:
    """``client.run(...)``'s manager, which keeps the stream it gives (for ``get_response``)."""

    def __init__(self, manager: Any, state: dict[str, Any]) -> None:
        self._manager = manager
        self._state = state

    async def __aenter__(self) -> Any:
        self._state["stream"] = stream = await self._manager.__aenter__()
        return stream

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._manager.__aexit__(*exc_info)


def run_interrupted(variant: Variant, at: int | None) -> dict[str, Any]:
    """One run, with Trio's SIGINT handler called at the ``at``-th library line (``None``:
    never); what came of it."""
    state: dict[str, Any] = {"lines": [], "where": None, "updates": [], "hung": False}
    conversation = USER
    settings = dict(variant.settings)
    options = None
    if variant.resumes is not None:
        settings |= variant.resumes
        conversation = paused(variant.resumes)
        options = RunOptions(tool_approval_responses=ANSWERS)
    if variant.provider_tools:
        options = RunOptions(provider_tools=variant.provider_tools)
    state["conversation"] = conversation
    spans = state["spans"] = _Spans()

    tracer = ctrl_c_at(at, state, (LIBRARY,), strip=LIBRARY)

    async def main() -> None:
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # Trio's
        http = None
        if variant.inner == "scripted":
            model: Any = ScriptedChatClient(scripted(variant.responses))
        else:
            model, http = http_model(variant.inner, variant.responses)
        if variant.telemetry:
            provider = TracerProvider()
            provider.add_span_processor(spans)
            exporter = state["exporter"] = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            settings["telemetry"] = Telemetry(tracer_provider=provider)
        client = FunctionInvokingChatClient(model, variant.tools, **settings)
        run = client.run
        client.run = lambda *args: _Capture(run(*args), state)  # type: ignore[method-assign]
        try:
            with tracing(tracer), trio.fail_after(1000):
                if variant.collect:
                    await client.get_response(conversation, options)
                else:
                    async with client.run(conversation, options) as stream:
                        async for update in stream:
                            state["updates"].append(update)
        except trio.TooSlowError:
            state["hung"] = True
            raise
        finally:
            if http is not None:
                await http.aclose()

    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        state["outcome"] = "finished"
    except KeyboardInterrupt:
        state["outcome"] = "interrupted"
    except BaseException as exc:  # what must never come of a Ctrl-C
        state["outcome"] = f"{type(exc).__name__}: {exc}"
    return state


def problems(state: dict[str, Any], waiting: frozenset[str] = frozenset()) -> list[str]:
    """What is wrong with how an interrupted run ended; ``waiting``: the calls that its run,
    left alone, ends waiting for approval (those may be left unanswered)."""
    found = []
    if state["outcome"] != "interrupted":
        found.append(f"the run ended with {state['outcome']}, not KeyboardInterrupt")
    if state["hung"]:
        found.append("the run hung")
    stream = state.get("stream")
    if stream is not None:
        messages = stream.messages
        whole = [*state["conversation"], *messages]
        try:
            assert_transcript_valid(whole, allow_pending_approval=bool(waiting))
        except AssertionError as exc:
            found.append(f"invalid transcript: {exc}")
        answered = {m.tool_call_id for m in whole if m.tool_call_id is not None}
        unanswered = unanswered_calls(whole) - waiting
        if unanswered:
            found.append(f"calls left unanswered: {sorted(unanswered)}")
        called = [u.call.id for u in state["updates"] if isinstance(u, ToolCalled)]
        twice = [i for i, n in Counter(called).items() if n > 1]
        if twice:
            found.append(f"calls with two ToolCalled: {twice}")
        lost = [i for i in called if i not in answered]
        if lost:
            found.append(f"ToolCalled without a tool message: {lost}")
    exporter = state.get("exporter")
    if exporter is not None:
        spans = state["spans"]
        left_open = set(spans.started) - set(spans.ended)
        if left_open:
            found.append(f"{len(left_open)} of {len(spans.started)} spans were never ended")
        if len(exporter.get_finished_spans()) != len(spans.started):
            found.append("the exporter did not get every span")
    return found


def unanswered_calls(messages: Sequence[ChatMessage]) -> frozenset[str]:
    answered = {m.tool_call_id for m in messages if m.tool_call_id is not None}
    return frozenset(c.id for m in messages for c in m.tool_calls or () if c.id not in answered)


def moments(lines: Sequence[str], every: int) -> list[int]:
    """Where to interrupt a run whose clean run went through ``lines``: at every ``every``-th
    line, and at the first time each line runs (counting from 1), and a little past the end
    (Trio's scheduling varies the path a little)."""
    first = {line: at for at, line in reversed(list(enumerate(lines, 1)))}
    return sorted({*range(1, len(lines) + len(lines) // 10, every), *first.values()})


@pytest.mark.slow  # (every line, or every few, of each kind of run: 2 to 20 seconds each)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_ctrl_c_on_any_line_of_a_run_reaches_the_caller_and_keeps_the_transcript(
    name: str,
) -> None:
    variant = VARIANTS[name]
    clean = run_interrupted(variant, None)
    if variant.fails:
        assert clean["outcome"].startswith("ModelResponseError: "), clean["outcome"]
    else:
        assert clean["outcome"] == "finished"
    waiting = unanswered_calls([*clean["conversation"], *clean["stream"].messages])
    assert bool(waiting) == variant.pauses
    assert problems({**clean, "outcome": "interrupted"}, waiting) == []
    lines = clean["lines"]
    assert len(lines) > 500  # the tracer sees the library
    failures: dict[str, list[str]] = {}
    fired = 0
    at_all = moments(lines, variant.every)
    for at in at_all:
        state = run_interrupted(variant, at)
        if state["where"] is None:
            continue  # the run ended before its at-th line
        fired += 1
        found = problems(state, waiting)
        if found and state["where"] not in failures:
            failures[state["where"]] = found
    assert fired > len([at for at in at_all if at <= len(lines)]) * 0.9
    assert not failures, "\n".join(f"{where}: {found}" for where, found in failures.items())


def ctrl_c_here() -> None:
    """What a Ctrl-C does in the code that calls this: Trio's SIGINT handler, called there."""
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler)
    assert handler is not signal.default_int_handler  # Trio's
    handler(signal.SIGINT, sys._getframe(1))


@pytest.mark.parametrize("where", ["tool", "middleware"])
@pytest.mark.parametrize("variant", list(VARIANTS)[:4])
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

    options = {**VARIANTS[variant].settings, "middleware": [middleware]}
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


def scripted_interrupted(at: int) -> tuple[dict[str, Any], ScriptedChatClient]:
    """Two calls of a ``ScriptedChatClient`` on its own, with Trio's SIGINT handler called at
    the ``at``-th library line; what came of it, and the client."""
    model = ScriptedChatClient(scripted(TWO_ROUNDS))
    state: dict[str, Any] = {"lines": [], "where": None, "entered": False}
    tracer = ctrl_c_at(at, state, (LIBRARY,), strip=LIBRARY)

    async def main() -> None:
        with tracing(tracer), trio.fail_after(100):
            for _ in range(2):
                async with model.run(USER) as updates:
                    state["entered"] = True
                    async for _update in updates:
                        pass

    state["outcome"] = "finished"
    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    except KeyboardInterrupt:
        state["outcome"] = "interrupted"
    except BaseException as exc:
        state["outcome"] = f"{type(exc).__name__}: {exc}"
    return state, model


@pytest.mark.slow
def test_a_ctrl_c_on_any_line_of_a_scripted_model_call_keeps_its_record() -> None:
    """``ScriptedChatClient`` on its own, no loop: a call that was entered is recorded once,
    whatever line the interrupt lands on, and the interrupt reaches the caller."""
    failures: dict[str, list[str]] = {}
    fired = 0
    for at in itertools.count(1):
        state, model = scripted_interrupted(at)
        if state["where"] is None:
            break
        fired += 1
        found = []
        if state["outcome"] != "interrupted":
            found.append(f"ended with {state['outcome']}")
        if state["entered"] and not model.calls:
            found.append("an entered call was not recorded")
        if len(model.calls) > 2 or any(call.messages != tuple(USER) for call in model.calls):
            found.append(f"calls recorded: {model.calls}")
        if found:
            failures.setdefault(state["where"], found)
    assert fired > 100
    assert not failures, "\n".join(f"{where}: {found}" for where, found in failures.items())
