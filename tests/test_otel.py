"""trio_invoke.otel: OpenTelemetry spans and metrics of runs, model calls and tool calls, read
back through the SDK's in-memory exporter and metric reader (an explicit provider per test: the
global one can be set only once per process)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode

import trio_invoke
from trio_invoke import (
    AgentResponseUpdate,
    ApprovalRequiredTool,
    CallNext,
    ChatClientError,
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ImagePart,
    MessageRole,
    ReasoningDelta,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    TextDelta,
    TextPart,
    ToolApprovalResponse,
    ToolCall,
    ToolCalled,
    ToolCallEnd,
    ToolContext,
    ToolTimeoutError,
    Usage,
    tool,
)
from trio_invoke.otel import Telemetry
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

USER = [ChatMessage.user("What is the secret plan?")]
SECRET = "swordfish"


class Open(SpanProcessor):
    """Counts spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: set[int] = set()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open.add(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        self.open.discard(span.context.span_id)


@attrs.define
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    opened: Open
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found += list(m.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter, opened = InMemorySpanExporter(), Open()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(opened)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(exporter, reader, opened, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


class Model:
    """A scripted model with a name, as a provider client has."""

    def __init__(self, script: Sequence[Any], model: str = "test-model") -> None:
        self.scripted = ScriptedChatClient(script)
        self.model = model

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        async with self.scripted.run(messages, options) as stream:
            yield stream


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    await trio.sleep(0.1)
    return f"{SECRET} about {topic}"


@tool
async def broken(topic: str) -> str:
    """Always fails."""
    raise RuntimeError(SECRET)


@tool
async def stalls(topic: str) -> str:
    """Takes forever."""
    await trio.sleep(100)
    return "late"


def batch(*names: str, usage: Usage | None = None) -> list[AgentResponseUpdate]:
    calls = [ToolCall(f"{n}-{i}", n, json.dumps({"topic": SECRET})) for i, n in enumerate(names)]
    return tool_calls_response(*calls, usage=usage)


def by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


@pytest.mark.parametrize("eager", [False, True])
async def test_chat_and_tool_spans_are_children_of_the_run_span(
    otel: Otel, eager: bool, autojump_clock: trio.testing.MockClock
) -> None:
    script = [
        batch("lookup", "lookup", "lookup", usage=Usage(10, 2)),
        batch("lookup", "broken", usage=Usage(20, 3)),
        [TextDelta("The plan."), Finish(FinishReason.STOP, Usage(30, 4))],
    ]
    agent = FunctionInvokingChatClient(
        Model(script), [lookup, broken], telemetry=otel.telemetry(), eager_tools=eager
    )
    result = await run_to_completion(agent, USER)
    assert_transcript_valid([*USER, *result.messages])
    (run,) = otel.named("invoke_agent")
    chats, tools = otel.named("chat"), otel.named("execute_tool")
    assert [s.name for s in chats] == ["chat test-model"] * 3
    assert sorted(s.name for s in tools) == ["execute_tool broken"] + ["execute_tool lookup"] * 4
    for span in [*chats, *tools]:
        assert span.parent is not None
        assert span.parent.span_id == run.context.span_id
        assert span.context.trace_id == run.context.trace_id
    assert run.kind is SpanKind.INTERNAL
    assert {s.kind for s in chats} == {SpanKind.CLIENT}
    assert {s.kind for s in tools} == {SpanKind.INTERNAL}
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.usage.input_tokens"] == 60
    assert run.attributes["gen_ai.usage.output_tokens"] == 9
    assert run.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert run.status.status_code is StatusCode.UNSET
    chat = chats[0].attributes
    assert chat is not None
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "test-model"
    assert chat["gen_ai.usage.input_tokens"] == 10
    assert chat["gen_ai.response.finish_reasons"] == ("tool_calls",)
    failed = next(s for s in tools if s.name == "execute_tool broken")
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "RuntimeError"
    assert failed.status.status_code is StatusCode.ERROR
    ok = next(s for s in tools if s.name == "execute_tool lookup")
    assert ok.attributes is not None
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "lookup"
    assert ok.attributes["gen_ai.tool.description"] == "Look a topic up."
    assert ok.attributes["gen_ai.tool.call.id"] in {"lookup-0", "lookup-1", "lookup-2"}
    assert "error.type" not in ok.attributes
    assert otel.opened.open == set()


async def test_no_content_in_any_attribute_by_default(otel: Otel) -> None:
    script = [batch("lookup", "broken"), [TextDelta(f"It is {SECRET}."), Finish(FinishReason.STOP)]]
    agent = FunctionInvokingChatClient(
        Model(script), [lookup, broken], telemetry=otel.telemetry(), include_detailed_errors=True
    )
    await run_to_completion(agent, USER)
    assert len(otel.spans()) == 5
    for span in otel.spans():
        for key, value in (span.attributes or {}).items():
            assert SECRET not in str(value), (span.name, key)
            assert "secret plan" not in str(value), (span.name, key)


async def test_capture_content_records_messages_arguments_and_results(otel: Otel) -> None:
    script = [batch("lookup"), [TextDelta("It is done."), Finish(FinishReason.STOP)]]
    agent = FunctionInvokingChatClient(
        Model(script), [lookup], telemetry=otel.telemetry(capture_content=True)
    )
    await run_to_completion(agent, USER)
    (tool_span,) = otel.named("execute_tool")
    attributes = tool_span.attributes or {}
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"topic": SECRET}
    assert attributes["gen_ai.tool.call.result"] == f"{SECRET} about {SECRET}"
    first, second = otel.named("chat")
    inputs = json.loads(str((first.attributes or {})["gen_ai.input.messages"]))
    # The conventions' JSON schemas (gen-ai-input-messages.json, gen-ai-output-messages.json):
    # role and parts, an output message's finish_reason; not the OpenAI format of to_dict().
    assert inputs == [
        {"role": "user", "parts": [{"type": "text", "content": "What is the secret plan?"}]}
    ]
    outputs = json.loads(str((second.attributes or {})["gen_ai.output.messages"]))
    assert outputs == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It is done."}],
            "finish_reason": "stop",
        }
    ]
    second_inputs = json.loads(str((second.attributes or {})["gen_ai.input.messages"]))
    assert second_inputs[1:] == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "lookup-0",
                    "name": "lookup",
                    "arguments": {"topic": SECRET},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "lookup-0",
                    "response": f"{SECRET} about {SECRET}",
                }
            ],
        },
    ]
    first_outputs = json.loads(str((first.attributes or {})["gen_ai.output.messages"]))
    assert first_outputs[0]["finish_reason"] == "tool_calls"
    assert first_outputs[0]["parts"][0]["type"] == "tool_call"


@pytest.mark.parametrize("eager", [False, True])
async def test_captured_arguments_are_those_a_middleware_passed_to_the_tool(
    otel: Otel, eager: bool
) -> None:
    async def rewrite(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return await call_next(context.evolve(arguments={"topic": "rewritten"}))

    async def answer(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return ToolCalled(context.call, "cached", is_error=False)

    script = [batch("lookup", "lookup"), [TextDelta("Done."), Finish(FinishReason.STOP)]]
    agent = FunctionInvokingChatClient(
        Model(script),
        [lookup],
        telemetry=otel.telemetry(capture_content=True),
        eager_tools=eager,
        middleware=[rewrite],
    )
    result = await run_to_completion(agent, USER)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    for span in otel.named("execute_tool"):
        attributes = span.attributes or {}
        ran = called[str(attributes["gen_ai.tool.call.id"])]
        assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"topic": "rewritten"}
        assert json.loads(ran.call.arguments) == {"topic": "rewritten"}
        assert attributes["gen_ai.tool.call.result"] == f"{SECRET} about rewritten"
    # A middleware that answers without the tool leaves the model's arguments.
    agent = FunctionInvokingChatClient(
        Model([batch("lookup"), "Done."]),
        [lookup],
        telemetry=otel.telemetry(capture_content=True),
        middleware=[answer],
    )
    otel.exporter.clear()
    await run_to_completion(agent, USER)
    (span,) = otel.named("execute_tool")
    attributes = span.attributes or {}
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"topic": SECRET}
    assert attributes["gen_ai.tool.call.result"] == "cached"


@tool(name="lookup_v2")
async def lookup_v2(topic: str) -> str:
    """Look a topic up, the new way."""
    return f"v2 on {topic}"


@pytest.mark.parametrize("tool_timeout", [None, 5])
async def test_a_tool_a_middleware_put_in_place_names_the_calls_span(
    otel: Otel, tool_timeout: float | None, autojump_clock: trio.testing.MockClock
) -> None:
    async def upgrade(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return await call_next(context.evolve(tool=lookup_v2))

    async def breaks(context: ToolContext, call_next: CallNext) -> ToolCalled:
        return await call_next(context.evolve(tool=lookup_v2, arguments={"topic": 7}))

    agent = FunctionInvokingChatClient(
        Model([batch("lookup"), "Done."]),
        [lookup],
        telemetry=otel.telemetry(),
        middleware=[upgrade],
        tool_timeout=tool_timeout,
    )
    result = await run_to_completion(agent, USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert called.result == "v2 on swordfish"
    (span,) = otel.named("execute_tool")
    attributes = span.attributes or {}
    # The span describes the tool that ran; its call id is still the model's call's.
    assert span.name == "execute_tool lookup_v2"
    assert attributes["gen_ai.tool.name"] == "lookup_v2"
    assert attributes["gen_ai.tool.description"] == "Look a topic up, the new way."
    assert attributes["gen_ai.tool.call.id"] == "lookup-0"
    assert called.call.name == "lookup_v2"
    # A replacement that never runs (its arguments fail its schema) leaves the span as it was.
    otel.exporter.clear()
    agent = FunctionInvokingChatClient(
        Model([batch("lookup"), "Done."]), [lookup], telemetry=otel.telemetry(), middleware=[breaks]
    )
    await run_to_completion(agent, USER)
    (span,) = otel.named("execute_tool")
    assert span.name == "execute_tool lookup"
    assert (span.attributes or {})["gen_ai.tool.name"] == "lookup"
    assert (span.attributes or {})["error.type"] == "ArgumentsError"


async def test_captured_messages_hold_every_kind_of_part_as_the_conventions_describe(
    otel: Otel,
) -> None:
    earlier = ToolCall("c0", "lookup", "not json \ud800")
    conversation = [
        ChatMessage.system("Be brief."),
        ChatMessage.user(
            [
                TextPart("Look:"),
                ImagePart(url="https://example.com/a.png"),
                ImagePart(data="iVBO", media_type="image/png"),
            ]
        ),
        ChatMessage.assistant("ok", tool_calls=[earlier]),
        ChatMessage.tool_result(earlier, "bad \ud800 text"),
    ]
    script = [[ReasoningDelta("Hmm."), TextDelta("Done."), Finish(FinishReason.LENGTH)]]
    agent = FunctionInvokingChatClient(
        Model(script), telemetry=otel.telemetry(capture_content=True)
    )
    await run_to_completion(agent, conversation)
    (chat,) = otel.named("chat")
    raw_inputs = str((chat.attributes or {})["gen_ai.input.messages"])
    raw_inputs.encode()  # valid Unicode: an exporter encodes it as UTF-8
    inputs = json.loads(raw_inputs)
    assert inputs[0] == {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}
    assert inputs[1]["parts"] == [
        {"type": "text", "content": "Look:"},
        {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBO"},
    ]
    assert inputs[2]["parts"] == [
        {"type": "text", "content": "ok"},
        {"type": "tool_call", "id": "c0", "name": "lookup", "arguments": "not json \ufffd"},
    ]
    assert inputs[3]["parts"] == [
        {"type": "tool_call_response", "id": "c0", "response": "bad \ufffd text"}
    ]
    outputs = json.loads(str((chat.attributes or {})["gen_ai.output.messages"]))
    assert outputs == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Hmm."},
                {"type": "text", "content": "Done."},
            ],
            "finish_reason": "length",
        }
    ]


async def test_timeouts_and_cancellations_end_their_spans_as_errors(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    agent = FunctionInvokingChatClient(
        Model([batch("stalls", "lookup"), "done"]),
        [stalls, lookup],
        telemetry=otel.telemetry(),
        tool_timeout=1,
    )
    await run_to_completion(agent, USER)
    errors = {s.name: (s.attributes or {}).get("error.type") for s in otel.named("execute_tool")}
    assert errors == {"execute_tool stalls": "timeout", "execute_tool lookup": None}
    otel.exporter.clear()

    scope = trio.CancelScope()
    scope.deadline = trio.current_time() + 0.5
    agent = FunctionInvokingChatClient(
        Model([batch("stalls", "lookup")]), [stalls, lookup], telemetry=otel.telemetry()
    )
    await run_to_completion(agent, USER, RunOptions(cancel_scope=scope))
    (run,) = otel.named("invoke_agent")
    assert (run.attributes or {})["error.type"] == "cancelled"
    assert run.status.status_code is StatusCode.ERROR
    errors = {s.name: (s.attributes or {}).get("error.type") for s in otel.named("execute_tool")}
    assert errors == {"execute_tool stalls": "cancelled", "execute_tool lookup": None}
    assert otel.opened.open == set()


@tool
async def fails_as_cancelled(topic: str) -> str:
    """Takes forever; cancelled, its helper task's cleanup fails (its nursery lets out a group
    holding the Cancelled beside a ValueError)."""

    async def helper() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError(SECRET)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(helper)
        await trio.sleep_forever()
    return "never"  # pragma: no cover


async def test_a_call_whose_tasks_fail_as_it_is_cut_short_ends_its_span_as_cut_short(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    tools = [fails_as_cancelled, lookup]
    agent = FunctionInvokingChatClient(
        Model([batch("fails_as_cancelled", "lookup"), "done"]),
        tools,
        telemetry=otel.telemetry(),
        tool_timeout=1,
    )
    await run_to_completion(agent, USER)
    errors = {s.name: (s.attributes or {}).get("error.type") for s in otel.named("execute_tool")}
    assert errors == {"execute_tool fails_as_cancelled": "timeout", "execute_tool lookup": None}
    otel.exporter.clear()
    scope = trio.CancelScope(deadline=trio.current_time() + 0.5)
    agent = FunctionInvokingChatClient(
        Model([batch("fails_as_cancelled", "lookup")]), tools, telemetry=otel.telemetry()
    )
    await run_to_completion(agent, USER, RunOptions(cancel_scope=scope))
    errors = {s.name: (s.attributes or {}).get("error.type") for s in otel.named("execute_tool")}
    assert errors == {"execute_tool fails_as_cancelled": "cancelled", "execute_tool lookup": None}
    assert otel.opened.open == set()


async def _interrupted_in_own_nursery() -> None:
    async def helper() -> None:
        await trio.sleep(0.01)
        raise KeyboardInterrupt  # (Ctrl-C lands in a helper task)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(helper)
        await trio.sleep_forever()


@tool
async def interrupted_inside(topic: str) -> str:
    """Its own helper task is interrupted."""
    await _interrupted_in_own_nursery()
    return "never"  # pragma: no cover


async def interrupted_middleware(context: ToolContext, call_next: CallNext) -> ToolCalled:
    await _interrupted_in_own_nursery()
    raise AssertionError("never")  # pragma: no cover


@pytest.mark.parametrize("where", ["tool", "middleware"])
async def test_an_interrupt_in_a_calls_own_nursery_is_named_on_its_span(
    otel: Otel, where: str, autojump_clock: trio.testing.MockClock
) -> None:
    name = "interrupted_inside" if where == "tool" else "lookup"
    agent = FunctionInvokingChatClient(
        Model([batch(name), "never"]),
        [interrupted_inside, lookup],
        telemetry=otel.telemetry(),
        middleware=[interrupted_middleware] if where == "middleware" else [],
    )
    with trio.fail_after(10), pytest.raises(KeyboardInterrupt):
        await run_to_completion(agent, USER)
    (span,) = otel.named("execute_tool")
    assert (span.attributes or {})["error.type"] == "KeyboardInterrupt"
    assert otel.opened.open == set()


async def test_a_cancelled_model_call_and_a_caller_that_leaves_end_every_span(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    slow_model = ScriptedChatClient([[TextDelta("a"), TextDelta("b"), Finish(FinishReason.STOP)]])
    slow_model.delay = 1.0
    agent = FunctionInvokingChatClient(slow_model, telemetry=otel.telemetry())
    async with agent.run(USER) as stream:
        async for _ in stream:
            break
    chat = otel.named("chat")
    assert [s.name for s in chat] == ["chat"]
    assert (chat[0].attributes or {})["error.type"] == "cancelled"
    assert (otel.named("invoke_agent")[0].attributes or {})["error.type"] == "cancelled"
    assert otel.opened.open == set()


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """The names of ``span``'s parents, nearest first."""
    found, names = by_id(spans), []
    while span.parent is not None and span.parent.span_id in found:
        span = found[span.parent.span_id]
        names.append(span.name)
    return names


@pytest.mark.parametrize(
    "options",
    [{}, {"tool_timeout": 10}, {"max_concurrency": 1}, {"eager_tools": True}],
    ids=["plain", "timeout", "limiter", "eager"],
)
async def test_spans_started_inside_a_call_are_children_of_its_span(
    otel: Otel, options: dict[str, Any]
) -> None:
    # What a tool's own code traces (an HTTP client, a database driver, the MCP SDK's request
    # span and the trace context it sends on) belongs to the call's span, in the run's trace:
    # async tools, sync tools in their threads, and middleware, each call under its own span.
    # Real time: a sync tool's worker thread would race the autojump clock.
    tracer = otel.tracer_provider.get_tracer("a tool's library")

    @tool
    async def fetch(topic: str) -> str:
        """Traces its own work."""
        with tracer.start_as_current_span(f"inside {topic}"):
            await trio.sleep(0.01)
        return "fetched"

    @tool
    def fetch_in_thread(topic: str) -> str:
        """Traces its own work, in its worker thread."""
        with tracer.start_as_current_span(f"inside {topic}"):
            return "fetched"

    async def traced(context: ToolContext, call_next: CallNext) -> ToolCalled:
        with tracer.start_as_current_span(f"middleware {context.call.id}"):
            return await call_next(context)

    calls = [
        ToolCall("c1", "fetch", '{"topic": "one"}'),
        ToolCall("c2", "fetch_in_thread", '{"topic": "two"}'),
        ToolCall("c3", "fetch", '{"topic": "three"}'),
    ]
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([tool_calls_response(*calls), "done"]),
        [fetch, fetch_in_thread],
        telemetry=otel.telemetry(),
        middleware=[traced],
        **options,
    )
    outside = trace.get_current_span()
    with trio.fail_after(10):
        await agent.get_response(USER)
    assert trace.get_current_span() is outside  # nothing leaks out
    spans = otel.spans()
    (run,) = otel.named("invoke_agent")
    tool_spans = {
        (s.attributes or {})["gen_ai.tool.call.id"]: s for s in otel.named("execute_tool")
    }
    for call, topic in zip(calls, ["one", "two", "three"], strict=True):
        (inside,) = otel.named(f"inside {topic}")
        assert inside.context.trace_id == run.context.trace_id
        assert ancestors(inside, spans) == [
            f"middleware {call.id}",
            f"execute_tool {call.name}",
            "invoke_agent",
        ]
        (middleware,) = otel.named(f"middleware {call.id}")
        assert middleware.parent is not None
        assert middleware.parent.span_id == tool_spans[call.id].context.span_id
    assert otel.opened.open == set()


class TracedModel:
    """A scripted model traced as an instrumented HTTP client is: a request span, current
    while the response streams, started in the task that enters ``run()``, a span per chunk
    read, and one from a task of its own (a connection's reader)."""

    def __init__(self, script: Sequence[Any], tracer: trace.Tracer, fail: bool = False) -> None:
        self.scripted = ScriptedChatClient(script)
        self.model = "test-model"
        self.tracer = tracer
        self.fail = fail
        self.requests = 0

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        self.requests += 1
        number = self.requests
        with self.tracer.start_as_current_span(f"POST {number}"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader, number)
                async with self.scripted.run(messages, options) as stream:
                    yield self._chunks(stream, number)

    async def _reader(self, number: int) -> None:
        with self.tracer.start_as_current_span(f"reader {number}"):
            await trio.lowlevel.checkpoint()

    async def _chunks(
        self, stream: AsyncIterator[AgentResponseUpdate], number: int
    ) -> AsyncIterator[AgentResponseUpdate]:
        async for update in stream:
            with self.tracer.start_as_current_span(f"chunk {number}"):
                pass
            if self.fail and isinstance(update, ToolCallEnd):
                raise ConnectionError("the server went away")
            yield update


@pytest.mark.parametrize("eager", [False, True])
async def test_what_the_inner_client_traces_is_a_child_of_its_chat_span(
    otel: Otel, eager: bool, autojump_clock: trio.testing.MockClock
) -> None:
    # The chat span is the current span while the inner client streams, in the task that
    # streams it: its HTTP request span (and the traceparent it sends) belongs to the model
    # call, each call's to its own; the tools still belong to the run, not to the model call
    # that asked for them (an eager call starts while the chat span is current).
    tracer = otel.tracer_provider.get_tracer("an HTTP client")

    @tool
    async def fetch(topic: str) -> str:
        """Traces its own work."""
        with tracer.start_as_current_span("inside"):
            await trio.sleep(0.1)
        return "fetched"

    model = TracedModel([batch("fetch", "fetch"), batch("fetch"), "done"], tracer)
    agent = FunctionInvokingChatClient(
        model, [fetch], telemetry=otel.telemetry(), eager_tools=eager
    )
    outside = trace.get_current_span()
    with trio.fail_after(10):
        await agent.get_response(USER)
    assert trace.get_current_span() is outside  # nothing leaks out
    spans = otel.spans()
    chats = otel.named("chat")
    assert len(chats) == 3
    for number in (1, 2, 3):
        (request,) = otel.named(f"POST {number}")
        (reader,) = otel.named(f"reader {number}")
        assert ancestors(request, spans) == ["chat test-model", "invoke_agent"]
        assert ancestors(reader, spans) == [f"POST {number}", "chat test-model", "invoke_agent"]
        assert request.parent is not None
        assert request.parent.span_id == chats[number - 1].context.span_id  # its own call's
        for chunk in otel.named(f"chunk {number}"):
            assert ancestors(chunk, spans)[:2] == [f"POST {number}", "chat test-model"]
    insides = otel.named("inside")
    assert len(insides) == 3
    for inside in insides:
        assert ancestors(inside, spans) == ["execute_tool fetch", "invoke_agent"]
    assert otel.opened.open == set()


async def test_a_failing_inner_client_leaves_no_span_current(
    otel: Otel, autojump_clock: trio.testing.MockClock
) -> None:
    tracer = otel.tracer_provider.get_tracer("an HTTP client")
    model = TracedModel([batch("lookup")], tracer, fail=True)
    agent = FunctionInvokingChatClient(model, [lookup], telemetry=otel.telemetry())
    outside = trace.get_current_span()
    with trio.fail_after(10), pytest.raises(ChatClientError):
        await agent.get_response(USER)
    assert trace.get_current_span() is outside
    (chat,) = otel.named("chat")
    assert chat.status.status_code is StatusCode.ERROR
    (request,) = otel.named("POST 1")
    assert ancestors(request, otel.spans()) == ["chat test-model", "invoke_agent"]
    assert otel.opened.open == set()


async def test_calls_of_a_run_that_is_not_sampled_run_in_its_trace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A run the sampler drops has no call spans; what its tools trace is dropped with it (a
    # child of the unsampled run), not kept as the root of a trace of its own.
    class NoRuns(Sampler):
        """Drops the runs; samples every other root (and follows a parent)."""

        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, *a: Any, **k: Any
        ) -> SamplingResult:
            parent = trace.get_current_span(parent_context).get_span_context()
            if name.startswith("invoke_agent") or (
                parent.is_valid and not parent.trace_flags.sampled
            ):
                return SamplingResult(Decision.DROP)
            return SamplingResult(Decision.RECORD_AND_SAMPLE)

        def get_description(self) -> str:
            return "NoRuns"

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=NoRuns())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("a tool's library")

    @tool
    async def fetch(topic: str) -> str:
        """Traces its own work."""
        with tracer.start_as_current_span("inside"):
            return "fetched"

    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch("fetch"), "done"]),
        [fetch],
        telemetry=Telemetry(tracer_provider=provider),
    )
    await agent.get_response(USER)
    assert [s.name for s in exporter.get_finished_spans()] == []
    provider.shutdown()


@attrs.define
class Recorder:
    """An observer of its own, without OpenTelemetry; ``running`` says whether its call and
    chat observations have the optional ``running()`` (an observer written before it has not)."""

    running: bool
    events: list[str] = attrs.Factory(list)

    def run(self, messages: Sequence[ChatMessage]) -> Recorder:
        self.events.append("run")
        return self

    def chat(self, client: object, messages: Sequence[ChatMessage], options: RunOptions) -> Any:
        events = self.events

        events.append("chat started")

        class Chat:
            def end(self, finish: Any, message: Any, error: BaseException | None) -> None:
                events.append("chat ended")

        class Running(Chat):
            @contextmanager
            def running(self) -> Iterator[None]:
                events.append("chat running")
                try:
                    yield
                finally:
                    events.append("chat left")

        return Running() if self.running else Chat()

    def tool(self, call: ToolCall, tool: Any, arguments: Any) -> Any:
        events = self.events
        events.append(f"{call.id} started")

        class Call:
            def end(self, called: ToolCalled | None, error_type: str | None) -> None:
                events.append(f"{call.id} ended {error_type}")

        class Running(Call):
            @contextmanager
            def running(self) -> Iterator[None]:
                events.append(f"{call.id} running")
                try:
                    yield
                finally:
                    events.append(f"{call.id} left")

        return Running() if self.running else Call()

    def end(self, reason: FinishReason | None, usage: Usage | None, error: str | None) -> None:
        self.events.append(f"run ended {reason}")


@pytest.mark.parametrize("running", [True, False])
async def test_an_observer_runs_each_call_and_stream_inside_its_running_if_it_has_one(
    running: bool, autojump_clock: trio.testing.MockClock
) -> None:
    recorder = Recorder(running)
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch("lookup", "broken", "stalls"), "done"]),
        [lookup, broken, stalls],
        telemetry=recorder,
        tool_timeout=5,
    )
    await agent.get_response(USER)
    assert recorder.events[0] == "run"
    assert recorder.events[-1] == "run ended stop"
    for call, error in [("lookup-0", None), ("broken-1", "RuntimeError"), ("stalls-2", "timeout")]:
        mine = [e for e in recorder.events if e.startswith(call)]
        if running:  # entered after the start, left before the end, around the time limit
            assert mine == [
                f"{call} started",
                f"{call} running",
                f"{call} left",
                f"{call} ended {error}",
            ]
        else:
            assert mine == [f"{call} started", f"{call} ended {error}"]
    chats = [e for e in recorder.events if e.startswith("chat")]
    if running:  # around the whole stream, left before the end, before any call starts
        assert chats == ["chat started", "chat running", "chat left", "chat ended"] * 2
        first_call = recorder.events.index("lookup-0 started")
        assert recorder.events.index("chat left") < first_call
    else:
        assert chats == ["chat started", "chat ended"] * 2


class OwnInterrupt(BaseException):
    """A user's own BaseException: it travels like KeyboardInterrupt."""


INTERRUPTS: list[Callable[[], BaseException]] = [
    KeyboardInterrupt,
    lambda: SystemExit(7),
    OwnInterrupt,
]


@pytest.mark.parametrize("make", INTERRUPTS, ids=lambda make: type(make()).__name__)
@pytest.mark.parametrize("where", ["tool", "sync tool", "middleware", "model", "caller"])
@pytest.mark.parametrize("eager", [False, True])
async def test_an_interrupt_from_anywhere_ends_every_span(
    otel: Otel, make: Callable[[], BaseException], where: str, eager: bool
) -> None:
    # Real time: a sync tool's worker thread would race the autojump clock.
    interrupt = make()

    @tool
    async def interrupts(topic: str) -> str:
        """Raises the interrupt."""
        await trio.sleep(0.01)
        raise interrupt

    @tool
    def interrupts_in_thread(topic: str) -> str:
        """Raises the interrupt in its worker thread."""
        raise interrupt

    async def middleware(context: ToolContext, call_next: CallNext) -> ToolCalled:
        if context.call.name == "interrupts":
            raise interrupt
        return await call_next(context)

    first = {"tool": "interrupts", "sync tool": "interrupts_in_thread"}.get(where, "lookup")
    model: Any = [batch(first, "lookup", "lookup"), "never reached"]
    if where == "middleware":
        model = [batch("lookup", "interrupts", "lookup"), "never reached"]
    elif where == "model":  # mid-stream, a call (started early if eager) running
        model = [[*batch("lookup")[:-1], TextDelta("and"), interrupt]]
    scripted = ScriptedChatClient(model, delay=0.005)  # eager calls run while it streams
    agent = FunctionInvokingChatClient(
        scripted,
        [lookup, interrupts, interrupts_in_thread],
        telemetry=otel.telemetry(),
        middleware=[middleware],
        eager_tools=eager,
    )
    with trio.fail_after(10), pytest.raises(type(interrupt)) as raised:
        async with agent.run(USER) as stream:
            async for update in stream:
                if where == "caller" and isinstance(update, ToolCallEnd):
                    raise interrupt  # the caller's own Ctrl-C, its tools still running
    assert raised.value is interrupt
    assert otel.opened.open == set(), [s.name for s in otel.spans()]
    name = type(interrupt).__name__
    (run,) = otel.named("invoke_agent")  # (a caller that leaves cancels its run, as a break does)
    assert (run.attributes or {})["error.type"] == ("cancelled" if where == "caller" else name)
    assert run.status.status_code is StatusCode.ERROR
    errors = [(s.attributes or {}).get("error.type") for s in otel.named("execute_tool")]
    if where in ("tool", "sync tool", "middleware"):
        assert name in errors
    (chat,) = otel.named("chat")
    if where == "model":
        assert (chat.attributes or {})["error.type"] == name


async def test_an_approval_pause_has_no_span_for_the_waiting_calls(otel: Otel) -> None:
    @tool(requires_approval=True)
    async def launch(topic: str) -> str:
        """Needs a human."""
        return "launched"

    agent = FunctionInvokingChatClient(
        Model([batch("lookup", "launch")]),
        [lookup, launch],
        telemetry=otel.telemetry(agent_name="planner"),
        approval="per_call",
    )
    result = await run_to_completion(agent, USER)
    assert result.updates[-1] == Finish(FinishReason.AWAITING_APPROVAL)
    assert [s.name for s in otel.named("execute_tool")] == ["execute_tool lookup"]
    (run,) = otel.named("invoke_agent")
    assert run.name == "invoke_agent planner"
    assert (run.attributes or {})["gen_ai.agent.name"] == "planner"
    assert (run.attributes or {})["gen_ai.response.finish_reasons"] == ("awaiting_approval",)


async def test_a_failing_model_marks_its_chat_and_run_spans(otel: Otel) -> None:
    agent = FunctionInvokingChatClient(
        Model([[TextDelta("a"), ValueError("the server went away")]]), telemetry=otel.telemetry()
    )
    with pytest.raises(Exception, match="the server went away"):
        await run_to_completion(agent, USER)
    (chat,) = otel.named("chat")
    assert (chat.attributes or {})["error.type"] == "ChatClientError"
    (run,) = otel.named("invoke_agent")
    assert (run.attributes or {})["error.type"] == "ChatClientError"
    assert otel.opened.open == set()


async def test_metrics_count_tokens_by_type_and_time_each_model_call(otel: Otel) -> None:
    script = [batch("lookup", usage=Usage(100, 7)), [Finish(FinishReason.STOP, Usage(5, 1))]]
    agent = FunctionInvokingChatClient(Model(script), [lookup], telemetry=otel.telemetry())
    await run_to_completion(agent, USER)
    tokens = {
        (p.attributes["gen_ai.token.type"]): (p.sum, p.count)
        for p in otel.points("gen_ai.client.token.usage")
    }
    assert tokens == {"input": (105, 2), "output": (8, 2)}
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    assert duration.attributes["gen_ai.request.model"] == "test-model"
    assert duration.attributes["gen_ai.operation.name"] == "chat"


async def test_metric_buckets_are_the_semantic_conventions_advice_in_full(otel: Otel) -> None:
    # gen_ai.client.operation.duration: seconds doubling from 0.01 to 81.92 (a model call of a
    # minute is not an overflow); gen_ai.client.token.usage: powers of 4 up to 4**13.
    agent = FunctionInvokingChatClient(
        Model([[TextDelta("hi"), Finish(FinishReason.STOP, Usage(3, 1))]]),
        telemetry=otel.telemetry(),
    )
    await run_to_completion(agent, USER)
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert tuple(duration.explicit_bounds) == tuple(0.01 * 2**n for n in range(14))
    assert duration.explicit_bounds[-1] == 81.92
    for tokens in otel.points("gen_ai.client.token.usage"):
        assert tuple(tokens.explicit_bounds) == tuple(4**n for n in range(14))
        assert tokens.explicit_bounds[-1] == 67108864


async def test_without_an_sdk_it_does_nothing_and_breaks_nothing() -> None:
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch("lookup"), "done"]), [lookup], telemetry=Telemetry()
    )
    result = await run_to_completion(agent, USER)
    assert [type(u) for u in result.updates][-2:] == [TextDelta, Finish]
    assert any(isinstance(u, ToolCalled) for u in result.updates)


@pytest.mark.parametrize("sdk", ["none", "sampled", "dropped"])
async def test_the_calls_are_observed_unless_no_sdk_is_configured(
    sdk: str, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """Without an SDK a run's calls would each get a span that records nothing and a context
    that is no one's: the run says it ``observes_tools`` not, and its calls run bare."""
    told: list[str] = []
    tool_of_run = trio_invoke.otel._telemetry._Run.tool

    def spied(self: Any, call: ToolCall, *args: Any) -> Any:
        told.append(call.id)
        return tool_of_run(self, call, *args)

    monkeypatch.setattr(trio_invoke.otel._telemetry._Run, "tool", spied)
    provider = None
    if sdk != "none":

        class Drops(Sampler):
            def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
                return SamplingResult(Decision.DROP)

            def get_description(self) -> str:
                return "Drops"

        provider = TracerProvider(sampler=Drops()) if sdk == "dropped" else TracerProvider()
    telemetry = Telemetry(tracer_provider=provider)
    assert telemetry.run(USER).observes_tools is (sdk != "none")
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([batch("lookup", "broken", "stalls"), "done"]),
        [lookup, broken, stalls],
        telemetry=telemetry,
        tool_timeout=5,
    )
    with trio.fail_after(30):
        result = await run_to_completion(agent, USER)
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    errors = {call_id: u.is_error for call_id, u in called.items()}
    assert errors == {"lookup-0": False, "broken-1": True, "stalls-2": True}  # observed or not
    assert isinstance(called["stalls-2"].exception, ToolTimeoutError)
    assert sorted(told) == ([] if sdk == "none" else ["broken-1", "lookup-0", "stalls-2"])
    if provider is not None:
        provider.shutdown()


@pytest.mark.parametrize("observes_tools", [True, False, "absent", "raises"])
async def test_an_observer_that_observes_no_tools_is_told_of_none(
    observes_tools: bool | str,
) -> None:
    recorder = Recorder(running=True)
    if observes_tools == "raises":  # a broken observer: its calls are observed
        recorder = BrokenToolsOrNot(running=True)
    elif observes_tools != "absent":
        recorder = ToolsOrNot(running=True, observes_tools=observes_tools)
    model = ScriptedChatClient([batch("lookup", "broken"), "done"])
    agent = FunctionInvokingChatClient(model, [lookup, broken], telemetry=recorder)
    with trio.fail_after(5):
        result = await run_to_completion(agent, USER)
    errors = [u.is_error for u in result.updates if isinstance(u, ToolCalled)]
    assert sorted(errors) == [False, True]
    calls = [e for e in recorder.events if e.startswith(("lookup", "broken"))]
    if observes_tools is False:
        assert calls == []
        assert recorder.events.count("chat started") == 2  # the model calls still are
    else:
        assert "lookup-0 started" in calls
        assert "broken-1 ended RuntimeError" in calls
    assert recorder.events[-1] == "run ended stop"


@attrs.define
class ToolsOrNot(Recorder):
    """A :class:`Recorder` that says whether it observes the tool calls."""

    observes_tools: bool = True


class BrokenToolsOrNot(Recorder):
    """A :class:`Recorder` whose ``observes_tools`` raises."""

    @property
    def observes_tools(self) -> bool:
        raise RuntimeError("broken")


@pytest.mark.parametrize("bad", [True, False, 1, "otel", Telemetry, object()])
def test_telemetry_that_is_not_an_observer_is_a_type_error_where_it_is_given(bad: Any) -> None:
    with pytest.raises(TypeError, match="telemetry"):
        FunctionInvokingChatClient(ScriptedChatClient(["x"]), telemetry=bad)
    agent = FunctionInvokingChatClient(ScriptedChatClient(["x"]))
    with pytest.raises(TypeError, match="telemetry"):
        agent.telemetry = bad
    assert agent.telemetry is None


@pytest.mark.parametrize(
    ("option", "bad"),
    [
        ("capture_content", "false"),
        ("capture_content", 0),
        ("capture_content", None),
        ("agent_name", 7),
        ("agent_name", b"agent"),
    ],
)
async def test_options_of_the_wrong_type_are_a_configuration_error(
    otel: Otel, option: str, bad: Any
) -> None:
    with pytest.raises(ConfigurationError, match=option):
        otel.telemetry(**{option: bad})
    telemetry = otel.telemetry()
    with pytest.raises(ConfigurationError, match=option):
        setattr(telemetry, option, bad)
    # Above all, no content goes out from a run with a string that reads "false".
    agent = FunctionInvokingChatClient(
        Model([batch("lookup"), "Done."]), [lookup], telemetry=telemetry
    )
    await run_to_completion(agent, USER)
    for span in otel.spans():
        assert SECRET not in str(span.attributes)


def test_import_without_opentelemetry_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    for name in [n for n in sys.modules if n.startswith("trio_invoke.otel")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r'pip install "trio-invoke\[otel\] @ git\+https://'):
        import trio_invoke.otel  # noqa: F401


class NurseryModel:
    """A model client that streams inside a nursery of its own (a connection's reader task, a
    keep-alive): cut short, what leaves its ``run()`` is a group holding the ``Cancelled`` (or
    the interrupt)."""

    model = "test-model"

    def __init__(self, interrupt: BaseException | None = None) -> None:
        self.interrupt = interrupt

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._reader)
            yield self._updates()
            nursery.cancel_scope.cancel()

    async def _reader(self) -> None:
        await trio.sleep(0.5)
        if self.interrupt is not None:
            raise self.interrupt
        await trio.sleep_forever()

    async def _updates(self) -> AsyncIterator[AgentResponseUpdate]:
        yield TextDelta("a")
        await trio.sleep(10)
        yield Finish(FinishReason.STOP)


@pytest.mark.parametrize("how", ["run's scope", "caller's scope", "interrupt"])
async def test_a_model_call_cut_short_in_its_clients_own_nursery_names_what_cut_it(
    otel: Otel, how: str, autojump_clock: trio.testing.MockClock
) -> None:
    # The chat span's error.type (and the duration metric's) is "cancelled" or the interrupt's
    # name, as for a tool call whose own nursery lets out the group, never "BaseExceptionGroup".
    interrupt = KeyboardInterrupt() if how == "interrupt" else None
    agent = FunctionInvokingChatClient(NurseryModel(interrupt), telemetry=otel.telemetry())
    with trio.fail_after(100):
        if how == "run's scope":
            scope = trio.CancelScope(deadline=trio.current_time() + 1)
            await run_to_completion(agent, USER, RunOptions(cancel_scope=scope))
        elif how == "caller's scope":
            with trio.move_on_after(1):
                await run_to_completion(agent, USER)
        else:
            with pytest.raises(KeyboardInterrupt):
                await run_to_completion(agent, USER)
    expected = "KeyboardInterrupt" if how == "interrupt" else "cancelled"
    (chat,) = otel.named("chat")
    assert (chat.attributes or {})["error.type"] == expected
    assert chat.status.status_code is StatusCode.ERROR
    (run,) = otel.named("invoke_agent")
    assert (run.attributes or {})["error.type"] == expected
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == expected
    assert otel.opened.open == set()


class Faulty(SpanProcessor):
    """A span processor (an exporter's, a user's own) that raises for the spans it is told of."""

    def __init__(self, when: str, prefix: str) -> None:
        self.when, self.prefix = when, prefix

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.when == "start" and span.name.startswith(self.prefix):
            raise RuntimeError("the processor broke")

    def on_end(self, span: ReadableSpan) -> None:
        if self.when == "end" and span.name.startswith(self.prefix):
            raise RuntimeError("the processor broke")


class FaultyHistogram(metrics.NoOpHistogram):
    def record(self, amount: Any, attributes: Any = None, context: Any = None) -> None:
        raise RuntimeError("the meter broke")


class FaultyMeter(metrics.NoOpMeter):
    def create_histogram(self, name: str, *args: Any, **kwargs: Any) -> metrics.Histogram:
        return FaultyHistogram(name)


class FaultyMeterProvider(metrics.NoOpMeterProvider):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> metrics.Meter:
        return FaultyMeter(name)


@pytest.mark.parametrize(
    ("when", "prefix"),
    [(when, prefix) for when in ("start", "end") for prefix in ("invoke", "chat", "execute")]
    + [("record", "")],
)
async def test_a_failing_tracer_or_meter_never_changes_the_run(
    otel: Otel,
    when: str,
    prefix: str,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Telemetry only watches: an SDK, exporter or processor that raises is logged, and the run
    # (its results, its transcript, how it ends) is what it is without telemetry.
    if when == "record":
        telemetry = Telemetry(
            tracer_provider=otel.tracer_provider, meter_provider=FaultyMeterProvider()
        )
    else:
        otel.tracer_provider.add_span_processor(Faulty(when, prefix))
        telemetry = otel.telemetry(capture_content=True)
    script = [batch("lookup", "broken", usage=Usage(3, 1)), "done"]
    agent = FunctionInvokingChatClient(Model(script), [lookup, broken], telemetry=telemetry)
    with trio.fail_after(10):
        result = await run_to_completion(agent, USER)
    plain = await run_to_completion(
        FunctionInvokingChatClient(Model(script), [lookup, broken]), USER
    )
    assert result.messages == plain.messages
    assert result.updates[-1] == Finish(FinishReason.STOP, Usage(3, 1))
    assert_transcript_valid([*USER, *result.messages])
    assert "the processor broke" in caplog.text or "the meter broke" in caplog.text
    started = {span.context.span_id for span in otel.spans()}
    if when != "start":  # (a span whose start failed was never handed back to end)
        assert otel.opened.open == set()
        assert len(started) == 5


async def test_every_attribute_is_valid_unicode_whatever_the_model_or_a_tool_holds(
    otel: Otel,
) -> None:
    # A lone surrogate (a hostile server's "\ud800" in JSON) in a call id, a tool's description
    # or anything captured would make an exporter's UTF-8 encoding fail, and lose the batch.
    @tool(description="Looks \ud800 up.")
    async def odd(topic: str) -> str:
        return "result \udfff"

    call = ToolCall("call-\ud800", "odd", '{"topic": "\\ud800"}')
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([tool_calls_response(call), "done \ud800"]),
        [odd],
        telemetry=otel.telemetry(capture_content=True),
    )
    await run_to_completion(agent, USER)
    assert len(otel.spans()) == 4
    for span in otel.spans():
        for value in (span.attributes or {}).values():
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, str):
                    item.encode()  # raises UnicodeEncodeError on a lone surrogate
    (tool_span,) = otel.named("execute_tool")
    assert (tool_span.attributes or {})["gen_ai.tool.call.id"] == "call-\ufffd"


# -- who the model call went to: gen_ai.provider.name, server.address / server.port ------------


def chat_span_of(otel: Otel, client: object) -> ReadableSpan:
    """The chat span of one model call to ``client``, observed as the loop observes it."""
    run = otel.telemetry().run(USER)
    run.chat(client, USER, RunOptions()).end(None, None, None)
    run.end(FinishReason.STOP, None, None)
    (chat,) = otel.named("chat")
    return chat


@pytest.mark.parametrize(
    ("base_url", "provider", "address", "port"),
    [
        ("https://api.openai.com/v1", "openai", "api.openai.com", 443),
        ("https://eu.api.openai.com/v1", "openai", "eu.api.openai.com", 443),
        (
            "https://my-rg.openai.azure.com/openai/v1",
            "azure.ai.openai",
            "my-rg.openai.azure.com",
            443,
        ),
        ("https://my-rg.cognitiveservices.azure.com/openai/v1", "azure.ai.openai", None, 443),
        ("https://my-hub.services.ai.azure.com/models", "azure.ai.inference", None, 443),
        ("https://api.deepseek.com", "deepseek", "api.deepseek.com", 443),
        ("https://api.groq.com/openai/v1", "groq", "api.groq.com", 443),
        ("https://api.mistral.ai/v1", "mistral_ai", "api.mistral.ai", 443),
        ("https://api.x.ai/v1", "x_ai", "api.x.ai", 443),
        ("https://API.Moonshot.ai./v1", "moonshot_ai", "api.moonshot.ai.", 443),
        ("https://api.perplexity.ai", "perplexity", None, 443),
        ("https://api.cohere.ai/compatibility/v1", "cohere", None, 443),
        (
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "gcp.gemini",
            "generativelanguage.googleapis.com",
            443,
        ),
        ("https://us-central1-aiplatform.googleapis.com/v1/projects/p", "gcp.vertex_ai", None, 443),
        ("https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1", "aws.bedrock", None, 443),
        ("https://openrouter.ai/api/v1", "openrouter", "openrouter.ai", 443),
        ("http://localhost:11434/v1", "openai", "localhost", 11434),
        ("http://10.0.0.7/v1", "openai", "10.0.0.7", 80),
        ("https://llm.example.com:8443/v1", "openai", "llm.example.com", 8443),
        ("https://api.groq.com.example.net/v1", "openai", None, 443),  # not Groq's host
    ],
)
def test_an_openai_client_names_who_serves_its_base_url(
    otel: Otel, base_url: str, provider: str, address: str | None, port: int
) -> None:
    # gen_ai.provider.name is what the host is (the conventions' well-known values), not the
    # API the client speaks: "openai" only for OpenAI's hosts and hosts it does not know.
    client = trio_invoke.OpenAIChatClient("m", base_url=base_url, api_key="k")
    assert client.provider_name == provider
    attributes = chat_span_of(otel, client).attributes or {}
    assert attributes["gen_ai.provider.name"] == provider
    if address is not None:
        assert attributes["server.address"] == address.lower()
    assert attributes["server.port"] == port


@pytest.mark.parametrize(
    ("base_url", "provider"),
    [
        ("https://api.anthropic.com", "anthropic"),
        ("https://api.deepseek.com/anthropic", "deepseek"),
        ("https://api.moonshot.ai/anthropic", "moonshot_ai"),
        ("http://127.0.0.1:8080", "anthropic"),
    ],
)
def test_an_anthropic_client_names_who_serves_its_base_url(
    otel: Otel, base_url: str, provider: str
) -> None:
    client = trio_invoke.AnthropicChatClient("m", base_url=base_url, api_key="k")
    assert client.provider_name == provider
    attributes = chat_span_of(otel, client).attributes or {}
    assert attributes["gen_ai.provider.name"] == provider


def test_a_clients_own_provider_name_and_base_url_are_read_like_its_model(otel: Otel) -> None:
    model = Model([])
    model.provider_name = "my_lab"  # type: ignore[attr-defined]
    model.base_url = "https://inference.my-lab.example:9000/v2"  # type: ignore[attr-defined]
    attributes = chat_span_of(otel, model).attributes or {}
    assert attributes["gen_ai.provider.name"] == "my_lab"
    assert attributes["server.address"] == "inference.my-lab.example"
    assert attributes["server.port"] == 9000
    assert attributes["gen_ai.request.model"] == "test-model"


async def test_prompt_cache_tokens_are_on_the_chat_and_run_spans(otel: Otel) -> None:
    cached = Usage(100, 7, cache_read_input_tokens=80, cache_creation_input_tokens=15)
    script = [
        batch("lookup", usage=cached),
        [TextDelta("done"), Finish(FinishReason.STOP, Usage(50, 2, cache_read_input_tokens=40))],
    ]
    agent = FunctionInvokingChatClient(Model(script), [lookup], telemetry=otel.telemetry())
    await run_to_completion(agent, USER)
    first, second = (span.attributes or {} for span in otel.named("chat"))
    assert first["gen_ai.usage.input_tokens"] == 100
    assert first["gen_ai.usage.cache_read.input_tokens"] == 80
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 15
    assert second["gen_ai.usage.cache_read.input_tokens"] == 40
    assert "gen_ai.usage.cache_creation.input_tokens" not in second  # none: left out
    (run,) = otel.named("invoke_agent")
    assert (run.attributes or {})["gen_ai.usage.cache_read.input_tokens"] == 120
    assert (run.attributes or {})["gen_ai.usage.cache_creation.input_tokens"] == 15


async def test_the_run_span_names_the_provider_and_model_of_its_first_model_call(
    otel: Otel,
) -> None:
    model = Model([batch("lookup"), [TextDelta("done"), Finish(FinishReason.STOP)]])
    model.provider_name = "my_lab"  # type: ignore[attr-defined]
    agent = FunctionInvokingChatClient(model, [lookup], telemetry=otel.telemetry())
    await run_to_completion(agent, USER)
    (run,) = otel.named("invoke_agent")
    assert (run.attributes or {})["gen_ai.provider.name"] == "my_lab"
    assert (run.attributes or {})["gen_ai.request.model"] == "test-model"
    # A client that says neither: the run's span says neither.
    otel.exporter.clear()
    plain = ScriptedChatClient(["hi"])
    await run_to_completion(FunctionInvokingChatClient(plain, telemetry=otel.telemetry()), USER)
    (run,) = otel.named("invoke_agent")
    assert "gen_ai.provider.name" not in (run.attributes or {})
    assert "gen_ai.request.model" not in (run.attributes or {})


@tool(requires_approval=True)
async def launch(topic: str) -> str:
    """Needs a human."""
    return "launched"


@tool
async def stops(topic: str) -> str:
    """Ends the run."""
    raise StopLoop("stopped")


def resumable(name: str) -> list[ChatMessage]:
    """A conversation that waits for the approval of one call of ``name``."""
    call = ToolCall(f"{name}-0", name, '{"topic": "plans"}')
    return [*USER, ChatMessage(MessageRole.ASSISTANT, tool_calls=(call,))]


@pytest.mark.parametrize("case", ["resume capped", "resume stops", "cancelled", "sampler"])
async def test_a_run_that_makes_no_model_call_names_its_provider_and_model(
    otel: Otel, case: str
) -> None:
    model = Model([])  # any model call would be past the end of its script
    model.provider_name = "my_lab"  # type: ignore[attr-defined]
    seen: list[dict[str, Any]] = []

    class Sees(Sampler):
        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
            attributes: Any = None, *a: Any, **k: Any,
        ) -> SamplingResult:  # fmt: skip
            seen.append(dict(attributes or {}))
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

        def get_description(self) -> str:
            return "sees"

    telemetry = otel.telemetry()
    if case == "sampler":
        provider = TracerProvider(sampler=Sees())
        provider.add_span_processor(SimpleSpanProcessor(otel.exporter))
        telemetry = Telemetry(tracer_provider=provider)
    options = RunOptions(tool_approval_responses=[ToolApprovalResponse("launch-0", approved=True)])
    messages = resumable("launch")
    if case == "resume stops":
        options = RunOptions(tool_approval_responses=[ToolApprovalResponse("stops-0", True)])
        messages = resumable("stops")
    elif case == "cancelled":
        scope = trio.CancelScope()
        scope.cancel()
        options, messages = RunOptions(cancel_scope=scope), USER
    agent = FunctionInvokingChatClient(
        model, [launch, ApprovalRequiredTool(stops)], max_rounds=1, telemetry=telemetry
    )
    await run_to_completion(agent, messages, options)
    assert model.scripted.calls == []
    assert otel.named("chat") == []
    (run,) = otel.named("invoke_agent")
    attributes = run.attributes or {}
    assert attributes["gen_ai.provider.name"] == "my_lab"
    assert attributes["gen_ai.request.model"] == "test-model"
    if case == "sampler":  # at the span's start
        assert seen[0]["gen_ai.provider.name"] == "my_lab"
        assert seen[0]["gen_ai.request.model"] == "test-model"
        assert seen[0]["gen_ai.operation.name"] == "invoke_agent"
        provider.shutdown()


async def test_an_observer_without_run_with_is_still_told_each_run(otel: Otel) -> None:
    # ``run_with`` is optional: Telemetry's own ``run`` (without the client) takes the provider
    # and the model of the first model call.
    telemetry = otel.telemetry()

    class Plain:
        def run(self, messages: Sequence[ChatMessage]) -> Any:
            return telemetry.run(messages)

    model = Model([["hi"]])
    model.provider_name = "my_lab"  # type: ignore[attr-defined]
    await run_to_completion(FunctionInvokingChatClient(model, telemetry=Plain()), USER)
    (run,) = otel.named("invoke_agent")
    assert (run.attributes or {})["gen_ai.provider.name"] == "my_lab"
    assert (run.attributes or {})["gen_ai.request.model"] == "test-model"


@pytest.mark.parametrize("value", [None, "", 7, b"openai", "unix:///tmp/x.sock", "http://[::1"])
def test_what_a_client_does_not_say_is_left_out(otel: Otel, value: object) -> None:
    model = Model([])
    model.provider_name = value  # type: ignore[attr-defined]
    model.base_url = value  # type: ignore[attr-defined]
    attributes = chat_span_of(otel, model).attributes or {}
    assert "server.address" not in attributes
    assert "server.port" not in attributes
    if not (isinstance(value, str) and value):
        assert "gen_ai.provider.name" not in attributes


async def test_a_sampler_sees_who_a_model_call_goes_to_when_its_span_starts() -> None:
    # The conventions ask for the operation, provider, model and server at the span's start,
    # where a sampler decides.
    seen: dict[str, Any] = {}

    class Watching(Sampler):
        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
            attributes: Any = None, *a: Any, **k: Any,
        ) -> SamplingResult:  # fmt: skip
            if name.startswith("chat"):
                seen.update(attributes or {})
            return SamplingResult(Decision.RECORD_AND_SAMPLE)

        def get_description(self) -> str:
            return "Watching"

    provider = TracerProvider(sampler=Watching())
    client = trio_invoke.OpenAIChatClient("gpt-x", base_url="https://api.groq.com/openai/v1")
    run = Telemetry(tracer_provider=provider).run(USER)
    run.chat(client, USER, RunOptions()).end(None, None, None)
    run.end(None, None, None)
    provider.shutdown()
    assert seen == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "groq",
        "gen_ai.request.model": "gpt-x",
        "server.address": "api.groq.com",
        "server.port": 443,
    }


async def test_a_model_call_over_http_is_described_on_its_span_and_its_metrics(
    otel: Otel,
) -> None:
    from sse_server import Reply, SSEServer

    def chunk(**fields: Any) -> dict[str, Any]:
        return {"id": "chatcmpl-1", "model": "m-0613", "choices": [], **fields}

    chunks = [
        chunk(choices=[{"index": 0, "delta": {"content": "hi"}}]),
        chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        chunk(usage={"prompt_tokens": 3, "completion_tokens": 1}),
        "[DONE]",
    ]
    body = "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)
    server = SSEServer([Reply([body.encode()])])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with trio_invoke.OpenAIChatClient("m", base_url=server.url) as model:
            agent = FunctionInvokingChatClient(model, telemetry=otel.telemetry())
            with trio.fail_after(10):
                await agent.get_response(USER)
        nursery.cancel_scope.cancel()
    (chat,) = otel.named("chat")
    where = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "server.address": "127.0.0.1",
        "server.port": server.port,
    }
    assert where.items() <= dict(chat.attributes or {}).items()
    # What the response said of itself: the model that answered and the completion's id.
    assert (chat.attributes or {})["gen_ai.response.model"] == "m-0613"
    assert (chat.attributes or {})["gen_ai.response.id"] == "chatcmpl-1"
    where["gen_ai.response.model"] = "m-0613"  # on the metrics too; the id is not
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert dict(duration.attributes) == where
    tokens = otel.points("gen_ai.client.token.usage")
    assert sorted(p.attributes["gen_ai.token.type"] for p in tokens) == ["input", "output"]
    for point in tokens:
        assert dict(point.attributes) == {
            **where,
            "gen_ai.token.type": point.attributes["gen_ai.token.type"],
        }
    assert otel.opened.open == set()


async def test_an_anthropic_response_names_its_model_and_id_on_the_chat_span(otel: Otel) -> None:
    from anthropic_streams import MODEL, message_end, message_start, text_block
    from sse_server import Reply, SSEServer

    body = message_start(msg_id="msg_01XYZ") + text_block(0, "hi") + message_end()
    server = SSEServer([Reply([body])])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with trio_invoke.AnthropicChatClient("claude-x", base_url=server.root) as model:
            agent = FunctionInvokingChatClient(model, telemetry=otel.telemetry())
            with trio.fail_after(10):
                await agent.get_response(USER)
        nursery.cancel_scope.cancel()
    (chat,) = otel.named("chat")
    attributes = chat.attributes or {}
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.request.model"] == "claude-x"
    assert attributes["gen_ai.response.model"] == MODEL
    assert attributes["gen_ai.response.id"] == "msg_01XYZ"
    assert (attributes["server.address"], attributes["server.port"]) == ("127.0.0.1", server.port)


@pytest.mark.parametrize("eager", [False, True])
async def test_a_model_call_a_tool_makes_is_not_the_runs(otel: Otel, eager: bool) -> None:
    # A tool that calls a model itself (no telemetry of its own), started while the run's
    # model still streams (eager): what that response says of itself is not the run's model
    # call's, even when the run's model names neither its model nor an id.
    from sse_server import Reply, SSEServer

    def body(chunk: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()

    call = {"index": 0, "id": "c1", "function": {"name": "ask", "arguments": "{}"}}
    model_replies = [
        Reply([body({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})]),
        Reply([body({"choices": [{"index": 0, "delta": {"content": "ok"}}]})]),
    ]
    tool_reply = Reply(
        [body({"id": "tool-response", "model": "tool-model", "choices": [
            {"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]})]
    )  # fmt: skip
    model_server, tool_server = SSEServer(model_replies), SSEServer([tool_reply])

    async with trio.open_nursery() as nursery:
        await nursery.start(model_server.serve)
        await nursery.start(tool_server.serve)
        async with trio_invoke.OpenAIChatClient("m", base_url=tool_server.url) as helper:

            @tool
            async def ask() -> str:
                """Asks another model."""
                text = ""
                async with helper.run([ChatMessage.user("?")]) as updates:
                    async for update in updates:
                        if isinstance(update, TextDelta):
                            text += update.text
                return text

            async with trio_invoke.OpenAIChatClient("m", base_url=model_server.url) as model:
                agent = FunctionInvokingChatClient(
                    model, [ask], telemetry=otel.telemetry(), eager_tools=eager
                )
                with trio.fail_after(10):
                    result = await run_to_completion(agent, USER)
        nursery.cancel_scope.cancel()
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert (called.result, called.is_error) == ("x", False)  # the tool's model answered
    chats = otel.named("chat")
    assert len(chats) == 2
    for chat in chats:
        assert "gen_ai.response.id" not in (chat.attributes or {})
        assert "gen_ai.response.model" not in (chat.attributes or {})
    for point in otel.points("gen_ai.client.operation.duration"):
        assert "gen_ai.response.model" not in point.attributes


async def test_a_client_whose_attributes_raise_runs_as_without_telemetry(otel: Otel) -> None:
    # A wrapper that looks everything up (``__getattr__``) and raises KeyError, or a property
    # that raises: telemetry only watches, the run goes on with the span less described.
    class Wrapper:
        def __init__(self) -> None:
            self.inner = ScriptedChatClient(["hello"])

        def __getattr__(self, name: str) -> Any:
            raise KeyError(name)

        def run(self, messages: Sequence[ChatMessage], options: RunOptions | None = None) -> Any:
            return self.inner.run(messages, options)

    agent = FunctionInvokingChatClient(Wrapper(), telemetry=otel.telemetry())
    with trio.fail_after(10):
        response = await agent.get_response(USER)
    assert response.text == "hello"
    (chat,) = otel.named("chat")
    assert chat.name == "chat"
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.response.finish_reasons": ("stop",),
    }


def test_a_base_url_set_later_names_its_provider(otel: Otel) -> None:
    client = trio_invoke.OpenAIChatClient("m", base_url="https://api.openai.com/v1")
    client.base_url = "https://api.groq.com/openai/v1"
    assert client.provider_name == "groq"
    attributes = chat_span_of(otel, client).attributes or {}
    assert (attributes["gen_ai.provider.name"], attributes["server.address"]) == (
        "groq",
        "api.groq.com",
    )
    with pytest.raises(AttributeError, match="derived"):
        client.provider_name = "openai"
