"""``MCPServer``: one connection to an MCP server, and its tools as trio_invoke tools.

The MCP SDK's sessions live in anyio task groups that must be closed by the task that opened
them. So ``async with MCPServer...`` starts one task, the *owner*, in a nursery of its own: the
owner opens the SDK client (transport, session, handshake), lists the tools, watches for tool
list changes, and closes it all when the block ends. Tool calls come from any task (the loop's
tool tasks) and go through the owner's session; the SDK matches each answer to its request.

Because the SDK's task groups live inside the owner task, a transport that fails (an HTTP
server that disappears) ends the owner task, not the caller's block: the failure is recorded.
Over HTTP the reconnecting task makes a new connection, with an owner task of its own, in the
background and for the next call (see :meth:`MCPServer._reconnect`); a stdio server's later
calls are "not available".

How errors (and log lines) name the server, all of them, entering's and the calls': by what the
user configured, :attr:`MCPServer.label` (the command line or the URL, without credentials or
query), as ``MCP server 'python notes.py'``; once a handshake told its own name
(``serverInfo.name``, which may be the same for two servers), it follows when it differs:
``MCP server 'python notes.py' (named 'notes')``. ``MCPToolError.server`` is the label.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import itertools
import json
import logging
import math
import os
import re
import shlex
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping, Sequence
from importlib import metadata
from os import PathLike
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar
from urllib.parse import urlsplit

import anyio
import attrs
import httpx2
import mcp_types
import pydantic
import trio
from mcp import Client, StdioServerParameters
from mcp.client import session as _sdk_session
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._exceptions import ConfigurationError, ToolDefinitionError, TrioInvokeError
from .._loop._channels import reraise_single
from .._text import wire_json
from .._validate import compile_validator
from ..providers._settings import checked_headers
from ..providers._sse import SSEParser
from ._errors import MCPConnectionError, MCPInitTimeoutError, MCPTimeoutError, MCPToolError
from ._names import model_names
from ._results import convert

__all__ = ["DEFAULT_INIT_TIMEOUT", "DEFAULT_TIMEOUT", "MCPServer", "MCPTool"]

DEFAULT_TIMEOUT: Final = 60.0
"""Seconds one tool call may take, unless ``timeout`` says otherwise."""
DEFAULT_INIT_TIMEOUT: Final = 30.0
"""Seconds to start (or reach) the server, finish the handshake and list its tools: enough for
``npx``/``uvx`` to fetch a server on first use."""

_HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults for its HTTP client (we build it, to see its answers' statuses), for
short requests; the long-lived ones have no read or pool timeout (:func:`_long_lived`)."""
_CLOSE_TIMEOUT: Final = 5.0
"""Seconds the request that deletes an HTTP session may take, as the block ends."""
_LONG_LIVED_METHODS: Final = frozenset({"tools/call", "subscriptions/listen"})
_STOPPED: Final = "it stopped taking connections while nothing was called"
"""Why a 2026-07-28 server whose listen stream found its port refusing, still refusing when a
call comes, is lost (see :meth:`MCPServer._connection`)."""
_SESSION_ENDED: Final = (
    "the server ended the session (it answered HTTP 404 to its id: did it restart?)"
)
"""Why an HTTP server is lost when it no longer knows the session."""
_CLOSED: Final = "it was closed: the `async with` block that opened it has ended"
_PERMISSIVE: Final[Mapping[str, Any]] = {"type": "object"}
_UNREADABLE: Final = "the answer could not be read: "
"""How :func:`_readable`'s parse errors begin (the server sent them in no form we could read)."""

_log = logging.getLogger("trio_invoke.mcp")

_RELISTEN_FIRST: Final = 0.25
"""Seconds before listening for tool list changes again, the first time after a loss (and
before connecting again, after a first attempt that failed)."""
_RELISTEN_MAX: Final = 30.0
"""The longest wait between two attempts to listen again, or to connect again."""
_DISCOVER_WAIT: Final[float | None] = getattr(_sdk_session, "DISCOVER_TIMEOUT_SECONDS", None)
"""Seconds the MCP SDK waits for an answer to ``server/discover`` before it sends
``initialize`` (in protocol ``"auto"``), if this version of it says."""
_PROBE_TIMEOUT: Final = 5.0
"""Seconds a server's port may take to accept the connection that checks it is up."""

_T = TypeVar("_T")

_Lose = Callable[[str], None]
"""Records why the connection is gone (:meth:`MCPServer._lose`)."""

Protocol = Literal["auto", "legacy"]


def _client_info() -> mcp_types.Implementation:
    try:
        version = metadata.version("trio-invoke")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        version = "0"
    return mcp_types.Implementation(name="trio-invoke", version=version)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception that is not ``Cancelled`` inside nested groups (or ``exc``)."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        exc = (inner or exc.exceptions)[0]
    return exc


def _say(outcome: tuple[list[str | None], trio.Event] | None, what: str | None) -> None:
    """Tell whoever connects again how it went (the first word counts)."""
    if outcome is not None and not outcome[0]:
        outcome[0].append(what)
        outcome[1].set()


def _told_name(client: Client) -> str | None:
    """The server's name, as its handshake told it (``serverInfo.name``)."""
    return client.server_info.name if client.server_info else None


def _summary(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


@attrs.frozen(eq=False)
class MCPTool:
    """One tool of an MCP server, as a trio_invoke :class:`~trio_invoke.Tool`.

    Made by :class:`MCPServer` (see :attr:`MCPServer.tools`); calls go through the server's
    connection, so they work only inside its ``async with`` block.
    """

    name: str
    """The name the model calls it by: the server's name with the prefix, made valid for the
    providers (``^[a-zA-Z0-9_-]{1,64}$``)."""
    description: str
    """The server's description (else its title, else empty)."""
    parameters: Mapping[str, Any]
    """The server's input schema (JSON Schema; servers send draft 2020-12). A schema that
    trio_invoke cannot compile is replaced by ``{"type": "object"}``, the description says so,
    and the server checks the arguments itself."""
    requires_approval: bool
    """Whether each call needs a human's approval (the server's ``require_approval`` option)."""
    remote_name: str
    """The tool's name on the server."""
    server: MCPServer = attrs.field(repr=False)
    """The server this tool calls."""
    definition: mcp_types.Tool = attrs.field(repr=False)
    """The server's listing of the tool, as the MCP SDK parsed it (annotations, output schema,
    title, ...)."""

    @property
    def timeout(self) -> float | None:
        """``None``: the loop's own ``tool_timeout`` applies around each call (and
        :attr:`call_timeout` inside it; the shorter wins)."""
        return None

    @property
    def call_timeout(self) -> float | None:
        """Seconds one call may take (the server's ``timeout``); ``None``: no limit.

        Applied inside :meth:`execute`, so the loop's ``tool_timeout`` still applies around it
        and the shorter of the two wins. (It is deliberately not a ``timeout`` attribute, which
        the loop would use instead of its own ``tool_timeout``.)
        """
        return self.server.timeout

    @trio.lowlevel.enable_ki_protection
    async def execute(self, arguments: dict[str, Any]) -> str:
        """Call the tool on the server and return what the model should read.

        Raises:
            MCPToolError: The server answered with ``isError`` (the message is the server's
                text), a JSON-RPC error (the message names code and message), went away
                during the call, is not available, or sent a result that could not be read.
            MCPTimeoutError: The call took longer than :attr:`call_timeout`.

        Cancellation: the SDK sends the server ``notifications/cancelled`` for the call (a
        bounded, shielded write), so the server stops working on it; nothing is left running
        here.
        """
        return await self.server._call(self, arguments)


def _checked_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as a dict, once checked: names and values are ``str``, a name is not empty and
    holds no ``=``, neither holds a NUL (what the operating system refuses, as the process
    would fail to start)."""
    # (values are not shown: an environment holds API keys and tokens)
    if not isinstance(env, Mapping):
        raise ConfigurationError(
            f"env must be a mapping of names to values, got a {type(env).__name__}"
        )
    checked: dict[str, str] = {}
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ConfigurationError(
                f"env names must be non-empty strs without '=' or NUL, got {name!r}"
            )
        if not isinstance(value, str):
            raise ConfigurationError(
                f"env[{name!r}] must be a str without NUL, got a {type(value).__name__}"
            )
        if "\0" in value:
            raise ConfigurationError(f"env[{name!r}] must be a str without NUL, got one with NUL")
        checked[name] = value
    return checked


@attrs.frozen
class _Stdio:
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | PathLike[str] | None

    @property
    def label(self) -> str:
        line = shlex.join([self.command, *self.args])
        return line if len(line) <= 80 else line[:79] + "…"

    proxy = None
    """(What :attr:`_HTTP.proxy` is for a URL.)"""
    lost = "the server process ended or closed its output"
    reconnects = False
    """A process that died is not started again (see :class:`MCPServer`)."""

    async def reachable(self) -> bool:
        return True  # (a process that ended is seen by its output's end)

    async def transport(
        self, stack: contextlib.AsyncExitStack[Any], lose: _Lose, noted: _Noted
    ) -> Any:
        parameters = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=os.fspath(self.cwd) if self.cwd is not None else None,
            # Bytes that are not UTF-8 on the server's stdout become U+FFFD in a line that is
            # not a message (the SDK logs and skips it); "strict" stops the SDK's reader for
            # good, and every later answer would be waited for in vain.
            encoding_error_handler="replace",
        )
        return stdio_client(parameters)


@attrs.frozen
class _HTTP:
    url: str
    headers: Mapping[str, str] | None

    @property
    def label(self) -> str:
        return _shown(self.url)

    @property
    def proxy(self) -> str | None:
        """The proxy that requests to the URL go through (as messages show it, with the
        setting it comes from), or ``None``: they go to the URL's own host."""
        found = _proxy_for(self.url)
        if found is None:
            return None
        proxy, key = found
        variable = _PROXY_VARIABLES.get(key, "")
        source = (
            variable
            if variable in os.environ or variable.lower() in os.environ
            else "the system's proxy settings"
        )
        return f"{_shown(str(proxy))} ({source})"

    lost = "the HTTP connection ended"
    reconnects = True
    """A server restarted (or one that ended the session) is connected to again."""

    async def reachable(self) -> bool:
        """Whether the server's port takes a connection now (opened and closed at once, outside
        the SDK: a request the SDK's transport cannot connect for ends its whole session); the
        proxy's port when requests go through one (:func:`_connects_to`)."""
        host, port = _connects_to(self.url)
        with trio.move_on_after(_PROBE_TIMEOUT):
            try:
                stream = await trio.open_tcp_stream(host, port)
            except OSError:
                return False
            await stream.aclose()
            return True
        return False

    async def transport(
        self, stack: contextlib.AsyncExitStack[Any], lose: _Lose, noted: _Noted
    ) -> Any:
        """The SDK's transport; ``noted`` gets the HTTP status of each request answered with
        an error status and no JSON-RPC error, the response of each answered with JSON, the
        body of each answered with an event stream, and how the GETs that resume one were
        answered (for :class:`_WatchedStream`)."""
        session = _Session()  # (ended by the SDK's close, or by ours if that is cancelled)

        async def resuming(request: httpx2.Request) -> None:
            # The SDK resumes an event-stream answer that ended with no response with a GET
            # that names the stream's last event id: noted as sent, and as answered (below).
            resumed = request.headers.get("last-event-id")
            if request.method == "GET" and resumed is not None:
                _remember(noted.resumed, resumed, None)

        async def answered(response: httpx2.Response) -> None:
            # The MCP spec: a 404 to a request with an Mcp-Session-Id means the server no
            # longer knows the session (it restarted, or ended it), and a client "MUST start a
            # new session". The connection is lost before the SDK hands the request its
            # error, and the call goes to a new session (see MCPServer._call). A POST (a
            # message of the session) counts, and a GET once one was answered 200: a server
            # may have no GET stream at all (404), and a JSON-RPC "method not found" may come
            # as a 404 too. The SDK opens a broken GET stream again, with the session's id, so
            # a server restarted while nothing is called is noticed then (and connected to
            # again in the background).
            request = response.request
            session.note(response)
            if (
                response.status_code == 404
                and "mcp-session-id" in request.headers
                and (request.method == "POST" or (request.method == "GET" and noted.streamed))
                and not await _method_not_found(response)
            ):
                session.ended = True  # (no DELETE is owed for it)
                lose(_SESSION_ENDED)
            if request.method == "GET" and response.status_code == 200:
                noted.streamed = True
            if request.method == "DELETE" and response.status_code == 404:
                # The session's end, answered "no such session" (a server restarted on its
                # port never knew it): what the DELETE asked for. The SDK logs it as a failed
                # termination in this task, right after this hook (_SDKParseErrors drops it).
                _GONE_ALREADY.set(True)
            if request.method == "GET" and "last-event-id" in request.headers:
                _note_resumed(response, noted.resumed)
            if request.method != "POST":
                return
            if response.status_code >= 400:
                await _note_status(response, noted.statuses)
            elif 200 <= response.status_code < 300 and response.status_code != 202:
                _note_response(response, noted.bodies)
                if _note_events(response, noted.events):
                    # This runs in the task of the request's POST, where the SDK reads the
                    # events: its log record of one that is no JSON-RPC message is dropped
                    # there (_SDKParseErrors), and only there.
                    _ANSWERING.set(True)

        http = httpx2.AsyncClient(
            headers=dict(self.headers) if self.headers is not None else None,
            timeout=_HTTP_TIMEOUT,
            event_hooks={"request": [_long_lived, resuming], "response": [answered]},
        )
        await stack.enter_async_context(http)
        stack.push_async_callback(session.end, http, self.url)  # after the SDK's own close
        return streamable_http_client(self.url, http_client=http)


try:
    from httpx2._utils import URLPattern, get_environment_proxies

    _PROXY_RULES: tuple[Any, Any] | None = (URLPattern, get_environment_proxies)
except ImportError:  # private to httpx2: another version may not have them
    _PROXY_RULES = None


_PROXY_VARIABLES: Final = {
    "http://": "HTTP_PROXY",
    "https://": "HTTPS_PROXY",
    "all://": "ALL_PROXY",
}
"""The environment variable behind each of httpx2's proxy mounts."""


def _shown(url: str) -> str:
    """``url`` as messages show it: without credentials or query string."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a port number (httpx2 refuses it)
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _proxy_for(url: str) -> tuple[httpx2.URL, str] | None:
    """The proxy an ``httpx2`` client sends requests for ``url`` through, and the key of its
    mount (``"http://"``, ...), when the environment gives one for it (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, matched as httpx2 matches them); else (or
    when httpx2's rules cannot be read) ``None``."""
    if _PROXY_RULES is None:  # httpx2's own rules (private)
        return None
    pattern_of, environment_proxies = _PROXY_RULES
    try:
        mounts = [(pattern_of(key), key, proxy) for key, proxy in environment_proxies().items()]
        target = httpx2.URL(url)
        for pattern, key, proxy in sorted(mounts, key=lambda mount: mount[0]):  # most specific
            if pattern.matches(target):
                return None if proxy is None else (httpx2.URL(proxy), key)
    except (AttributeError, TypeError, ValueError, httpx2.InvalidURL):
        return None
    return None


def _connects_to(url: str) -> tuple[str, int]:
    """The host and port an ``httpx2`` client opens its connection to for ``url``: the proxy's
    when the environment gives one for it (:func:`_proxy_for`), else the URL's own."""
    found = _proxy_for(url)
    target = httpx2.URL(url) if found is None else found[0]
    return target.host or "localhost", target.port or (443 if target.scheme == "https" else 80)


async def _long_lived(request: httpx2.Request) -> None:
    """No read or pool timeout for a tool call (its ``timeout`` bounds it), the GET stream and
    a ``subscriptions/listen`` stream (quiet while nothing changes). httpx's timeouts are a
    transport failure to the SDK, which ends the whole session: a call answered after 300 s
    without a keep-alive, one that waited 30 s for one of the 100 connections, or a stream
    quiet for 300 s would end every call (and the SDK stops opening a GET stream after two).

    The ``DELETE`` that ends the session when the block ends has :data:`_CLOSE_TIMEOUT` in
    all: leaving the block waits for it, and a server that hangs would hold it 300 s."""
    if request.method == "DELETE":
        request.extensions["timeout"] = dict.fromkeys(
            ("connect", "read", "write", "pool"), _CLOSE_TIMEOUT
        )
        return
    if request.method == "POST":
        try:
            method = json.loads(request.content).get("method")
        except (httpx2.StreamError, ValueError, AttributeError):
            return
        if method not in _LONG_LIVED_METHODS:
            return
    elif request.method != "GET":
        return
    request.extensions["timeout"] = {
        **request.extensions.get("timeout", {}),
        "read": None,
        "pool": None,
    }


async def _note_status(response: httpx2.Response, statuses: dict[Any, str]) -> None:
    """Record the status of a request the server answered with an HTTP error and no JSON-RPC
    error, by its JSON-RPC id: the SDK answers it "Server returned an error response", without
    the status (a 401 from a wrong token, a 502 from a proxy)."""
    request_id = _request_id(response.request)
    if request_id is None:
        return
    try:
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            body = json.loads(await response.aread())
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                return  # the SDK passes the server's own error on
    except (httpx2.HTTPError, httpx2.StreamError, ValueError):
        return
    statuses[request_id] = f"HTTP {response.status_code} {response.reason_phrase}".strip()


async def _method_not_found(response: httpx2.Response) -> bool:
    """Whether a 404's body is a JSON-RPC "method not found" error (the server knows the
    session, not the method). Read here, the body is there for the SDK to read again."""
    if not response.headers.get("content-type", "").lower().startswith("application/json"):
        return False
    try:
        body = json.loads(await response.aread())
    except (httpx2.HTTPError, ValueError):
        return False
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == mcp_types.METHOD_NOT_FOUND


_NOTED_MAX: Final = 256
"""The most responses noted at once (:func:`_note_response`); one whose request is abandoned
(a call cancelled while its answer came) is never answered, and the oldest go first."""
_SDK_UNPARSED: Final = "Failed to parse JSON response: "
"""How the MCP SDK's HTTP transport begins the JSON-RPC parse error it answers a request with
when the body of its JSON response is no JSON-RPC message (or could not be read)."""
_SDK_UNPARSED_EVENT: Final = "Failed to parse SSE message: "
"""How it begins the one it answers a request with when an event of its event-stream response
is no JSON-RPC message."""
_SDK_NO_RESPONSE: Final = "SSE stream ended without a response"
"""The MCP SDK's HTTP transport's error (``CONNECTION_CLOSED``) for a request whose event-stream
answer ended with no response in it, and no event id to resume it from: the stream's end, be it
the server's own or the connection's."""
_SDK_NOT_RESUMED: Final = "SSE stream ended and reconnection attempts were exhausted"
"""Its error when there was an event id, and the GETs that resumed the stream from it (two)
failed."""
_ENDED: Final = "the server answered with an event stream that ended without a response"
"""How :func:`_unanswered`'s errors begin."""
_NOT_JSON_RPC: Final = "the server's HTTP response is not a JSON-RPC message: it is "
"""How :func:`_unparsed`'s errors begin; what follows says what the body (or its event) is."""
_PREVIEW: Final = 60
"""Characters of a body that messages show."""
_TAPPED_MAX: Final = 1024 * 1024
"""Bytes of an event-stream answer kept to say, should one of its events be no JSON-RPC
message, what it was (beyond them, the error says so without the event)."""


@attrs.define
class _Noted:
    """What the HTTP transport noted of the server's answers, by JSON-RPC request id, for
    :class:`_WatchedStream` to take when the SDK hands it their answer."""

    statuses: dict[Any, str] = attrs.Factory(dict)
    """The HTTP status of each request answered with an error status (:func:`_note_status`)."""
    bodies: dict[Any, httpx2.Response] = attrs.Factory(dict)
    """The response of each request answered with JSON, until its answer is handed on
    (:func:`_note_response`)."""
    events: dict[Any, _Tapped] = attrs.Factory(dict)
    """The events of each request answered with an event stream, until its answer is handed
    on (:func:`_note_events`)."""
    streamed: bool = False
    """A GET stream of the session was answered 200 (the server has one): a 404 to a later one
    is the session's end."""
    resumed: dict[Any, str | None] = attrs.Factory(dict)
    """How the last GET that resumed an event stream (by the ``Last-Event-ID`` it named) was
    refused, ``None`` while it has no answer or was not refused (:func:`_note_resumed`)."""


@attrs.define
class _Session:
    """The HTTP session of one connection, as its answers showed it: what ends it when the
    SDK could not.

    The SDK ends a session with a ``DELETE`` as its client closes, in the closing task: where
    that close is cancelled (the block cancelled while it connects or serves, ``init_timeout``
    run out while the server lists its tools), the ``DELETE`` is cancelled before it is sent,
    and the server keeps the session (and whatever it holds for it) until it restarts.
    :meth:`end` sends it then, shielded, within :data:`_CLOSE_TIMEOUT`."""

    headers: dict[str, str] | None = None
    """The session's id (and the protocol version its requests name), once a response gave
    it: the headers a ``DELETE`` of it carries."""
    ended: bool = False
    """A ``DELETE`` of it was answered (however), or the server said it no longer knows it."""

    def note(self, response: httpx2.Response) -> None:
        request = response.request
        if request.method == "DELETE":
            self.ended = True
            return
        found = response.headers.get("mcp-session-id") or request.headers.get("mcp-session-id")
        if found is None:
            return
        if self.headers is None or self.headers["mcp-session-id"] != found:
            self.headers = {"mcp-session-id": found}
        version = request.headers.get("mcp-protocol-version")
        if version is not None:
            self.headers["mcp-protocol-version"] = version

    async def end(self, http: httpx2.AsyncClient, url: str) -> None:
        """Send the session's ``DELETE`` if the SDK's was not answered because the close is
        cancelled; an answer or a failure ends it (the SDK's close warned of any other).

        Cancellation: this is what runs when the close is cancelled; shielded, at most
        :data:`_CLOSE_TIMEOUT` (a server that does not answer keeps the session)."""
        if self.headers is None or self.ended or trio.current_effective_deadline() != -math.inf:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_TIMEOUT):
            try:
                await http.request("DELETE", url, headers=self.headers)
            except httpx2.HTTPError as exc:
                _log.debug("could not end the MCP session at %s: %s", _shown(url), exc)
            finally:
                _GONE_ALREADY.set(False)  # (no SDK record follows this one's answer)


def _note_resumed(response: httpx2.Response, resumed: dict[Any, str | None]) -> None:
    """Note how the server refused a GET that resumed an event stream: an error status, or a
    2xx answer that is no event stream (the SDK tries again, then gives up). An event stream
    is no refusal (what became of it is not known here): ``None``, as for a GET never
    answered, which the connection's end left with no answer."""
    event_id = response.request.headers["last-event-id"]
    status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if not response.is_success:
        _remember(resumed, event_id, status)
    elif kind != "text/event-stream":
        _remember(resumed, event_id, f"{status} with {kind or 'no content type'}")
    else:
        _remember(resumed, event_id, None)


def _request_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of the request a POST sent; ``None`` for a notification or a response
    (or a body that is not a JSON object)."""
    try:
        request_id = json.loads(request.content).get("id")
    except (httpx2.StreamError, ValueError, AttributeError):
        return None
    if isinstance(request_id, int | str) and not isinstance(request_id, bool):
        return request_id
    return None


def _remember(noted: dict[Any, _T], request_id: int | str, value: _T) -> None:
    """Note ``value`` for the request ``request_id``, forgetting the oldest past
    :data:`_NOTED_MAX`."""
    if len(noted) >= _NOTED_MAX:
        del noted[next(iter(noted))]
    noted[request_id] = value


def _note_response(response: httpx2.Response, bodies: dict[Any, httpx2.Response]) -> None:
    """Note a request's successful response with a JSON body, by its JSON-RPC id: when the
    SDK cannot parse the body it answers the request with its parse error and the body in a
    multi-line pydantic dump; :func:`_unparsed` says what the body was instead."""
    if not response.headers.get("content-type", "").lower().startswith("application/json"):
        return
    request_id = _request_id(response.request)
    if request_id is not None:
        _remember(bodies, request_id, response)


def _note_events(response: httpx2.Response, events: dict[Any, _Tapped]) -> bool:
    """Note a request's successful response with an event stream, by its JSON-RPC id, and tap
    its body (:class:`_Tapped`): when an event is no JSON-RPC message the SDK answers the
    request with its parse error and the event in a multi-line pydantic dump, and
    :func:`_unparsed` says what the event was instead. Whether it was noted."""
    if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
        return False
    request_id = _request_id(response.request)
    if request_id is None or not isinstance(response.stream, httpx2.AsyncByteStream):
        return False
    # Whether the body's end is the server's own (a Content-Length, chunks, HTTP/2), not only
    # the connection's (a body that lasts until the connection closes).
    framed = (
        response.http_version.upper().startswith("HTTP/2")
        or "content-length" in response.headers
        or "chunked" in response.headers.get("transfer-encoding", "").lower()
    )
    encoding = response.headers.get("content-encoding", "").strip().lower()
    compressed = encoding not in ("", "identity")
    tapped = _Tapped(response.stream, framed=framed, compressed=compressed)
    response.stream = tapped
    _remember(events, request_id, tapped)
    return True


class _Tapped(httpx2.AsyncByteStream):
    """An event-stream response's body, passed on as it comes, with its first
    :data:`_TAPPED_MAX` bytes kept: read as events only if the SDK found one that is no
    JSON-RPC message (:meth:`what`), or none that answers the request (:meth:`ended`), not on
    the way of every answer."""

    __slots__ = ("_compressed", "_framed", "_kept", "_pieces", "_read", "_stream")

    def __init__(self, stream: httpx2.AsyncByteStream, *, framed: bool, compressed: bool) -> None:
        """``framed``: the body's end is the server's own (see :meth:`ended`); ``compressed``:
        the pieces that pass are not the events', and none are kept."""
        self._stream = stream
        self._pieces: list[bytes] | None = None if compressed else []
        self._kept = 0
        self._framed = framed
        self._compressed = compressed
        self._read = False  # to its end, with no error

    @property
    def elapsed(self) -> Any:
        """What httpx2's own stream tells the response (:attr:`httpx2.Response.elapsed`)."""
        return getattr(self._stream, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = self._stream.__aiter__()
        try:
            async for piece in pieces:
                if self._pieces is not None:
                    self._kept += len(piece)
                    if self._kept > _TAPPED_MAX:
                        self._pieces = None  # (grown large: no more is kept)
                    else:
                        self._pieces.append(piece)
                yield piece
            self._read = True
        finally:
            if isinstance(pieces, AsyncGenerator):
                await pieces.aclose()

    async def aclose(self) -> None:
        await self._stream.aclose()

    def what(self) -> str:
        """What the event that is no JSON-RPC message was, in a few words: the first such
        ``message`` event of the body, where the SDK stopped (it skips those with no data)."""
        parser = SSEParser()
        for piece in self._pieces or ():
            for event in parser.feed(piece):
                data = event.data
                if event.event != "message" or not data:
                    continue
                try:
                    mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)
                except ValueError:  # (the SDK's own check)
                    try:
                        json.loads(data)
                    except (ValueError, RecursionError):
                        return f"an event stream with an event that is not JSON ({_preview(data)})"
                    return (
                        "an event stream with an event that is JSON but not a JSON-RPC message "
                        f"({_preview(data)})"
                    )
        return "an event stream with an event that is not a JSON-RPC message"

    def ended(self) -> _Ended | None:
        """What the body held, if it ended as the server meant it to, whole and between two
        events (the SDK found no response in it); ``None`` if it did not: the connection
        ended before the body did, or inside an event, or only the connection's end ended
        it."""
        if not (self._read and self._framed):
            return None
        if self._pieces is None:  # (the events are not known: the body's end is trusted)
            held = (
                "compressed events, not read here"
                if self._compressed
                else f"more than {_TAPPED_MAX >> 20} MiB of events"
            )
            return _Ended(held, None)
        return _held(b"".join(self._pieces))


@attrs.frozen
class _Ended:
    """What an event stream that ended with no response held."""

    held: str
    """In a few words: ``"3 events with no data and 1 comment"``."""
    last_id: str | None
    """The last event id it gave (the one the SDK resumes it from), ``""`` for none, ``None``
    when not known."""


_LINE_END: Final = re.compile(r"\r\n|\r|\n")


def _held(body: bytes) -> _Ended | None:
    """What the event stream ``body`` held, counted as the MCP SDK reads it (httpx2's parser:
    an event with any field is dispatched, ``event`` names its type), or ``None`` when it
    ends inside a line or an event (which is dropped there)."""
    text = body.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = _LINE_END.split(text)
    if lines.pop():  # (after the last line end: a line with none)
        return None
    counts: collections.Counter[str] = collections.Counter()
    kind, pending, last_id = "", False, ""
    data: list[str] = []
    for line in lines:
        if not line:
            if pending:
                counts[_kind_of(kind or "message", "\n".join(data))] += 1
            kind, data, pending = "", [], False
            continue
        if line.startswith(":"):
            counts["comment"] += 1
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            kind, pending = value, True
        elif field == "data":
            data.append(value)
            pending = True
        elif field == "id" and "\0" not in value:
            pending = True
            if value:
                last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            pending = True
    if pending:
        return None
    parts = [
        _counted(label, n)
        for label, n in sorted(counts.items(), key=lambda item: item[0] == "comment")
    ]
    held = " and ".join((", ".join(parts[:-1]), parts[-1])) if len(parts) > 1 else "".join(parts)
    return _Ended(held or "nothing", last_id)


def _kind_of(kind: str, data: str) -> str:
    """What one event of a stream with no response was, as :func:`_held` counts it."""
    if kind != "message":
        return f"{_preview(kind)} event"  # (the SDK logs it, and skips it)
    if not data:
        return "event with no data"  # (the SDK skips it)
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        return "event"
    if isinstance(message, dict) and "method" in message:
        return "request" if "id" in message else "notification"
    return "event"


def _counted(label: str, n: int) -> str:
    """``n`` of ``label`` (one of :func:`_kind_of`'s, or ``"comment"``)."""
    if n == 1:
        return f"1 {label}"
    if label.startswith("event "):
        return f"{n} events {label.removeprefix('event ')}"
    return f"{n} {label}s"


def _preview(text: str) -> str:
    """``text`` on one line and at most :data:`_PREVIEW` characters, quoted."""
    line = " ".join(text.split())
    return repr(line if len(line) <= _PREVIEW else line[: _PREVIEW - 1] + "…")


def _what_body(content: bytes) -> str:
    """What a response's body that is no JSON-RPC message is, in a few words."""
    text = content.decode("utf-8", errors="replace")
    if not text.strip():
        return "an empty body"
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return f"a body that is not JSON ({_preview(text)})"
    return f"JSON that is not a JSON-RPC response ({_preview(text)})"


def _unparsed(
    message: mcp_types.JSONRPCError, answer: httpx2.Response | _Tapped
) -> SessionMessage | None:
    """The SDK's parse error for a request whose ``answer`` (a response with a JSON body, or
    the events of one with an event stream) it could not parse, as one line that says what
    the body or the event was; ``None`` for any other error (and when the body was not read:
    the connection failed while it came)."""
    error = message.error
    if error.code != mcp_types.PARSE_ERROR:
        return None
    if isinstance(answer, _Tapped):
        if not error.message.startswith(_SDK_UNPARSED_EVENT):
            return None
        what = answer.what()
    else:
        if not error.message.startswith(_SDK_UNPARSED):
            return None
        try:
            what = _what_body(answer.content)
        except httpx2.ResponseNotRead:
            return None
    _log.debug("the MCP SDK could not parse a response: %s", error.message)
    data = error.model_copy(update={"message": _NOT_JSON_RPC + what})
    return SessionMessage(message.model_copy(update={"error": data}))


def _unanswered(
    message: mcp_types.JSONRPCError, answer: httpx2.Response | _Tapped, noted: _Noted
) -> SessionMessage | None:
    """The SDK's error for a request whose event-stream ``answer`` ended with no response in
    it, as an error of that request alone (``INTERNAL_ERROR``) that says what the stream held,
    when the stream ended as the server meant it to (:meth:`_Tapped.ended`), and the GETs that
    resumed it (if it named an event id) were refused by the server; ``None`` otherwise: the
    connection ended (the SDK's ``CONNECTION_CLOSED``, which loses the server, stays)."""
    error = message.error
    if not isinstance(answer, _Tapped) or error.code != mcp_types.CONNECTION_CLOSED:
        return None
    if error.message not in (_SDK_NO_RESPONSE, _SDK_NOT_RESUMED):
        return None
    ended = answer.ended()
    if ended is None:
        return None
    said = f"{_ENDED} (it held {ended.held})"
    if error.message == _SDK_NOT_RESUMED:
        refused = None if not ended.last_id else noted.resumed.pop(ended.last_id, None)
        if refused is None:  # (a GET with no answer: the connection ended)
            return None
        said += (
            f", and resuming it (a GET with Last-Event-ID {_preview(ended.last_id or '')}) "
            f"was answered {refused}"
        )
    _log.debug("the MCP SDK found no response in an event stream: %s", error.message)
    data = error.model_copy(update={"code": mcp_types.INTERNAL_ERROR, "message": said})
    return SessionMessage(message.model_copy(update={"error": data}))


def _is_unanswered(error: MCPError) -> bool:
    """Whether ``error`` is an event stream that ended with no response (:func:`_unanswered`)."""
    return error.code == mcp_types.INTERNAL_ERROR and error.message.startswith(_ENDED)


def _what_ended(error: MCPError) -> str:
    """What the server answered with, for an error that :func:`_is_unanswered`."""
    return error.message.removeprefix("the server answered with ")


def _is_unparsed(error: MCPError) -> bool:
    """Whether ``error`` is a response's body that was no JSON-RPC message (:func:`_unparsed`)."""
    return error.code == mcp_types.PARSE_ERROR and error.message.startswith(_NOT_JSON_RPC)


class _SDKParseErrors(logging.Filter):
    """Keeps the MCP SDK's HTTP transport from logging, with its traceback, a JSON body or an
    event of a request's event stream it could not parse, in a connection of ours only: the
    request it answered gets an error that says what the body or the event was
    (:func:`_unparsed`), which raises or is the call's result. The SDK's own words go to
    ``trio_invoke.mcp``'s debug log. Every other record (a bad event of the GET stream, which
    answers no request, among them), and every record of the SDK's own users, passes.

    Nor does it log as a failure the end of a session of ours that the server answers 404
    (it knows no such session: it restarted), which is the end the ``DELETE`` asked for; nor
    warn, in a connection of ours, of each event whose type is not ``message`` (a server's
    ``event: ping`` keep-alive, every few seconds of a long call or of the GET stream): the
    SSE standard has a client ignore the events it does not listen for, as the SDK does."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            (_OURS.get() or _IN_CONNECTION.get())
            and isinstance(record.msg, str)
            and record.msg.startswith(_UNKNOWN_EVENT)
        ):
            _log.debug("ignored an event of the server's that is not a message (%s)", record.msg)
            return False
        if record.msg == _TERMINATION_404 and _GONE_ALREADY.get():
            _GONE_ALREADY.set(False)  # (once: the task may end another session later)
            _log.debug("the server knew the session no more when it was ended (HTTP 404)")
            return False
        if record.msg == "Error parsing JSON response":
            ours = _IN_CONNECTION.get()
        elif record.msg == "Error parsing SSE message":
            ours = _ANSWERING.get()
        else:
            return True
        caught = record.exc_info[1] if record.exc_info else None
        return not (ours and isinstance(caught, pydantic.ValidationError))


_IN_CONNECTION: Final = contextvars.ContextVar("trio_invoke.mcp connection", default=False)
"""Set while a message goes to the transport (:meth:`_NotedWrites.send`): the SDK's HTTP
transport sends each request, and reads its response, in the context it was sent in, where
:class:`_SDKParseErrors` applies."""
_ANSWERING: Final = contextvars.ContextVar("trio_invoke.mcp event answer", default=False)
"""Set in the task of a request's POST of ours once its answer is an event stream (by the HTTP
transport's response hook): the SDK reads its events there, and answers the request with an
error when one is no JSON-RPC message. The SDK reads its GET stream in a task of its own, where
this is not set (and the context of a message's POST is a copy: nothing leaks to the next)."""
_OURS: Final = contextvars.ContextVar("trio_invoke.mcp ours", default=False)
"""Set in the owner task of each connection (:meth:`MCPServer._own`): the SDK's tasks for it
start there and inherit it, all but those of the requests, which run in the context of the
message they send (:data:`_IN_CONNECTION`)."""
_UNKNOWN_EVENT: Final = "Unknown SSE event: "
"""How the SDK's warning of an event that is not a ``message`` begins (its type follows)."""
_GONE_ALREADY: Final = contextvars.ContextVar("trio_invoke.mcp session gone", default=False)
"""Set in the task that ends a session of ours once the server answered its ``DELETE`` 404."""
_TERMINATION_404: Final = "Session termination failed: 404"
"""The SDK's record of a ``DELETE`` answered 404 (``StreamableHTTPTransport.terminate_session``)."""
logging.getLogger("mcp.client.streamable_http").addFilter(_SDKParseErrors())


class _Wrapped:
    """One of the transport's streams, wrapped: closing or leaving the wrapper closes it."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _WatchedStream(_Wrapped):
    """The transport's read stream, reporting its end to the server: once the server's side of
    the connection is gone, later calls are answered at once without trying."""

    __slots__ = ("_noted", "_on_end")

    def __init__(self, stream: Any, on_end: Any, noted: _Noted) -> None:
        super().__init__(stream)
        self._on_end = on_end
        self._noted = noted

    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if isinstance(item, pydantic.ValidationError):
            return _readable(item)
        noted = self._noted
        if (noted.statuses or noted.bodies or noted.events) and isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, mcp_types.JSONRPCResponse):
                noted.bodies.pop(message.id, None)
                noted.events.pop(message.id, None)
            if isinstance(message, mcp_types.JSONRPCError):
                answer: httpx2.Response | _Tapped | None = noted.bodies.pop(message.id, None)
                if answer is None:
                    answer = noted.events.pop(message.id, None)
                if answer is not None:
                    return _unparsed(message, answer) or _unanswered(message, answer, noted) or item
                status = noted.statuses.pop(message.id, None)
                if status is not None and message.error.code == mcp_types.INTERNAL_ERROR:
                    error = message.error.model_copy(
                        update={"message": f"{message.error.message} ({status})"}
                    )
                    return SessionMessage(message.model_copy(update={"error": error}))
        return item

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _readable(exc: pydantic.ValidationError) -> SessionMessage | Exception:
    """A line the SDK's stdio transport could not parse, as the answer it was meant to be.

    The SDK hands the session such a line as an exception that names no request, so a call
    whose answer it was would wait for an answer that never comes. An answer that names its
    request is read with Python's own JSON parser (which takes ``"\\ud83d"``, half a
    surrogate pair, as JavaScript's ``JSON.stringify`` writes it) and becomes that call's
    result, or, when it is no valid response, that call's JSON-RPC parse error (as the SDK's
    HTTP transport does). Anything else is left as it is (the SDK logs and skips it).
    """
    raw: Any = None
    for error in exc.errors(include_url=False):
        value = error.get("input")
        if error["type"] == "json_invalid" and isinstance(value, str):
            try:
                raw = json.loads(value)
            except (ValueError, RecursionError):
                return exc
            break
        if error["type"] == "missing" and len(error["loc"]) == 2 and isinstance(value, dict):
            raw = value  # the whole message (one of its top-level fields is missing)
            break
    if not isinstance(raw, dict) or ("result" not in raw and "error" not in raw):
        return exc
    request_id = raw.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return exc
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except (ValueError, RecursionError) as again:
        kind = "JSONRPCResponse" if "result" in raw else "JSONRPCError"
        problems = [
            f"{'.'.join(map(str, error['loc'][1:]))}: {error['msg']}"
            for error in (again.errors() if isinstance(again, pydantic.ValidationError) else ())
            if error["loc"][:1] == (kind,)
        ]
        error_data = mcp_types.ErrorData(
            code=mcp_types.PARSE_ERROR,
            message=_UNREADABLE + ("; ".join(problems) or _summary(again)),
        )
        message = mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error_data)
    return SessionMessage(message)


@attrs.define
class _Handshake:
    """How far making one connection got, for the message when it fails or times out."""

    discovering: bool = False
    """A ``server/discover`` was sent (``protocol="auto"``), and no ``initialize`` after it."""
    client: Client | None = None
    """The SDK's client, once the handshake is done."""


class _ProtectTasks(trio.abc.Instrument):
    """Protects the tasks the MCP SDK starts for a connection of ours from ``KeyboardInterrupt``,
    as Trio protects its own: a Ctrl-C that lands in one is raised in the main task at its next
    checkpoint instead (Trio's handling of a Ctrl-C in protected code).

    The SDK's code, and anyio's under it, is not written to be interrupted between any two
    lines: raised there, the interrupt was lost (a task group took it for a failure, the
    request was sent again, the run went on) or turned into an error of the connection
    (``could not connect ... RuntimeError: Cancel scope stack corrupted``), and Trio's state
    was left corrupted. Our own functions are protected with
    :func:`trio.lowlevel.enable_ki_protection`; the SDK's start in tasks of their own, which
    inherit the context of the task that starts them -- :data:`_OURS` or
    :data:`_IN_CONNECTION`, for ours -- and are marked here as they are spawned. (Trio has no
    public way to protect a task that some other library starts.)"""

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        context = task.context
        if context.get(_OURS, False) or context.get(_IN_CONNECTION, False):
            task._ki_protected = True  # what Trio sets for a task it spawns protected


class _NotedWrites(_Wrapped):
    """The transport's write stream, noting in :class:`_Handshake` which handshake request
    went out last, and sending each message with :data:`_IN_CONNECTION` set."""

    __slots__ = ("_handshake",)

    def __init__(self, stream: Any, handshake: _Handshake) -> None:
        super().__init__(stream)
        self._handshake = handshake

    async def send(self, item: Any) -> None:
        if isinstance(item, SessionMessage) and isinstance(item.message, mcp_types.JSONRPCRequest):
            if item.message.method == "server/discover":
                self._handshake.discovering = True
            elif item.message.method == "initialize":
                self._handshake.discovering = False
        token = _IN_CONNECTION.set(True)  # (the transport takes a copy of the context)
        try:
            await self._stream.send(item)
        finally:
            _IN_CONNECTION.reset(token)


@contextlib.asynccontextmanager
async def _watched(
    transport: Any, on_end: Any, noted: _Noted, handshake: _Handshake
) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield (
            _WatchedStream(read_stream, on_end, noted),
            _NotedWrites(write_stream, handshake),
        )


def _names(value: Collection[str] | None, option: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise ConfigurationError(
            f"{option} takes a collection of server tool names, not {type(value).__name__} "
            f"({value!r}); write {option}=[{value!r}] for one name"
        )
    names = frozenset(value)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ConfigurationError(f"{option} takes tool names (str), got {bad[0]!r}")
    return names


def _seconds(value: float | None, option: str, *, allow_none: bool) -> float | None:
    if value is None:
        if allow_none:
            return None
        raise ConfigurationError(f"{option} must be a number of seconds > 0, not None")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{option} must be a number of seconds > 0, got {value!r}")
    return float(value)


class MCPServer:
    """A connection to one MCP server, whose tools become trio_invoke tools.

    Make one with :meth:`stdio` (a local command that speaks MCP on stdin/stdout) or
    :meth:`http` (a streamable HTTP endpoint), then enter it::

        async with MCPServer.stdio("uvx", ["mcp-server-time"], prefix="time") as server:
            client = FunctionInvokingChatClient(model, server.tools)
            response = await client.get_response([ChatMessage.user("What time is it?")])

    Entering starts (or reaches) the server, finishes the MCP handshake and lists its tools;
    leaving cancels nothing of yours but ends the connection: a stdio server's process is
    stopped (stdin closed, then SIGTERM, then SIGKILL, each after a bounded wait), an HTTP
    session is deleted. Calls still running in other tasks then get an error result. A
    Ctrl-C anywhere in the connection, in the MCP SDK's code and tasks too, comes out as a
    plain ``KeyboardInterrupt`` at the next checkpoint of your code, and leaving the block
    ends the connection as above.

    A server that dies: its running calls get error results naming what happened (they are
    not sent again). Over HTTP, the connection is made again (handshake and tool listing; one
    attempt at a time, which every waiting call shares) in the background once it is lost --
    at once, then after a wait that doubles from 0.25 s to 30 s while attempts fail, so that
    :attr:`tools` and tool list changes come back with the server -- and at once for each
    later call, which is sent over the new connection: answered "not available" at once while
    nothing takes connections on the server's port, answered as usual once the server is
    back. A server that no longer knows the session (HTTP 404 to its id: it restarted, or
    ended the session) refused the calls sent with it; they are sent once more over a new
    session. A stdio process that exited is not started again: later calls get "not
    available" at once; leave the block and enter it again for a new process (one connection
    at a time).
    """

    def __init__(
        self,
        target: _Stdio | _HTTP,
        *,
        prefix: str | None = None,
        allowed_tools: Collection[str] | None = None,
        require_approval: bool | Collection[str] = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        init_timeout: float = DEFAULT_INIT_TIMEOUT,
        protocol: Protocol = "auto",
    ) -> None:
        """Use :meth:`stdio` or :meth:`http`; they take the same keyword options."""
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise ConfigurationError(f"prefix must be a non-empty str or None, got {prefix!r}")
        if protocol not in ("auto", "legacy"):
            raise ConfigurationError(f"protocol must be 'auto' or 'legacy', got {protocol!r}")
        self._target = target
        self.prefix = prefix
        """Put before each tool's name (``f"{prefix}_{name}"``), or ``None``."""
        self.allowed_tools = _names(allowed_tools, "allowed_tools")
        """The server tools to offer (by their names on the server); ``None``: all of them."""
        self.require_approval: bool | frozenset[str]
        """``True``: every call needs approval; a set: calls of these server tools do."""
        if isinstance(require_approval, bool):
            self.require_approval = require_approval
        elif require_approval is None:
            raise ConfigurationError(
                "require_approval takes True, False or a collection of server tool names, not None"
            )
        else:
            names = _names(require_approval, "require_approval")
            assert names is not None
            self.require_approval = names
        self.timeout = _seconds(timeout, "timeout", allow_none=True)
        """Seconds one call may take; ``None``: no limit (the loop's ``tool_timeout`` may
        still apply)."""
        init = _seconds(init_timeout, "init_timeout", allow_none=False)
        assert init is not None
        self.init_timeout = init
        """Seconds entering may take: start or reach the server, handshake, list its tools."""
        self.protocol: Protocol = protocol
        """``"auto"``: try the 2026-07-28 ``server/discover`` handshake, fall back to
        ``initialize`` (the SDK's default; it waits 10 s for an answer to ``server/discover``
        first, and an ``init_timeout`` that runs out meanwhile says so); ``"legacy"``:
        ``initialize`` only, for servers that do not answer an unknown method."""
        self._entered = False
        self._client: Client | None = None
        self._tools: tuple[MCPTool, ...] | None = None
        self._changed: trio.MemorySendChannel[None] | None = None
        self._server_name: str | None = None
        self._epochs = itertools.count()
        self._fresh()

    def _fresh(self) -> None:
        """The state of one ``async with`` block, as it begins."""
        self._epoch = next(self._epochs)
        """Which connection :attr:`_client` and :attr:`_lost` belong to: a connection that was
        replaced (or is still being made) changes nothing of them. (:attr:`_changed` is the
        newest connection's, once it is being made: what changes meanwhile is listed on it.)"""
        self._lost: str | None = None
        self._closing = trio.Event()
        self._gone = trio.Event()
        """Set once the current connection is lost: its owner task then closes it."""
        self._wanted = trio.Event()
        """Set when the connection is lost, and by a call that found it lost: the reconnecting
        task (over HTTP) makes a new one."""
        self._attempt: trio.Event | None = None
        """Set when the attempt to connect again that calls wait for is over."""
        self._again: str | None = None
        """Why the last attempt to connect again failed, or ``None``."""
        self._unreachable: int | None = None
        """The connection whose server stopped taking connections while it was idle (a
        2026-07-28 server: its listen stream ended, and its port refuses), until it listens
        again: not available meanwhile, though not lost (see :meth:`_listen`)."""
        self._connecting: set[trio.CancelScope] = set()
        """The time limits of connections being made again (the block's end cancels them)."""
        self._ended: set[int] = set()
        """The connections whose server answered HTTP 404 to the session's id."""
        self._in_flight: collections.Counter[int] = collections.Counter()
        """How many calls each connection is waiting for."""
        self._call_ended = trio.Event()
        """Set (and replaced) when a call ends; also when the block ends."""

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | PathLike[str] | None = None,
        prefix: str | None = None,
        allowed_tools: Collection[str] | None = None,
        require_approval: bool | Collection[str] = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        init_timeout: float = DEFAULT_INIT_TIMEOUT,
        protocol: Protocol = "auto",
    ) -> MCPServer:
        """A server run as a subprocess, speaking MCP over its stdin and stdout.

        Args:
            command: The executable (looked up on ``PATH``).
            args: Its arguments.
            env: Environment variables for the server, on top of the MCP SDK's minimal
                default environment (``HOME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``,
                ``LOGNAME`` on POSIX); the rest of this process's environment is not passed.
            cwd: Its working directory (default: this process's).
            prefix: Put before each tool's name: ``f"{prefix}_{name}"``.
            allowed_tools: Offer only these server tools (their names on the server).
            require_approval: ``True`` for every tool, or the server tools that need it.
            timeout: Seconds per call (``None``: no limit).
            init_timeout: Seconds to start the server, handshake and list its tools.
            protocol: ``"auto"`` or ``"legacy"`` (see :attr:`protocol`).

        Returns:
            The server, not yet connected: use it as ``async with``.

        Raises:
            ConfigurationError: An option is invalid (an empty command, a timeout <= 0, a
                ``str`` where a collection of names belongs, an ``env`` name or value that is
                not a ``str`` or that the system refuses).

        The server's stderr goes to this process's stderr.
        """
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError(f"command must be a non-empty str, got {command!r}")
        if isinstance(args, str):
            raise ConfigurationError(
                f"args takes a sequence of arguments, not a str ({args!r}); "
                f"write args={shlex.split(args)!r}"
            )
        if env is not None:
            env = _checked_env(env)
        if cwd is not None and not isinstance(cwd, str | os.PathLike):
            raise ConfigurationError(f"cwd must be a str or a path, got {cwd!r}")
        return cls(
            _Stdio(command, tuple(str(a) for a in args), env, cwd),
            prefix=prefix,
            allowed_tools=allowed_tools,
            require_approval=require_approval,
            timeout=timeout,
            init_timeout=init_timeout,
            protocol=protocol,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        allowed_tools: Collection[str] | None = None,
        require_approval: bool | Collection[str] = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        init_timeout: float = DEFAULT_INIT_TIMEOUT,
        protocol: Protocol = "auto",
    ) -> MCPServer:
        """A server at a streamable HTTP endpoint (``http://host:port/mcp``, usually).

        Args:
            url: The endpoint.
            headers: Sent with every request (``Authorization``, for one).
            prefix, allowed_tools, require_approval, timeout, init_timeout, protocol:
                As for :meth:`stdio`.

        Returns:
            The server, not yet connected: use it as ``async with``.

        Raises:
            ConfigurationError: The URL is not ``http://`` or ``https://``, a header cannot
                go in an HTTP request (not a ``str``, a newline, non-ASCII; the message names
                the header, never its value), or an option is invalid.
        """
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise ConfigurationError(f"url must be an http:// or https:// URL, got {url!r}")
        if not urlsplit(url).hostname:
            raise ConfigurationError(f"url has no host: {url!r}")
        if headers is not None and not isinstance(headers, Mapping):
            raise ConfigurationError(
                f"headers must be a mapping of names to values, got a {type(headers).__name__}"
            )
        return cls(
            _HTTP(url, dict(checked_headers(headers)) if headers is not None else None),
            prefix=prefix,
            allowed_tools=allowed_tools,
            require_approval=require_approval,
            timeout=timeout,
            init_timeout=init_timeout,
            protocol=protocol,
        )

    # -- what users read ---------------------------------------------------------------------

    @property
    def label(self) -> str:
        """The command line or URL (without credentials or query), as errors name the server
        (with :attr:`name` after it once the handshake told it)."""
        return self._target.label

    @property
    def name(self) -> str:
        """The server's own name (``serverInfo.name``) once connected, else :attr:`label`."""
        return self._server_name or self.label

    def _describe(self, server_name: str | None) -> str:
        """How errors and logs name the server: ``MCP server '<label>'``, what the user
        configured, and then ``(named '<serverInfo.name>')`` when a handshake told it (and
        it differs)."""
        label = self.label
        if server_name and server_name != label:
            return f"MCP server {label!r} (named {server_name!r})"
        return f"MCP server {label!r}"

    def _named(self, client: Client) -> str:
        """:meth:`_describe` with the name ``client``'s handshake told."""
        return self._describe(_told_name(client))

    @property
    def _who(self) -> str:
        """:meth:`_describe` with the name of the latest connection's handshake, if any."""
        return self._describe(self._server_name)

    @property
    def tools(self) -> tuple[MCPTool, ...]:
        """The server's tools, as they are now (the list changes when the server says so).

        Pass them as ``FunctionInvokingChatClient(model, server.tools)`` or, to give each run
        the current list, ``RunOptions(provider_tools=server.tools)``. A run keeps the tools it
        started with.

        Raises:
            RuntimeError: The server was never entered.
        """
        if self._tools is None:
            raise RuntimeError(
                f"{self._describe(None)} is not connected: use `async with server:` first"
            )
        return self._tools

    @property
    def remote_names(self) -> Mapping[str, str]:
        """Each tool's model-facing name, mapped to its name on the server."""
        return {tool.name: tool.remote_name for tool in self.tools}

    @property
    def available(self) -> bool:
        """Whether calls can reach the server now: connected, and not known to be gone (a
        request found it gone, it ended the session, or, with the 2026-07-28 protocol, its
        tool list changes stream ended and its port takes no connections; ``True`` again
        once it listens there)."""
        return self._client is not None and self._lost is None and self._unreachable != self._epoch

    def __repr__(self) -> str:
        state = "connected" if self.available else "not connected"
        return f"<MCPServer {self.label!r} {state}>"

    @trio.lowlevel.enable_ki_protection
    async def refresh_tools(self) -> tuple[MCPTool, ...]:
        """List the server's tools now and update :attr:`tools` (the server normally says
        when they change, and :attr:`tools` follows by itself).

        Raises:
            MCPConnectionError: The server is not available, or the listing failed.
            ConfigurationError: Two tools now collide after name mapping (the list is kept).

        Cancellation: the listing is abandoned; :attr:`tools` is unchanged.
        """
        refused = False
        while True:
            client, epoch = await self._connection(None)
            try:
                listed = await self._list(client)
            except TrioInvokeError:
                raise
            except Exception as exc:
                if not refused and epoch in self._ended:  # (as a call: once, a new session)
                    refused = True
                    continue
                if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
                    self._lose(self._target.lost, epoch)  # (later ones connect again)
                if isinstance(exc, MCPError) and _is_unanswered(exc):
                    raise MCPConnectionError(
                        f"listing the tools of {self._named(client)} failed: it answered "
                        f"tools/list with {_what_ended(exc)}"
                    ) from exc
                raise MCPConnectionError(
                    f"listing the tools of {self._named(client)} failed: {_summary(exc)}"
                ) from exc
            self._tools = self._build(listed, strict=False, who=self._named(client))
            return self._tools

    # -- the connection ----------------------------------------------------------------------

    @trio.lowlevel.enable_ki_protection
    async def __aenter__(self) -> MCPServer:
        """Connect: start or reach the server, handshake, list the tools.

        Raises:
            MCPConnectionError: The command could not be started, nothing answers at the URL,
                the server closed the connection or refused the handshake, or the URL
                answered it with no JSON-RPC message (an empty body, a web page, an event
                stream that ended without a response).
            MCPInitTimeoutError: All that took longer than ``init_timeout``.
            ConfigurationError: ``allowed_tools`` or ``require_approval`` names a tool the
                server does not have, or two tools collide after name mapping.
            RuntimeError: The server is already entered.

        Cancellation: whatever was started is stopped again before the ``Cancelled``
        propagates (a stdio process is ended).
        """
        if self._entered:
            raise RuntimeError(f"{self._who} is already entered")
        self._entered = True
        self._tools = None
        self._fresh()
        self._lifetime = self._live()
        try:
            await self._lifetime.__aenter__()
        except BaseException:
            self._entered = False
            raise
        return self

    @trio.lowlevel.enable_ki_protection
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        """Disconnect (see the class docstring).

        Cancellation: the shutdown is bounded and shielded inside the MCP SDK, so a stdio
        process is always ended; an HTTP session is ended with a shielded ``DELETE`` of at
        most 5 s; calls still running in other tasks get error results.
        """
        try:
            return await self._lifetime.__aexit__(exc_type, exc, traceback)
        finally:
            self._entered = False

    @contextlib.asynccontextmanager
    @trio.lowlevel.enable_ki_protection
    async def _live(self) -> AsyncIterator[None]:
        protect = _ProtectTasks()  # (until the block's tasks are all gone)
        trio.lowlevel.add_instrument(protect)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._own, self._epoch)
                if self._target.reconnects:
                    nursery.start_soon(self._reconnect, nursery)
                try:
                    yield
                finally:
                    self._lose(_CLOSED)
                    self._closing.set()
                    self._wanted.set()  # (the reconnecting task ends)
                    self._call_ended.set()
                    for scope in self._connecting:
                        scope.cancel()
        except BaseExceptionGroup as group:
            reraise_single(group)
        finally:
            trio.lowlevel.remove_instrument(protect)

    def _lose(self, reason: str, epoch: int | None = None) -> None:
        """Record why the connection is gone; the first reason stays. ``epoch``: only if that
        connection is the current one."""
        if epoch is not None and epoch != self._epoch:
            return
        if reason == _SESSION_ENDED:
            self._ended.add(self._epoch if epoch is None else epoch)
        if self._lost is None:
            self._lost = reason
            self._gone.set()
            self._wanted.set()  # (over HTTP, connected again in the background)

    def _back(self, epoch: int | None) -> None:
        """Connection ``epoch``'s server takes connections again (see :attr:`_unreachable`)."""
        if self._unreachable == epoch:
            self._unreachable = None

    def _is_lost(self, epoch: int | None) -> bool:
        """Whether connection ``epoch`` (``None``: the current one) is gone; one still being
        made is not."""
        if epoch is None or epoch == self._epoch:
            return self._lost is not None
        return epoch < self._epoch

    @trio.lowlevel.enable_ki_protection
    async def _reconnect(self, nursery: trio.Nursery) -> None:
        """Connects again once the connection is lost: at once, then, while attempts fail,
        after a wait that doubles from :data:`_RELISTEN_FIRST` up to :data:`_RELISTEN_MAX`,
        so that :attr:`tools` and the following of tool list changes come back with the server
        even when nothing calls it; a call that finds it lost (see :meth:`_call`) has it try
        at once. One attempt at a time, which every call that comes meanwhile waits for.
        Each reason an attempt fails for is logged as a WARNING once until it is connected
        again (a server that restarts over and over fails for two or three, in turn), later
        attempts at DEBUG. However it ends (the block's end may cancel it), the calls waiting
        are let go."""
        delay = _RELISTEN_FIRST
        warned: set[str] = set()  # (since connected: a server down for long alternates)
        try:
            while True:
                if self._lost is not None and self._again is not None:  # the last one failed
                    with trio.move_on_after(delay):
                        await self._wanted.wait()
                    delay = min(2 * delay, _RELISTEN_MAX)
                else:
                    await self._wanted.wait()  # a loss (see _lose), or a call
                self._wanted = trio.Event()
                if self._closing.is_set():
                    return
                if self._lost is not None:
                    if self._attempt is None:  # (calls that come meanwhile wait for this one)
                        self._attempt = trio.Event()
                    why = await self._connect_again(nursery)
                    if why is None:
                        delay = _RELISTEN_FIRST
                        warned.clear()
                        _log.info("%s: connected again", self._who)
                    else:  # (once per reason: it goes on trying)
                        quiet = why in warned or self._closing.is_set()
                        if not quiet:
                            warned.add(why)
                        level = logging.DEBUG if quiet else logging.WARNING
                        _log.log(level, "%s: could not connect again: %s", self._who, why)
                    self._again = why
                attempt, self._attempt = self._attempt, None
                if attempt is not None:
                    attempt.set()
        finally:
            if self._attempt is not None:
                self._attempt.set()

    def _ends_with_block(self, scope: trio.CancelScope) -> None:
        """Have the block's end cancel ``scope`` (at once if it has ended: a task started
        just before it ended begins after)."""
        self._connecting.add(scope)
        if self._closing.is_set():
            scope.cancel()

    async def _connect_again(self, nursery: trio.Nursery) -> str | None:
        """One attempt: ``None`` once a new connection is the current one, else why not."""
        reachable = False  # (a port that does not answer: not beyond init_timeout)
        with trio.CancelScope(deadline=trio.current_time() + self.init_timeout) as probe:
            self._ends_with_block(probe)
            try:
                reachable = await self._target.reachable()  # (at once on a closed port)
            finally:
                self._connecting.discard(probe)
        if self._closing.is_set():
            return "the block ended meanwhile"
        if not reachable:
            proxy = self._target.proxy  # (the connection refused may be the proxy's)
            if proxy is not None:
                return (
                    f"nothing takes connections at the proxy {proxy}, through which requests "
                    f"to {self.label} go"
                )
            return f"nothing takes connections at {self.label}"
        outcome: list[str | None] = []
        ready = trio.Event()
        nursery.start_soon(
            functools.partial(self._own, next(self._epochs), outcome=(outcome, ready))
        )
        await ready.wait()  # (bounded by init_timeout; the block's end stops it)
        return outcome[0]

    async def _connection(self, tool: MCPTool | None) -> tuple[Client, int]:
        """The current connection's client and epoch, or a new connection's once it is lost
        (see :meth:`_reconnected`, which raises "not available" when there is none). A 2026-07-28
        server the listen stream found refusing connections is asked again first: still
        refusing, it is lost (the call is not sent); back, the same connection goes on."""
        epoch = self._epoch
        if self._client is not None and self._lost is None and self._unreachable == epoch:
            # (the listen stream found its port refusing: still so, or back meanwhile?)
            if not await self._target.reachable():
                self._lose(_STOPPED, epoch)
            else:
                self._back(epoch)  # the same connection goes on
        client = self._client
        if client is None or self._lost is not None:
            client = await self._reconnected(tool)
        return client, self._epoch

    async def _reconnected(self, tool: MCPTool | None) -> Client:
        """The client of a new connection, once the current one is lost (a call that finds
        it lost asks for one and waits); raises "not available" when there is none."""
        reason = self._lost or "it is not connected"
        if self._target.reconnects and self._entered and not self._closing.is_set():
            attempt = self._attempt
            if attempt is None:
                attempt = self._attempt = trio.Event()
                self._wanted.set()
            await attempt.wait()
            client = self._client
            if client is not None and self._lost is None:
                return client
            if self._closing.is_set():
                reason = _CLOSED
            elif self._again is not None:
                reason = f"{reason} (connecting again failed: {self._again})"
        message = f"{self._who} is not available: {reason}"
        if tool is None:
            raise MCPConnectionError(message)
        raise self._error(tool, message)

    @trio.lowlevel.enable_ki_protection
    async def _own(
        self,
        epoch: int,
        *,
        outcome: tuple[list[str | None], trio.Event] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """The owner task of connection ``epoch``: opens the SDK client, serves until the
        connection is lost or the block ends, closes it.

        On entering (``outcome`` is ``None``) what fails raises; when connecting again, the
        first item put into ``outcome``'s list is ``None`` once this connection is the current
        one, else why it could not be made (the connection it would replace stays lost), and
        its event is set then.
        """
        _OURS.set(True)  # (this task's own context, and that of every task the SDK starts)
        changed_send, changed_receive = trio.open_memory_channel[None](1)
        entering = outcome is None
        self._changed = changed_send  # (what changes meanwhile is listed once it is current)
        started = False
        gone = self._gone
        init = trio.CancelScope(deadline=trio.current_time() + self.init_timeout)
        lose = functools.partial(self._lose, epoch=epoch)
        if not entering:
            self._ends_with_block(init)
        handshake = _Handshake()
        try:
            with init, changed_send, changed_receive:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._open(stack, lose, handshake)
                    async with trio.open_nursery() as watchers:
                        if self._announces_changes(client):
                            await watchers.start(self._listen, client, epoch)
                        tools = self._build(
                            await self._list(client), strict=entering, who=self._named(client)
                        )
                        init.deadline = math.inf
                        if not entering:
                            gone = self._adopt(epoch, changed_send, outcome, init)
                        self._serve(client, tools)
                        watchers.start_soon(self._follow_changes, client, changed_receive)
                        started = True
                        task_status.started()
                        await self._drained(gone, epoch)
                        watchers.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                self._not_connected(exc, init, handshake, outcome)  # raises on entering
                return
            # The transport failed (an HTTP server that went away): its running calls already
            # got errors from the SDK; later calls connect again (or are "not available").
            lose(f"the connection failed ({_summary(exc)})")
        finally:
            self._disown(epoch, changed_send, init, handshake, outcome)
        if init.cancelled_caught and not started and entering:
            raise MCPInitTimeoutError(self._too_slow(handshake))

    def _serve(self, client: Client, tools: tuple[MCPTool, ...]) -> None:
        """Make ``client``, whose ``tools`` are listed, the one calls go to."""
        self._server_name = _told_name(client)
        self._tools = tools
        self._client = client

    def _not_connected(
        self,
        exc: Exception,
        init: trio.CancelScope,
        handshake: _Handshake,
        outcome: tuple[list[str | None], trio.Event] | None,
    ) -> None:
        """A connection that failed (``exc``) before it was the current one, as far as its
        ``handshake`` got within ``init``: on entering (``outcome`` is ``None``) the error
        raises; when connecting again, ``outcome`` is told why."""
        leaf = _leaf(exc)
        error = self._entering_error(leaf, timed_out=init.cancel_called, done=handshake)
        if outcome is not None:
            _say(outcome, str(error))
        elif error is leaf:
            raise leaf  # keeps its own cause
        else:
            raise error from leaf

    def _disown(
        self,
        epoch: int,
        changed: trio.MemorySendChannel[None],
        init: trio.CancelScope,
        handshake: _Handshake,
        outcome: tuple[list[str | None], trio.Event] | None,
    ) -> None:
        """Connection ``epoch``'s owner ends, however: the connection is lost (if current),
        its ``changed`` channel and ``init`` scope are let go, and whoever connected again
        is told why, if no one has told them yet."""
        if epoch == self._epoch:
            self._client = None
            self._lose("it was closed", epoch)
        if self._changed is changed:
            self._changed = None
        self._connecting.discard(init)
        if self._closing.is_set():
            _say(outcome, "the block ended meanwhile")
        elif init.cancelled_caught:
            _say(outcome, self._too_slow(handshake))
        else:
            _say(outcome, "it was closed")

    def _too_slow(self, handshake: _Handshake) -> str:
        """Why entering timed out, as far as ``handshake`` got."""
        within = f"within init_timeout={self.init_timeout:g} s"
        if handshake.client is not None:
            return (
                f"{self._named(handshake.client)} finished the handshake but did not list its "
                f"tools {within}"
            )
        if handshake.discovering:  # (the SDK falls back to initialize only after a while)
            wait = f"after {_DISCOVER_WAIT:g} s" if _DISCOVER_WAIT is not None else "later"
            return (
                f"{self._describe(None)} did not answer server/discover (the handshake of "
                f'protocol="auto") {within}: a server of the older protocols that ignores '
                f'methods it does not know never will; protocol="legacy" skips it and sends '
                f"only initialize (the MCP SDK would fall back to it only {wait})"
            )
        return f"{self._describe(None)} did not finish the handshake {within}"

    async def _open(
        self, stack: contextlib.AsyncExitStack[Any], lose: _Lose, handshake: _Handshake
    ) -> Client:
        """The SDK's client, entered on ``stack``: transport, session, handshake (noted in
        ``handshake`` as it goes)."""
        noted = _Noted()
        transport = await self._target.transport(stack, lose, noted)
        client = Client(
            _watched(transport, lambda: lose(self._target.lost), noted, handshake),
            mode="legacy" if self.protocol == "legacy" else "auto",
            message_handler=self._on_message,
            client_info=_client_info(),
            cache=None,
        )
        await stack.enter_async_context(client)
        handshake.client = client
        return client

    async def _drained(self, gone: trio.Event, epoch: int) -> None:
        """Until connection ``epoch`` is lost and its calls are answered (a server that no
        longer knows the session answers each of them "not run"), or the block ends."""
        await gone.wait()
        while self._in_flight.get(epoch) and not self._closing.is_set():
            await self._call_ended.wait()

    def _adopt(
        self,
        epoch: int,
        changed: trio.MemorySendChannel[None],
        outcome: tuple[list[str | None], trio.Event] | None,
        init: trio.CancelScope,
    ) -> trio.Event:
        """Make connection ``epoch`` (made again) the current one; its ``gone`` event.

        The block's end no longer cancels ``init`` (the time limit of making it): it ends
        this connection as the first one, which closes it properly (the session's ``DELETE``
        would not be sent from a cancelled scope)."""
        self._connecting.discard(init)
        gone = trio.Event()
        self._epoch, self._lost, self._gone, self._changed = epoch, None, gone, changed
        _say(outcome, None)
        return gone

    def _entering_error(
        self, leaf: BaseException, *, timed_out: bool, done: _Handshake
    ) -> Exception:
        """What entering raises for ``leaf``, the failure underneath the SDK's groups, as far
        as the handshake was ``done`` (once it was, the tool listing failed)."""
        if isinstance(leaf, TrioInvokeError):  # ours already: as it is
            return leaf
        if timed_out:
            return MCPInitTimeoutError(f"{self._too_slow(done)} ({_summary(leaf)})")
        client = done.client
        who = self._describe(None) if client is None else self._named(client)
        step = "during the handshake" if client is None else "while listing its tools"
        if isinstance(self._target, _Stdio) and isinstance(leaf, OSError):
            return MCPConnectionError(
                f"could not start {who}: {_summary(leaf)} (command {self._target.command!r})"
            )
        if isinstance(leaf, httpx2.HTTPError):
            proxy = self._target.proxy
            through = f" (through the proxy {proxy})" if proxy is not None else ""
            return MCPConnectionError(f"could not reach {who}{through}: {_summary(leaf)}")
        if isinstance(leaf, MCPError) and leaf.code == mcp_types.CONNECTION_CLOSED:
            # (a process's stderr goes where the user's does; an HTTP server has none here)
            why = "; its stderr may say why" if isinstance(self._target, _Stdio) else ""
            return MCPConnectionError(
                f"{who} closed the connection {step} ({self._target.lost}{why})"
            )
        if isinstance(leaf, MCPError) and _is_unanswered(leaf):
            return MCPConnectionError(
                f"{who} answered {'the handshake' if client is None else 'tools/list'} with "
                f"{_what_ended(leaf)}"
            )
        if isinstance(leaf, MCPError) and _is_unparsed(leaf):
            what = leaf.message.removeprefix(_NOT_JSON_RPC)
            if client is None:  # (a web server's page, another API: not an MCP endpoint)
                return MCPConnectionError(
                    f"{who} answered the handshake with {what}: not an MCP server's answer "
                    "(a wrong URL or path?)"
                )
            return MCPConnectionError(
                f"{who} answered tools/list with {what}: not an MCP server's answer"
            )
        if isinstance(leaf, MCPError):
            refused = "refused the handshake:" if client is None else "answered tools/list with"
            return MCPConnectionError(f"{who} {refused} JSON-RPC error {leaf.code}: {leaf.message}")
        return MCPConnectionError(f"could not connect to {who}: {_summary(leaf)}")

    # -- tools and their changes ---------------------------------------------------------------

    async def _list(self, client: Client) -> list[mcp_types.Tool]:
        """Every page of ``tools/list``; none for a server without tools (one that does not
        announce the ``tools`` capability and answers "method not found": a server of
        prompts or resources only)."""
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            try:
                page = await client.list_tools(cursor=cursor)
            except MCPError as exc:
                if (
                    exc.code == mcp_types.METHOD_NOT_FOUND
                    and cursor is None
                    and client.server_capabilities.tools is None
                ):
                    return tools
                raise
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
            if cursor in seen:
                raise MCPConnectionError(
                    f"{self._named(client)} sent the tools/list cursor {cursor!r} twice"
                )
            seen.add(cursor)

    def _build(
        self, listed: list[mcp_types.Tool], *, strict: bool, who: str
    ) -> tuple[MCPTool, ...]:
        """The tools to offer. ``strict`` (on entering): option names must exist; ``who``:
        the server, as errors name it (:meth:`_describe`)."""
        on_server = {tool.name for tool in listed}
        for option, names in (
            ("allowed_tools", self.allowed_tools),
            ("require_approval", self.require_approval),
        ):
            if not strict or not isinstance(names, frozenset):
                continue
            unknown = sorted(names - on_server)
            if unknown:
                have = ", ".join(sorted(on_server)) or "none"
                raise ConfigurationError(
                    f"{option} names {', '.join(map(repr, unknown))}, which {who} does not "
                    f"have (it has: {have})"
                )
        if self.allowed_tools is not None:
            listed = [tool for tool in listed if tool.name in self.allowed_tools]
        reverse = model_names((tool.name for tool in listed), self.prefix)
        return tuple(self._tool(tool, name) for name, tool in zip(reverse, listed, strict=True))

    def _tool(self, tool: mcp_types.Tool, name: str) -> MCPTool:
        description = tool.description or tool.title or ""
        parameters: Mapping[str, Any] = dict(tool.input_schema)
        try:
            compile_validator(parameters)  # what the loop does with it; cached
        except ToolDefinitionError as exc:
            parameters = _PERMISSIVE
            note = f"(Its input schema could not be used here: {exc}. The server checks them.)"
            description = f"{description}\n{note}" if description else note
        required = self.require_approval
        return MCPTool(
            name=name,
            description=description,
            parameters=parameters,
            requires_approval=required if isinstance(required, bool) else tool.name in required,
            remote_name=tool.name,
            server=self,
            definition=tool,
        )

    @staticmethod
    def _announces_changes(client: Client) -> bool:
        """A 2026-07-28 server sends list changes only on a ``subscriptions/listen`` stream."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        tools = client.server_capabilities.tools
        return tools is not None and bool(tools.list_changed)

    @trio.lowlevel.enable_ki_protection
    async def _listen(
        self,
        client: Client,
        epoch: int | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hold a ``subscriptions/listen`` stream open for tool list changes (2026-07-28).

        A stream that ends (the SDK: "re-listen and refetch"; the server restarted, a proxy cut
        it, or it never opened) is opened again after a wait that doubles from
        :data:`_RELISTEN_FIRST` up to :data:`_RELISTEN_MAX` (back to the first after a stream
        that lasted that long), and the tools are listed again once it is open: changes in
        between went unseen. Before listening again it waits (as long again) until the
        server takes connections: a request the SDK's HTTP transport cannot connect ends the
        whole session, and a server restarting on its port takes a moment (the 2026-07-28
        protocol has no session to lose, so one back before any call goes on as before).
        While its port takes no connections the server is not :attr:`available` (until it
        listens again, or a call is answered); a request is what finds a server gone for good,
        and connects again (see :meth:`_call`). It stops when the connection is lost (a new
        one listens again: see :meth:`_reconnect`), and the block's end cancels it.
        ``task_status`` is told once the first attempt is done.
        """
        delay = _RELISTEN_FIRST
        first = True
        while True:
            opened: float | None = None
            listens = first or await self._target.reachable()  # (not while it is down)
            if listens:
                try:
                    async with client.listen(tools_list_changed=True) as subscription:
                        opened = trio.current_time()
                        self._back(epoch)
                        if first:
                            task_status.started()
                        else:
                            self._tools_changed()  # what changed while no stream was open
                            _log.info("%s: listening for tool list changes again", self._who)
                        # Held open only: the SDK tees each change to the message handler
                        # too (_on_message), which refreshes the tools, once per change.
                        async for _ in subscription:
                            pass
                    why = "the server closed it"
                except Exception as exc:  # no stream, the connection gone, or SubscriptionLost
                    why = _summary(exc)
                if first and opened is None:
                    task_status.started()  # the first attempt is done, without a stream
            if self._is_lost(epoch):
                return  # calls say it is gone; nothing to follow
            if not listens:
                if epoch is None or epoch == self._epoch:
                    self._unreachable = self._epoch
                _log.debug("%s: no connection yet; trying in %g s", self._who, delay)
            else:
                if opened is not None and trio.current_time() - opened >= _RELISTEN_MAX:
                    delay = _RELISTEN_FIRST
                level = logging.WARNING if first or opened is not None else logging.DEBUG
                _log.log(
                    level,
                    "%s: no tool list changes for now (%s); listening again in %g s",
                    self._who,
                    why,
                    delay,
                )
            first = False
            await trio.sleep(delay)
            delay = min(2 * delay, _RELISTEN_MAX)

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler, run in the SDK's tasks: notices tool list changes."""
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools_changed()

    def _tools_changed(self) -> None:
        channel = self._changed
        if channel is None:
            return
        with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
            channel.send_nowait(None)  # a refresh is already due when it is full

    @trio.lowlevel.enable_ki_protection
    async def _follow_changes(
        self, client: Client, changes: trio.MemoryReceiveChannel[None]
    ) -> None:
        async for _ in changes:
            try:
                listed = await self._list(client)
                self._tools = self._build(listed, strict=False, who=self._named(client))
            except Exception as exc:  # the previous list stays
                _log.warning("%s: keeping its previous tools: %s", self._who, _summary(exc))

    # -- one call ------------------------------------------------------------------------------

    def _error(self, tool: MCPTool, message: str, code: int | None = None) -> MCPToolError:
        return MCPToolError(message, server=self.label, tool=tool.remote_name, code=code)

    def _failure(self, tool: MCPTool, exc: MCPError, epoch: int) -> MCPToolError:
        """The error result of a call over connection ``epoch`` that got ``exc``."""
        current = epoch == self._epoch
        if exc.code == mcp_types.CONNECTION_CLOSED:
            # The connection is gone: a stdio server's output ended (already recorded), or an
            # HTTP request found the server gone, which nothing else may notice for a while
            # (the server's answers come on each request's own response). Later calls connect
            # again (HTTP) or are answered "not available" at once (stdio). This call may
            # have reached the server or not (the SDK tells the two apart no more than this),
            # so it is not sent again: its work may have been half done.
            reason = (self._lost if current else None) or self._target.lost
            self._lose(reason, epoch)
            return self._error(
                tool,
                f"the connection to {self._who} ended while the call was running: {reason}",
                exc.code,
            )
        if exc.code == mcp_types.PARSE_ERROR and exc.message.startswith(_UNREADABLE):
            return self._error(
                tool,
                f"{self._who} sent an answer for {tool.remote_name!r} that "
                f"could not be read: {exc.message.removeprefix(_UNREADABLE)}",
                exc.code,
            )
        if _is_unanswered(exc):
            return self._error(
                tool,
                f"{self._who} answered the call of {tool.remote_name!r} with {_what_ended(exc)}",
                exc.code,
            )
        if _is_unparsed(exc):
            return self._error(
                tool,
                f"{self._who} answered the call of {tool.remote_name!r} with "
                f"{exc.message.removeprefix(_NOT_JSON_RPC)}: not an MCP server's answer",
                exc.code,
            )
        if epoch in self._ended:  # the server refused the call: not run
            return self._error(tool, f"{self._who} is not available: {_SESSION_ENDED}", exc.code)
        return self._error(
            tool,
            f"{self._who} answered with JSON-RPC error {exc.code}: {exc.message}",
            exc.code,
        )

    async def _call(self, tool: MCPTool, arguments: dict[str, Any]) -> str:
        timeout = self.timeout
        # Lone surrogates (half an emoji from the model) as U+FFFD, as on every wire of ours:
        # the SDK's transports cannot encode them, and that would end the whole connection.
        sendable = wire_json(arguments)
        sent = refused = False
        with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
            while True:
                sent = False
                client, epoch = await self._connection(tool)
                sent = True
                self._in_flight[epoch] += 1
                try:
                    result = await client.call_tool(tool.remote_name, sendable)
                    self._back(epoch)  # it answered
                except MCPError as exc:
                    if (
                        not refused
                        and exc.code == mcp_types.INVALID_REQUEST
                        and epoch in self._ended
                    ):
                        # HTTP 404 to the session's id: the server refused the call (it does
                        # not know the session), so it was not run; the MCP spec says to start
                        # a new session, and the call goes there, once.
                        refused = True
                        continue
                    raise self._failure(tool, exc, epoch) from exc
                except Exception as exc:  # a result the SDK could not parse or validate, ...
                    raise self._error(
                        tool,
                        f"{self._who} sent a result for {tool.remote_name!r} that "
                        f"could not be used: {_summary(exc)}",
                    ) from exc
                finally:
                    self._in_flight[epoch] -= 1
                    if not self._in_flight[epoch]:
                        del self._in_flight[epoch]
                        self._call_ended.set()
                        self._call_ended = trio.Event()
                break
        if scope.cancelled_caught:
            assert timeout is not None
            if not sent:
                raise MCPTimeoutError(
                    f"MCP tool {tool.remote_name!r} of {self._who} timed out after "
                    f"{timeout:g} s while connecting again to the server ({self._lost}); the "
                    "call was not sent",
                    server=self.label,
                    tool=tool.remote_name,
                )
            raise MCPTimeoutError(
                f"MCP tool {tool.remote_name!r} of {self._who} timed out after "
                f"{timeout:g} s; the call was cancelled on the server",
                server=self.label,
                tool=tool.remote_name,
            )
        converted = convert(result)
        if converted.is_error:
            raise self._error(
                tool, converted.text or f"MCP tool {tool.remote_name!r} failed (no message)"
            )
        return converted.text
