"""Every chat client's ``run()`` value (the loop's too) is one call: entering it a second time --
after it ended, after it failed, or while it is still open -- is a ``RuntimeError`` that says so,
and makes no second model call (``contextlib`` alone would fail with an ``AttributeError`` from
its inside)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from anthropic_streams import TEXT
from sse_server import Reply, SSEServer

from trio_invoke import (
    AnthropicChatClient,
    ChatClient,
    ChatMessage,
    FunctionInvokingChatClient,
    OpenAIChatClient,
    ScriptedChatClient,
)
from trio_invoke.testing import FunctionChatClient

USER = [ChatMessage.user("Hello?")]
OPENAI_TEXT = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "Hi."}, "finish_reason": "stop"}]}'
    b"\n\ndata: [DONE]\n\n"
)
Calls = Callable[[], int]
"""How many model calls were made so far."""
MODEL_CALL = (
    r"^this model call was already entered: each value client\.run\(\.\.\.\) returns is one "
    r"model call, entered once; call client\.run\(\.\.\.\) again for another$"
)
RUN = (
    r"^this run was already entered: each value agent\.run\(\.\.\.\) returns is one run, "
    r"entered once; call agent\.run\(\.\.\.\) again for another$"
)


async def scripted(server: SSEServer) -> tuple[ChatClient, Calls]:
    model = ScriptedChatClient(["one", "two"])
    return model, lambda: len(model.calls)


async def function(server: SSEServer) -> tuple[ChatClient, Calls]:
    made: list[object] = []

    def answer(messages: Any, options: Any) -> str:
        made.append(messages)
        return "an answer"

    return FunctionChatClient(answer), lambda: len(made)


async def openai(server: SSEServer) -> tuple[ChatClient, Calls]:
    server.add(Reply([OPENAI_TEXT]), Reply([OPENAI_TEXT]))
    client = OpenAIChatClient("m", base_url=server.url, api_key="k", retry_backoff=0.0)
    return client, lambda: len(server.requests)


async def anthropic(server: SSEServer) -> tuple[ChatClient, Calls]:
    server.add(Reply([TEXT]), Reply([TEXT]))
    client = AnthropicChatClient("m", base_url=server.root, api_key="k", retry_backoff=0.0)
    return client, lambda: len(server.requests)


async def agent(server: SSEServer) -> tuple[ChatClient, Calls]:
    model = ScriptedChatClient(["one", "two"])
    return FunctionInvokingChatClient(model), lambda: len(model.calls)


CLIENTS: list[Callable[[SSEServer], Awaitable[tuple[ChatClient, Calls]]]] = [
    scripted,
    function,
    openai,
    anthropic,
    agent,
]


@pytest.mark.parametrize("make", CLIENTS, ids=lambda make: make.__name__)
@pytest.mark.parametrize("first", ["exhausted", "left early", "failed"])
async def test_a_model_calls_value_is_entered_once(
    make: Callable[[SSEServer], Awaitable[tuple[ChatClient, Calls]]],
    first: str,
    server: SSEServer,
) -> None:
    client, calls = await make(server)
    run = client.run(USER)
    with trio.fail_after(10):
        with pytest.raises(KeyError) if first == "failed" else contextlib.nullcontext():
            async with run as stream:
                async for _ in stream:
                    if first == "left early":
                        break
                if first == "failed":
                    raise KeyError("the caller's own")
        for _ in range(2):
            with pytest.raises(RuntimeError, match=RUN if make is agent else MODEL_CALL):
                async with run:
                    pass  # pragma: no cover
        assert calls() == 1  # the second entry made no call
        async with client.run(USER) as stream:  # a new call is fine
            assert [u async for u in stream]
        assert calls() == 2


@pytest.mark.parametrize("make", CLIENTS, ids=lambda make: make.__name__)
async def test_a_model_calls_value_entered_while_open_is_refused(
    make: Callable[[SSEServer], Awaitable[tuple[ChatClient, Calls]]], server: SSEServer
) -> None:
    client, calls = await make(server)
    run = client.run(USER)
    with trio.fail_after(10):
        async with run as stream:
            with pytest.raises(RuntimeError, match="already entered"):
                async with run:
                    pass  # pragma: no cover
            assert [u async for u in stream]  # the open one is unharmed
    assert calls() == 1


@pytest.mark.parametrize("make", CLIENTS, ids=lambda make: make.__name__)
@pytest.mark.parametrize("how", ["async for", "await", "with"])
async def test_a_run_value_used_as_an_iterator_says_to_write_async_with(
    make: Callable[[SSEServer], Awaitable[tuple[ChatClient, Calls]]], how: str, server: SSEServer
) -> None:
    client, calls = await make(server)
    call = "agent.run(...)" if make is agent else "client.run(...)"
    expected = (
        rf"^{re.escape(call)} returns an async context manager, which .*: write "
        rf"`async with {re.escape(call)} as stream:`, then `async for update in stream:`$"
    )
    run: Any = client.run(USER)
    with pytest.raises(TypeError, match=expected):
        if how == "async for":
            async for _ in run:
                pass  # pragma: no cover
        elif how == "await":
            await run
        else:
            with run:
                pass  # pragma: no cover
    assert calls() == 0  # nothing was called
    async with run as stream:  # and the value can still be entered, once
        assert [u async for u in stream]
    assert calls() == 1
