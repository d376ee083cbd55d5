"""What the HTTP clients share (providers/_http.py): settings, the request body's JSON, the retry
policy, the progress deadline on a streamed body, httpx2 on Trio. Real HTTP over loopback
(tests/sse_server.py)."""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import pickle
import re
from typing import Any

import attrs
import httpx2
import pytest
import sniffio
import trio
import trio.testing
from sse_server import Reply, SSEServer, no_resource_warnings, stream_updates

from trio_invoke import (
    AnthropicChatClient,
    ChatMessage,
    ConfigurationError,
    Finish,
    FinishReason,
    HTTPStatusError,
    ModelConnectionError,
    ModelResponseError,
    ModelTimeoutError,
    OpenAIChatClient,
    RunOptions,
    TextDelta,
)
from trio_invoke._updates import AgentResponseUpdate
from trio_invoke.providers._http import DRAIN_AFTER_DONE, RetryPolicy, checked_timeout

USER = [ChatMessage.user("hi")]


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def data(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


def delta(content: str | None = None, finish: str | None = None, **fields: Any) -> bytes:
    body: dict[str, Any] = dict(fields)
    if content is not None:
        body["content"] = content
    return data({"choices": [{"index": 0, "delta": body, "finish_reason": finish}]})


async def collect(model: OpenAIChatClient, into: list[AgentResponseUpdate]) -> None:
    async with model.run(USER) as stream:
        async for update in stream:
            into.append(update)


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"timeout": math.nan}, "nan"),
        ({"timeout": -1}, "-1"),
        ({"timeout": math.inf}, "inf"),
        ({"timeout": "30"}, "'30'"),
        ({"timeout": True}, "True"),
        ({"timeout": [5]}, r"\[5\]"),
        ({"timeout": httpx2.Timeout(5.0, read=math.nan)}, "read timeout.*nan"),
        ({"timeout": httpx2.Timeout(5.0, connect=-2.0)}, "connect timeout.*-2"),
        ({"max_retries": -1}, "max_retries.*-1"),
        ({"max_retries": 1.5}, "max_retries.*1.5"),
        ({"max_retries": "2"}, "max_retries.*'2'"),
        ({"max_retries": None}, "max_retries.*None"),
        ({"retry_backoff": math.nan}, "retry_backoff.*nan"),
        ({"retry_backoff": -0.1}, r"retry_backoff.*-0\.1"),
        ({"retry_backoff": "0.5"}, "retry_backoff.*'0.5'"),
        ({"retry_backoff": None}, "retry_backoff.*None"),
        ({"max_retry_delay": math.nan}, "max_retry_delay.*nan"),
        ({"max_retry_delay": -3}, "max_retry_delay.*-3"),
        ({"max_retry_delay": False}, "max_retry_delay.*False"),
        ({"http_client": object()}, "httpx2.AsyncClient"),
        ({"headers": {"X-Count": 3}}, "headers"),
        ({"model_options": ["temperature"]}, "model_options must be a mapping"),
    ],
)
def test_bad_settings_are_a_configuration_error_naming_the_value(
    kwargs: dict[str, Any], shown: str
) -> None:
    with pytest.raises(ConfigurationError, match=shown):
        OpenAIChatClient("m", **kwargs)


def test_good_settings() -> None:
    model = OpenAIChatClient(
        "m", timeout=30, max_retries=0, retry_backoff=0, max_retry_delay=1, headers={"X": "y"}
    )
    assert model.timeout == httpx2.Timeout(30)
    assert (model.retry_backoff, model.max_retry_delay) == (0.0, 1.0)
    assert OpenAIChatClient("m", timeout=None).timeout == httpx2.Timeout(None)
    custom = httpx2.Timeout(5.0, connect=1.0)
    assert OpenAIChatClient("m", timeout=custom).timeout is custom
    assert checked_timeout(0) == httpx2.Timeout(0)


def test_the_client_is_an_attrs_class_with_the_same_signature() -> None:
    import inspect

    import attrs

    assert attrs.has(OpenAIChatClient)
    parameters = inspect.signature(OpenAIChatClient).parameters
    assert list(parameters) == [
        "model",
        "base_url",
        "api_key",
        "timeout",
        "max_retries",
        "retry_backoff",
        "max_retry_delay",
        "model_options",
        "headers",
        "http_client",
        "send_reasoning",
        "on_retry",
    ]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in parameters.items() if name != "model")
    assert "sk-secret" not in repr(OpenAIChatClient("m", api_key="sk-secret"))


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_settings_assigned_later_take_effect(server: SSEServer, client: str) -> None:
    model = build(client, base_url="http://127.0.0.1:9", max_retries=0, api_key="sk-k")
    model.base_url = server.url if client == "openai" else server.root
    model.max_retries = 1
    model.retry_backoff = 0
    assert model.url.startswith(server.root)
    assert (model.max_retries, model.retry_backoff) == (1, 0.0)
    if client == "anthropic":
        assert isinstance(model, AnthropicChatClient)
        model.anthropic_version = "2099-01-01"
    server.add(
        Reply.error(503, {"error": {"message": "busy"}}),
        Reply.error(400, {"error": {"message": "bad"}}),
    )
    with pytest.raises(HTTPStatusError, match="bad"):  # the 503 was retried, once
        await stream_updates(model)
    assert len(server.requests) == 2
    sent = server.requests[0].headers
    assert sent["authorization" if client == "openai" else "x-api-key"].endswith("sk-k")
    if client == "anthropic":
        assert sent["anthropic-version"] == "2099-01-01"


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("setting", "value", "match"),
    [
        ("base_url", "ftp://example.com", "http"),
        ("max_retries", -1, "max_retries"),
        ("retry_backoff", math.nan, "retry_backoff"),
        ("max_retry_delay", "60", "max_retry_delay"),
        ("timeout", -1, "timeout"),
        ("model", "", "model"),
        ("model_options", {"stream": False}, "stream"),
    ],
)
def test_a_bad_setting_assigned_later_is_refused_and_changes_nothing(
    client: str, setting: str, value: Any, match: str
) -> None:
    model = build(client, base_url="http://127.0.0.1:9", max_retries=3)
    before = {field.name: getattr(model, field.name) for field in attrs.fields(type(model))}
    with pytest.raises(ConfigurationError, match=match):
        setattr(model, setting, value)
    assert {field.name: getattr(model, field.name) for field in attrs.fields(type(model))} == (
        before
    )


def test_settings_assigned_later_are_checked_together() -> None:
    model = OpenAIChatClient("m", base_url="http://127.0.0.1:9/v1", send_reasoning=True)
    with pytest.raises(ConfigurationError, match="send_reasoning=True cannot apply"):
        model.base_url = "https://api.openai.com/v1"
    assert model.family.name == "local"
    model.send_reasoning = None
    model.base_url = "https://api.openai.com/v1"
    assert (model.family.name, model.url) == (
        "openai",
        "https://api.openai.com/v1/chat/completions",
    )
    thinking = {"type": "enabled", "budget_tokens": 2000}
    claude = AnthropicChatClient("claude-x", thinking=thinking)
    with pytest.raises(ConfigurationError, match="must be below max_tokens"):
        claude.max_tokens = 1000
    assert claude.max_tokens == 4096


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_what_a_client_derives_from_its_settings_cannot_be_assigned(client: str) -> None:
    model = build(client)
    name = type(model).__name__
    with pytest.raises(AttributeError, match=rf"{name}.url is derived .* set those instead"):
        model.url = "http://127.0.0.1:9/v1/chat/completions"
    if isinstance(model, OpenAIChatClient):
        with pytest.raises(AttributeError, match="family is derived"):
            model.family = model.family


@pytest.mark.parametrize("base", [OpenAIChatClient, AnthropicChatClient])
def test_an_attrs_subclass_keeps_settings_assigned_later_in_effect(base: type[Any]) -> None:
    """A subclass made with ``attrs.define`` has hooks of its own for its own fields: the
    settings it inherits are still checked and derived again, and its own state is kept."""

    @attrs.define(eq=False, repr=False)
    class Counting(base):  # type: ignore[misc,valid-type]
        requests: int = attrs.field(init=False, default=0)
        label: str = "x"

    model = Counting("m", base_url="http://127.0.0.1:9")
    model.requests = 3
    model.max_retries = 5
    assert model._retry.max_retries == 5
    if base is OpenAIChatClient:
        model.base_url = "https://api.groq.com/openai/v1"
        assert (model.url, model.provider_name) == (
            "https://api.groq.com/openai/v1/chat/completions",
            "groq",
        )
    with pytest.raises(ConfigurationError, match="max_retries"):
        model.max_retries = -1
    with pytest.raises(AttributeError, match="url is derived"):
        model.url = "http://127.0.0.1:9/v1"
    model.label = "y"
    assert (model.requests, model.label, model.max_retries) == (3, "y", 5)


SECRET = "sk-4f9Qz"


def build(client: str, **settings: Any) -> OpenAIChatClient | AnthropicChatClient:
    if client == "openai":
        return OpenAIChatClient("m", **settings)
    return AnthropicChatClient("claude-x", **settings)


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "key",
    [
        f"{SECRET}\n",
        f"{SECRET}\r\nX-Injected: 1",
        f" {SECRET}",
        f"{SECRET} ",
        "sk-4f9Qzé",
        f"{SECRET}\x7f",
    ],
    ids=["a newline", "CRLF", "leading space", "trailing space", "non-ASCII", "DEL"],
)
@pytest.mark.parametrize("source", ["api_key", "environment"])
def test_a_key_that_cannot_go_in_a_header_is_refused_without_showing_it(
    client: str, key: str, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # httpx2 would refuse it at every request, with the header's value -- the key -- in its
    # message (or raise a UnicodeEncodeError holding it): refused when the client is built.
    env = "OPENAI_API_KEY" if client == "openai" else "ANTHROPIC_API_KEY"
    if source == "environment":
        monkeypatch.setenv(env, key)
    settings = {"api_key": key} if source == "api_key" else {}
    with pytest.raises(ConfigurationError, match="cannot go in an HTTP header") as caught:
        build(client, **settings)
    text = str(caught.value) + repr(caught.value.args)
    assert "4f9Qz" not in text
    assert (env in text) == (source == "environment")


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("headers", "shown"),
    [
        ({"Authorization": f"Bearer {SECRET}\n"}, "value of 'Authorization'"),
        ({"X-Key": f"{SECRET}\r\nX-Injected: 1"}, "value of 'X-Key'"),
        ({"X-Key": "é"}, "value of 'X-Key'"),
        ({"X-Key": f"{SECRET} "}, "value of 'X-Key'"),
        ({"X Key": "v"}, "'X Key' is not a valid header name"),
        ({"X-Key:": "v"}, "'X-Key:' is not a valid header name"),
    ],
)
def test_headers_that_cannot_be_sent_are_refused_without_showing_the_value(
    client: str, headers: dict[str, str], shown: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(shown)) as caught:
        build(client, headers=headers)
    assert "4f9Qz" not in str(caught.value)


async def test_a_good_key_and_headers_are_sent_as_they_are(server: SSEServer) -> None:
    server.add(Reply([delta("a"), delta(None, "stop"), data("[DONE]")]))
    headers = {"X-Tab": "a\tb c", "X-Empty": ""}
    model = OpenAIChatClient("m", base_url=server.url, api_key="sk-A_b.c~9", headers=headers)
    await collect(model, [])
    sent = server.requests[0].headers
    assert sent["authorization"] == "Bearer sk-A_b.c~9"
    assert (sent["x-tab"], sent["x-empty"]) == ("a\tb c", "")


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_a_header_in_another_case_replaces_the_clients_own(
    server: SSEServer, client: str
) -> None:
    # One of each goes out: the headers given replace the client's own, the API key's header
    # included (as the official SDKs do: a proxy's token wins over a key in the environment).
    server.add(Reply.error(400, {"error": {"message": "x"}}))
    key_header = "authorization" if client == "openai" else "x-api-key"
    headers = {"accept": "application/json", key_header.upper(): "other", "X-Mine": "1"}
    if client == "anthropic":
        headers["Anthropic-Version"] = "2099-01-01"
    base = server.url if client == "openai" else server.root
    model = build(client, base_url=base, api_key="sk-k", headers=headers, max_retries=0)
    with pytest.raises(HTTPStatusError):
        await stream_updates(model)
    lines = server.requests[0].lines
    names = [name for name, _ in lines]
    assert len(names) == len(set(names)), lines
    sent = dict(lines)
    assert sent["accept"] == "application/json"
    assert sent[key_header] == "other"
    assert sent["x-mine"] == "1"
    if client == "anthropic":
        assert sent["anthropic-version"] == "2099-01-01"


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_credentials_in_base_url_are_not_shown(server: SSEServer, client: str) -> None:
    # A proxy's user and password in the URL: sent (as basic auth), never shown.
    base = f"http://user:{SECRET}@127.0.0.1:{server.port}"
    model = build(client, base_url=base + "/v1" if client == "openai" else base, max_retries=0)
    assert "4f9Qz" not in repr(model)
    assert f"***@127.0.0.1:{server.port}" in repr(model)
    server.add(Reply([b"data: {"], ending="cut"))  # the connection breaks mid-response
    with pytest.raises(ModelConnectionError, match=r"broke in the middle") as caught:
        await stream_updates(model)
    assert "4f9Qz" not in str(caught.value)
    assert f"http://***@127.0.0.1:{server.port}/" in str(caught.value)
    assert server.requests[0].headers["authorization"].startswith("Basic ")
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = build(client, base_url=f"http://{SECRET}@127.0.0.1:{port}", max_retries=0)
    with pytest.raises(ModelConnectionError, match=r"could not get a response") as caught:
        await stream_updates(refused)
    assert "4f9Qz" not in str(caught.value)
    # A key in the query string, too: ?key=..., &access_token=...
    query = f"?api-version=1&key={SECRET}&Access_Token={SECRET}&x=2"
    refused = build(client, base_url=f"http://127.0.0.1:{port}{query}", max_retries=0)
    assert "4f9Qz" not in repr(refused)
    with pytest.raises(ModelConnectionError, match=r"could not get a response") as caught:
        await stream_updates(refused)
    assert "4f9Qz" not in str(caught.value)
    assert "?api-version=1&key=***&Access_Token=***&x=2" in str(caught.value)


def test_no_proxy_variable_reaches_the_tests() -> None:
    # With HTTP_PROXY set, httpx2 sends even a loopback request through the proxy: the tests'
    # requests would leave the machine. conftest.py removes the variables for the session.
    names = [f"{kind}_proxy" for kind in ("http", "https", "all")]
    assert not [name for name in os.environ if name.lower() in names]


# -- the request body ----------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["a client option", "a run option", "inside a run option"])
async def test_nan_or_an_infinity_in_the_body_is_a_configuration_error_naming_its_place(
    server: SSEServer, client: str, value: float, where: str
) -> None:
    # json.dumps writes them as the bare tokens NaN, Infinity and -Infinity, which are not
    # JSON: no request goes out, and the error says which value it was and where.
    inside = where == "inside a run option"
    option = {"metadata": {"scores": [0.5, value]}} if inside else {"temperature": value}
    pointer = "#/metadata/scores/1" if inside else "#/temperature"
    settings: dict[str, Any] = {"model_options": option} if where == "a client option" else {}
    options = None if where == "a client option" else RunOptions(model_options=option)
    model: OpenAIChatClient | AnthropicChatClient
    if client == "openai":
        model = OpenAIChatClient("m", base_url=server.url, max_retries=0, **settings)
    else:
        model = AnthropicChatClient(
            "claude-x", base_url=server.root, api_key="k", max_retries=0, **settings
        )
    shown = (
        f"the request body is not JSON-serialisable: {value!r} at {pointer} is not a JSON number"
    )
    with trio.fail_after(10), pytest.raises(ConfigurationError, match=re.escape(shown)):
        async with model.run(USER, options) as stream:
            async for _ in stream:
                pass
    assert server.requests == []


def error(status: int, retry_after: float | None = None) -> HTTPStatusError:
    return HTTPStatusError(status, "x", retry_after=retry_after)


def test_the_retry_policy() -> None:
    policy = RetryPolicy(max_retries=2, retry_backoff=1.0, max_retry_delay=10.0)
    assert policy.wait_for(error(400), 0) is None
    assert policy.wait_for(error(404), 0) is None
    assert policy.wait_for(error(429, 3.0), 0) == 3.0
    assert policy.wait_for(error(503, 0.0), 1) == 0.0
    assert policy.wait_for(error(429, 11.0), 0) is None  # longer than max_retry_delay
    assert policy.wait_for(error(500), 2) is None  # retries spent
    for attempt, ceiling in ((0, 1.0), (1, 2.0), (2, 4.0), (5, 10.0)):
        wait = policy.backoff(attempt)
        assert 0.75 * ceiling <= wait <= ceiling
    first = policy.wait_for(error(502), 0)
    assert first is not None
    assert 0.75 <= first <= 1.0


# -- progress, not silence, bounds a response ------------------------------------------------

KEEP_ALIVES = {
    "ping comments": b": ping\n\n",
    "OpenRouter's comment": b": OPENROUTER PROCESSING\n\n",
    "empty deltas": delta(),
    "empty content": delta(""),
    "role only": delta(role="assistant"),
    "no choices": data({"choices": [], "usage": None}),
    "null reasoning": delta(None, reasoning=None, reasoning_content=None),
}


@pytest.mark.parametrize("keep_alive", sorted(KEEP_ALIVES))
async def test_keep_alives_without_progress_end_in_a_timeout(
    keep_alive: str, server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    # a token, then a keep-alive every second forever: no single read waits 5 s
    pieces = [delta("Hel"), *[KEEP_ALIVES[keep_alive]] * 200]
    server.add(Reply(pieces, ending="stall", interval=1.0, paced=False))
    seen: list[AgentResponseUpdate] = []
    start = trio.current_time()
    with trio.fail_after(100), pytest.raises(ModelTimeoutError, match="without progress"):
        await collect(OpenAIChatClient("m", base_url=server.url, timeout=5.0), seen)
    assert 5 <= trio.current_time() - start < 7
    assert seen == [TextDelta("Hel")]
    with trio.fail_after(10):
        await server.closed_while_sending.wait()  # the connection was closed, not left open
    no_resource_warnings()


async def test_keep_alives_before_the_first_token_count_against_it(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(Reply([b": ping\n\n"] * 100, ending="stall", interval=1.0, paced=False))
    start = trio.current_time()
    with trio.fail_after(100), pytest.raises(ModelTimeoutError, match=r"read timeout, 3\.0 s"):
        await collect(OpenAIChatClient("m", base_url=server.url, timeout=3.0), [])
    assert 3 <= trio.current_time() - start < 4


async def test_a_slow_stream_that_makes_progress_is_not_cut(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    # pings every second, a token every 4 s, 20 s in all, with a 5 s timeout
    pieces: list[bytes] = []
    for i in range(5):
        pieces += [b": ping\n\n"] * 3 + [delta(f"t{i} ", reasoning="r" if i % 2 else None)]
    pieces.append(delta(None, "stop"))
    server.add(Reply(pieces, interval=1.0, paced=False))
    seen: list[AgentResponseUpdate] = []
    with trio.fail_after(100):
        await collect(OpenAIChatClient("m", base_url=server.url, timeout=5.0), seen)
    assert trio.current_time() > 19
    assert "".join(u.text for u in seen if isinstance(u, TextDelta)) == "".join(
        f"t{i} " for i in range(5)
    )
    assert seen[-1] == Finish(FinishReason.STOP)


async def test_no_timeout_means_no_progress_deadline(
    server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    # four minutes of pings, past the 120 s default, then the answer
    server.add(Reply([b": ping\n\n"] * 4 + [delta("late"), delta(None, "stop")], interval=60.0))
    seen: list[AgentResponseUpdate] = []
    with trio.fail_after(1000):
        await collect(OpenAIChatClient("m", base_url=server.url, timeout=None), seen)
    assert seen == [TextDelta("late"), Finish(FinishReason.STOP)]


# -- httpx2 on Trio --------------------------------------------------------------------------


async def test_httpx2_runs_on_trio_many_streams_through_one_client(server: SSEServer) -> None:
    count = 20
    body = [delta("a"), delta("b"), delta(None, "stop"), data("[DONE]")]
    server.add(*(Reply(body, paced=False) for _ in range(count)))
    results: list[list[AgentResponseUpdate]] = [[] for _ in range(count)]
    libraries: set[str] = set()

    async def one(model: OpenAIChatClient, into: list[AgentResponseUpdate]) -> None:
        libraries.add(sniffio.current_async_library())
        await collect(model, into)

    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url) as model, trio.open_nursery() as n:
            for into in results:
                n.start_soon(one, model, into)
    assert libraries == {"trio"}
    assert all(r == [TextDelta("a"), TextDelta("b"), Finish(FinishReason.STOP)] for r in results)
    assert len(server.requests) == count
    assert server.connections <= count


# -- connections: reused after every complete response ----------------------------------------

USAGE = data(
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
)
CALL = data(
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}}
                    ]
                },
            }
        ]
    }
)
ARGS = data(
    {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}
        ]
    }
)
COMPLETE_BODIES = {
    "[DONE], then the end of the body": [delta("a"), delta(None, "stop"), data("[DONE]")],
    "a usage chunk after the finish": [delta("a"), delta(None, "stop"), USAGE, data("[DONE]")],
    "no [DONE]: the body ends after the finish": [delta("a"), delta(None, "stop")],
    "a comment after [DONE]": [delta("a"), delta(None, "stop"), data("[DONE]"), b": bye\n\n"],
    "an event after [DONE]": [delta("a"), delta(None, "stop"), data("[DONE]"), delta("late")],
    "all in one piece": [delta("a") + delta(None, "stop") + USAGE + data("[DONE]")],
    "tool calls": [CALL, ARGS, delta(None, "tool_calls"), USAGE, data("[DONE]")],
}


@pytest.mark.parametrize("paced", [True, False], ids=["piece by piece", "at once"])
@pytest.mark.parametrize("body", sorted(COMPLETE_BODIES))
async def test_sequential_requests_reuse_one_connection(
    body: str, paced: bool, server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    runs = 4
    server.add(*(Reply(COMPLETE_BODIES[body], paced=paced) for _ in range(runs)))
    start = trio.current_time()
    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url) as model:
            for _ in range(runs):
                seen: list[AgentResponseUpdate] = []
                await collect(model, seen)
                assert isinstance(seen[-1], Finish)
    assert len(server.requests) == runs
    assert server.connections == 1  # one accept for all the requests
    # Reading to the end of the body waited for nothing: no drain ran out its time.
    assert trio.current_time() - start < 0.5
    no_resource_warnings()


async def test_concurrent_requests_reuse_the_pools_connections(server: SSEServer) -> None:
    batches, width = 4, 8
    body = [delta("a"), delta(None, "stop"), USAGE, data("[DONE]")]
    server.add(*(Reply(body, paced=False) for _ in range(batches * width)))
    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url) as model:
            for _ in range(batches):
                async with trio.open_nursery() as nursery:
                    for _ in range(width):
                        nursery.start_soon(collect, model, [])
    assert len(server.requests) == batches * width
    assert server.connections <= width  # later batches took the connections of the first


async def test_an_error_answer_or_a_retry_keeps_the_connection(server: SSEServer) -> None:
    body = [delta("a"), delta(None, "stop"), data("[DONE]")]
    server.add(
        Reply.error(400, {"error": {"message": "bad request"}}),
        Reply.error(503, {"error": {"message": "busy"}}),
        Reply(body),
    )
    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url, retry_backoff=0) as model:
            with pytest.raises(HTTPStatusError, match="bad request"):
                await collect(model, [])
            seen: list[AgentResponseUpdate] = []
            await collect(model, seen)  # a 503, retried at once, then the answer
    assert seen == [TextDelta("a"), Finish(FinishReason.STOP)]
    assert len(server.requests) == 3
    assert server.connections == 1


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_a_huge_error_page_is_cut_short_and_its_connection_closed(
    server: SSEServer, client: str
) -> None:
    page = b"<html><body>" + b"<p>Bad gateway</p>" * 300_000 + b"</body></html>"  # 5 MB
    server.add(
        Reply([page], 502, content_type="text/html", paced=False),
        Reply([delta("a"), delta(None, "stop"), data("[DONE]")]),
    )
    model: OpenAIChatClient | AnthropicChatClient
    if client == "openai":
        model = OpenAIChatClient("m", base_url=server.url, max_retries=0)
    else:
        model = AnthropicChatClient("claude-x", base_url=server.root, max_retries=0)
    with trio.fail_after(30):
        async with model:
            with pytest.raises(HTTPStatusError) as caught:
                async with model.run(USER) as stream:
                    async for _ in stream:
                        pass
            await server.closed_while_sending.wait()  # the client hung up, it did not read on
            if client == "openai":
                assert (await stream_updates(model))[0] == TextDelta("a")
    error = caught.value
    assert error.status_code == 502
    assert error.message.startswith("<html><body><p>Bad gateway</p>")
    assert len(error.message) < 5000
    assert len(error.body) < 5000
    assert len(str(error)) < 5000
    no_resource_warnings()


async def test_a_huge_error_message_is_cut_short(server: SSEServer) -> None:
    server.add(Reply.error(400, {"error": {"message": "Invalid schema: " + "x" * 30_000}}))
    with trio.fail_after(30), pytest.raises(HTTPStatusError) as caught:
        await stream_updates(OpenAIChatClient("m", base_url=server.url))
    assert caught.value.message.startswith("Invalid schema: xxx")
    assert caught.value.message.endswith("...")
    assert len(str(caught.value)) < 4100


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_a_redirect_is_an_error_and_the_key_goes_nowhere_else(
    server: SSEServer, nursery: trio.Nursery, client: str
) -> None:
    elsewhere = SSEServer()  # another origin (its own port)
    await nursery.start(elsewhere.serve)
    target = f"{elsewhere.root}/v1/" + ("chat/completions" if client == "openai" else "messages")
    server.add(Reply([b"moved"], 307, {"Location": target}, "text/plain", paced=False))
    with trio.fail_after(10):
        async with httpx2.AsyncClient(follow_redirects=True) as http:
            base = server.url if client == "openai" else server.root
            model = build(client, base_url=base, api_key=SECRET, http_client=http)
            with pytest.raises(HTTPStatusError, match="HTTP 307: moved") as caught:
                await stream_updates(model)
    assert caught.value.status_code == 307
    assert elsewhere.requests == []
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize("how", ["break", "exception"])
async def test_a_response_left_unfinished_is_not_reused(how: str, server: SSEServer) -> None:
    # The counter can tell: a body not read to its end closes its connection.
    server.add(
        Reply([delta("a"), delta("b")], ending="stall"),
        Reply([delta("c"), delta(None, "stop"), data("[DONE]")]),
    )
    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url) as model:
            with contextlib.suppress(LookupError):
                async with model.run(USER) as stream:
                    async for _ in stream:
                        if how == "break":
                            break
                        raise LookupError
            await server.closed_while_stalled.wait()
            seen: list[AgentResponseUpdate] = []
            await collect(model, seen)
    assert seen == [TextDelta("c"), Finish(FinishReason.STOP)]
    assert server.connections == 2
    no_resource_warnings()


@pytest.mark.parametrize("how", ["read to its end", "left at the finish", "cancelled meanwhile"])
async def test_a_body_that_stays_open_after_done_is_given_up_after_the_drain(
    how: str, server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    # The read after the last update, or on the way out of a stream left at its Finish, is
    # bounded (DRAIN_AFTER_DONE); a cancellation meanwhile closes the connection at once,
    # leaving nothing to the garbage collector.
    mock_clock.autojump_threshold = 0.1
    server.add(
        Reply([delta("a"), delta(None, "stop"), data("[DONE]")], ending="stall"),
        Reply([delta("b"), delta(None, "stop"), data("[DONE]")]),
    )
    first: list[AgentResponseUpdate] = []
    cut = DRAIN_AFTER_DONE / 4 if how == "cancelled meanwhile" else math.inf
    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url) as model:
            start = trio.current_time()
            with trio.move_on_after(cut):
                async with model.run(USER) as stream:
                    async for update in stream:
                        first.append(update)
                        if how != "read to its end" and isinstance(update, Finish):
                            break
            took = trio.current_time() - start
            assert took == pytest.approx(min(cut, DRAIN_AFTER_DONE), abs=0.2)
            await server.closed_while_stalled.wait()
            await collect(model, [])
    assert first == [TextDelta("a"), Finish(FinishReason.STOP)]
    assert server.connections == 2
    no_resource_warnings()


ANTHROPIC_TEXT = (
    b'event: message_start\ndata: {"type": "message_start", "message": {"usage": {}}}\n\n'
    b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    b'"content_block": {"type": "text", "text": ""}}\n\n'
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    b'"delta": {"type": "text_delta", "text": "a"}}\n\n'
)


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_a_stream_used_after_its_block_is_a_closed_resource(
    server: SSEServer, client: str
) -> None:
    model: OpenAIChatClient | AnthropicChatClient
    if client == "openai":
        server.add(Reply([delta("a"), delta("b")], ending="stall"))
        model = OpenAIChatClient("m", base_url=server.url)
    else:
        server.add(Reply([ANTHROPIC_TEXT, ANTHROPIC_TEXT], ending="stall"))
        model = AnthropicChatClient("claude-x", base_url=server.root)
    with trio.fail_after(10):
        async with model.run(USER) as stream:
            assert await anext(stream) == TextDelta("a")
        with pytest.raises(trio.ClosedResourceError, match="was closed"):
            await anext(stream)
        await server.closed_while_stalled.wait()
    no_resource_warnings()


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize("endless", ["one line", "data lines"])
async def test_an_event_that_never_ends_is_a_response_error_not_a_memory_leak(
    server: SSEServer, client: str, endless: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hostile or broken server that sends an event without end (a line with no line end, or
    # data lines with no blank line): the client stops reading past the limit, after giving the
    # updates before it, closes the connection, and says what happened.
    monkeypatch.setattr("trio_invoke.providers._http.MAX_EVENT_SIZE", 100_000)
    piece = b"x" * 10_000 if endless == "one line" else b"data: x\n" * 1_250
    first = delta("a") if client == "openai" else ANTHROPIC_TEXT
    head = b"data: " if endless == "one line" else b""
    server.add(Reply([first, head, *[piece] * 40], ending="stall"))
    model: OpenAIChatClient | AnthropicChatClient
    if client == "openai":
        model = OpenAIChatClient("m", base_url=server.url)
    else:
        model = AnthropicChatClient("claude-x", base_url=server.root)
    seen: list[AgentResponseUpdate] = []
    with trio.fail_after(10):
        with pytest.raises(ModelResponseError, match=r"over 100,000 bytes that does not end"):
            async with model.run(USER) as stream:
                async for update in stream:
                    seen.append(update)
        await server.closed_while_sending.wait()  # it hung up before the 40 pieces were sent
    assert seen[:1] == [TextDelta("a")]
    no_resource_warnings()


# -- the progress deadline counts the server's time, not the caller's ------------------------


@pytest.mark.parametrize("pieces", ["one piece", "a piece per event"])
async def test_a_slow_caller_is_not_a_slow_server(
    pieces: str, server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    events = [delta("a"), delta("b"), delta("c"), delta(None, "stop"), data("[DONE]")]
    server.add(Reply([b"".join(events)] if pieces == "one piece" else events))
    seen: list[AgentResponseUpdate] = []
    model = OpenAIChatClient("m", base_url=server.url, timeout=5.0)
    with trio.fail_after(100):
        async with model, model.run(USER) as stream:
            async for update in stream:
                seen.append(update)
                await trio.sleep(8)  # longer than the read timeout, between two updates
    assert seen == [TextDelta("a"), TextDelta("b"), TextDelta("c"), Finish(FinishReason.STOP)]


@pytest.mark.parametrize(
    "before",
    [[], [b": ping\n\n"], [delta(role="assistant")], [delta("a")]],
    ids=["nothing", "a comment", "a role chunk", "a token"],
)
async def test_a_body_that_goes_silent_times_out_after_the_read_timeout(
    before: list[bytes], server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.1
    server.add(Reply(before, ending="stall"))
    seen: list[AgentResponseUpdate] = []
    start = trio.current_time()
    with trio.fail_after(100), pytest.raises(ModelTimeoutError, match=r"read timeout, 5\.0 s"):
        await collect(OpenAIChatClient("m", base_url=server.url, timeout=5.0), seen)
    assert 5 <= trio.current_time() - start < 6
    assert seen == ([TextDelta("a")] if before == [delta("a")] else [])
    with trio.fail_after(10):
        await server.closed_while_stalled.wait()
    no_resource_warnings()


@pytest.mark.parametrize("body", sorted(COMPLETE_BODIES))
async def test_leaving_at_the_finish_still_reuses_the_connection(
    body: str, server: SSEServer, mock_clock: trio.testing.MockClock
) -> None:
    # A caller who stops at Finish leaves the rest of a complete body unread (the end of the
    # chunked body, or what came after [DONE]): it is read on the way out, briefly.
    mock_clock.autojump_threshold = 0.1
    runs = 3
    server.add(*(Reply(COMPLETE_BODIES[body], paced=True) for _ in range(runs)))
    with trio.fail_after(30):
        async with OpenAIChatClient("m", base_url=server.url) as model:
            for _ in range(runs):
                async with model.run(USER) as stream:
                    async for update in stream:
                        if isinstance(update, Finish):
                            break
    assert server.connections == 1
    no_resource_warnings()


# -- copies: the same settings, a connection pool of their own --------------------------------

ANTHROPIC_WHOLE_TEXT = ANTHROPIC_TEXT + (
    b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
    b'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": '
    b'"end_turn"}, "usage": {"output_tokens": 1}}\n\n'
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
)


def text_reply(client: str) -> Reply:
    if client == "openai":
        return Reply([delta("a"), delta(None, "stop"), data("[DONE]")])
    return Reply([ANTHROPIC_WHOLE_TEXT])


def root(server: SSEServer, client: str) -> str:
    """The ``base_url`` of ``client`` for ``server``."""
    return server.url if client == "openai" else server.root


def copied(how: str, client: Any) -> Any:
    if how == "pickle":
        return pickle.loads(pickle.dumps(client))
    return getattr(copy, how)(client)


@pytest.mark.parametrize("client", ["openai", "anthropic"])
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
async def test_a_copy_has_the_same_settings_and_a_connection_pool_of_its_own(
    server: SSEServer, client: str, how: str
) -> None:
    # The client owns its pool: a copy (copy.copy, copy.deepcopy, pickle) is a new client
    # built with the same settings, not open, whatever the original's pool does later.
    server.add(text_reply(client), text_reply(client), text_reply(client))
    options = {"temperature": 0, "stop": ["END"]}
    settings = {"api_key": "sk-copied", "model_options": options, "headers": {"X-Team": "a"}}
    model = build(client, base_url=root(server, client), max_retries=5, **settings)
    with trio.fail_after(10):
        async with model:
            expected = await stream_updates(model)
            twin = copied(how, model)
        assert type(twin) is type(model)
        assert twin is not model
        names = ["model", "base_url", "url", "timeout", "max_retries", "retry_backoff"]
        names += ["provider_name", "model_options"]
        names += ["family"] if client == "openai" else ["max_tokens"]
        for name in names:
            assert getattr(twin, name) == getattr(model, name), name
        assert twin._headers == model._headers  # the key and the extra header included
        assert (twin.model_options["stop"] is model.model_options["stop"]) is (how == "copy")
        async with twin:  # the original's pool closed; the copy opens its own
            assert await stream_updates(twin) == expected
        assert await stream_updates(twin) == expected
    twin.max_retries = 1
    assert model.max_retries == 5


@pytest.mark.parametrize("client", ["openai", "anthropic"])
async def test_a_copy_shares_your_http_client_and_pickling_one_is_a_type_error(
    server: SSEServer, client: str
) -> None:
    server.add(text_reply(client))
    async with httpx2.AsyncClient() as http:
        model = build(client, base_url=root(server, client), http_client=http)
        for twin in (copy.copy(model), copy.deepcopy(model)):
            assert twin._http_client is http
        assert (await stream_updates(copy.deepcopy(model)))[0] == TextDelta("a")
        assert not http.is_closed
        name = type(model).__name__
        with pytest.raises(
            TypeError, match=rf"cannot pickle this {name}: its http_client is yours"
        ):
            pickle.dumps(model)
