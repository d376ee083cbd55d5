"""What the HTTP chat clients share of their settings and their connections.

The validators and converters of the settings every HTTP client has (the model name, the API
root and key from the environment, headers, ``model_options`` that may not set what the client
owns, an ``http_client`` of the caller's) and :class:`Pooled`, the connection pool that
``async with client:`` opens for the runs inside it. Each client is an attrs class that uses
these; its own settings stay in its module.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from contextlib import AsyncExitStack
from types import MappingProxyType, TracebackType
from typing import Any, Self

import attrs

from .._exceptions import ConfigurationError
from ._http import Describe, EventDecoder, RetryPolicy, SSEStream, encode_json, send
from ._provider_name import gen_ai_provider

try:
    import httpx2
except ImportError as exc:  # pragma: no cover - the extras sessions import this without httpx2
    raise ImportError(
        "trio_invoke's HTTP clients need httpx2, which is not installed: "
        'pip install "trio-invoke[openai] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[openai]")'
    ) from exc

__all__ = [
    "Pooled",
    "api_key_from",
    "base_url_from",
    "check_http_client",
    "check_model",
    "checked_headers",
    "checked_options",
    "endpoint",
    "merged_headers",
    "reconfigurable",
    "reconfigured",
    "shown_url",
]


def check_model(_: object, __: attrs.Attribute[Any], value: object) -> None:
    """A validator: the model name is a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"model must be a non-empty string, got {value!r}")


def base_url_from(
    value: str | None, *, env: str, default: str, example: str, path: str, not_ending: str
) -> str:
    """The API root: ``value``, else the ``env`` variable, else ``default``; an http(s) URL
    without a trailing slash (``example`` shows one in the error), whose path ends neither with
    the ``path`` the client adds (a URL given whole) nor with ``not_ending``, part of it (nearly
    whole)."""
    base = value if value is not None else os.environ.get(env, "")
    if not isinstance(base, str):
        raise ConfigurationError(f"base_url must be a string, got {base!r}")
    base = (base or default).rstrip("/")
    try:
        parsed = httpx2.URL(base)
    except httpx2.InvalidURL as exc:
        raise ConfigurationError(
            f"base_url {shown_url(base)!r} is not a valid URL: {exc}"
        ) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(
            f"base_url must be an http(s) URL such as {example}, got {shown_url(base)!r}"
        )
    for ending in (path, not_ending):  # the URL given whole, or nearly
        if parsed.path.rstrip("/").endswith(ending):
            raise ConfigurationError(
                f"base_url is the API root, without {ending} (requests go to "
                f"{{base_url}}{path}), got {shown_url(base)!r}"
            )
    return base


def endpoint(base_url: str, path: str) -> str:
    """``base_url`` with ``path`` appended to its path; a query string stays at the end (Azure
    OpenAI's ``?api-version=...``), and a fragment, which is never sent, is dropped."""
    if "?" not in base_url and "#" not in base_url:
        return base_url + path
    url = httpx2.URL(base_url)
    return str(url.copy_with(path=url.path.rstrip("/") + path, fragment=None))


_SECRET_PARAMETER = re.compile(
    r"([?&][^=&#]*(?:key|token|secret|sig|auth|pass|credential)[^=&#]*=)[^&#]*", re.IGNORECASE
)
"""A query parameter that carries a secret (``?key=...``, ``&access_token=...``): its value."""


def shown_url(url: str) -> str:
    """``url`` as errors and reprs show it: user and password (``http://user:key@host``, a
    proxy's credentials) and the values of query parameters named like a secret (``key``,
    ``token``, ``sig``, ...) replaced by ``***``."""
    if "?" in url:
        url = _SECRET_PARAMETER.sub(r"\1***", url)
    if "@" not in url:
        return url
    scheme, slashes, rest = url.partition("//")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    authority = rest[:end]
    if "@" not in authority:
        return url
    return f"{scheme}{slashes}***@{authority.rpartition('@')[2]}{rest[end:]}"


def api_key_from(value: str | None, *, env: str) -> str | None:
    """The API key: ``value``, else the ``env`` variable; ``None`` when there is none.

    A key goes in a header, so it may hold visible ASCII only: a newline left by a file read
    or a non-ASCII character would fail every request, with the key in httpx2's message.
    """
    key = value if value is not None else os.environ.get(env)
    if key is not None and not isinstance(key, str):
        raise ConfigurationError("api_key must be a string")  # never show a key
    if key:
        bad = next((i for i, char in enumerate(key) if not "!" <= char <= "~"), None)
        if bad is not None:
            where = "api_key" if value is not None else f"the {env} environment variable"
            raise ConfigurationError(  # never show a key, nor the character (part of it)
                f"{where} holds a character that cannot go in an HTTP header (whitespace, a "
                f"control character or non-ASCII) at position {bad} of {len(key)}"
            )
    return key or None


def checked_options(
    options: Mapping[str, Any] | None, *, reserved: Collection[str], owned: str
) -> Mapping[str, Any]:
    """``model_options`` as a read-only mapping; setting a ``reserved`` field is an error whose
    message ends with ``owned`` (where those fields come from instead)."""
    options = options or {}
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"model_options must be a mapping, got {options!r}")
    clash = sorted(set(reserved).intersection(options))
    if clash:
        raise ConfigurationError(
            f"model_options may not set {', '.join(clash)}: the client sets "
            f"{'it' if len(clash) == 1 else 'them'} ({owned})"
        )
    return MappingProxyType(dict(options))


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name (RFC 9110, 5.1)."""
_FIELD_VALUE = re.compile(r"([!-~]([\t !-~]*[!-~])?)?")
"""A header value httpx2 can send: visible ASCII, inner spaces and tabs (RFC 9110, 5.5)."""


def checked_headers(value: Mapping[str, str] | None) -> Mapping[str, str]:
    """Extra headers as a read-only mapping of strings that can go in a request; a bad value
    is named by its header only (it may be a secret)."""
    headers = dict(value or {})
    for name, text in headers.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise ConfigurationError(f"headers must map strings to strings, got {name!r}")
        if not _TOKEN.fullmatch(name):
            raise ConfigurationError(f"headers: {name!r} is not a valid header name")
        if not _FIELD_VALUE.fullmatch(text):
            raise ConfigurationError(
                f"headers: the value of {name!r} cannot go in an HTTP header: it holds a "
                "newline, a control character or non-ASCII, or starts or ends with whitespace"
            )
    return MappingProxyType(headers)


def merged_headers(*layers: Mapping[str, str]) -> dict[str, str]:
    """The headers of ``layers``, a later layer's header replacing an earlier one of the same
    name in any case (``authorization`` replaces ``Authorization``: one of each goes out)."""
    merged: dict[str, tuple[str, str]] = {}
    for layer in layers:
        for name, value in layer.items():
            merged[name.lower()] = (name, value)
    return dict(merged.values())


def check_http_client(_: object, __: attrs.Attribute[Any], value: object) -> None:
    """A validator: ``http_client`` is ``None`` or an ``httpx2.AsyncClient``."""
    if value is not None and not isinstance(value, httpx2.AsyncClient):
        raise ConfigurationError(
            f"http_client must be an httpx2.AsyncClient, got {type(value).__module__}."
            f"{type(value).__name__}"
        )


def reconfigured(client: Any, attribute: attrs.Attribute[Any], value: Any) -> Any:
    """The ``on_setattr`` hook of the HTTP clients: a setting assigned after construction
    (``client.max_retries = 5``, ``client.base_url = ...``) takes effect as if the client had
    been built with it. The client is built again with the new value, so the value is checked
    as the constructor checks it, with the other settings (a ``ConfigurationError`` changes
    nothing), and what the client derives from its settings -- the URL, the retry policy, the
    headers -- is derived again. Those derived attributes are not settings: assigning one is an
    ``AttributeError``. (The constructor's own ``__attrs_post_init__`` sets them with
    ``object.__setattr__``, past this hook.)
    """
    if attribute.name == "_pool":  # the connection pool of ``async with``: the client's own
        return value
    name = type(client).__name__
    if not attribute.init:
        raise AttributeError(
            f"{name}.{attribute.name} is derived from the client's settings: set those "
            f"instead, or build a new {name}"
        )
    rebuilt = attrs.evolve(client, **{attribute.alias or attribute.name: value})
    for field in attrs.fields(type(client)):
        derived = not field.init and field.default is attrs.NOTHING  # (set by the post-init)
        if (field.init or derived) and field.name != attribute.name:
            object.__setattr__(client, field.name, getattr(rebuilt, field.name))
    return getattr(rebuilt, attribute.name)


def reconfigurable(_: type, fields: list[attrs.Attribute[Any]]) -> list[attrs.Attribute[Any]]:
    """The ``field_transformer`` of the HTTP clients: each field's ``on_setattr`` is
    :func:`reconfigured`, so that a subclass made with ``attrs.define`` (whose own hooks would
    replace a class-wide one) keeps it for the fields it inherits. A subclass's own state with
    a default (``attrs.field(init=False, default=0)``) is left as it is."""
    return [field.evolve(on_setattr=reconfigured) for field in fields]


def _rebuilt(cls: Callable[..., Any], settings: Mapping[str, Any]) -> Any:
    """A client of ``cls`` built with ``settings`` (a copy's, an unpickled client's)."""
    return cls(**settings)


class Pooled:
    """The connections of an HTTP chat client: the caller's ``http_client``, the pool that
    ``async with client:`` opened, or, for a run outside both, a client of the run's own.

    A mixin of the attrs client classes, which define the attributes below.
    """

    base_url: str
    max_retries: int
    retry_backoff: float
    max_retry_delay: float
    url: str
    provider_name: str
    timeout: httpx2.Timeout
    on_retry: Callable[[Exception, int, float], object] | None
    _headers: dict[str, str]
    _retry: RetryPolicy
    _http_client: httpx2.AsyncClient | None
    _pool: httpx2.AsyncClient | None

    def _derive(self, path: str, api: str) -> None:
        """Set what the client derives from its settings, as both clients do: the retry
        policy, the delays as floats, ``url`` (``base_url`` + ``path``) and ``provider_name``
        (``api`` for a host it does not know). Past the ``reconfigured`` hook: that is for
        later changes."""
        derive = object.__setattr__
        retry = RetryPolicy(self.max_retries, self.retry_backoff, self.max_retry_delay)
        derive(self, "_retry", retry)
        derive(self, "retry_backoff", float(self.retry_backoff))
        derive(self, "max_retry_delay", float(self.max_retry_delay))
        derive(self, "url", endpoint(self.base_url, path))
        derive(self, "provider_name", gen_ai_provider(self.base_url, api))

    # -- copies: the same settings, connections of their own ------------------------------------
    #
    # A client owns its pool (``async with``): a copy that shared it would lose it when the
    # original closes it, and httpx2's pool cannot be copied or pickled at all (an obscure
    # TypeError from its SSL context). So a copy is a new client built with the same settings,
    # its pool not open, as ``attrs.evolve(client)`` builds one; an ``http_client`` of the
    # caller's is the caller's to open and close: a copy shares it, and pickling refuses it.

    def _settings(self) -> dict[str, Any]:
        """The constructor's arguments that build this client again, by their names (a
        read-only mapping as a dict: the constructor makes it read-only again)."""
        cls: type[Any] = type(self)  # (an attrs class: the clients and their subclasses)
        settings = {}
        for field in attrs.fields(cls):
            if field.init:
                value = getattr(self, field.name)
                plain = isinstance(value, MappingProxyType)
                settings[field.alias] = dict(value) if plain else value
        return settings

    def __copy__(self) -> Self:
        """A new client with the same settings; its connection pool is its own, not open
        (see :meth:`__aenter__`). An ``http_client`` of yours is shared."""
        copied: Self = _rebuilt(type(self), self._settings())
        return copied

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        """As :meth:`__copy__`, with the settings (``model_options``, ``on_retry``, ...)
        deep-copied; an ``http_client`` of yours is shared, not copied: it holds connections
        that you open and close."""
        import copy  # noqa: PLC0415 -- copying clients is rare

        settings = self._settings()
        http_client = settings.pop("http_client", None)
        settings = copy.deepcopy(settings, memo)
        copied: Self = _rebuilt(type(self), {**settings, "http_client": http_client})
        return copied

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its settings (the API key included), unpickled as a new client built
        with them, its pool not open. One with an ``http_client`` of yours is a ``TypeError``:
        that client's connections cannot go to another process."""
        name = type(self).__name__
        if self._http_client is not None:
            raise TypeError(
                f"cannot pickle this {name}: its http_client is yours, and its connections "
                "cannot go to another process; pickle a client without an http_client, or "
                "build one there"
            )
        return (_rebuilt, (type(self), self._settings()))

    async def __aenter__(self) -> Self:
        """Open a connection pool that the runs inside the block share.

        Cancellation: nothing is opened until this returns.
        """
        if self._pool is not None:
            name = type(self).__name__
            raise RuntimeError(f"this {name} is already open; enter it once at a time")
        if self._http_client is None:
            self._pool = httpx2.AsyncClient(timeout=self.timeout)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the connection pool (see :meth:`aclose`).

        Cancellation: the connections are closed all the same.
        """
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool opened by ``async with`` (a client passed as ``http_client`` stays
        open). Cancellation: the connections are closed anyway (httpx2 shields the close)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()

    async def _post(
        self,
        http: httpx2.AsyncClient,
        body: Mapping[str, Any],
        decoder: EventDecoder,
        describe: Describe,
    ) -> tuple[httpx2.Response, SSEStream]:
        """POST ``body`` as JSON to :attr:`url` (with the retries of ``_retry``) and return the
        response and the stream of updates ``decoder`` makes of its body; the caller closes both.

        Cancellation: a cancelled send or retry wait sends nothing more; no response is open.
        """
        content = encode_json(body)

        def build() -> httpx2.Request:
            request = http.build_request(
                "POST", self.url, content=content, headers=self._headers, timeout=self.timeout
            )
            request.headers["Content-Type"] = "application/json"
            return request

        url = shown_url(self.url)
        response = await send(
            http,
            build,
            url=url,
            timeouts=self.timeout,
            retry=self._retry,
            describe=describe,
            on_retry=self.on_retry,
        )
        return response, SSEStream(response, decoder, url=url, timeout=self.timeout)

    async def _http(self, stack: AsyncExitStack) -> httpx2.AsyncClient:
        """The client a run sends with; one of the run's own is closed with ``stack``."""
        http = self._http_client if self._http_client is not None else self._pool
        if http is None:
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=self.timeout))
        return http
