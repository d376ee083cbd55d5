"""What the loop is given, checked where it is given: tools, conversations, inner clients that
break the protocol, cancel scopes, and tools that misbehave in ways ``except Exception`` does not
see. Each bad input gets an error naming what is wrong, and every call still gets one result."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
import trio
import trio.testing
from strays import stray_cancelled

from trio_invoke import (
    AgentResponseUpdate,
    ChatClientError,
    ChatMessage,
    ConfigurationError,
    ConversationError,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    StopLoop,
    StreamProtocolError,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCallArgs,
    ToolCalled,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    tool,
)
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

USER = [ChatMessage.user("go")]


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


# -- tools, checked at construction -------------------------------------------------------------


async def plain_async(text: str) -> str:
    return text


def plain_sync(text: str) -> str:
    return text


class Complete:
    name = "complete"
    description = "A tool written by hand."
    parameters: ClassVar[dict[str, Any]] = {"type": "object"}
    requires_approval = False

    async def execute(self, arguments: dict[str, Any]) -> Any:
        return "ok"


class NoName(Complete):
    name = None  # type: ignore[assignment]


def without(attribute: str) -> object:
    namespace = {k: v for k, v in vars(Complete).items() if not k.startswith("__")}
    namespace.pop(attribute)
    return type(f"Without_{attribute}", (), namespace)()


class SyncExecute(Complete):
    def execute(self, arguments: dict[str, Any]) -> Any:  # type: ignore[override]
        return "ok"


class AsyncCallable:
    async def __call__(self, arguments: dict[str, Any]) -> Any:
        return "ok"


class CallableExecute(Complete):
    execute = AsyncCallable()  # type: ignore[assignment]


def named(name: Any) -> Complete:
    tool_ = Complete()
    tool_.name = name  # type: ignore[misc]
    return tool_


@pytest.mark.parametrize("function", [plain_async, plain_sync, lambda text: text, print])
def test_a_plain_function_is_a_type_error_saying_to_decorate_it(function: Any) -> None:
    with pytest.raises(TypeError, match=r"is a function, not a tool: decorate it with @tool"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [function])


@pytest.mark.parametrize(
    "attribute", ["name", "description", "parameters", "requires_approval", "execute"]
)
def test_a_tool_missing_an_attribute_names_it(attribute: str) -> None:
    with pytest.raises(TypeError, match=rf"has no {attribute} attribute"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [without(attribute)])


def test_a_tool_whose_execute_is_not_async_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="execute attribute must be an async function"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [SyncExecute()])
    FunctionInvokingChatClient(ScriptedChatClient([]), [CallableExecute()])  # async __call__: fine


@pytest.mark.parametrize(
    "name", ["", "has space", "dotted.name", "x" * 65, "new\nline", "ok\n", "é", None, 3]
)
def test_a_tool_name_providers_refuse_is_a_configuration_error(name: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"must match \^\[a-zA-Z0-9_-\]\{1,64\}\$"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [named(name)])


@pytest.mark.parametrize("name", ["a", "x" * 64, "get-weather_2", "A_B-c"])
def test_names_providers_accept_are_fine(name: str) -> None:
    FunctionInvokingChatClient(ScriptedChatClient([]), [named(name)])


def test_parameters_must_be_a_schema_object() -> None:
    bad = Complete()
    bad.parameters = '{"type": "object"}'  # type: ignore[assignment]
    with pytest.raises(TypeError, match="parameters attribute must be a JSON Schema object"):
        FunctionInvokingChatClient(ScriptedChatClient([]), [bad])


class Timed(Complete):
    def __init__(self, timeout: Any) -> None:
        self.timeout = timeout


@pytest.mark.parametrize("seconds", [-1, 0, 0.0, float("nan"), -math.inf, "5", True, [1]])
async def test_a_tools_own_timeout_that_is_not_seconds_is_a_configuration_error(
    seconds: Any,
) -> None:
    """A tool's ``timeout`` attribute is checked where the tool is given (the client's tools at
    construction, provider tools on entering a run), as ``tool_timeout`` is."""
    match = r"tool 'complete': its timeout attribute must be a number of seconds > 0 or None"
    with pytest.raises(ConfigurationError, match=match):
        FunctionInvokingChatClient(ScriptedChatClient([]), [Timed(seconds)])
    agent = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    with pytest.raises(ConfigurationError, match=f"provider {match}"):
        async with agent.run(USER, RunOptions(provider_tools=[Timed(seconds)])):
            pass  # pragma: no cover


@pytest.mark.parametrize("timeout", [None, 0.5, 3, math.inf])
def test_a_tools_own_timeout_in_seconds_is_fine(timeout: Any) -> None:
    FunctionInvokingChatClient(ScriptedChatClient([]), [Timed(timeout)])


@pytest.mark.parametrize("tools", [echo, "echo", Complete])
def test_tools_must_be_an_iterable_of_tools(tools: Any) -> None:
    with pytest.raises(TypeError, match="tools"):
        FunctionInvokingChatClient(ScriptedChatClient([]), tools)


class NoRun:
    """Has a ``run`` that is not a method: not a chat client."""

    run = "fast"


@pytest.mark.parametrize("inner", [None, 5, "gpt-4o", NoRun(), ScriptedChatClient])
def test_an_inner_client_without_a_run_method_is_a_type_error_naming_it(inner: Any) -> None:
    with pytest.raises(TypeError, match=r"^inner must be a chat client .*got "):
        FunctionInvokingChatClient(inner)


@pytest.mark.parametrize("telemetry", [5, "otel", True, NoRun()])
def test_telemetry_without_a_run_method_is_a_type_error_naming_it(telemetry: Any) -> None:
    with pytest.raises(TypeError, match=r"^telemetry must be .*got "):
        FunctionInvokingChatClient(ScriptedChatClient([]), telemetry=telemetry)


@pytest.mark.parametrize(
    "options", [5, {"max_tool_calls": 1}, "none", [RunOptions()], RunOptions], ids=repr
)
async def test_options_that_are_not_run_options_are_a_type_error_naming_them(
    options: Any,
) -> None:
    model = ScriptedChatClient(["hi"])
    agent = FunctionInvokingChatClient(model)
    with pytest.raises(TypeError, match=r"^options must be a RunOptions or None, got "):
        async with agent.run(USER, options):
            pass  # pragma: no cover
    with pytest.raises(TypeError, match=r"^options must be a RunOptions or None, got "):
        await agent.get_response(USER, options)
    assert model.calls == []


async def test_provider_tools_are_checked_on_entering_run() -> None:
    agent = FunctionInvokingChatClient(ScriptedChatClient(["hi"]))
    for bad, error in ((plain_async, TypeError), (named("a.b"), ConfigurationError)):
        with pytest.raises(error, match="provider tool"):
            async with agent.run(USER, RunOptions(provider_tools=[bad])):
                pass  # pragma: no cover


# -- the conversation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([ChatMessage.user("hi"), {"role": "user", "content": "hi"}], r"messages\[1\] is a dict"),
        ([None], r"messages\[0\] is a NoneType"),
        ([ChatMessage.user("a"), ChatMessage.user("b"), "c"], r"messages\[2\] is a str"),
        ("hello", "messages must be a sequence of ChatMessage, got a str"),
        (ChatMessage.user("hi"), "messages must be a sequence of ChatMessage, got a ChatMessage"),
    ],
)
async def test_run_with_something_that_is_not_a_message_names_its_index(
    messages: Any, match: str
) -> None:
    model = ScriptedChatClient(["hi"])
    with pytest.raises(TypeError, match=match):
        async with FunctionInvokingChatClient(model).run(messages):
            pass  # pragma: no cover
    assert model.calls == []


async def test_a_conversation_ending_in_tool_messages_out_of_order_is_refused() -> None:
    calls = (ToolCall("a", "echo", '{"text": "1"}'), ToolCall("b", "echo", '{"text": "2"}'))
    assistant = ChatMessage.assistant("", calls)
    cases = [
        [assistant, ChatMessage.tool_result(calls[1], "2"), ChatMessage.tool_result(calls[0], "1")],
        [assistant, ChatMessage.tool_result(ToolCall("zz", "echo", "{}"), "?")],
        [assistant, ChatMessage.tool_result(calls[0], "1"), ChatMessage.tool_result(calls[0], "1")],
        [ChatMessage.tool_result(calls[0], "1")],
        [ChatMessage.assistant("no calls"), ChatMessage.tool_result(calls[0], "1")],
    ]
    for tail in cases:
        model = ScriptedChatClient(["hi"])
        with pytest.raises(ConversationError, match=r"messages\[\d+\]"):
            async with FunctionInvokingChatClient(model, [echo]).run([*USER, *tail]):
                pass  # pragma: no cover
        assert model.calls == []


# -- inner clients that break the protocol ------------------------------------------------------


class Yields:
    """A chat client that streams whatever it is given."""

    def __init__(self, *items: Any) -> None:
        self.items = items

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[Any]]:
        yield self._items()

    async def _items(self) -> AsyncIterator[Any]:
        for item in self.items:
            yield item


CALL = ToolCall("c1", "echo", '{"text": "x"}')


@pytest.mark.parametrize(
    ("item", "name"),
    [
        (None, "NoneType"),
        ({"type": "text", "text": "hi"}, "dict"),
        ("hello", "str"),
        (42, "int"),
        (b"bytes", "bytes"),
        (Error("cancelled"), "Error"),
    ],
)
async def test_an_inner_client_yielding_a_non_update_is_a_protocol_error(
    item: Any, name: str
) -> None:
    agent = FunctionInvokingChatClient(Yields(TextDelta("before "), item, TextDelta("after")))
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(StreamProtocolError, match=rf"\(a {name}\), which is not a model update"):
        async with agent.run(USER) as stream:
            async for update in stream:
                seen.append(update)
    assert seen == [TextDelta("before ")]
    assert stream.messages == [ChatMessage.assistant("before ")]


@pytest.mark.parametrize(
    "item", [ToolCalled(CALL, "forged", False), ToolApprovalRequest(CALL)], ids=type
)
async def test_loop_side_updates_from_the_inner_client_are_refused(item: Any) -> None:
    agent = FunctionInvokingChatClient(Yields(item, Finish(FinishReason.STOP)), [echo])
    with pytest.raises(StreamProtocolError, match="which only the loop sends"):
        await agent.get_response(USER)


@pytest.mark.parametrize(
    ("item", "match"),
    [
        (ToolCallArgs("c1", None), r"ToolCallArgs\.args_delta must be a str, got None"),
        (ToolCallArgs("c1", b'{"text": "x"}'), r"ToolCallArgs\.args_delta must be a str"),
        (TextDelta(None), r"TextDelta\.text must be a str, got None"),
        (ToolCallStart(["c2"], "echo"), r"ToolCallStart\.id must be a str"),
    ],
)
async def test_an_update_holding_the_wrong_type_is_a_protocol_error(item: Any, match: str) -> None:
    agent = FunctionInvokingChatClient(
        Yields(
            ToolCallStart("c1", "echo"),
            ToolCallArgs("c1", '{"text": "x"}'),
            item,
            ToolCallEnd("c1"),
            Finish(FinishReason.TOOL_CALLS),
        ),
        [echo],
    )
    with trio.fail_after(5), pytest.raises(StreamProtocolError, match=match):
        async with agent.run(USER) as stream:
            async for _ in stream:
                pass
    assert_transcript_valid([*USER, *stream.messages])


@pytest.mark.parametrize(
    ("finish", "match"),
    [
        (Finish("stop"), r"Finish\.finish_reason must be a FinishReason, got 'stop'"),  # type: ignore[arg-type]
        (Finish("length"), r"Finish\.finish_reason must be a FinishReason, got 'length'"),  # type: ignore[arg-type]
        (Finish(None), r"Finish\.finish_reason must be a FinishReason, got None"),  # type: ignore[arg-type]
        (Finish(FinishReason.STOP, 5), r"Finish\.usage must be a Usage or None, got 5"),  # type: ignore[arg-type]
        (
            Finish(FinishReason.STOP, {"input_tokens": 1}),  # type: ignore[arg-type]
            r"Finish\.usage must be a Usage or None, got \{'input_tokens': 1\}",
        ),
    ],
)
@pytest.mark.parametrize("rounds", [1, 2])
async def test_a_finish_holding_the_wrong_type_is_a_protocol_error(
    finish: Finish, match: str, rounds: int
) -> None:
    first = [ToolCallStart("c1", "echo"), ToolCallArgs("c1", '{"text": "x"}'), ToolCallEnd("c1")]
    responses: list[list[Any]] = [[TextDelta("answer"), finish]]
    if rounds == 2:  # after a round whose usage counted
        responses.insert(0, [*first, Finish(FinishReason.TOOL_CALLS, Usage(3, 4))])
    agent = FunctionInvokingChatClient(ScriptedChatClient(responses), [echo])
    seen: list[AgentResponseUpdate] = []
    with trio.fail_after(5), pytest.raises(StreamProtocolError, match=match):
        async with agent.run(USER) as stream:
            async for update in stream:
                seen.append(update)
    assert not any(isinstance(update, Finish) for update in seen)
    assert_transcript_valid([*USER, *stream.messages])


def test_a_protocol_error_is_a_chat_client_error() -> None:
    assert issubclass(StreamProtocolError, ChatClientError)


# -- cancel scopes ------------------------------------------------------------------------------


async def test_a_resume_whose_calls_repeat_an_id_is_refused_before_anything_runs() -> None:
    ran: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Note the text."""
        ran.append(text)
        return text

    calls = (ToolCall("c1", "note", '{"text": "a"}'), ToolCall("c1", "note", '{"text": "b"}'))
    conversation = [*USER, ChatMessage.assistant("", calls)]
    model = ScriptedChatClient(["done"])
    with pytest.raises(ConversationError, match="makes tool call 'c1' twice"):
        async with FunctionInvokingChatClient(model, [note]).run(conversation):
            pass  # pragma: no cover
    assert ran == []
    assert model.calls == []


async def test_a_cancel_scope_entered_before_is_a_configuration_error_on_entry() -> None:
    agent = FunctionInvokingChatClient(ScriptedChatClient(["one", "two"]))
    scope = trio.CancelScope()
    await agent.get_response(USER, RunOptions(cancel_scope=scope))
    with pytest.raises(ConfigurationError, match="was already entered"):
        async with agent.run(USER, RunOptions(cancel_scope=scope)):
            pass  # pragma: no cover
    used = trio.CancelScope()
    with used:
        pass
    with pytest.raises(ConfigurationError, match="give each run a fresh one"):
        await agent.get_response(USER, RunOptions(cancel_scope=used))


@pytest.mark.parametrize("given_scope", [False, True])
async def test_entering_a_run_is_a_checkpoint(given_scope: bool) -> None:
    agent = FunctionInvokingChatClient(ScriptedChatClient(["never"]), [echo])
    options = RunOptions(cancel_scope=trio.CancelScope()) if given_scope else None
    body = False
    with trio.CancelScope() as outer:
        outer.cancel()
        async with agent.run(USER, options):
            body = True  # pragma: no cover
    assert outer.cancelled_caught
    assert not body


@pytest.mark.parametrize("given_scope", [False, True])
async def test_the_body_runs_once_the_run_has_started(given_scope: bool) -> None:
    # Leaving at once cancels the round the run has already started, with or without a scope
    # of the caller's: the model was called, and the transcript is valid.
    model = ScriptedChatClient([tool_calls_response(ToolCall("c1", "echo", '{"text": "x"}')), "y"])
    agent = FunctionInvokingChatClient(model, [echo])
    options = RunOptions(cancel_scope=trio.CancelScope()) if given_scope else None
    async with agent.run(USER, options) as stream:
        pass
    assert len(model.calls) == 1
    assert_transcript_valid([*USER, *stream.messages])


class Renamed:
    """A tool whose description and schema its owner changes between runs."""

    name = "renamed"
    description = "first"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    requires_approval = False

    async def execute(self, arguments: dict[str, Any]) -> str:
        return "ok"  # pragma: no cover


@pytest.mark.parametrize("options", [None, RunOptions(max_tool_calls=3)])
async def test_the_model_is_given_each_tools_definition_as_it_is_at_the_run(
    options: RunOptions | None,
) -> None:
    renamed = Renamed()
    model = ScriptedChatClient(["a", "b", "c", "d"])
    agent = FunctionInvokingChatClient(model, [renamed])
    await agent.get_response(USER, options)
    renamed.description = "second"
    await agent.get_response(USER, options)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    renamed.parameters = schema
    await agent.get_response(USER, options)
    await agent.get_response(USER, options)
    seen = [call.options.tools[0] for call in model.calls]
    assert [d.description for d in seen] == ["first", "second", "second", "second"]
    assert [d.parameters for d in seen] == [Renamed.parameters, Renamed.parameters, schema, schema]


class Reshaped:
    """A tool whose owner replaces its schema and its time limit between runs."""

    name = "reshaped"
    description = "A tool whose schema changes."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    requires_approval = False
    timeout: float | None = None

    async def execute(self, arguments: dict[str, Any]) -> str:
        await trio.sleep(5)
        return json.dumps(arguments)


async def test_each_call_is_checked_against_its_tools_schema_and_limit_as_they_are_at_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The model is told the schema as it is at the run; the arguments it sends by that schema
    # are checked by it too, and the tool's own time limit is the one it has now.
    reshaped = Reshaped()
    agent = FunctionInvokingChatClient(ScriptedChatClient([]), [reshaped])
    reshaped.parameters = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    reshaped.timeout = 1
    for arguments, result in [
        ('{"n": 1}', "Error: tool 'reshaped' timed out after 1 s"),
        ("{}", "Error: invalid arguments for tool 'reshaped': missing required field 'n'"),
    ]:
        agent.inner = ScriptedChatClient(
            [tool_calls_response(ToolCall("c1", "reshaped", arguments)), "done"]
        )
        with trio.fail_after(10):
            response = await agent.get_response(USER)
        assert response.messages[1].content == result
    reshaped.timeout = 0
    with pytest.raises(ConfigurationError, match="reshaped"):
        await agent.get_response(USER)


async def test_a_scope_cancelled_before_the_run_never_calls_the_model() -> None:
    for deadline in ("cancel", "past"):
        model = ScriptedChatClient(["never"])
        scope = trio.CancelScope()
        if deadline == "cancel":
            scope.cancel()
        else:
            scope.deadline = trio.current_time() - 1
        result = await run_to_completion(
            FunctionInvokingChatClient(model), USER, RunOptions(cancel_scope=scope)
        )
        assert result.updates == (Error("cancelled"),)
        assert result.messages == ()
        assert model.calls == []


async def test_a_resume_under_a_cancelled_scope_runs_no_call() -> None:
    ran: list[str] = []

    @tool
    async def record(text: str) -> str:
        """Record."""
        ran.append(text)
        return text

    pending = [*USER, ChatMessage.assistant("", [ToolCall("p1", "record", '{"text": "x"}')])]
    scope = trio.CancelScope()
    scope.cancel()
    result = await run_to_completion(
        FunctionInvokingChatClient(ScriptedChatClient(["never"]), [record]),
        pending,
        RunOptions(cancel_scope=scope),
    )
    assert ran == []
    assert result.updates == (Error("cancelled"),)
    assert result.messages == ()  # nothing happened: the conversation can be resumed as it is
    again = await run_to_completion(
        FunctionInvokingChatClient(ScriptedChatClient(["done"]), [record]), pending
    )
    assert ran == ["x"]
    assert_transcript_valid([*pending, *again.messages])


# -- tools that misbehave beyond ``except Exception`` ------------------------------------------


async def test_a_stray_cancelled_from_a_tool_is_that_calls_error() -> None:
    @tool
    async def leaks() -> str:
        """Lets out a Cancelled of its own making."""
        raise await stray_cancelled()

    script = [tool_calls_response(ToolCall("a", "leaks", "{}"), CALL), "done"]
    result = await run_to_completion(
        FunctionInvokingChatClient(ScriptedChatClient(script), [leaks, echo]), USER
    )
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert (
        called["a"].result == "Error: tool 'leaks' raised trio.Cancelled, but nothing cancelled it"
    )
    assert called["a"].is_error
    assert called["c1"].result == "x"
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert_transcript_valid([*USER, *result.messages])


async def test_a_group_with_a_stray_cancelled_beside_an_error_is_that_calls_error() -> None:
    """A Cancelled that no scope of the run made, in a group beside the tool's own error: the
    call's error result reports the error."""

    @tool
    async def leaks_in_a_group() -> str:
        """Lets out a group: a Cancelled of its own making and an error."""
        raise BaseExceptionGroup("mine", [await stray_cancelled(), ValueError("boom")])

    batch = tool_calls_response(ToolCall("c1", "leaks_in_a_group", "{}"))
    agent = FunctionInvokingChatClient(ScriptedChatClient([batch, "done"]), [leaks_in_a_group])
    result = await run_to_completion(agent, USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert called.result == "Error: tool 'leaks_in_a_group' raised ExceptionGroup"
    assert isinstance(called.exception, ExceptionGroup)
    assert called.exception.exceptions[0].args == ("boom",)
    assert result.updates[-1] == Finish(FinishReason.STOP)


class LeakingModel:
    """A chat client that lets out a Cancelled of its own making: on entering, mid-stream,
    or in a group beside an error of its own."""

    def __init__(self, where: str) -> None:
        self.where = where

    @asynccontextmanager
    async def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AsyncIterator[AsyncIterator[AgentResponseUpdate]]:
        if self.where == "entering":
            raise await stray_cancelled()
        yield self._stream()

    async def _stream(self) -> AsyncIterator[AgentResponseUpdate]:
        yield TextDelta("so far")
        if self.where == "group":
            raise BaseExceptionGroup("mine", [await stray_cancelled(), OSError("reset")])
        if self.where == "group of two":
            errors = [await stray_cancelled(), OSError("reset"), KeyError("k")]
            raise BaseExceptionGroup("mine", errors)
        raise await stray_cancelled()


@pytest.mark.parametrize("where", ["entering", "streaming", "group", "group of two"])
async def test_a_stray_cancelled_from_the_chat_client_is_a_chat_client_error(where: str) -> None:
    """Nothing cancelled the run: the model's Cancelled is its failure, raised as a
    ChatClientError chained to it (the round's nursery swallowed it, and the caller got a
    trio.EndOfChannel)."""
    updates: list[AgentResponseUpdate] = []
    with trio.fail_after(5), pytest.raises(ChatClientError) as caught:
        async with FunctionInvokingChatClient(LeakingModel(where)).run(USER) as stream:
            async for update in stream:
                updates.append(update)
    cause = caught.value.__cause__
    if where == "group":
        assert isinstance(cause, OSError)
        assert "OSError: reset" in str(caught.value)
    elif where == "group of two":  # the client's errors, whole, without the Cancelled
        assert isinstance(cause, ExceptionGroup)
        assert cause.message == "mine"
        assert [type(e) for e in cause.exceptions] == [OSError, KeyError]
    else:
        assert isinstance(cause, trio.Cancelled)
        assert "trio.Cancelled, but nothing cancelled it" in str(caught.value)
    assert updates == ([] if where == "entering" else [TextDelta("so far")])
    assert_transcript_valid([*USER, *stream.messages])


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


class UnreadableError(Exception):
    def __str__(self) -> str:
        raise ValueError("nor this")


@pytest.mark.parametrize("exception", [UnprintableError, UnreadableError])
async def test_an_exception_whose_str_raises_still_yields_a_result(exception: type) -> None:
    @tool
    async def raises() -> str:
        """Raises an exception that cannot be printed."""
        raise exception

    script = [tool_calls_response(ToolCall("a", "raises", "{}")), "done"]
    agent = FunctionInvokingChatClient(
        ScriptedChatClient(script), [raises], include_detailed_errors=True
    )
    result = await run_to_completion(agent, USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    cause = {UnprintableError: "RuntimeError", UnreadableError: "ValueError"}[exception]
    assert called.result == (
        f"Error: tool 'raises' raised {exception.__name__}: "
        f"<the exception's message could not be read: {cause}>"
    )
    assert result.updates[-1] == Finish(FinishReason.STOP)


@pytest.mark.parametrize(
    ("value", "what"),
    [({1, 2}, "a set"), (object(), "an object"), (b"bytes", "a bytes"), (1j, "a complex")],
)
async def test_stop_loop_with_a_result_that_is_not_json_still_stops(value: Any, what: str) -> None:
    @tool
    async def finish() -> str:
        """Stops the loop."""
        raise StopLoop(value)

    model = ScriptedChatClient([tool_calls_response(ToolCall("a", "finish", "{}")), "never"])
    result = await run_to_completion(FunctionInvokingChatClient(model, [finish]), USER)
    (called,) = [u for u in result.updates if isinstance(u, ToolCalled)]
    assert called.result == (
        f"Error: tool 'finish' stopped the loop with {what}, which is not JSON-serialisable"
    )
    assert isinstance(called.exception, StopLoop)
    assert result.updates[-1] == Finish(FinishReason.STOP)
    assert len(model.calls) == 1  # the stop stands: the model is not called again


def test_tool_call_arguments_in_these_tests_are_json() -> None:
    json.loads(CALL.arguments)
