"""AnthropicChatClient against a real HTTP server on 127.0.0.1 (tests/sse_server.py) replaying
Anthropic-shaped and recorded Messages API streams, cut into pieces at awkward places: the
request, errors and retries, cancellation, ``pause_turn``, and whole tool loops with thinking."""

from __future__ import annotations

import json
import sys
from typing import Any
from unittest.mock import ANY

import httpx2
import pytest
import trio
import trio.testing
from anthropic_streams import (
    CACHED,
    INTERLEAVED,
    PARALLEL,
    RESULTS,
    SHAPED,
    TEXT,
    TEXT_BETWEEN_CALLS,
    THINKING,
    UNKNOWN,
    WEB_CITATION,
    WEB_RESULT,
    WEB_SEARCH,
    WEB_USE,
    decode,
    error_event,
    event,
    message_end,
    message_start,
    ping,
    redacted_block,
    text_block,
    thinking_block,
    tool_block,
)
from anthropic_streams import SEARCH as SERVER_SEARCH
from recorded import recorded, recorded_json
from sse_server import (
    Reply,
    Request,
    SSEServer,
    cut,
    cuts_inside_a_character,
    no_resource_warnings,
    stream_updates,
)

import trio_invoke
from trio_invoke import (
    AnthropicChatClient,
    ChatClient,
    ChatMessage,
    ConfigurationError,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    HTTPStatusError,
    MessageRole,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeoutError,
    ProviderDataDelta,
    ReasoningDelta,
    RunOptions,
    TextDelta,
    ToolCalled,
    ToolCallStart,
    ToolDefinition,
    Usage,
    tool,
)
from trio_invoke._updates import AgentResponseUpdate
from trio_invoke.providers.anthropic._decode import AnthropicDecoder
from trio_invoke.testing import assert_transcript_valid

USER = [ChatMessage.user("What's the weather in Paris?")]
THINK = {"type": "enabled", "budget_tokens": 2048}


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CWdMFGmmtqDd5uETFt98k",
    }


@pytest.fixture(autouse=True)
def _no_anthropic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def client_for(server: SSEServer, **kwargs: Any) -> AnthropicChatClient:
    kwargs.setdefault("retry_backoff", 0.0)
    kwargs.setdefault("api_key", "sk-ant-test")
    return AnthropicChatClient("claude-test", base_url=server.root, **kwargs)


# -- the request ---------------------------------------------------------------------------------


async def test_post_to_v1_messages_with_the_key_and_version_headers(server: SSEServer) -> None:
    server.add(Reply([TEXT]))
    await stream_updates(client_for(server), [ChatMessage.system("Brief."), *USER])
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert "authorization" not in request.headers
    assert request.json == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "Brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]}
        ],
        "stream": True,
    }


async def test_no_key_no_header_and_extra_headers(server: SSEServer) -> None:
    server.add(Reply([TEXT]))
    model = client_for(
        server, api_key=None, headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}
    )
    await stream_updates(model)
    headers = server.requests[0].headers
    assert "x-api-key" not in headers
    assert headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"


async def test_base_url_and_key_from_the_environment(
    server: SSEServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root + "/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    server.add(Reply([TEXT]))
    model = AnthropicChatClient("claude-test", retry_backoff=0)
    assert model.url == f"{server.root}/v1/messages"
    await stream_updates(model)
    assert server.requests[0].headers["x-api-key"] == "sk-ant-env"
    assert "sk-ant-env" not in repr(model)


async def test_a_query_in_base_url_stays_at_the_end_of_the_url(server: SSEServer) -> None:
    server.add(Reply([TEXT]))
    model = AnthropicChatClient("claude-test", base_url=f"{server.root}/proxy/?team=a%20b")
    await stream_updates(model)
    assert server.requests[0].path == "/proxy/v1/messages?team=a%20b"


def test_defaults_without_environment() -> None:
    model = AnthropicChatClient("claude-sonnet-4-5")
    assert (model.base_url, model.url) == (
        "https://api.anthropic.com",
        "https://api.anthropic.com/v1/messages",
    )
    assert (model.max_tokens, model.thinking, model.anthropic_version) == (4096, None, "2023-06-01")
    assert (
        repr(model)
        == "AnthropicChatClient('claude-sonnet-4-5', base_url='https://api.anthropic.com')"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "api.anthropic.com"}, "http"),
        ({"base_url": "https://api.anthropic.com/v1"}, "without /v1"),
        ({"base_url": "https://api.anthropic.com/v1/messages"}, "without /v1/messages"),
        ({"base_url": "http://127.0.0.1:8080/proxy/v1/messages/"}, "without /v1/messages"),
        ({"base_url": 5}, "must be a string"),
        ({"max_tokens": 0}, "max_tokens must be an integer >= 1"),
        ({"max_tokens": 10.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"thinking": "on"}, "thinking must be shaped as the API's"),
        ({"thinking": {"budget_tokens": 2000}}, "a 'type'"),
        ({"thinking": {"type": "enabled"}}, "needs budget_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": "2000"}}, "needs budget_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": 5000}, "max_tokens": 4096}, "below"),
        ({"thinking": {"type": "enabled", "budget_tokens": object()}}, "JSON"),
        ({"timeout": -1}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_continuations": -1}, "max_continuations"),
        ({"anthropic_version": ""}, "anthropic_version"),
        ({"http_client": object()}, "httpx2.AsyncClient"),
        ({"headers": {"x": 1}}, "headers"),
        ({"model_options": ["x"]}, "model_options must be a mapping"),
    ],
)
def test_bad_configuration(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        AnthropicChatClient("claude-x", **kwargs)
    with pytest.raises(ConfigurationError, match="model must be a non-empty string"):
        AnthropicChatClient("")


@pytest.mark.parametrize(
    "beta",
    ["interleaved-thinking-2025-05-14", "files-api-2025-04-14,interleaved-thinking-2025-05-14"],
)
def test_interleaved_thinking_may_have_a_budget_above_max_tokens(beta: str) -> None:
    # With interleaved thinking the budget is the whole context window, not max_tokens (the
    # API's extended-thinking docs say so).
    thinking = {"type": "enabled", "budget_tokens": 16000}
    model = AnthropicChatClient(
        "claude-x", max_tokens=4096, thinking=thinking, headers={"Anthropic-Beta": beta}
    )
    assert model.request_body(USER)["thinking"] == thinking
    model.max_tokens = 1024
    assert model.request_body(USER)["max_tokens"] == 1024


def test_adaptive_thinking_needs_no_budget() -> None:
    model = AnthropicChatClient("claude-x", thinking={"type": "adaptive"})
    assert model.request_body(USER)["thinking"] == {"type": "adaptive"}


def test_is_a_chat_client() -> None:
    assert isinstance(AnthropicChatClient("claude-x"), ChatClient)
    assert AnthropicChatClient.__module__ == "trio_invoke"


# -- streams cut anywhere ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SHAPED))
async def test_shaped_streams_cut_mid_line_and_mid_character(server: SSEServer, name: str) -> None:
    raw = SHAPED[name]
    pieces = cut(raw, 5)
    if not raw.isascii():
        assert cuts_inside_a_character(pieces) > 0
    server.add(Reply(pieces))
    seen: list[AgentResponseUpdate] = []
    if name == "error":
        with pytest.raises(ModelResponseError, match="overloaded_error: Overloaded") as caught:
            await stream_updates(client_for(server), into=seen)
        assert caught.value.error_type == "overloaded_error"
        assert seen == [TextDelta("Partial")]
        assert len(server.requests) == 1  # never retried once the response started
        return
    assert await stream_updates(client_for(server)) == decode([raw])


@pytest.mark.parametrize(
    "name", ["text-end_turn", "thinking-then-tool_use", "redacted_thinking-then-text"]
)
async def test_recorded_streams_cut_mid_line_and_mid_character(
    server: SSEServer, name: str
) -> None:
    raw = recorded(f"anthropic/{name}.sse")
    server.add(Reply(cut(raw, 11)))
    assert await stream_updates(client_for(server)) == decode([raw])


@pytest.mark.parametrize(
    "tail",
    [
        b"data: [DONE]\n\n",  # what some proxies in front of the API append
        error_event("api_error", "late"),
    ],
)
@pytest.mark.parametrize("together", [True, False])
async def test_what_follows_message_stop_is_ignored_in_any_piece(
    server: SSEServer, tail: bytes, together: bool
) -> None:
    # The response is whole at message_stop: what comes after it changes nothing, whether it
    # arrives in the piece that ends the response or in a later one.
    server.add(Reply([TEXT + tail] if together else [TEXT, tail]))
    assert await stream_updates(client_for(server)) == decode([TEXT])


async def test_crlf_line_ends(server: SSEServer) -> None:
    server.add(Reply(cut(TEXT.replace(b"\n", b"\r\n"), 3)))
    assert await stream_updates(client_for(server)) == decode([TEXT])


# -- errors and retries --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (400, "invalid_request_error", "messages.1.content.0: unexpected `tool_use_id` found"),
        (
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        (404, "not_found_error", "model: claude-nope"),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
    ],
)
async def test_http_errors_carry_the_errors_type_and_message_and_are_not_retried(
    server: SSEServer, status: int, kind: str, message: str
) -> None:
    server.add(Reply.error(status, error_body(kind, message)))
    with pytest.raises(HTTPStatusError) as caught:
        await stream_updates(client_for(server))
    error = caught.value
    assert (error.status_code, error.error_type, error.message) == (status, kind, message)
    assert str(error) == f"HTTP {status}: {kind}: {message}"
    assert len(server.requests) == 1


async def test_the_recorded_401(server: SSEServer) -> None:
    body = recorded("anthropic/http-401-authentication_error.json")
    server.add(
        Reply(
            [body],
            401,
            {"request-id": "req_011CWdMFGmmtqDd5uETFt98k"},
            "application/json",
            paced=False,
        )
    )
    with pytest.raises(HTTPStatusError, match="HTTP 401: authentication_error: invalid x-api-key"):
        await stream_updates(client_for(server))
    assert len(server.requests) == 1


async def test_429_honours_retry_after(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(
        Reply.error(
            429,
            error_body("rate_limit_error", "Number of requests has exceeded your rate limit"),
            {"retry-after": "7"},
        ),
        Reply([TEXT]),
    )
    start = trio.current_time()
    assert await stream_updates(client_for(server, retry_backoff=100.0)) == decode([TEXT])
    assert 7 <= trio.current_time() - start < 8
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "kind"),
    [(529, "overloaded_error"), (500, "api_error"), (503, "api_error"), (504, "timeout_error")],
)
async def test_overloaded_and_5xx_are_retried_then_succeed(
    server: SSEServer, status: int, kind: str
) -> None:
    server.add(
        Reply.error(status, error_body(kind, "Overloaded")),
        Reply.error(status, error_body(kind, "x")),
        Reply([TEXT]),
    )
    retries: list[tuple[int, int]] = []

    def on_retry(error: Exception, retry: int, delay: float) -> None:
        assert isinstance(error, HTTPStatusError)
        retries.append((error.status_code, retry))

    assert await stream_updates(client_for(server, on_retry=on_retry)) == decode([TEXT])
    assert retries == [(status, 1), (status, 2)]
    assert len(server.requests) == 3
    assert server.requests[2].body == server.requests[0].body  # the same request again


async def test_retries_run_out(server: SSEServer) -> None:
    server.add(*[Reply.error(529, error_body("overloaded_error", "Overloaded"))] * 3)
    with pytest.raises(HTTPStatusError) as caught:
        await stream_updates(client_for(server, max_retries=2))
    assert (caught.value.status_code, caught.value.error_type) == (529, "overloaded_error")
    assert len(server.requests) == 3


async def test_an_overloaded_error_mid_stream_is_not_retried(server: SSEServer) -> None:
    server.add(
        Reply(cut(message_start() + text_block(0, "Half") + error_event(), 9)), Reply([TEXT])
    )
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelResponseError) as caught:
        await stream_updates(client_for(server), into=seen)
    assert caught.value.error_type == "overloaded_error"
    assert seen == [TextDelta("Half")]
    assert len(server.requests) == 1


async def test_connection_cut_mid_stream_is_not_retried(server: SSEServer) -> None:
    raw = PARALLEL
    server.add(Reply([raw[: raw.index(b"toolu_01T")]], ending="cut"), Reply([TEXT]))
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelConnectionError, match="broke in the middle of the response"):
        await stream_updates(client_for(server), into=seen)
    assert seen[0] == TextDelta("Both at once.")
    assert len(server.requests) == 1


DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested deeper than the decoder's recursion limit: ``json.loads`` raises RecursionError."""


async def test_an_event_nested_too_deeply_is_a_response_error(server: SSEServer) -> None:
    server.add(Reply([message_start() + f"event: ping\ndata: {DEEP}\n\n".encode()]))
    with pytest.raises(ModelResponseError, match=r"not valid JSON.*recursion"):
        await stream_updates(client_for(server))


async def test_an_error_body_nested_too_deeply_is_still_an_http_error(server: SSEServer) -> None:
    server.add(Reply.error(529, f'{{"error": {{"type": {DEEP}}}}}'.encode()))
    with pytest.raises(HTTPStatusError, match=r"HTTP 529: \{\"error\"") as caught:
        await stream_updates(client_for(server, max_retries=0))
    assert caught.value.status_code == 529


async def test_a_body_that_ends_early_is_an_error(server: SSEServer) -> None:
    server.add(Reply([message_start() + text_block(0, "Hal")]))
    with pytest.raises(ModelResponseError, match="ended before the response was complete"):
        await stream_updates(client_for(server))


async def test_only_pings_is_no_progress(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(Reply([message_start(), *[ping()] * 20], interval=1.0, ending="stall"))
    start = trio.current_time()
    with pytest.raises(ModelTimeoutError, match="without progress"):
        await stream_updates(client_for(server, timeout=5.0))
    assert 5 <= trio.current_time() - start < 6


OMITTED = {"type": "thinking", "thinking": "", "signature": ""}
"""A thinking block with ``display: "omitted"`` (the default on Claude Opus 4.7): it starts
empty, the API sends only ``ping`` events while the model thinks, then the signature."""
SEARCHING = (  # a server tool (web search, code execution) ran; the API pings until its result
    event("content_block_start", index=0, content_block=SERVER_SEARCH)
    + event(
        "content_block_delta",
        index=0,
        delta={"type": "input_json_delta", "partial_json": '{"query": "trio"}'},
    )
    + event("content_block_stop", index=0)
)
AFTER_SEARCH = (
    event("content_block_start", index=1, content_block=RESULTS)
    + event("content_block_stop", index=1)
    + text_block(2, "Found it.")
    + message_end()
)
AFTER_THINKING = (
    event(
        "content_block_delta",
        index=0,
        delta={"type": "signature_delta", "signature": "EqQBCkYIBhgCIkBfcm5=="},
    )
    + event("content_block_stop", index=0)
    + text_block(1, "Done.")
    + message_end()
)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            message_start() + event("content_block_start", index=0, content_block=OMITTED),
            AFTER_THINKING,
        ),
        (message_start() + SEARCHING, AFTER_SEARCH),
        (  # the API buffers a long parameter value whole (no fine-grained tool streaming)
            message_start() + tool_block(0, "toolu_1", "make_file", stop=False),
            event(
                "content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": '{"lines": ["a", "b"]}'},
            )
            + event("content_block_stop", index=0)
            + message_end("tool_use"),
        ),
    ],
    ids=["omitted-thinking", "server-tool", "buffered-tool-input"],
)
async def test_pings_while_the_model_works_unseen_are_progress(
    server: SSEServer, mock_clock: trio.testing.MockClock, before: bytes, after: bytes
) -> None:
    # The model thinks (display "omitted") or a server tool runs for longer than the timeout:
    # the API says it is at work only with pings, and the response is not cut short.
    mock_clock.autojump_threshold = 0.1
    server.add(Reply([before, *[ping()] * 12, after], interval=1.0))
    updates = await stream_updates(client_for(server, timeout=5.0))
    assert updates == decode([before + after])
    assert isinstance(updates[-1], Finish)


async def test_pings_after_the_unseen_work_are_no_progress_again(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    body = message_start() + thinking_block(0, signature="Sig==") + text_block(1, "Hal")
    server.add(Reply([body, *[ping()] * 20], interval=1.0, ending="stall"))
    with pytest.raises(ModelTimeoutError, match="without progress"):
        await stream_updates(client_for(server, timeout=5.0))


# -- connections and cancellation ----------------------------------------------------------------


async def test_your_own_http_client_is_used_and_left_open(server: SSEServer) -> None:
    server.add(Reply([TEXT]), Reply([TEXT]))
    async with httpx2.AsyncClient() as http:
        model = client_for(server, http_client=http)
        assert await stream_updates(model) == decode([TEXT])
        assert await stream_updates(model) == decode([TEXT])
        assert not http.is_closed
    assert server.connections == 1


async def test_async_with_shares_one_connection(server: SSEServer) -> None:
    server.add(Reply([TEXT]), Reply([TEXT]))
    async with client_for(server) as model:
        with pytest.raises(RuntimeError, match="already open"):
            await model.__aenter__()
        await stream_updates(model)
        await stream_updates(model)
    assert server.connections == 1
    await model.aclose()


async def test_cancelling_the_loop_closes_the_response_promptly(server: SSEServer) -> None:
    server.add(
        Reply(
            [
                message_start()
                + event("content_block_start", index=0, content_block={"type": "text", "text": ""})
                + event(
                    "content_block_delta", index=0, delta={"type": "text_delta", "text": "Thinking"}
                )
            ],
            ending="stall",
        )
    )
    agent = FunctionInvokingChatClient(client_for(server), [])
    scope = trio.CancelScope()
    seen: list[AgentResponseUpdate] = []
    with trio.fail_after(10):
        async with agent.run(USER, RunOptions(cancel_scope=scope)) as stream:
            async for update in stream:
                seen.append(update)
                if update == TextDelta("Thinking"):
                    scope.cancel()
        await server.closed_while_stalled.wait()
    assert seen == [TextDelta("Thinking"), Error("cancelled")]
    assert stream.messages == [ChatMessage.assistant("Thinking")]
    no_resource_warnings()


async def test_a_run_cancelled_in_the_thinking_leaves_a_conversation_the_api_takes(
    server: SSEServer,
) -> None:
    # The API checks the signature of every thinking block sent back, earlier turns' too: a
    # block kept without its signature would make every later request of this conversation
    # a 400. The reasoning so far stays on the message; the unsigned block is not kept.
    block = {"type": "thinking", "thinking": "", "signature": ""}
    server.add(
        Reply(
            [
                message_start()
                + event("content_block_start", index=0, content_block=block)
                + event(
                    "content_block_delta",
                    index=0,
                    delta={"type": "thinking_delta", "thinking": "Paris, so"},
                )
            ],
            ending="stall",
        )
    )
    model = client_for(server)
    scope = trio.CancelScope()
    with trio.fail_after(10):
        async with FunctionInvokingChatClient(model, []).run(
            USER, RunOptions(cancel_scope=scope)
        ) as stream:
            async for update in stream:
                if update == ReasoningDelta("Paris, so"):
                    scope.cancel()
        await server.closed_while_stalled.wait()
    [kept] = stream.messages
    assert kept.reasoning == "Paris, so"
    body = model.request_body([*USER, kept, ChatMessage.user("Go on.")])
    sent = [b for m in body["messages"] for b in m["content"] if b["type"] == "thinking"]
    assert sent == []
    no_resource_warnings()


async def test_leaving_the_block_early_closes_the_connection(server: SSEServer) -> None:
    server.add(Reply([message_start() + text_block(0, "a", "b")], ending="stall"))
    with trio.fail_after(10):
        async with client_for(server).run(USER) as stream:
            async for update in stream:
                assert update == TextDelta("a")
                break
        await server.closed_while_stalled.wait()
    no_resource_warnings()


def test_import_without_httpx_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx2", None)  # import httpx2 -> ImportError
    monkeypatch.delitem(sys.modules, "trio_invoke.providers.anthropic._client", raising=False)
    monkeypatch.delattr(trio_invoke, "AnthropicChatClient", raising=False)
    with pytest.raises(ImportError, match=r'pip install "trio-invoke\[anthropic\] @ git\+https://'):
        from trio_invoke import AnthropicChatClient  # noqa: F401


def test_the_decoder_and_the_wire_need_no_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx2", None)
    for name in (
        "trio_invoke.providers.anthropic._decode",
        "trio_invoke.providers.anthropic._wire",
    ):
        monkeypatch.delitem(sys.modules, name, raising=False)
        __import__(name)


# -- pause_turn: the turn goes on ----------------------------------------------------------------

SEARCH = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}


def paused(index: int = 0, query: str = "trio") -> bytes:
    """A response the API paused in the middle of a server tool's turn."""
    return (
        message_start(40)
        + text_block(index, "Searching. ")
        + event(
            "content_block_start",
            index=index + 1,
            content_block=SEARCH | {"id": f"srvtoolu_{query}"},
        )
        + event(
            "content_block_delta",
            index=index + 1,
            delta={"type": "input_json_delta", "partial_json": json.dumps({"query": query})},
        )
        + event("content_block_stop", index=index + 1)
        + message_end("pause_turn", 15, input_tokens=40)
    )


async def test_pause_turn_is_continued_as_one_response(server: SSEServer) -> None:
    continuation = (
        message_start(90)
        + text_block(0, "Found: Trio.")
        + message_end("end_turn", 8, input_tokens=90)
    )
    server.add(Reply(cut(paused(), 13)), Reply(cut(continuation, 13)))
    updates = await stream_updates(client_for(server), [ChatMessage.user("Search trio")])
    use = {"type": "server_tool_use", "id": "srvtoolu_trio", "name": "web_search"}
    place = {"after_calls": 0, "text_at": 11, "after_thinking": 0}
    assert updates == [
        TextDelta("Searching. "),
        ProviderDataDelta(
            "server_blocks", "1", update={"block": use | {"input": {"query": "trio"}}, **place}
        ),
        TextDelta("Found: Trio."),
        Finish(FinishReason.STOP, Usage(40 + 90, 15 + 8)),
    ]
    first, second = (r.json for r in server.requests)
    assert second["messages"] == [
        *first["messages"],
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Searching. "},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_trio",
                    "name": "web_search",
                    "input": {"query": "trio"},
                },
            ],
        },
    ]
    assert {k: v for k, v in second.items() if k != "messages"} == {
        k: v for k, v in first.items() if k != "messages"
    }


async def test_pauses_merge_into_one_trailing_assistant_message(server: SSEServer) -> None:
    done = message_start(5) + text_block(0, "Done.") + message_end("end_turn", 2, input_tokens=5)
    server.add(Reply([paused(query="a")]), Reply([paused(query="b")]), Reply([done]))
    updates = await stream_updates(client_for(server))
    assert updates[-1] == Finish(FinishReason.STOP, Usage(85, 32))
    third = server.requests[2].json["messages"]
    assert [m["role"] for m in third] == ["user", "assistant"]
    ids = [b.get("id") for b in third[-1]["content"] if b["type"] == "server_tool_use"]
    assert ids == ["srvtoolu_a", "srvtoolu_b"]


async def test_a_paused_response_goes_back_without_its_empty_text_blocks(server: SSEServer) -> None:
    # The API refuses an empty text block: a continuation must not send one back.
    search = event("content_block_start", index=1, content_block=SEARCH) + event(
        "content_block_stop", index=1
    )
    only_empty = message_start(10) + text_block(0) + message_end("pause_turn", 1)
    with_search = message_start(10) + text_block(0) + search + message_end("pause_turn", 1)
    done = message_start(5) + text_block(0, "Done.") + message_end("end_turn", 2)
    server.add(Reply([only_empty]), Reply([with_search]), Reply([done]))
    updates = await stream_updates(client_for(server), [ChatMessage.user("Search trio")])
    place = {"after_calls": 0, "text_at": 0, "after_thinking": 0}
    assert updates == [
        ProviderDataDelta("server_blocks", "1.1", update={"block": SEARCH, **place}),
        TextDelta("Done."),
        Finish(FinishReason.STOP, Usage(75, 4)),
    ]
    second, third = (r.json["messages"] for r in server.requests[1:])
    assert second == [{"role": "user", "content": [{"type": "text", "text": "Search trio"}]}]
    assert third[1] == {"role": "assistant", "content": [SEARCH]}


@pytest.mark.parametrize("limit", [0, 1, 3])
async def test_max_continuations_leaves_the_turn_unfinished(server: SSEServer, limit: int) -> None:
    server.add(*[Reply([paused(query=f"q{n}")]) for n in range(limit + 1)])
    updates = await stream_updates(client_for(server, max_continuations=limit))
    assert updates[-1] == Finish(FinishReason.LENGTH, Usage(40 * (limit + 1), 15 * (limit + 1)))
    assert len(server.requests) == limit + 1


async def test_pause_turn_inside_the_loop_is_one_round(server: SSEServer) -> None:
    continuation = (
        message_start(90) + text_block(0, "Found.") + message_end("end_turn", 8, input_tokens=90)
    )
    server.add(Reply([paused()]), Reply([continuation]))
    agent = FunctionInvokingChatClient(client_for(server), [])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert (response.text, response.finish_reason) == ("Searching. Found.", FinishReason.STOP)
    assert response.usage == Usage(130, 23)


# -- whole tool loops ----------------------------------------------------------------------------


@tool
async def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny in {city}"


@tool
def get_time(zone: str) -> str:
    """The time in a time zone."""
    if zone == "Mars/Olympus":
        raise ValueError("no such zone")
    return "14:05"


@tool
async def to_fahrenheit(celsius: float) -> float:
    """Convert Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


async def test_agent_two_tool_rounds_with_parallel_calls(server: SSEServer) -> None:
    round_1 = (
        message_start(200)
        + text_block(0, "Checking both.")
        + tool_block(1, "toolu_w", "get_weather", '{"city": ', '"Paris"}')
        + tool_block(2, "toolu_t", "get_time", '{"zone": "Mars/Olympus"}')
        + tool_block(3, "toolu_t2", "get_time", '{"zone": "Europe/Paris"}')
        + message_end("tool_use", 60, input_tokens=200)
    )
    round_2 = (
        message_start(300, cache_read=200)
        + tool_block(0, "toolu_f", "to_fahrenheit", '{"celsius": 21}')
        + message_end("tool_use", 20, input_tokens=100, cache_read_input_tokens=200)
    )
    round_3 = (
        message_start(350)
        + text_block(0, "Sunny, 69.8 °F, 14:05.")
        + message_end("end_turn", 12, input_tokens=350)
    )
    server.add(Reply(cut(round_1, 17)), Reply(cut(round_2, 9)), Reply(cut(round_3, 5)))
    agent = FunctionInvokingChatClient(client_for(server), [get_weather, get_time, to_fahrenheit])
    updates: list[AgentResponseUpdate] = []
    with trio.fail_after(20):
        async with agent.run([ChatMessage.system("Use tools."), *USER]) as stream:
            async for update in stream:
                updates.append(update)
    assert updates[-1] == Finish(
        FinishReason.STOP, Usage(200 + 300 + 350, 60 + 20 + 12, cache_read_input_tokens=200)
    )
    called = {u.call.id: u for u in updates if isinstance(u, ToolCalled)}
    assert set(called) == {"toolu_w", "toolu_t", "toolu_t2", "toolu_f"}
    assert called["toolu_t"].is_error
    assert [u.id for u in updates if isinstance(u, ToolCallStart)] == [
        "toolu_w",
        "toolu_t",
        "toolu_t2",
        "toolu_f",
    ]
    assert len(server.requests) == 3
    second = server.requests[1].json
    assert second["system"] == [{"type": "text", "text": "Use tools."}]
    assert [t["name"] for t in second["tools"]] == ["get_weather", "get_time", "to_fahrenheit"]
    assert second["tools"][0]["input_schema"]["required"] == ["city"]
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking both."},
            {
                "type": "tool_use",
                "id": "toolu_w",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {
                "type": "tool_use",
                "id": "toolu_t",
                "name": "get_time",
                "input": {"zone": "Mars/Olympus"},
            },
            {
                "type": "tool_use",
                "id": "toolu_t2",
                "name": "get_time",
                "input": {"zone": "Europe/Paris"},
            },
        ],
    }
    results = second["messages"][2]
    assert results["role"] == "user"
    assert [
        (b["type"], b["tool_use_id"], b.get("is_error", False)) for b in results["content"]
    ] == [
        ("tool_result", "toolu_w", False),
        ("tool_result", "toolu_t", True),
        ("tool_result", "toolu_t2", False),
    ]
    assert results["content"][0]["content"] == "Sunny in Paris"
    third = server.requests[2].json["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    assert third[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_f", "content": "69.8"}
    ]
    assert stream.messages[-1] == ChatMessage.assistant("Sunny, 69.8 °F, 14:05.")
    assert_transcript_valid([*USER, *stream.messages])


async def test_parallel_tool_calls_false_and_tool_choice_reach_the_request(
    server: SSEServer,
) -> None:
    server.add(
        Reply(
            [
                message_start()
                + tool_block(0, "toolu_1", "get_weather", '{"city": "Oslo"}')
                + message_end("tool_use")
            ]
        ),
        Reply([TEXT]),
    )
    agent = FunctionInvokingChatClient(client_for(server), [get_weather])
    with trio.fail_after(20):
        await agent.get_response(
            USER, RunOptions(tool_choice="required", parallel_tool_calls=False)
        )
    first, second = (r.json for r in server.requests)
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert second["tool_choice"] == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }  # a forced choice is for round one


# -- server tools ----------------------------------------------------------------------------

WEB = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


def test_server_tools_go_after_the_function_tools() -> None:
    fetch = {"type": "web_fetch_20250910", "name": "web_fetch", "allowed_domains": ["a.org"]}
    model = AnthropicChatClient("claude-x", server_tools=[WEB, fetch])
    assert model.server_tools == (WEB, fetch)
    body = model.request_body(USER, RunOptions(tools=[ToolDefinition.of(get_weather)]))
    assert [tool.get("type") for tool in body["tools"]] == [None, WEB["type"], fetch["type"]]
    assert body["tools"][0]["name"] == "get_weather"
    assert body["tools"][1:] == [WEB, fetch]
    assert "tool_choice" not in body
    # Also with no function tools; and the tool_choice of the run goes with them.
    body = model.request_body(USER, RunOptions(tool_choice="required"))
    assert (body["tools"], body["tool_choice"]) == ([WEB, fetch], {"type": "any"})
    named = {"type": "function", "function": {"name": "web_search"}}
    body = model.request_body(USER, RunOptions(tool_choice=named, parallel_tool_calls=False))
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "web_search",
        "disable_parallel_tool_use": True,
    }
    # Without either kind, neither tools nor tool_choice.
    plain = AnthropicChatClient("claude-x").request_body(USER, RunOptions(tool_choice="auto"))
    assert "tools" not in plain
    assert "tool_choice" not in plain
    # The request holds copies: changing one changes nothing of the client's.
    body["tools"][1]["allowed_domains"].append("b.org")
    assert model.server_tools[1]["allowed_domains"] == ["a.org"]


@pytest.mark.parametrize(
    ("tools", "match"),
    [
        ({"type": "web_search_20250305", "name": "web_search"}, "a sequence of tool declar"),
        ("web_search", "a sequence of tool declarations"),
        (["web_search"], r"server_tools\[0\] must be a mapping with a 'type' and a 'name'"),
        ([{"name": "web_search"}], r"server_tools\[0\] needs a 'type'"),
        ([{"type": "web_search_20250305"}], r"server_tools\[0\] needs a 'name'"),
        ([WEB, {"type": "x", "name": 5}], r"server_tools\[1\] needs a 'name'"),
        ([{"type": "", "name": "w"}], "needs a 'type', a non-empty string"),
        ([WEB, WEB], "two tools named 'web_search'"),
        ([{**WEB, "max_uses": float("nan")}], r"server_tools\[0\] must hold JSON values only"),
        ([{**WEB, "user_location": object()}], "JSON values only"),
    ],
)
def test_bad_server_tools(tools: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        AnthropicChatClient("claude-x", server_tools=tools)
    model = AnthropicChatClient("claude-x")
    with pytest.raises(ConfigurationError, match=match):
        model.server_tools = tools  # checked as the constructor checks it
    assert model.server_tools == ()


def test_a_server_tool_named_as_a_function_tool_is_an_error_naming_both() -> None:
    search = ToolDefinition("web_search", "Search my notes.", {"type": "object"})
    model = AnthropicChatClient("claude-x", server_tools=[WEB])
    with pytest.raises(
        ConfigurationError,
        match=r"server tool 'web_search' \(web_search_20250305\) has the name of a function "
        r"tool, 'web_search'",
    ):
        model.request_body(USER, RunOptions(tools=[search]))


async def test_a_web_search_turn_streams_its_text_and_goes_back_whole(server: SSEServer) -> None:
    # The API runs the search: no call of the loop's comes of it, only the text; the blocks
    # (the search, its results, the text around them, the function call) go back in the next
    # round's request, in the order they came, as the API's content of the turn.
    done = message_start(2500) + text_block(0, "Sunny; it is 14:05.") + message_end("end_turn", 9)
    server.add(Reply(cut(WEB_SEARCH, 23)), Reply([done]))
    agent = FunctionInvokingChatClient(client_for(server, server_tools=[WEB]), [get_time])
    updates: list[AgentResponseUpdate] = []
    with trio.fail_after(20):
        async with agent.run(USER) as stream:
            async for update in stream:
                updates.append(update)
    texts = [u.text for u in updates if isinstance(u, TextDelta)]
    assert texts == ["I'll look that up.", "It is sunny.", "Sunny; it is 14:05."]
    assert [(u.id, u.name) for u in updates if isinstance(u, ToolCallStart)] == [
        ("toolu_01Time", "get_time")
    ]
    assert [u.call.id for u in updates if isinstance(u, ToolCalled)] == ["toolu_01Time"]
    assert updates[-1] == Finish(FinishReason.STOP, Usage(2037 + 25, 160 + 9))
    first, second = (r.json for r in server.requests)
    for body in (first, second):
        assert [t["name"] for t in body["tools"]] == ["get_time", "web_search"]
        assert body["tools"][1] == WEB
    search = {**WEB_USE, "input": {"query": "Paris weather today"}}
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll look that up."},
                search,
                WEB_RESULT,
                {"type": "text", "text": "It is sunny.", "citations": [WEB_CITATION]},
                {
                    "type": "tool_use",
                    "id": "toolu_01Time",
                    "name": "get_time",
                    "input": {"zone": "Europe/Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01Time", "content": ANY}],
        },
    ]
    # The transcript keeps them (JSON: it can be stored and sent again later).
    assistant = stream.messages[0]
    assert assistant.content == "I'll look that up.It is sunny."
    assert [entry["block"] for entry in assistant.provider_data["server_blocks"]] == [
        search,
        WEB_RESULT,
    ]
    assert assistant.provider_data["text_citations"] == [
        {"text_at": 18, "length": 12, "citations": [WEB_CITATION]}
    ]
    again = ChatMessage.from_dict(json.loads(json.dumps(assistant.to_dict())))
    assert again == assistant
    assert_transcript_valid([*USER, *stream.messages])


async def test_server_tools_alone_answer_in_one_round(server: SSEServer) -> None:
    server.add(Reply([UNKNOWN]), Reply([TEXT]))
    model = client_for(server, server_tools=[WEB])
    agent = FunctionInvokingChatClient(model, [])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
        assert (response.text, response.finish_reason) == ("Found it.", FinishReason.STOP)
        assert not any(isinstance(u, ToolCallStart) for u in await stream_updates(model, USER))
    assert [r.json["tools"] for r in server.requests] == [[WEB], [WEB]]
    # The next turn of the conversation sends the search back before the text.
    body = model.request_body([*USER, *response.messages, ChatMessage.user("Thanks.")])
    assert body["messages"][1]["content"] == [
        {**SERVER_SEARCH, "input": {"query": "trio"}},
        RESULTS,
        {"type": "text", "text": "Found it."},
    ]


def anthropic_like(request: Request) -> Reply | None:
    """What the API does with thinking on: HTTP 400 when the assistant message of a tool loop
    comes back without its thinking block first."""
    body = request.json
    if body.get("thinking", {}).get("type") != "enabled":
        return None
    last = next((m for m in reversed(body["messages"]) if m["role"] == "assistant"), None)
    if last is None or not any(b["type"] == "tool_use" for b in last["content"]):
        return None
    first = last["content"][0]
    if first["type"] in ("thinking", "redacted_thinking") and (
        first.get("signature") or first.get("data")
    ):
        return None
    message = (
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        f"`{first['type']}`. When `thinking` is enabled, a final `assistant` message must start "
        "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
        "blocks)."
    )
    return Reply.error(400, error_body("invalid_request_error", message))


async def test_a_thinking_loop_carries_the_signed_block_back(nursery: trio.Nursery) -> None:
    server = SSEServer(check=anthropic_like)
    await nursery.start(server.serve)
    round_2 = (
        message_start(400)
        + thinking_block(0, "It is sunny.", signature="Sig-2==")
        + text_block(1, "Sunny in Paris.")
        + message_end("end_turn", 30, input_tokens=400)
    )
    server.add(Reply(cut(THINKING, 6)), Reply(cut(round_2, 8)))
    agent = FunctionInvokingChatClient(client_for(server, thinking=THINK), [get_weather])
    updates: list[AgentResponseUpdate] = []
    with trio.fail_after(20):
        async with agent.run(USER) as stream:
            async for update in stream:
                updates.append(update)
    assert updates[-1] == Finish(FinishReason.STOP, Usage(700, 120))
    reasoning = [u.text for u in updates if isinstance(u, ReasoningDelta)]
    assert reasoning == ["Weather first; ", "then time — ", "Fahrenheit?", "It is sunny."]
    sent = server.requests[1].json
    assert sent["thinking"] == THINK
    assert sent["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Weather first; then time — Fahrenheit?",
        "signature": "EqQBCkYIBhgCIkBfcm5==",
    }
    assert stream.messages[0].reasoning == "Weather first; then time — Fahrenheit?"
    assert stream.messages[-1].provider_data["thinking_blocks"] == [
        {"type": "thinking", "thinking": "It is sunny.", "signature": "Sig-2=="}
    ]
    stored = [ChatMessage.from_dict(json.loads(json.dumps(m.to_dict()))) for m in stream.messages]
    assert stored == stream.messages  # a stored conversation goes back the same


async def test_redacted_blocks_go_back_in_the_next_round(nursery: trio.Nursery) -> None:
    server = SSEServer(check=anthropic_like)
    await nursery.start(server.serve)
    round_1 = (
        message_start(92)
        + redacted_block(0)
        + ping()
        + thinking_block(1, "Hmm.", signature="Sig2==")
        + redacted_block(2, "EtgBCkYIBxgCKkDQ")
        + tool_block(3, "toolu_r", "get_weather", '{"city": "Rome"}')
        + message_end("tool_use", 12, input_tokens=92)
    )
    server.add(Reply([round_1]), Reply([TEXT]))
    agent = FunctionInvokingChatClient(client_for(server, thinking=THINK), [get_weather])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert response.finish_reason is FinishReason.STOP
    content = server.requests[1].json["messages"][1]["content"]
    assert [b["type"] for b in content] == [
        "redacted_thinking",
        "thinking",
        "redacted_thinking",
        "tool_use",
    ]


@pytest.mark.parametrize("raw", [INTERLEAVED, TEXT_BETWEEN_CALLS], ids=["thinking", "text"])
async def test_interleaved_thinking_goes_back_in_its_places(
    nursery: trio.Nursery, raw: bytes
) -> None:
    # One response with thinking, or text, between its text and calls (interleaved thinking):
    # the next round sends it back block for block as it came.
    server = SSEServer(check=anthropic_like)
    await nursery.start(server.serve)
    server.add(Reply(cut(raw, 9)), Reply([TEXT]))
    agent = FunctionInvokingChatClient(client_for(server, thinking=THINK), [get_weather, get_time])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert response.finish_reason is FinishReason.STOP
    decoder = AnthropicDecoder()
    decode([raw], decoder)
    assert server.requests[1].json["messages"][1] == {
        "role": "assistant",
        "content": decoder.blocks,
    }


async def test_without_its_thinking_blocks_the_api_refuses_round_two(nursery: trio.Nursery) -> None:
    # The check is real: an assistant message that lost its blocks (stored elsewhere, say) is
    # refused, as the API refuses it.
    server = SSEServer(check=anthropic_like)
    await nursery.start(server.serve)
    call = ChatMessage.assistant(
        "", [trio_invoke.ToolCall("toolu_1", "get_weather", '{"city": "Paris"}')]
    )
    conversation = [*USER, call, ChatMessage.tool_result(call.tool_calls[0], "Sunny")]  # type: ignore[index]
    with pytest.raises(HTTPStatusError) as caught:
        await stream_updates(client_for(server, thinking=THINK), conversation)
    assert (caught.value.status_code, caught.value.error_type) == (400, "invalid_request_error")
    assert "must start with a thinking block" in caught.value.message


# -- the recorded exchanges through the loop -----------------------------------------------------


async def test_recorded_thinking_rounds_send_the_signed_block_back(nursery: trio.Nursery) -> None:
    server = SSEServer(check=anthropic_like)
    await nursery.start(server.serve)
    name = "anthropic/thinking-then-tool_use"
    server.add(
        Reply(cut(recorded(f"{name}.sse"), 97)), Reply(cut(recorded(f"{name}.turn2.sse"), 61))
    )
    accepted = recorded_json(f"{name}.turn2.request.json")

    @tool
    async def weather(location: str) -> str:
        """Get weather information for a location."""
        return "40 C"

    model = client_for(server, thinking=accepted["thinking"], max_tokens=accepted["max_tokens"])
    agent = FunctionInvokingChatClient(model, [weather])
    messages = [
        ChatMessage.system("You are a helpful assistant"),
        ChatMessage.user("What's the weather in Florence, Italy?"),
    ]
    with trio.fail_after(20):
        response = await agent.get_response(messages)
    assert response.text.startswith("The current weather in Florence, Italy is 40°C")
    assert response.usage == Usage(423 + 557, 119 + 35)
    ours = server.requests[1].json
    assert ours["messages"][1] == accepted["messages"][1]  # the signed block and the call, exactly
    tool_result = ours["messages"][2]["content"][0]
    recorded_result = accepted["messages"][2]["content"][0]
    assert tool_result["tool_use_id"] == recorded_result["tool_use_id"]
    assert tool_result["content"] == recorded_result["content"][0]["text"]


async def test_recorded_parallel_rounds(server: SSEServer) -> None:
    name = "anthropic/parallel-tool_use-after-text"
    server.add(
        Reply(cut(recorded(f"{name}.sse"), 41)), Reply(cut(recorded(f"{name}.turn2.sse"), 23))
    )
    accepted = recorded_json(f"{name}.turn2.request.json")

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool
    async def multiply(a: int, b: int) -> int:
        """Multiply two numbers."""
        return a * b

    agent = FunctionInvokingChatClient(client_for(server, max_tokens=4000), [add, multiply])
    messages = [
        ChatMessage.system(accepted["system"][0]["text"]),
        ChatMessage.user(accepted["messages"][0]["content"][0]["text"]),
    ]
    with trio.fail_after(20):
        response = await agent.get_response(messages)
    assert response.text == "The results are:\n- 2 + 3 = 5\n- 2 \u00d7 3 = 6"  # a times sign
    ours = server.requests[1].json["messages"]
    assert ours[1] == accepted["messages"][1]
    assert [(b["tool_use_id"], b["content"]) for b in ours[2]["content"]] == [
        (b["tool_use_id"], b["content"][0]["text"]) for b in accepted["messages"][2]["content"]
    ]
    assert [m.role for m in response.messages] == [
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]


# -- telemetry ------------------------------------------------------------------------------------


async def test_telemetry_names_the_provider_and_the_model(server: SSEServer) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from trio_invoke.otel import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server.add(Reply([CACHED]))
    agent = FunctionInvokingChatClient(
        client_for(server), [], telemetry=Telemetry(tracer_provider=provider)
    )
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert response.usage == Usage(
        2310, 5, cache_read_input_tokens=2000, cache_creation_input_tokens=300
    )
    [chat] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert chat.name == "chat claude-test"
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 2310


CODE = {"type": "code_execution_20260120", "name": "code_execution"}


@tool
def query_database(sql: str) -> str:
    """Run a SQL query."""
    return '[{"revenue": 45000}]'


def programmatic_round(container: str | None, caller: dict[str, Any]) -> bytes:
    """A response whose code called a function tool (programmatic tool calling), in the
    container the message_delta names."""
    code = {"type": "server_tool_use", "id": "srvtoolu_code", "name": "code_execution"}
    call = {"type": "tool_use", "id": "toolu_q", "name": "query_database", "input": {}}
    delta: dict[str, Any] = {"stop_reason": "tool_use", "stop_sequence": None}
    if container is not None:
        delta["container"] = {"id": container, "expires_at": "2026-01-20T14:30:00Z"}
    return (
        message_start(50)
        + text_block(0, "I'll query it.")
        + event("content_block_start", index=1, content_block=code | {"input": {"code": "q()"}})
        + event("content_block_stop", index=1)
        + event("content_block_start", index=2, content_block=call | {"caller": caller})
        + event(
            "content_block_delta",
            index=2,
            delta={"type": "input_json_delta", "partial_json": '{"sql": "SELECT 1"}'},
        )
        + event("content_block_stop", index=2)
        + event("message_delta", delta=delta, usage={"output_tokens": 30})
        + event("message_stop")
    )


@pytest.mark.parametrize(
    ("caller", "container", "sent"),
    [
        ({"type": "code_execution_20260120", "tool_id": "srvtoolu_code"}, "cont_1", "cont_1"),
        # A direct call does not need the container; no container named: none sent.
        ({"type": "direct"}, "cont_1", None),
        ({"type": "code_execution_20260120", "tool_id": "srvtoolu_code"}, None, None),
    ],
)
async def test_a_programmatic_calls_result_goes_back_with_its_caller_and_container(
    server: SSEServer, caller: dict[str, Any], container: str | None, sent: str | None
) -> None:
    # The API pauses the code for the call's result, and takes the result only with the call
    # as it came (its caller) and the container the code runs in.
    done = message_start(90) + text_block(0, "C1 leads.") + message_end("end_turn", 5)
    server.add(Reply([programmatic_round(container, caller)]), Reply([done]))
    agent = FunctionInvokingChatClient(client_for(server, server_tools=[CODE]), [query_database])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert response.text.endswith("C1 leads.")
    first, second = (r.json for r in server.requests)
    assert "container" not in first
    assert second.get("container") == sent
    call = second["messages"][1]["content"][-1]
    assert call == {
        "type": "tool_use",
        "id": "toolu_q",
        "name": "query_database",
        "input": {"sql": "SELECT 1"},
        "caller": caller,
    }
    # A later question, after the answer, names no container: no code waits.
    later = [*USER, *response.messages, ChatMessage.user("And C2?")]
    assert "container" not in client_for(server).request_body(later)
