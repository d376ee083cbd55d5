"""A worked example: property tests of your own tools and chat client with trio_invoke.testing.

This file is written as a user of trio_invoke would write it, and runs in our suite so it stays
true. It tests:

1. a ``@tool`` function, against whatever JSON object a model may send it (``tool_arguments``);
2. a tool whose schema is data, against any schema and valid arguments (``schemas_with_arguments``);
3. a ``ChatClient`` implementation (a toy provider adapter, below), against any chunking and
   interleaving of streamed tool calls (``tool_call_streams``), alone and under the loop;
4. an agent whose model answers from what a tool returned (``FunctionChatClient``).

Hypothesis and Trio: ``@given`` tests are plain functions that call ``trio.run`` once per
example, opening whatever they need inside it (no async fixtures). A ``MockClock`` with
``autojump_threshold=0`` makes sleeps instant.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    AgentResponseUpdate,
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    TextDelta,
    ToolCall,
    ToolCallAccumulator,
    ToolCallArgs,
    ToolCalled,
    ToolCallEnd,
    ToolCallStart,
    tool,
)
from trio_invoke.testing import (
    FunctionChatClient,
    RunResult,
    assert_transcript_valid,
    run_to_completion,
    schemas_with_arguments,
    tool_arguments,
    tool_call_streams,
    tool_calls_response,
)

USER = [ChatMessage.user("go")]


def run_agent(model: Any, tools: Sequence[Any], conversation: Sequence[ChatMessage]) -> RunResult:
    """Run the loop over ``model`` and ``tools`` to the end, on a virtual clock."""

    async def main() -> RunResult:
        agent = FunctionInvokingChatClient(model, tools)
        result = await run_to_completion(agent, conversation)
        assert_transcript_valid([*conversation, *result.messages])  # in every test, for free
        return result

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- 1. your @tool, against anything a model may send -----------------------------------------


@tool
def word_count(text: str, unique: bool = False) -> int:
    """Count the words in a text.

    Args:
        text: The text.
        unique: Count each distinct word once.
    """
    words = text.split()
    return len(set(words)) if unique else len(words)


fitting_arguments = st.fixed_dictionaries({"text": st.text()}, optional={"unique": st.booleans()})


def expected_count(arguments: dict[str, Any]) -> int | None:
    """What ``word_count`` must answer, worked out by hand from its signature rather than with
    the library under test: ``None`` when the arguments do not fit it (a missing or non-string
    ``text``, a ``unique`` that is not a boolean, a parameter it does not have)."""
    text, unique = arguments.get("text"), arguments.get("unique", False)
    if set(arguments) - {"text", "unique"} or not isinstance(text, str):
        return None
    if not isinstance(unique, bool):
        return None
    words = text.split()
    return len(set(words)) if unique else len(words)


@given(tool_arguments() | fitting_arguments)
def test_word_count_answers_whatever_the_model_sends(arguments: dict[str, Any]) -> None:
    call = ToolCall("call_1", "word_count", json.dumps(arguments))
    model = ScriptedChatClient([tool_calls_response(call), "Counted."])
    result = run_agent(model, [word_count], USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    expected = expected_count(arguments)
    if expected is None:
        assert called.is_error  # goes back to the model, which can correct itself
        assert called.result.startswith("Error: invalid arguments for tool 'word_count': ")
    else:
        assert not called.is_error
        assert called.result == str(expected)


# -- 2. a tool whose schema is data, against any schema ---------------------------------------


class EndpointTool:
    """A tool made from configuration (one operation of an HTTP API, say): its schema is data,
    and it forwards the arguments to a backend."""

    requires_approval = False

    def __init__(
        self,
        name: str,
        parameters: dict[str, Any],
        backend: Callable[[str, dict[str, Any]], Awaitable[Any]],
    ) -> None:
        self.name = name
        self.description = f"Call the {name} endpoint."
        self.parameters = parameters
        self.backend = backend

    async def execute(self, arguments: dict[str, Any]) -> Any:
        return await self.backend(self.name, arguments)


@given(schemas_with_arguments())
def test_endpoint_tool_gets_exactly_what_the_model_sent(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    schema, arguments = case
    received: list[dict[str, Any]] = []

    async def backend(name: str, body: dict[str, Any]) -> Any:
        received.append(body)
        return {"status": "created"}

    endpoint = EndpointTool("create_ticket", schema, backend)
    call = ToolCall("call_1", "create_ticket", json.dumps(arguments))
    result = run_agent(
        ScriptedChatClient([tool_calls_response(call), "Created."]), [endpoint], USER
    )
    assert received == [arguments]  # validated, nothing dropped or coerced on the way
    assert result.messages[1] == ChatMessage.tool_result(call, '{"status":"created"}')


# -- 3. your ChatClient, against any chunking and interleaving --------------------------------


class LinesChatClient:
    """A toy ``ChatClient`` for a made-up provider that streams JSON lines::

        {"type": "text", "delta": "..."}
        {"type": "call", "id": "...", "name": "..."}     a tool call starts
        {"type": "args", "id": "...", "delta": "..."}    a piece of its arguments
        {"type": "done", "reason": "stop" | "tool_calls"}

    The provider never says when one call ends, so the client ends every open call at "done".
    ``server`` stands in for the network: it returns the lines for a conversation.
    """

    def __init__(self, server: Callable[[Sequence[ChatMessage]], list[str]]) -> None:
        self.server = server

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        async with aclosing(self._updates(self.server(messages))) as updates:
            yield updates

    async def _updates(self, lines: list[str]) -> AsyncGenerator[AgentResponseUpdate, None]:
        open_calls: list[str] = []
        for line in lines:
            await trio.lowlevel.checkpoint()  # a real client awaits the network here
            event = json.loads(line)
            match event["type"]:
                case "text":
                    yield TextDelta(event["delta"])
                case "call":
                    open_calls.append(event["id"])
                    yield ToolCallStart(event["id"], event["name"])
                case "args":
                    yield ToolCallArgs(event["id"], event["delta"])
                case "done":
                    for call_id in open_calls:
                        yield ToolCallEnd(call_id)
                    yield Finish(FinishReason(event["reason"]))


def provider_lines(updates: Sequence[AgentResponseUpdate]) -> list[str]:
    """What the made-up provider sends for ``updates`` (the inverse of ``LinesChatClient``)."""
    lines: list[dict[str, Any]] = []
    for update in updates:
        match update:
            case TextDelta(text):
                lines.append({"type": "text", "delta": text})
            case ToolCallStart(call_id, name):
                lines.append({"type": "call", "id": call_id, "name": name})
            case ToolCallArgs(call_id, delta):
                lines.append({"type": "args", "id": call_id, "delta": delta})
            case Finish(reason):
                lines.append({"type": "done", "reason": reason.value})
            case ToolCallEnd():
                pass  # no such line: calls end with "done"
    return [json.dumps(line) for line in lines]


tool_calls = st.lists(
    st.builds(
        ToolCall,
        id=st.from_regex(r"call_[a-z0-9]{1,6}", fullmatch=True),
        name=st.just("word_count"),
        arguments=tool_arguments().map(json.dumps),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda call: call.id,
)
calls_and_streams = tool_calls.flatmap(
    lambda calls: st.tuples(st.just(calls), tool_call_streams(calls))
)


@given(calls_and_streams)
def test_my_client_streams_every_call_whole(case: tuple[list[ToolCall], list[Any]]) -> None:
    calls, stream = case
    lines = provider_lines([*stream, Finish(FinishReason.TOOL_CALLS)])
    result = trio.run(run_to_completion, LinesChatClient(lambda messages: lines), USER)
    accumulator = ToolCallAccumulator()
    for update in result.updates[:-1]:
        accumulator.add(update)
    by_id = {call.id: call for call in calls}
    started = [u.id for u in stream if isinstance(u, ToolCallStart)]
    assert accumulator.finish() == [by_id[call_id] for call_id in started]  # call order
    assert result.updates[-1] == Finish(FinishReason.TOOL_CALLS)


@given(calls_and_streams)
def test_an_agent_on_my_client_answers_every_call(case: tuple[list[ToolCall], list[Any]]) -> None:
    calls, stream = case
    rounds = [
        [*stream, Finish(FinishReason.TOOL_CALLS)],
        [TextDelta("Done."), Finish(FinishReason.STOP)],
    ]

    def server(messages: Sequence[ChatMessage]) -> list[str]:
        answered = sum(m.role is MessageRole.ASSISTANT for m in messages)  # one per round
        return provider_lines(rounds[answered])

    result = run_agent(LinesChatClient(server), [word_count], USER)
    called = [u.call.id for u in result.updates if isinstance(u, ToolCalled)]
    assert sorted(called) == sorted(call.id for call in calls)
    assert result.messages[-1] == ChatMessage.assistant("Done.")


# -- 4. an agent whose model answers from what a tool returned --------------------------------

FORECASTS = {"Paris": "rain", "Rome": "sun", "Oslo": "snow"}


@tool
async def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    await trio.sleep(1)  # free on the virtual clock
    return FORECASTS.get(city, "unknown city")


def umbrella_model(messages: tuple[ChatMessage, ...], options: RunOptions) -> Any:
    """A stand-in for the model: asks the forecast, then answers from what it said."""
    last = messages[-1]
    if last.role is MessageRole.TOOL:  # if the tool result says rain, answer "umbrella"
        return "Take an umbrella." if "rain" in last.content else "No umbrella needed."
    city = last.content.removeprefix("Umbrella in ").removesuffix("?")
    return tool_calls_response(ToolCall("call_1", "forecast", json.dumps({"city": city})))


@given(st.sampled_from(sorted(FORECASTS)) | st.text(max_size=10))
def test_the_answer_follows_the_forecast(city: str) -> None:
    model = FunctionChatClient(umbrella_model)
    result = run_agent(model, [forecast], [ChatMessage.user(f"Umbrella in {city}?")])
    rain = FORECASTS.get(city) == "rain"
    expected = "Take an umbrella." if rain else "No umbrella needed."
    assert result.messages[-1] == ChatMessage.assistant(expected)
    assert len(model.calls) == 2  # one round of tool calls, one answer
    assert [tool.name for tool in model.calls[0].options.tools] == ["forecast"]
