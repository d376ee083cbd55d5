"""OpenAIChatClient against a real HTTP server on 127.0.0.1 (tests/sse_server.py) replaying SSE
transcripts in the shapes OpenAI, Ollama and vLLM send, cut into pieces at awkward places."""

from __future__ import annotations

import itertools
import json
import pickle
import sys
import time
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
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
    ChatClient,
    ChatMessage,
    ConfigurationError,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    HTTPStatusError,
    ImagePart,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeoutError,
    OpenAIChatClient,
    ReasoningDelta,
    RunOptions,
    TextDelta,
    ToolCallArgs,
    ToolCalled,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    tool,
)
from trio_invoke._updates import AgentResponseUpdate
from trio_invoke.providers._http import retry_after as _retry_after
from trio_invoke.providers.openai._decode import ChunkDecoder
from trio_invoke.testing import assert_transcript_valid

USER = [ChatMessage.user("What's the weather in Paris?")]


# -- transcripts ---------------------------------------------------------------------------------


def sse(*chunks: dict[str, Any] | str, eol: str = "\n") -> bytes:
    """An SSE body: one ``data:`` event per chunk (a dict is JSON-encoded), then nothing."""
    events = [c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in chunks]
    return "".join(f"data: {e}{eol}{eol}" for e in events).encode()


def openai_chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, *, usage: Any = None
) -> dict[str, Any]:
    """A chunk as api.openai.com sends it: every field present, ``"usage": null`` until the
    usage chunk, whose ``choices`` is empty."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
        "choices": [],
        "usage": usage,
    }
    if delta is not None:
        chunk["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return chunk


def openai_usage(prompt: int, completion: int) -> dict[str, Any]:
    return openai_chunk(
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
    )


def ollama_chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, *, usage: Any = None
) -> dict[str, Any]:
    """A chunk as Ollama's /v1 sends it: the role on every delta, no ``usage`` key except in
    the usage chunk (a copy of the last chunk with empty ``choices``)."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-611",
        "object": "chat.completion.chunk",
        "created": 1741570290,
        "model": "llama3.2",
        "system_fingerprint": "fp_ollama",
        "choices": [],
    }
    if delta is not None:
        full = {"role": "assistant", "content": "", **delta}
        chunk["choices"] = [{"index": 0, "delta": full, "finish_reason": finish}]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def vllm_chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, *, usage: Any = None
) -> dict[str, Any]:
    """A chunk as vLLM sends it: ``logprobs`` and ``finish_reason`` always, ``stop_reason`` on
    the last, no ``usage`` key except in the usage chunk."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-9c3f0b6e1d2a4f7b",
        "object": "chat.completion.chunk",
        "created": 1741570301,
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "choices": [],
    }
    if delta is not None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        if finish is not None:
            choice["stop_reason"] = None
        chunk["choices"] = [choice]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def call_start(index: int, call_id: str, name: str, arguments: str | None = "") -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if arguments is not None:
        function["arguments"] = arguments
    return {"index": index, "id": call_id, "type": "function", "function": function}


def call_args(index: int, arguments: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": arguments}}


OPENAI_TEXT = sse(
    openai_chunk({"role": "assistant", "content": "", "refusal": None}),
    openai_chunk({"content": "Café"}),
    openai_chunk({"content": " ☕ in Paris: "}),
    openai_chunk({"content": ""}),
    openai_chunk({"content": "sunny, 21 °C."}),
    openai_chunk({}, "stop"),
    openai_usage(12, 9),
    "[DONE]",
)
OPENAI_TEXT_UPDATES = [
    TextDelta("Café"),
    TextDelta(" ☕ in Paris: "),
    TextDelta("sunny, 21 °C."),
    Finish(FinishReason.STOP, Usage(12, 9)),
]

OPENAI_PARALLEL = sse(  # OpenAI streams parallel calls one after the other, by index
    openai_chunk(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call_start(0, "call_Wx1", "get_weather")],
            "refusal": None,
        }
    ),
    openai_chunk({"tool_calls": [call_args(0, '{"ci')]}),
    openai_chunk({"tool_calls": [call_args(0, 'ty": "Paris"}')]}),
    openai_chunk({"tool_calls": [call_start(1, "call_Tm2", "get_time")]}),
    openai_chunk({"tool_calls": [call_args(1, '{"zone": ')]}),
    openai_chunk({"tool_calls": [call_args(1, '"Europe/Paris"}')]}),
    openai_chunk({}, "tool_calls"),
    openai_usage(80, 41),
    "[DONE]",
)
PARALLEL_UPDATES = [
    ToolCallStart("call_Wx1", "get_weather"),
    ToolCallArgs("call_Wx1", '{"ci'),
    ToolCallArgs("call_Wx1", 'ty": "Paris"}'),
    ToolCallStart("call_Tm2", "get_time"),
    ToolCallArgs("call_Tm2", '{"zone": '),
    ToolCallArgs("call_Tm2", '"Europe/Paris"}'),
    ToolCallEnd("call_Wx1"),
    ToolCallEnd("call_Tm2"),
    Finish(FinishReason.TOOL_CALLS, Usage(80, 41)),
]

OLLAMA_TOOLS = sse(  # whole calls in one chunk, each with its id and index
    ollama_chunk(
        {
            "tool_calls": [
                call_start(0, "call_k3b1x9fz", "get_weather", '{"city":"Paris"}'),
                call_start(1, "call_7yq2m0aa", "get_time", '{"zone":"Europe/Paris"}'),
            ]
        }
    ),
    ollama_chunk({}, "tool_calls"),
    ollama_chunk(usage={"prompt_tokens": 140, "completion_tokens": 38, "total_tokens": 178}),
    "[DONE]",
)
OLLAMA_TEXT = sse(
    ollama_chunk({"content": "Il fait "}),
    ollama_chunk({"content": "beau à Paris."}),
    ollama_chunk({}, "stop"),
    ollama_chunk(usage={"prompt_tokens": 200, "completion_tokens": 7, "total_tokens": 207}),
    "[DONE]",
)

VLLM_INTERLEAVED = sse(  # name on a call's first chunk without arguments; two calls interleaved
    vllm_chunk({"role": "assistant", "content": ""}),
    vllm_chunk({"tool_calls": [call_start(0, "chatcmpl-tool-a1", "get_weather", None)]}),
    vllm_chunk({"tool_calls": [call_start(1, "chatcmpl-tool-b2", "get_time", None)]}),
    vllm_chunk({"tool_calls": [call_args(0, '{"city": "')]}),
    vllm_chunk({"tool_calls": [call_args(1, '{"zone": "Europe/')]}),
    vllm_chunk({"tool_calls": [call_args(0, 'Paris"}')]}),
    vllm_chunk({"tool_calls": [call_args(1, 'Paris"}')]}),
    vllm_chunk({"content": ""}, "tool_calls"),
    vllm_chunk(usage={"prompt_tokens": 301, "total_tokens": 342, "completion_tokens": 41}),
    "[DONE]",
)
VLLM_INTERLEAVED_UPDATES = [
    ToolCallStart("chatcmpl-tool-a1", "get_weather"),
    ToolCallStart("chatcmpl-tool-b2", "get_time"),
    ToolCallArgs("chatcmpl-tool-a1", '{"city": "'),
    ToolCallArgs("chatcmpl-tool-b2", '{"zone": "Europe/'),
    ToolCallArgs("chatcmpl-tool-a1", 'Paris"}'),
    ToolCallArgs("chatcmpl-tool-b2", 'Paris"}'),
    ToolCallEnd("chatcmpl-tool-a1"),
    ToolCallEnd("chatcmpl-tool-b2"),
    Finish(FinishReason.TOOL_CALLS, Usage(301, 41)),
]


# -- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def client_for(server: SSEServer, **kwargs: Any) -> OpenAIChatClient:
    kwargs.setdefault("retry_backoff", 0.0)
    return OpenAIChatClient("test-model", base_url=server.url, **kwargs)


# -- responses -----------------------------------------------------------------------------------


async def test_openai_text_cut_mid_utf8_character(server: SSEServer) -> None:
    pieces = cut(OPENAI_TEXT)
    assert cuts_inside_a_character(pieces) > 0
    server.add(Reply(pieces))
    assert await stream_updates(client_for(server)) == OPENAI_TEXT_UPDATES


async def test_openai_parallel_tool_calls_by_index(server: SSEServer) -> None:
    server.add(Reply(cut(OPENAI_PARALLEL, 5)))
    assert await stream_updates(client_for(server)) == PARALLEL_UPDATES


def one_event_a_piece(raw: bytes) -> list[bytes]:
    """``raw`` cut after every blank line: each event alone in its piece, as a server that
    flushes every event sends it (the stream's fast path, ``SSEParser.lone_message``)."""
    return [event + b"\n\n" for event in raw.removesuffix(b"\n\n").split(b"\n\n")]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (OPENAI_TEXT, OPENAI_TEXT_UPDATES),
        (OPENAI_PARALLEL, PARALLEL_UPDATES),
        (VLLM_INTERLEAVED, VLLM_INTERLEAVED_UPDATES),
    ],
)
async def test_one_event_a_piece_gives_the_same_updates(
    server: SSEServer, raw: bytes, expected: list[AgentResponseUpdate]
) -> None:
    pieces = one_event_a_piece(raw)
    assert b"".join(pieces) == raw
    assert len(pieces) > 5
    # between the events: fields and comments the fast path leaves to the parser
    keep_alive, named = b": keep-alive\n\n", b"event: message\nid: 4\n"
    server.add(
        Reply(pieces),
        Reply([pieces[0], keep_alive, *pieces[1:3], named, *pieces[3:]]),
    )
    client = client_for(server)
    assert await stream_updates(client) == expected
    assert await stream_updates(client) == expected


async def test_ollama_whole_calls_and_usage_chunk(server: SSEServer) -> None:
    server.add(Reply(cut(OLLAMA_TOOLS, 11)), Reply(cut(OLLAMA_TEXT, 3)))
    model = client_for(server)
    assert await stream_updates(model) == [
        ToolCallStart("call_k3b1x9fz", "get_weather"),
        ToolCallArgs("call_k3b1x9fz", '{"city":"Paris"}'),
        ToolCallStart("call_7yq2m0aa", "get_time"),
        ToolCallArgs("call_7yq2m0aa", '{"zone":"Europe/Paris"}'),
        ToolCallEnd("call_k3b1x9fz"),
        ToolCallEnd("call_7yq2m0aa"),
        Finish(FinishReason.TOOL_CALLS, Usage(140, 38)),
    ]
    assert await stream_updates(model) == [
        TextDelta("Il fait "),
        TextDelta("beau à Paris."),
        Finish(FinishReason.STOP, Usage(200, 7)),
    ]


async def test_vllm_interleaved_calls(server: SSEServer) -> None:
    server.add(Reply(cut(VLLM_INTERLEAVED, 13)))
    assert await stream_updates(client_for(server)) == VLLM_INTERLEAVED_UPDATES


async def test_crlf_and_keep_alive_comments_cut_between_cr_and_lf(server: SSEServer) -> None:
    # sse-starlette based servers (llama-cpp-python and others) end lines with CRLF and send
    # ": ping" comments while the model thinks.
    raw = b": ping - 2025-03-10 01:31:23\r\n\r\n" + OPENAI_TEXT.replace(b"\n", b"\r\n")
    pieces = [raw[: i + 1] for i in [raw.index(b"\r")]]
    pieces += cut(raw[len(pieces[0]) :], 9)
    assert pieces[0].endswith(b"\r")
    assert pieces[1].startswith(b"\n")
    server.add(Reply(pieces))
    assert await stream_updates(client_for(server)) == OPENAI_TEXT_UPDATES


async def test_a_chunk_over_several_crlf_data_lines_cut_at_every_cr(server: SSEServer) -> None:
    # One event may carry its JSON over several data lines (joined with "\n", still JSON); with
    # CRLF line ends a parser that forgets a CR at the end of a piece ends the event at the
    # following LF and dispatches half a chunk. Cut after every CR of the body.
    chunk = json.dumps(openai_chunk({"content": "Café ☕"}), indent=1).split("\n")
    raw = b"".join(f"data: {line}\r\n".encode() for line in chunk) + b"\r\n"
    raw += OPENAI_TEXT.replace(b"\n", b"\r\n")
    ends = [i + 1 for i, byte in enumerate(raw) if byte == ord("\r")]
    server.add(Reply(cut_at(raw, ends)))
    expected = [TextDelta("Café ☕"), *OPENAI_TEXT_UPDATES]
    assert await stream_updates(client_for(server)) == expected


def cut_at(raw: bytes, points: list[int]) -> list[bytes]:
    bounds = [0, *points, len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds) if b > a]


async def test_usage_may_come_with_the_finish_chunk_and_done_may_be_missing(
    server: SSEServer,
) -> None:
    # llama.cpp's server puts usage (and timings) on the finish chunk; a close-delimited body
    # that ends after a finish reason, without [DONE], is complete.
    body = sse(
        openai_chunk({"content": "ok"}),
        openai_chunk(
            {}, "length", usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        ),
    )
    server.add(Reply([body], framing="close"))
    assert await stream_updates(client_for(server)) == [
        TextDelta("ok"),
        Finish(FinishReason.LENGTH, Usage(3, 1)),
    ]


async def test_content_filter_and_no_usage(server: SSEServer) -> None:
    server.add(
        Reply([sse(openai_chunk({"content": "I"}), openai_chunk({}, "content_filter"), "[DONE]")])
    )
    assert await stream_updates(client_for(server)) == [
        TextDelta("I"),
        Finish(FinishReason.CONTENT_FILTER, None),
    ]


# -- the request ---------------------------------------------------------------------------------


@tool
async def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(zone: str) -> str:
    """The local time in an IANA time zone."""
    return f"14:05 in {zone}"


@tool
async def to_fahrenheit(celsius: float) -> float:
    """Convert Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


async def test_request_carries_model_messages_tools_and_options(server: SSEServer) -> None:
    server.add(Reply([OPENAI_TEXT]))
    model = client_for(server, api_key="sk-test", model_options={"temperature": 0.5, "seed": 1})
    options = RunOptions(
        tools=[trio_invoke.ToolDefinition.of(get_weather)],
        tool_choice="required",
        parallel_tool_calls=False,
        model_options={"temperature": 0.0, "max_tokens": 64},
    )
    messages = [ChatMessage.system("Be brief."), *USER]
    await stream_updates(model, messages, options)
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.json == {
        "model": "test-model",
        "messages": [m.to_dict() for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The current weather in a city.",
                    "parameters": dict(get_weather.parameters),
                },
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.0,
        "seed": 1,
        "max_tokens": 64,
    }


async def test_tool_messages_go_without_a_name(server: SSEServer) -> None:
    server.add(Reply([OPENAI_TEXT]))
    call = trio_invoke.ToolCall("c1", "get_weather", '{"city": "Paris"}')
    messages = [*USER, ChatMessage.assistant("", [call]), ChatMessage.tool_result(call, "Sunny")]
    await stream_updates(client_for(server), messages)
    sent = server.requests[0].json["messages"]
    assert sent[2] == {"role": "tool", "content": "Sunny", "tool_call_id": "c1"}
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_no_key_no_authorization_and_optional_fields_left_out(server: SSEServer) -> None:
    server.add(Reply([OPENAI_TEXT]), Reply([OPENAI_TEXT]))
    await stream_updates(client_for(server))
    # tool_choice and parallel_tool_calls without tools: OpenAI would answer 400
    options = RunOptions(tool_choice="auto", parallel_tool_calls=True)
    await stream_updates(client_for(server, model_options={"seed": 3}), options=options)
    first, second = server.requests
    assert "authorization" not in first.headers
    assert set(first.json) == {"model", "messages", "stream", "stream_options"}
    assert set(second.json) == {"model", "messages", "stream", "stream_options", "seed"}


async def test_a_none_model_option_leaves_the_field_out(server: SSEServer) -> None:
    server.add(Reply([OPENAI_TEXT]))
    model = client_for(server, model_options={"temperature": 1})
    options = RunOptions(model_options={"stream_options": None, "temperature": None})
    await stream_updates(model, options=options)
    assert set(server.requests[0].json) == {"model", "messages", "stream"}


async def test_base_url_and_key_from_the_environment(
    server: SSEServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = OpenAIChatClient("gpt-4o-mini")
    assert model.base_url == server.url
    assert repr(model) == f"OpenAIChatClient('gpt-4o-mini', base_url={server.url!r}, api_key=***)"
    server.add(Reply([OPENAI_TEXT]))
    await stream_updates(model)
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


@pytest.mark.parametrize("slash", ["", "/"])
async def test_a_query_in_base_url_stays_at_the_end_of_the_url(
    server: SSEServer, slash: str
) -> None:
    # Azure OpenAI's deployments: .../openai/deployments/NAME?api-version=2024-10-21
    base = f"{server.root}/openai/deployments/gpt-4o{slash}?api-version=2024-10-21"
    server.add(Reply([OPENAI_TEXT]))
    model = OpenAIChatClient("gpt-4o", base_url=base)
    await stream_updates(model)
    assert server.requests[0].path == (
        "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    )
    assert model.url == f"{server.root}{server.requests[0].path}"


def test_defaults_without_environment() -> None:
    model = OpenAIChatClient("gpt-4o-mini")
    assert model.url == "https://api.openai.com/v1/chat/completions"
    assert "api_key" not in repr(model)


@pytest.mark.parametrize(
    "base_url",
    [
        "ftp://user:s3cret@example.com/v1",
        "http://user:s3cret@localhost:8000/v1/chat/completions",
        "localhost?api_key=s3cret",
    ],
)
def test_a_bad_base_url_is_refused_without_showing_its_secrets(base_url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        OpenAIChatClient("m", base_url=base_url)
    assert "s3cret" not in str(caught.value)
    assert "***" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "localhost:11434"}, "http"),
        ({"base_url": "ftp://example.com/v1"}, "http"),
        ({"base_url": "http://[::1/v1"}, "not a valid URL"),
        ({"base_url": "http://localhost:11434/v1/chat/completions"}, "without /chat/completions"),
        ({"base_url": "https://api.example.com/v1/chat/completions/"}, "the API root"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": True}, "max_retries"),
        ({"retry_backoff": -0.5}, "retry_backoff"),
        ({"max_retry_delay": float("inf")}, "max_retry_delay"),
        ({"model_options": {"stream": False}}, "stream"),
    ],
)
def test_bad_configuration(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        OpenAIChatClient("m", **kwargs)
    with pytest.raises(ValueError, match=match):  # a ConfigurationError is a ValueError
        OpenAIChatClient("m", **kwargs)


def test_empty_model_name() -> None:
    with pytest.raises(ConfigurationError, match="model"):
        OpenAIChatClient("")


async def test_run_options_may_not_set_fields_the_client_owns(server: SSEServer) -> None:
    with pytest.raises(ConfigurationError, match="tools"):
        await stream_updates(client_for(server), options=RunOptions(model_options={"tools": []}))
    with pytest.raises(ConfigurationError, match="JSON"):
        await stream_updates(client_for(server), options=RunOptions(model_options={"x": {1, 2}}))
    assert server.requests == []


def test_is_a_chat_client() -> None:
    assert isinstance(OpenAIChatClient("m"), ChatClient)
    assert OpenAIChatClient.__module__ == "trio_invoke"
    assert "OpenAIChatClient" in dir(trio_invoke)


# -- HTTP errors and retries ---------------------------------------------------------------------

INVALID_KEY = {
    "error": {
        "message": "Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


async def test_http_401_is_raised_with_status_and_message_and_not_retried(
    server: SSEServer,
) -> None:
    server.add(Reply.error(401, INVALID_KEY))
    with pytest.raises(HTTPStatusError) as caught:
        await stream_updates(client_for(server, api_key="sk-test"))
    assert caught.value.status_code == 401
    assert caught.value.message.startswith("Incorrect API key provided: sk-test.")
    assert str(caught.value).startswith("HTTP 401: Incorrect API key provided: sk-test.")
    assert len(server.requests) == 1


def test_http_status_error_pickles_with_its_attributes() -> None:
    error = HTTPStatusError(429, "Rate limit reached", body="{}", retry_after=2.5)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status_code, copy.message, copy.body, copy.retry_after, str(copy)) == (
        429,
        "Rate limit reached",
        "{}",
        2.5,
        "HTTP 429: Rate limit reached",
    )
    assert isinstance(copy, trio_invoke.ChatClientError)
    assert copy.error_type is None
    typed = pickle.loads(
        pickle.dumps(HTTPStatusError(529, "Overloaded", error_type="overloaded_error"))
    )
    assert (typed.error_type, str(typed)) == (
        "overloaded_error",
        "HTTP 529: overloaded_error: Overloaded",
    )
    streamed = pickle.loads(
        pickle.dumps(ModelResponseError("the stream broke", error_type="api_error"))
    )
    assert (str(streamed), streamed.error_type) == ("the stream broke", "api_error")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"object": "error", "message": "max_tokens is too large", "code": 400}, "max_tokens is"),
        ({"error": 'model "llama9" not found, try pulling it first'}, 'model "llama9" not'),
        ({"error": {"code": 400, "message": "the request exceeds the context"}}, "the request"),
        ({"detail": "Not Found"}, "Not Found"),
        (b"upstream connect error", "upstream connect error"),
        (b"", "Not Found"),
    ],
)
async def test_error_message_from_each_server_shape(
    server: SSEServer, body: Any, message: str
) -> None:
    server.add(Reply.error(404 if body == b"" else 400, body))
    with pytest.raises(HTTPStatusError, match=message) as caught:
        await stream_updates(client_for(server))
    assert caught.value.message.startswith(message)


async def test_inside_the_loop_an_http_error_passes_through_unwrapped(server: SSEServer) -> None:
    server.add(Reply.error(401, INVALID_KEY))
    agent = FunctionInvokingChatClient(client_for(server), [get_weather])
    with pytest.raises(HTTPStatusError, match="HTTP 401: Incorrect API key"):
        await stream_updates(agent)


async def test_5xx_is_retried_then_succeeds(server: SSEServer) -> None:
    server.add(
        Reply.error(500, {"error": {"message": "The server had an error"}}),
        Reply.error(503, b"Service Unavailable"),
        Reply([OPENAI_TEXT]),
    )
    assert await stream_updates(client_for(server)) == OPENAI_TEXT_UPDATES
    assert len(server.requests) == 3
    assert server.requests[0].body == server.requests[2].body


async def test_retries_run_out(server: SSEServer) -> None:
    server.add(*[Reply.error(502, b"Bad Gateway")] * 3)
    with pytest.raises(HTTPStatusError, match="HTTP 502: Bad Gateway"):
        await stream_updates(client_for(server, max_retries=1))
    assert len(server.requests) == 2


async def test_no_retries_when_max_retries_is_zero(server: SSEServer) -> None:
    server.add(Reply.error(429, {"error": {"message": "Rate limit reached"}}))
    with pytest.raises(HTTPStatusError) as caught:
        await stream_updates(client_for(server, max_retries=0))
    assert caught.value.status_code == 429
    assert len(server.requests) == 1


async def test_429_honours_retry_after(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1  # virtual time jumps only while everything waits
    server.add(
        Reply.error(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "7"}),
        Reply([OPENAI_TEXT]),
    )
    start = trio.current_time()
    assert await stream_updates(client_for(server, retry_backoff=100.0)) == OPENAI_TEXT_UPDATES
    assert 7 <= trio.current_time() - start < 8
    assert len(server.requests) == 2


async def test_backoff_doubles_without_retry_after(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(*[Reply.error(500, b"oops")] * 2, Reply([OPENAI_TEXT]))
    start = trio.current_time()
    await stream_updates(client_for(server, retry_backoff=2.0))
    assert 0.75 * (2 + 4) <= trio.current_time() - start < 6.5  # with up to 25 % jitter


async def test_retry_after_longer_than_max_retry_delay_is_not_waited_for(
    server: SSEServer,
) -> None:
    server.add(Reply.error(429, {"error": {"message": "quota"}}, {"Retry-After": "3600"}))
    with pytest.raises(HTTPStatusError) as caught:
        await stream_updates(client_for(server, max_retry_delay=30.0))
    assert caught.value.retry_after == 3600
    assert len(server.requests) == 1


def test_retry_after_forms() -> None:
    def parse(**headers: str) -> float | None:
        named = {name.replace("_", "-"): value for name, value in headers.items()}
        return _retry_after(httpx2.Headers(named), now=1445412480.0)  # 2015-10-21 07:28:00Z

    assert parse() is None
    assert parse(retry_after="12") == 12
    assert parse(retry_after="1.5") == 1.5
    assert parse(retry_after="Wed, 21 Oct 2015 07:28:30 GMT") == 30
    assert parse(retry_after="Wed, 21 Oct 2015 07:00:00 GMT") == 0  # in the past: now
    assert parse(retry_after="soon") is None
    assert parse(retry_after="-3") == 0
    assert parse(retry_after_ms="250", retry_after="9") == 0.25  # OpenAI's header wins
    assert parse(retry_after_ms="x", retry_after="9") == 9


@pytest.mark.parametrize(
    "date",
    ["Wed Oct 21 07:28:30 2015", "Wed, 21 Oct 2015 07:28:30 -0000"],
    ids=["asctime", "no zone"],
)
def test_a_retry_after_date_without_a_zone_is_gmt(
    date: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # RFC 9110: every HTTP date is GMT, the obsolete asctime form too. The local zone of the
    # machine reading it changes nothing.
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        headers = httpx2.Headers({"retry-after": date})
        assert _retry_after(headers, now=1445412480.0) == 30  # 2015-10-21 07:28:00Z
    finally:
        monkeypatch.undo()
        time.tzset()


async def test_connection_refused_is_retried_then_raised() -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatClient("m", base_url=f"http://127.0.0.1:{port}/v1", retry_backoff=0.0)
    with pytest.raises(ModelConnectionError, match=r"could not get a response .*3 attempts"):
        await stream_updates(model)
    no_resource_warnings()


# -- broken streams ------------------------------------------------------------------------------


async def test_connection_cut_mid_stream_raises_after_the_updates_before_it(
    server: SSEServer,
) -> None:
    raw = OPENAI_PARALLEL
    server.add(Reply([raw[: raw.index(b"call_Tm2")]], ending="cut"))
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelConnectionError, match="broke in the middle of the response") as caught:
        await stream_updates(client_for(server), into=seen)
    assert isinstance(caught.value.__cause__, httpx2.RemoteProtocolError)
    assert seen == PARALLEL_UPDATES[:3]
    assert len(server.requests) == 1  # never retried once the response started


async def test_body_ending_without_finish_or_done_is_an_error(server: SSEServer) -> None:
    server.add(Reply([sse(openai_chunk({"content": "Hel"}))], framing="close"))
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelResponseError, match=r"ended before the response was complete"):
        await stream_updates(client_for(server), into=seen)
    assert seen == [TextDelta("Hel")]


async def test_a_body_that_is_not_sse_is_described(server: SSEServer) -> None:
    server.add(Reply([b'{"object": "chat.completion"}'], content_type="application/json"))
    with pytest.raises(ModelResponseError, match=r"application/json.*chat\.completion"):
        await stream_updates(client_for(server))


async def test_malformed_json_chunk(server: SSEServer) -> None:
    body = sse(openai_chunk({"content": "ok"})) + b'data: {"choices": [\n\n'
    server.add(Reply([body], ending="stall"))
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelResponseError, match=r"not valid JSON.*choices"):
        await stream_updates(client_for(server), into=seen)
    assert seen == [TextDelta("ok")]
    with trio.fail_after(5):
        await server.closed_while_stalled.wait()  # the client hung up, it did not wait


DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested deeper than the decoder's recursion limit: ``json.loads`` raises RecursionError."""


async def test_a_chunk_nested_too_deeply_is_a_response_error(server: SSEServer) -> None:
    body = sse(openai_chunk({"content": "ok"})) + f"data: {DEEP}\n\n".encode()
    server.add(Reply([body], ending="stall"))
    seen: list[AgentResponseUpdate] = []
    with pytest.raises(ModelResponseError, match=r"not valid JSON.*recursion"):
        await stream_updates(client_for(server), into=seen)
    assert seen == [TextDelta("ok")]


async def test_an_error_body_nested_too_deeply_is_still_an_http_error(server: SSEServer) -> None:
    server.add(Reply.error(400, f'{{"error": {DEEP}}}'.encode()))
    with pytest.raises(HTTPStatusError, match=r"HTTP 400: \{\"error\": \[\[\[") as caught:
        await stream_updates(client_for(server))
    assert caught.value.status_code == 400


async def test_an_error_inside_the_stream(server: SSEServer) -> None:
    error = {"error": {"message": "The server is overloaded", "type": "server_error"}}
    server.add(Reply([sse(openai_chunk({"content": "Hi"}), error)], ending="stall"))
    with pytest.raises(ModelResponseError, match="reported an error in the stream: The server is"):
        await stream_updates(client_for(server))


async def test_an_error_event_inside_the_stream(server: SSEServer) -> None:
    server.add(Reply([b'event: error\ndata: {"message": "model crashed"}\n\n'], ending="stall"))
    with pytest.raises(ModelResponseError, match="model crashed"):
        await stream_updates(client_for(server))


@pytest.mark.parametrize(
    "tail",
    [
        b'event: error\ndata: {"error": {"message": "late"}}\n\n',
        b"event: error\ndata: not even JSON\n\n",
    ],
)
@pytest.mark.parametrize("together", [True, False])
async def test_an_error_event_after_done_is_ignored_in_any_piece(
    server: SSEServer, tail: bytes, together: bool
) -> None:
    # The response is whole at [DONE]: an error event after it changes nothing, whether it
    # arrives in the piece that ends the response or in a later one.
    body = sse(openai_chunk({"content": "Hi"}), openai_chunk({}, "stop"), "[DONE]")
    server.add(Reply([body + tail] if together else [body, tail]))
    assert await stream_updates(client_for(server)) == [TextDelta("Hi"), Finish(FinishReason.STOP)]


async def test_read_timeout(server: SSEServer, mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(Reply([sse(openai_chunk({"content": "Hel"}))], ending="stall"))
    seen: list[AgentResponseUpdate] = []
    start = trio.current_time()
    with pytest.raises(ModelTimeoutError, match=r"read timeout, 5\.0 s"):
        await stream_updates(client_for(server, timeout=5.0), into=seen)
    assert 5 <= trio.current_time() - start < 6
    assert seen == [TextDelta("Hel")]
    assert isinstance(ModelTimeoutError("x"), ModelConnectionError)


async def test_a_server_that_never_answers_times_out_without_retry(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(Reply(ending="silent"))
    with pytest.raises(ModelTimeoutError, match=r"read timeout, 5\.0 s"):
        await stream_updates(client_for(server, timeout=5.0))
    assert len(server.requests) == 1


# -- connections ---------------------------------------------------------------------------------


async def test_your_own_http_client_is_used_and_left_open(server: SSEServer) -> None:
    server.add(Reply([OPENAI_TEXT]), Reply([OPENAI_TEXT]))
    async with httpx2.AsyncClient() as http:
        model = client_for(server, http_client=http)
        async with model:  # nothing to open: the client is yours
            assert await stream_updates(model) == OPENAI_TEXT_UPDATES
        assert await stream_updates(model) == OPENAI_TEXT_UPDATES
        assert not http.is_closed
    assert server.connections == 1


async def test_a_closed_http_client_is_a_connection_error(server: SSEServer) -> None:
    http = httpx2.AsyncClient()
    await http.aclose()
    with pytest.raises(ModelConnectionError, match=r"httpx2\.AsyncClient it sends with is closed"):
        await stream_updates(client_for(server, http_client=http))
    assert server.requests == []


async def test_a_pool_closed_during_a_retry_wait_sends_nothing_more(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(Reply.error(503, {"error": {"message": "busy"}}, {"retry-after": "5"}))
    model = client_for(server)

    async def close_soon() -> None:
        await trio.sleep(1)  # the 503 is in, and the retry waits for its Retry-After
        await model.aclose()

    with trio.fail_after(30):
        async with model, trio.open_nursery() as nursery:
            nursery.start_soon(close_soon)  # another task closes the pool meanwhile
            with pytest.raises(ModelConnectionError, match="is closed"):
                await stream_updates(model)
    assert len(server.requests) == 1


async def test_entering_twice_is_an_error_and_closing_twice_is_fine(server: SSEServer) -> None:
    model = client_for(server)
    async with model:
        with pytest.raises(RuntimeError, match="already open"):
            await model.__aenter__()
    await model.aclose()


# -- cancellation and leaks ----------------------------------------------------------------------


async def test_cancelling_the_loop_closes_the_response_promptly(server: SSEServer) -> None:
    server.add(Reply([sse(openai_chunk({"content": "Thinking"}))], ending="stall"))
    agent = FunctionInvokingChatClient(client_for(server), [get_weather])
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


async def test_leaving_the_block_early_closes_the_connection(server: SSEServer) -> None:
    server.add(
        Reply([sse(openai_chunk({"content": "a"}), openai_chunk({"content": "b"}))], ending="stall")
    )
    with trio.fail_after(10):
        async with client_for(server).run(USER) as stream:
            async for update in stream:
                assert update == TextDelta("a")
                break
        await server.closed_while_stalled.wait()
    no_resource_warnings()


async def test_an_outer_deadline_stops_a_stalled_request(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.05
    server.add(Reply([], ending="stall"))
    with trio.move_on_after(3) as scope:  # before the 5 s read timeout
        await stream_updates(client_for(server, timeout=5.0))
    assert scope.cancelled_caught
    with trio.fail_after(10):
        await server.closed_while_stalled.wait()
    no_resource_warnings()


# -- the decoder, without I/O --------------------------------------------------------------------


def decode(*chunks: dict[str, Any] | str) -> list[AgentResponseUpdate]:
    decoder = ChunkDecoder()
    updates: list[AgentResponseUpdate] = []
    for chunk in chunks:
        updates += decoder.feed(chunk if isinstance(chunk, str) else json.dumps(chunk))
    return updates + decoder.end_of_body()


def test_calls_without_index_as_older_ollama_sends_them() -> None:
    chunk = ollama_chunk({"tool_calls": [call_start(0, "call_a", "f", "{}")]})
    for call in chunk["choices"][0]["delta"]["tool_calls"]:
        del call["index"]
    second = json.loads(json.dumps(chunk).replace("call_a", "call_b").replace('"f"', '"g"'))
    assert decode(chunk, second, ollama_chunk({}, "stop"), "[DONE]") == [
        ToolCallStart("call_a", "f"),
        ToolCallArgs("call_a", "{}"),
        ToolCallStart("call_b", "g"),
        ToolCallArgs("call_b", "{}"),
        ToolCallEnd("call_a"),
        ToolCallEnd("call_b"),
        Finish(FinishReason.TOOL_CALLS),  # "stop" with calls: the calls decide
    ]


def test_a_new_id_and_name_at_a_used_index_is_a_new_call() -> None:
    assert decode(
        vllm_chunk({"tool_calls": [call_start(0, "t1", "f", '{"a": 1}')]}),
        vllm_chunk({"tool_calls": [call_start(0, "t2", "g", '{"b": 2}')]}),
        vllm_chunk({"tool_calls": [{"index": 0, "id": "t9", "function": {"arguments": " "}}]}),
        vllm_chunk({}, "tool_calls"),
    ) == [
        ToolCallStart("t1", "f"),
        ToolCallArgs("t1", '{"a": 1}'),
        ToolCallEnd("t1"),
        ToolCallStart("t2", "g"),
        ToolCallArgs("t2", '{"b": 2}'),
        ToolCallArgs("t2", " "),  # a new id without a name continues the call
        ToolCallEnd("t2"),
        Finish(FinishReason.TOOL_CALLS),
    ]


def test_arguments_sent_as_an_object_and_a_missing_id() -> None:
    updates = decode(
        openai_chunk(
            {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": {"a": 1}}}]}
        ),
        openai_chunk({}, "tool_calls"),
        "[DONE]",
    )
    start = updates[0]
    assert isinstance(start, ToolCallStart)
    assert start.id.startswith("call_")
    assert updates[1:] == [
        ToolCallArgs(start.id, '{"a": 1}'),
        ToolCallEnd(start.id),
        Finish(FinishReason.TOOL_CALLS),
    ]


def test_duplicate_ids_are_made_unique() -> None:
    updates = decode(
        openai_chunk({"tool_calls": [call_start(0, "same", "f", "{}")]}),
        openai_chunk({"tool_calls": [call_start(1, "same", "f", "{}")]}),
        "[DONE]",
    )
    starts = [u.id for u in updates if isinstance(u, ToolCallStart)]
    assert len(set(starts)) == 2


def test_done_without_finish_reason_ends_calls() -> None:
    assert decode(openai_chunk({"tool_calls": [call_start(0, "c", "f", "{}")]}), "[DONE]") == [
        ToolCallStart("c", "f"),
        ToolCallArgs("c", "{}"),
        ToolCallEnd("c"),
        Finish(FinishReason.TOOL_CALLS),
    ]


def test_a_piece_with_neither_index_nor_id_continues_the_last_call() -> None:
    assert decode(
        openai_chunk({"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}]}),
        openai_chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        "[DONE]",
    ) == [
        ToolCallStart("c", "f"),
        ToolCallArgs("c", "{"),
        ToolCallArgs("c", "}"),
        ToolCallEnd("c"),
        Finish(FinishReason.TOOL_CALLS),
    ]


def test_a_call_without_a_name_is_an_error() -> None:
    with pytest.raises(ModelResponseError, match="without a function name"):
        decode(openai_chunk({"tool_calls": [call_args(0, "{}")]}))


def test_arguments_after_the_call_ended_are_an_error() -> None:
    decoder = ChunkDecoder()
    decoder.feed(json.dumps(openai_chunk({"tool_calls": [call_start(0, "c", "f", "{")]})))
    decoder.feed(json.dumps(openai_chunk({}, "tool_calls")))
    assert decoder.feed(json.dumps(openai_chunk({"tool_calls": [{"index": 0}]}))) == []
    with pytest.raises(ModelResponseError, match="after it ended"):
        decoder.feed(json.dumps(openai_chunk({"tool_calls": [call_args(0, "}")]})))


def test_refusal_text_other_choices_and_odd_chunks() -> None:
    other_choice = openai_chunk({"content": "ignored"})
    other_choice["choices"][0]["index"] = 1
    assert decode(
        openai_chunk({"refusal": "I can't help with that."}),
        other_choice,
        {"object": "chat.completion.chunk", "choices": None},
        openai_chunk({}, "mystery_reason"),
        "[DONE]",
        openai_chunk({"content": "after done"}),
    ) == [TextDelta("I can't help with that."), Finish(FinishReason.STOP)]
    with pytest.raises(ModelResponseError, match="not a JSON object"):
        decode("[1, 2]")


def test_import_without_httpx_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx2", None)  # import httpx2 -> ImportError
    monkeypatch.delitem(sys.modules, "trio_invoke.providers.openai._client")
    monkeypatch.delattr(trio_invoke, "OpenAIChatClient", raising=False)
    with pytest.raises(ImportError, match=r'pip install "trio-invoke\[openai\] @ git\+https://'):
        from trio_invoke import OpenAIChatClient  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        trio_invoke.nope  # noqa: B018


# -- a whole agent run over HTTP -----------------------------------------------------------------


async def test_agent_two_tool_rounds_with_parallel_calls(server: SSEServer) -> None:
    round_1 = VLLM_INTERLEAVED  # get_weather(Paris) and get_time(Europe/Paris), interleaved
    round_2 = sse(
        openai_chunk({"role": "assistant", "content": "Converting. "}),
        openai_chunk({"tool_calls": [call_start(0, "call_F3", "to_fahrenheit")]}),
        openai_chunk({"tool_calls": [call_args(0, '{"celsius"')]}),
        openai_chunk({"tool_calls": [call_args(0, ": 21}")]}),
        openai_chunk({}, "tool_calls"),
        openai_usage(400, 20),
        "[DONE]",
    )
    server.add(Reply(cut(round_1, 17)), Reply(cut(round_2, 6)), Reply(cut(OLLAMA_TEXT, 4)))
    updates: list[AgentResponseUpdate] = []
    with trio.fail_after(20):
        async with client_for(server) as model:  # one connection pool for the three rounds
            agent = FunctionInvokingChatClient(model, [get_weather, get_time, to_fahrenheit])
            options = RunOptions(parallel_tool_calls=True, model_options={"temperature": 0})
            async with agent.run(USER, options) as stream:
                async for update in stream:
                    updates.append(update)
    assert_transcript_valid(stream.messages)
    assert stream.messages[-1] == ChatMessage.assistant("Il fait beau à Paris.")
    called = [u for u in updates if isinstance(u, ToolCalled)]
    assert sorted((c.call.name, c.result, c.is_error) for c in called) == [
        ("get_time", "14:05 in Europe/Paris", False),
        ("get_weather", "sunny in Paris", False),
        ("to_fahrenheit", "69.8", False),
    ]
    assert updates[-1] == Finish(FinishReason.STOP, Usage(301 + 400 + 200, 41 + 20 + 7))
    assert [u.text for u in updates if isinstance(u, TextDelta)] == [
        "Converting. ",
        "Il fait ",
        "beau à Paris.",
    ]
    assert len(server.requests) == 3
    assert server.connections == 1  # after [DONE] the body is read to its end: reused
    tools_sent = [[t["function"]["name"] for t in r.json["tools"]] for r in server.requests]
    assert tools_sent == [["get_weather", "get_time", "to_fahrenheit"]] * 3
    assert all(r.json["temperature"] == 0 for r in server.requests)
    assert server.requests[0].json["parallel_tool_calls"] is True
    second = [ChatMessage.from_dict(m) for m in server.requests[1].json["messages"]]
    assert second[0] == USER[0]
    assert second[1].tool_calls is not None
    assert [(c.id, c.name, c.arguments) for c in second[1].tool_calls] == [
        ("chatcmpl-tool-a1", "get_weather", '{"city": "Paris"}'),
        ("chatcmpl-tool-b2", "get_time", '{"zone": "Europe/Paris"}'),
    ]
    assert [(m.tool_call_id, m.content) for m in second[2:]] == [
        ("chatcmpl-tool-a1", "sunny in Paris"),
        ("chatcmpl-tool-b2", "14:05 in Europe/Paris"),
    ]
    third = [ChatMessage.from_dict(m) for m in server.requests[2].json["messages"]]
    assert third[:4] == second
    assert third[4] == ChatMessage.assistant(
        "Converting. ", [trio_invoke.ToolCall("call_F3", "to_fahrenheit", '{"celsius": 21}')]
    )
    assert third[5].content == "69.8"
    assert_transcript_valid(third)
    no_resource_warnings()


# -- on_retry: what a caller is told about each retry ------------------------------------------


async def test_on_retry_reports_each_retry_with_its_error_number_and_wait(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(
        Reply.error(503, b"Service Unavailable"),
        Reply.error(429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}),
        Reply([OPENAI_TEXT]),
    )
    seen: list[tuple[str, int, float]] = []
    client = client_for(
        server,
        retry_backoff=0.5,
        on_retry=lambda error, n, delay: seen.append((str(error), n, delay)),
    )
    assert await stream_updates(client) == OPENAI_TEXT_UPDATES
    assert [(text.split(":")[0], n) for text, n, _ in seen] == [("HTTP 503", 1), ("HTTP 429", 2)]
    assert 0.5 * 0.75 <= seen[0][2] <= 0.5
    assert seen[1][2] == 3.0


async def test_on_retry_is_not_called_for_the_final_failure(server: SSEServer) -> None:
    server.add(*[Reply.error(500, b"oops")] * 3)
    errors: list[Exception] = []
    client = client_for(
        server, max_retries=2, retry_backoff=0, on_retry=lambda e, n, d: errors.append(e)
    )
    with pytest.raises(HTTPStatusError):
        await stream_updates(client)
    assert [type(e) for e in errors] == [HTTPStatusError, HTTPStatusError]
    assert [e.status_code for e in errors if isinstance(e, HTTPStatusError)] == [500, 500]


async def test_on_retry_reports_connection_failures() -> None:
    # Nothing listens on port 9 (discard) of loopback: each attempt is refused at once.
    errors: list[tuple[type[Exception], int]] = []
    client = OpenAIChatClient(
        "m",
        base_url="http://127.0.0.1:9/v1",
        retry_backoff=0,
        on_retry=lambda error, n, delay: errors.append((type(error), n)),
    )
    with pytest.raises(ModelConnectionError):
        await stream_updates(client)
    assert errors == [(ModelConnectionError, 1), (ModelConnectionError, 2)]


async def test_what_on_retry_raises_ends_the_request(server: SSEServer) -> None:
    server.add(*[Reply.error(503, b"busy")] * 3)

    def give_up(error: Exception, n: int, delay: float) -> None:
        raise KeyError("stop retrying")

    with pytest.raises(KeyError, match="stop retrying"):
        await stream_updates(client_for(server, on_retry=give_up))
    assert len(server.requests) == 1


# -- reasoning through the loop: DeepSeek's rule, recorded OpenRouter rounds ---------------------


def deepseek_like(request: Request) -> Reply | None:
    """What DeepSeek's thinking mode does: HTTP 400 for an assistant message with tool calls that
    comes back without its ``reasoning_content``."""
    for index, message in enumerate(request.json["messages"]):
        needs_it = message["role"] == "assistant" and message.get("tool_calls")
        if needs_it and not isinstance(message.get("reasoning_content"), str):
            return Reply.error(
                400,
                {
                    "error": {
                        "message": "Missing `reasoning_content` field in the assistant "
                        f"message at message index {index}.",
                        "type": "invalid_request_error",
                    }
                },
            )
    return None


DEEPSEEK_ROUND_1 = sse(
    openai_chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
    openai_chunk({"content": None, "reasoning_content": "Weather first, "}),
    openai_chunk({"content": None, "reasoning_content": "then the clock."}),
    openai_chunk({"tool_calls": [call_start(0, "call_00_w", "get_weather", "")]}),
    openai_chunk({"tool_calls": [call_args(0, '{"city": "Paris"}')]}),
    openai_chunk({"tool_calls": [call_start(1, "call_01_t", "get_time", "")]}),
    openai_chunk({"tool_calls": [call_args(1, '{"zone": "Europe/Paris"}')]}),
    openai_chunk({"content": "", "reasoning_content": None}, "tool_calls"),
    openai_usage(100, 30),
    "[DONE]",
)
DEEPSEEK_ROUND_2 = sse(
    openai_chunk({"role": "assistant", "content": None, "reasoning_content": "Both came back."}),
    openai_chunk({"content": "Sunny, 14:05."}),
    openai_chunk({}, "stop"),
    openai_usage(150, 10),
    "[DONE]",
)


async def test_a_two_round_loop_keeps_deepseeks_reasoning(nursery: trio.Nursery) -> None:
    server = SSEServer(check=deepseek_like)
    await nursery.start(server.serve)
    server.add(Reply(cut(DEEPSEEK_ROUND_1, 9)), Reply(cut(DEEPSEEK_ROUND_2, 5)))
    agent = FunctionInvokingChatClient(client_for(server), [get_weather, get_time])
    updates: list[AgentResponseUpdate] = []
    with trio.fail_after(20):
        async with agent.run(USER) as stream:
            async for update in stream:
                updates.append(update)
    assert updates[-1] == Finish(FinishReason.STOP, Usage(250, 40))
    reasoning = [u.text for u in updates if isinstance(u, ReasoningDelta)]
    assert reasoning == ["Weather first, ", "then the clock.", "Both came back."]
    first_text = next(i for i, u in enumerate(updates) if isinstance(u, TextDelta))
    assert isinstance(updates[first_text - 1], ReasoningDelta)  # reasoning before its text
    sent = server.requests[1].json["messages"]
    assert sent[1]["reasoning_content"] == "Weather first, then the clock."
    assert stream.messages[0].reasoning == "Weather first, then the clock."
    assert stream.messages[-1] == ChatMessage.assistant(
        "Sunny, 14:05.", reasoning="Both came back."
    )
    assert_transcript_valid(stream.messages)


async def test_without_its_reasoning_deepseek_refuses_round_two(nursery: trio.Nursery) -> None:
    server = SSEServer(check=deepseek_like)
    await nursery.start(server.serve)
    server.add(Reply(cut(DEEPSEEK_ROUND_1, 9)), Reply(cut(DEEPSEEK_ROUND_2, 5)))
    agent = FunctionInvokingChatClient(
        client_for(server, send_reasoning=False), [get_weather, get_time]
    )
    with trio.fail_after(20), pytest.raises(HTTPStatusError) as caught:
        async with agent.run(USER) as stream:
            async for _ in stream:
                pass
    assert caught.value.status_code == 400
    assert "reasoning_content" in caught.value.message
    assert len(server.requests) == 2
    assert_transcript_valid(stream.messages)


def gemini_like(request: Request) -> Reply | None:
    """What Gemini 3 does through its OpenAI-compatible API: HTTP 400 for an assistant tool call
    that comes back without the thought signature its response gave it."""
    for message in request.json["messages"]:
        for call in message.get("tool_calls") or ():
            signature = call.get("extra_content", {}).get("google", {}).get("thought_signature")
            if signature != f"sig-{call['id']}":
                return Reply.error(
                    400,
                    [
                        {
                            "error": {
                                "code": 400,
                                "message": "Function call is missing a thought_signature in "
                                f"functionCall parts. function call `{call['function']['name']}`",
                                "status": "INVALID_ARGUMENT",
                            }
                        }
                    ],
                )
    return None


def gemini_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A chunk as Gemini's OpenAI-compatible API sends it (no ``index`` on a tool call)."""
    return {
        "choices": [{"delta": {"role": "assistant", **delta}, "finish_reason": finish, "index": 0}],
        "created": 1761900000,
        "id": "vF0Kab2mN4",
        "model": "gemini-3-flash-preview",
        "object": "chat.completion.chunk",
    }


GEMINI_ROUND_1 = sse(  # each call whole, its signature on a trailing piece with no index
    gemini_chunk(
        {
            "tool_calls": [
                {
                    "function": {"arguments": '{"city":"Paris"}', "name": "get_weather"},
                    "id": "function-call-1",
                    "type": "function",
                }
            ]
        }
    ),
    gemini_chunk(
        {
            "tool_calls": [
                {"extra_content": {"google": {"thought_signature": "sig-function-call-1"}}}
            ]
        }
    ),
    gemini_chunk({}, "stop"),
    "[DONE]",
)
GEMINI_ROUND_2 = sse(
    gemini_chunk({"content": "Sunny in Paris."}), gemini_chunk({}, "stop"), "[DONE]"
)


async def test_a_two_round_loop_sends_back_geminis_late_thought_signature(
    nursery: trio.Nursery,
) -> None:
    server = SSEServer(check=gemini_like)
    await nursery.start(server.serve)
    server.add(Reply(cut(GEMINI_ROUND_1, 11)), Reply([GEMINI_ROUND_2]))
    agent = FunctionInvokingChatClient(client_for(server), [get_weather])
    with trio.fail_after(20):
        async with agent.run(USER) as stream:
            updates = [update async for update in stream]
    signed = {"extra_content": {"google": {"thought_signature": "sig-function-call-1"}}}
    assert ToolCallStart("function-call-1", "get_weather") in updates
    assert ToolCallEnd("function-call-1", provider_data=signed) in updates
    assert updates[-1] == Finish(FinishReason.STOP)
    [sent_call] = server.requests[1].json["messages"][1]["tool_calls"]
    assert sent_call["extra_content"] == signed["extra_content"]
    assert stream.messages[0].tool_calls is not None
    assert stream.messages[0].tool_calls[0].provider_data == signed
    assert stream.messages[-1] == ChatMessage.assistant("Sunny in Paris.")
    assert_transcript_valid(stream.messages)


async def test_get_response_exposes_the_reasoning(nursery: trio.Nursery) -> None:
    server = SSEServer(check=deepseek_like)
    await nursery.start(server.serve)
    server.add(Reply([DEEPSEEK_ROUND_1]), Reply([DEEPSEEK_ROUND_2]))
    agent = FunctionInvokingChatClient(client_for(server), [get_weather, get_time])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert (response.text, response.reasoning) == ("Sunny, 14:05.", "Both came back.")
    assert response.messages[0].reasoning == "Weather first, then the clock."


async def test_recorded_openrouter_rounds_send_reasoning_details_back(server: SSEServer) -> None:
    name = "openrouter/claude-sonnet-4-reasoning_details-tool-call"
    server.add(
        Reply(cut(recorded(f"{name}.sse"), 97)), Reply(cut(recorded(f"{name}.turn2.sse"), 61))
    )
    accepted = recorded_json(f"{name}.turn2.request.json")

    @tool
    async def weather(location: str) -> str:
        """Get weather information for a location."""
        return "40 C"

    # The server is on loopback, whose family sends reasoning back by default, as the
    # recorded exchange's openrouter.ai does.
    agent = FunctionInvokingChatClient(client_for(server), [weather])
    messages = [
        ChatMessage.system("You are a helpful assistant"),
        ChatMessage.user("What's the weather in Florence, Italy?"),
    ]
    with trio.fail_after(20):
        response = await agent.get_response(messages)
    assert response.finish_reason is FinishReason.STOP
    assert response.text.startswith("The current weather in Florence, Italy is 40°C")
    assert response.usage == Usage(424 + 549, 110 + 54)
    ours = next(m for m in server.requests[1].json["messages"] if m["role"] == "assistant")
    theirs = next(m for m in accepted["messages"] if m["role"] == "assistant")
    assert ours["tool_calls"] == theirs["tool_calls"]
    [detail] = ours["reasoning_details"]
    [recorded_detail] = theirs["reasoning_details"]
    assert detail["signature"] == recorded_detail["signature"]
    assert (detail["type"], detail["format"], detail["index"]) == (
        "reasoning.text",
        "anthropic-claude-v1",
        0,
    )
    # The recording client dropped the reasoning's first piece from what it sent back; ours
    # sends all of it, in both fields.
    assert detail["text"] == ours["reasoning"]
    assert ours["reasoning"].endswith(theirs["reasoning"])
    assert ours["reasoning"].startswith("The user is asking for weather information for")
    assert server.requests[1].json["messages"][-1] == {
        "role": "tool",
        "content": "40 C",
        "tool_call_id": "toolu_vrtx_01NRAptSJVJEik354SSeQZAs",
    }


async def test_a_history_with_images_and_a_developer_message_is_sent_as_it_is(
    server: SSEServer,
) -> None:
    history = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
    ]
    server.add(Reply([OPENAI_TEXT]))
    assert (
        await stream_updates(client_for(server), [ChatMessage.from_dict(m) for m in history])
        == OPENAI_TEXT_UPDATES
    )
    assert server.requests[0].json["messages"] == history


async def test_an_image_from_a_tool_reaches_the_model_in_a_user_message(
    server: SSEServer,
) -> None:
    @tool
    async def get_chart() -> ImagePart:
        """The chart."""
        return ImagePart(data="iVBORw0KGgo=", media_type="image/png")

    server.add(
        Reply(
            [
                sse(
                    openai_chunk({"tool_calls": [call_start(0, "c1", "get_chart", "{}")]}),
                    openai_chunk({}, "tool_calls"),
                    "[DONE]",
                )
            ]
        ),
        Reply([OPENAI_TEXT]),
    )
    agent = FunctionInvokingChatClient(client_for(server), [get_chart])
    with trio.fail_after(20):
        response = await agent.get_response(USER)
    assert response.finish_reason is FinishReason.STOP
    sent = server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["content"] == "[1 image in the user message that follows]"
    assert sent[3]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
    tool_message = response.messages[1]
    assert tool_message.content == (ImagePart(data="iVBORw0KGgo=", media_type="image/png"),)


# -- text that is not valid Unicode --------------------------------------------------------------


def escaped(chunk: dict[str, Any]) -> str:
    """A chunk as JSON with every non-ASCII character escaped: how a server sends a lone
    surrogate (``"\\udcff"``), or a character's surrogate pair split over two chunks."""
    return json.dumps(chunk)


@tool
async def list_dir(hint: str = "") -> list[str]:
    """File names, as os.listdir gives them for names that are not UTF-8."""
    assert hint == "\udcff"  # the model's lone surrogate reaches the tool as it was sent
    return ["caf\udce9.txt", "ok.txt"]


async def test_invalid_unicode_never_stops_the_next_request(server: SSEServer) -> None:
    # Round 1: text whose emoji is split over two chunks plus half a pair, and a call whose
    # arguments hold a lone surrogate; the tool's result holds one too. Round 2 must be sent.
    round_1 = sse(
        escaped(openai_chunk({"role": "assistant", "content": "Look \ud83d"})),
        escaped(openai_chunk({"content": "\ude00 and \ud800!"})),
        escaped(openai_chunk({"tool_calls": [call_start(0, "call_1", "list_dir")]})),
        escaped(openai_chunk({"tool_calls": [call_args(0, '{"hint": "\udcff"}')]})),
        escaped(openai_chunk({}, "tool_calls")),
        "[DONE]",
    )
    server.add(Reply(cut(round_1, 9)), Reply([OPENAI_TEXT]))
    agent = FunctionInvokingChatClient(client_for(server), [list_dir])
    with trio.fail_after(20):
        async with agent.run(USER) as stream:
            updates = [update async for update in stream]
    assert updates[-1] == Finish(FinishReason.STOP, Usage(12, 9))
    assert len(server.requests) == 2
    raw = server.requests[1].body
    raw.decode("utf-8")  # strict UTF-8 on the wire
    sent = server.requests[1].json["messages"]
    assert sent[1]["content"] == "Look 😀 and \ufffd!"
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"hint": "\ufffd"}'
    assert json.loads(sent[2]["content"]) == ["caf\ufffd.txt", "ok.txt"]
    assert "\\ud" not in raw.decode()  # replaced, not escaped
    assert_transcript_valid(stream.messages)


@pytest.mark.parametrize(
    "where",
    ["user text", "tool description", "tool schema", "model option", "tool name in history"],
)
async def test_any_field_with_invalid_unicode_is_sent_as_valid_utf8(
    server: SSEServer, where: str
) -> None:
    bad = "x\udcffy\ud83d\ude00"
    messages = [ChatMessage.user(bad if where == "user text" else "hi")]
    if where == "tool name in history":
        call = trio_invoke.ToolCall("c\udcff", bad, "{}")
        messages += [ChatMessage.assistant("", [call]), ChatMessage.tool_result(call, bad)]
    definition = trio_invoke.ToolDefinition(
        "t",
        bad if where == "tool description" else "d",
        {"type": "object", "description": bad} if where == "tool schema" else {"type": "object"},
    )
    options = RunOptions(
        tools=[definition], model_options={"user": bad} if where == "model option" else {}
    )
    server.add(Reply([OPENAI_TEXT]))
    await stream_updates(client_for(server), messages, options)
    (request,) = server.requests
    assert "x\ufffdy😀" in request.body.decode("utf-8")
