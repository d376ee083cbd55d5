"""``Telemetry``: the loop's observer that speaks OpenTelemetry."""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs

from .._checks import check_flag
from .._content import ContentPart, ImagePart, TextPart
from .._exceptions import ConfigurationError
from .._facts import RESPONSE_FACTS, ResponseFacts
from .._messages import ChatMessage, FinishReason, MessageRole, ToolCall, Usage
from .._options import RunOptions
from .._text import wire_text
from .._tools import Tool
from .._updates import Finish, ToolCalled
from . import _attributes as names

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
except ImportError as exc:  # pragma: no cover - the test hides opentelemetry and re-imports
    raise ImportError(
        "trio_invoke.otel needs opentelemetry-api, which is not installed: "
        'pip install "trio-invoke[otel] @ git+https://github.com/trio-invoke/trio_invoke" '
        '(from a checkout: pip install ".[otel]")'
    ) from exc

__all__ = ["Telemetry"]

_log = logging.getLogger("trio_invoke.otel")
_SCOPE = "trio_invoke"
# The GenAI semantic conventions' advised bucket boundaries (gen-ai-metrics), in full.
# fmt: off
_TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
# fmt: on


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 -- once

    try:
        return version("trio-invoke")
    except PackageNotFoundError:  # pragma: no cover - a checkout that was never installed
        return "0"


def _json(value: Any) -> str:
    """``value`` as compact JSON, valid Unicode (an exporter encodes it as UTF-8)."""
    return wire_text(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr))


def _part(part: ContentPart) -> dict[str, Any]:
    """A content part as the conventions' message part: text, an image's URI or its data."""
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ImagePart):
        if part.url is not None:
            return {"type": "uri", "modality": "image", "uri": part.url}
        return {
            "type": "blob",
            "modality": "image",
            "mime_type": part.media_type,
            "content": part.data,
        }
    return part.to_dict()  # a RawPart: a generic part of its own type


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # as the model sent it, if it is not JSON
        return text


def _message(message: ChatMessage, finish_reason: str | None = None) -> dict[str, Any]:
    """A message as the GenAI conventions' JSON schemas describe one (``role`` and ``parts``;
    an output message's ``finish_reason``), not in the OpenAI format of ``to_dict()``."""
    parts: list[dict[str, Any]] = []
    if message.reasoning:
        parts.append({"type": "reasoning", "content": message.reasoning})
    if message.role is MessageRole.TOOL:
        response = {"type": "tool_call_response", "id": message.tool_call_id}
        parts.append({**response, "response": message.text})
    else:
        parts.extend(_part(part) for part in message.parts)
    for call in message.tool_calls or ():
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(call.arguments),
            }
        )
    found: dict[str, Any] = {"role": message.role.value, "parts": parts}
    if message.name and message.role is not MessageRole.TOOL:  # (a tool message's: the tool's)
        found["name"] = message.name
    if finish_reason is not None:
        found["finish_reason"] = finish_reason
    return found


def _text_attribute(client: object, name: str) -> str | None:
    """The client's attribute ``name`` if it is a non-empty ``str`` (as valid Unicode); ``None``
    if it has none, or reading it raised (a property, a ``__getattr__`` raising ``KeyError``:
    telemetry only watches, and the client works without it)."""
    try:
        value = getattr(client, name, None)
    except Exception:
        return None
    return wire_text(value) if isinstance(value, str) and value else None


@functools.lru_cache(maxsize=64)
def _server(base_url: str) -> tuple[str, int] | None:
    """``server.address`` and ``server.port`` of a base URL (the port its scheme implies if it
    names none); ``None`` if it is not an http(s) URL with a host."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in ("http", "https") or not host:
        return None
    return wire_text(host), port or (443 if scheme == "https" else 80)


def _error_name(error: BaseException) -> str:
    import trio  # noqa: PLC0415 -- trio is loaded already; kept local to the rare path

    return "cancelled" if isinstance(error, trio.Cancelled) else type(error).__name__


def _fail(span: trace.Span, error_type: str) -> None:
    span.set_attribute(names.ERROR_TYPE, error_type)
    span.set_status(trace.Status(trace.StatusCode.ERROR, error_type))


def _failed(what: str) -> None:
    """Log what went wrong in the SDK (a processor, an exporter, a meter): telemetry only
    watches, so the run goes on as it would without it."""
    _log.exception("trio_invoke.otel: %s failed; the run goes on without it", what)


def _start(
    tracer: trace.Tracer,
    name: str,
    context: otel_context.Context | None,
    kind: trace.SpanKind,
    attributes: Mapping[str, Any] | None = None,
) -> trace.Span:
    """``tracer.start_span(...)``, or the invalid span if the SDK raised (logged)."""
    try:
        return tracer.start_span(name, context=context, kind=kind, attributes=attributes)
    except Exception:
        _failed(f"starting the span {name!r}")
        return trace.INVALID_SPAN


def _end(span: trace.Span) -> None:
    """``span.end()``; what the SDK raises there (a span processor's ``on_end``) is logged."""
    try:
        span.end()
    except Exception:
        _failed("ending a span")


def _set_usage(span: trace.Span, usage: Usage | None) -> None:
    if usage is not None:
        span.set_attribute(names.USAGE_INPUT_TOKENS, usage.input_tokens)
        span.set_attribute(names.USAGE_OUTPUT_TOKENS, usage.output_tokens)
        if usage.cache_read_input_tokens:  # (part of input_tokens, as the conventions count)
            span.set_attribute(names.USAGE_CACHE_READ_TOKENS, usage.cache_read_input_tokens)
        if usage.cache_creation_input_tokens:
            span.set_attribute(names.USAGE_CACHE_CREATION_TOKENS, usage.cache_creation_input_tokens)


def _a_bool(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_flag(attribute.name, value)


def _text_or_none(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{attribute.name} must be a str or None, got {value!r:.80}")


@attrs.define(kw_only=True)
class Telemetry:
    """OpenTelemetry spans and metrics for every run of the loop, after the GenAI semantic
    conventions. Pass it as ``FunctionInvokingChatClient(..., telemetry=Telemetry())``.

    Spans (all children of the run's span, in whichever task they ran):

    * ``invoke_agent`` (or ``invoke_agent {agent_name}``), kind ``INTERNAL``, one per run:
      ``gen_ai.operation.name``, ``gen_ai.agent.name``, the summed ``gen_ai.usage.input_tokens``
      / ``gen_ai.usage.output_tokens`` (and ``gen_ai.usage.cache_read.input_tokens`` /
      ``gen_ai.usage.cache_creation.input_tokens`` where the prompt cache served or stored
      some: parts of ``input_tokens``), ``gen_ai.response.finish_reasons`` (the final reason);
      ``error.type`` and an error status when the run failed or was cancelled;
      ``gen_ai.provider.name`` and ``gen_ai.request.model`` of its inner client, read as the
      chat spans read them, set as the span starts: also on a run that makes no model call (an
      approval resume whose calls end the run, a run cancelled or capped before its first).
    * ``chat {model}`` (or ``chat``), kind ``CLIENT``, one per model call:
      ``gen_ai.request.model`` (the inner client's ``model`` attribute),
      ``gen_ai.provider.name`` (its ``provider_name`` attribute: the built-in clients tell it
      from their ``base_url``'s host -- ``"openai"``, ``"azure.ai.openai"``, ``"groq"``,
      ``"gcp.gemini"``, ``"anthropic"``, ...; a client of your own may declare one, or have
      none), ``server.address`` / ``server.port`` (from its ``base_url`` attribute, if it is an
      http(s) URL), all set as the span starts; ``gen_ai.usage.*``,
      ``gen_ai.response.finish_reasons``, and ``gen_ai.response.model`` /
      ``gen_ai.response.id`` when the response names them (the built-in clients read them
      from the stream; a client of your own does not report them).
    * ``execute_tool {name}``, kind ``INTERNAL``, one per tool call that runs (not for rejected,
      unknown, invalid or budgeted-out calls, nor in a run whose span is not recorded -- no SDK,
      or not sampled): ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
      ``gen_ai.tool.description``, ``gen_ai.tool.type`` (``"function"``); ``error.type`` (the
      exception's class name, ``"timeout"`` or ``"cancelled"``) and an error status when its
      result is an error, or it was cancelled or interrupted (``"KeyboardInterrupt"``, ...).
      The name, ``gen_ai.tool.name`` and description are the tool's that ran: a middleware's
      replacement (``context.evolve(tool=other)``) renames the span once ``other`` runs (its
      arguments passed its schema); ``gen_ai.tool.call.id`` stays the model's call's.

    A call's span is the current span while the call (its middleware and its tool) runs, in
    its task and in a sync tool's thread: spans that the tool's code starts (an HTTP client's,
    a database driver's, the MCP SDK's ``MCP send tools/call``) are its children, and the trace
    context it propagates (the MCP SDK's ``_meta.traceparent``) is the call's. In a run that
    is not sampled, calls run in the run's context (no span of their own): what they trace is
    not sampled either, under a parent-based sampler.

    Telemetry only watches: what the SDK raises (a span processor, an exporter, a meter) is
    logged on the ``trio_invoke.otel`` logger, and the run goes on as it would without it.

    Metrics: ``gen_ai.client.token.usage`` (histogram of tokens per model call, by
    ``gen_ai.token.type`` ``input`` / ``output``) and ``gen_ai.client.operation.duration``
    (histogram of seconds per model call, with ``error.type`` when it failed), with the chat
    span's operation, provider, model, server and response model attributes.

    Args:
        tracer_provider: Where spans go; default: the global one (set it once per process).
        meter_provider: Where metrics go; default: the global one.
        capture_content: Also record what was said: the chat spans' ``gen_ai.input.messages`` /
            ``gen_ai.output.messages`` and the tool spans' ``gen_ai.tool.call.arguments`` (those
            the tool ran with, as a middleware passed them on) / ``gen_ai.tool.call.result``
            (JSON; messages as the conventions' schemas have them:
            ``role``, ``parts``, an output's ``finish_reason``). Off by default: no arguments,
            results or message text in any attribute.
        agent_name: Names the agent in the run span's name and ``gen_ai.agent.name``.

    Raises:
        ConfigurationError: ``capture_content`` is not a bool (``"false"`` from a config file
            would turn it on), or ``agent_name`` is neither a str nor ``None``; also when one
            is assigned later.
    """

    tracer_provider: trace.TracerProvider | None = None
    meter_provider: metrics.MeterProvider | None = None
    capture_content: bool = attrs.field(default=False, validator=_a_bool)
    agent_name: str | None = attrs.field(default=None, validator=_text_or_none)
    _tracer: trace.Tracer = attrs.field(init=False)
    _token_usage: metrics.Histogram = attrs.field(init=False)
    _duration: metrics.Histogram = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        version = _version()
        self._tracer = trace.get_tracer(_SCOPE, version, tracer_provider=self.tracer_provider)
        meter = metrics.get_meter(_SCOPE, version, meter_provider=self.meter_provider)
        self._token_usage = meter.create_histogram(
            names.TOKEN_USAGE_METRIC,
            unit="{token}",
            description="Tokens used per model call",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            names.OPERATION_DURATION_METRIC,
            unit="s",
            description="Seconds per model call",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    def run(self, messages: Sequence[ChatMessage]) -> _Run:
        """Start the span of a run whose inner client is not known: its span has the
        provider and the model of its first model call, if it makes one."""
        return self._run(None)

    def run_with(self, messages: Sequence[ChatMessage], client: object) -> _Run:
        """Start the span of a run of the inner chat client ``client`` (the loop calls this;
        see ``_loop._hooks.Observer``): its provider and model are on the span from its start,
        read from ``client`` as each model call's span reads them."""
        return self._run(_Described.of(client))

    def _run(self, described: _Described | None) -> _Run:
        name = f"{names.INVOKE_AGENT} {self.agent_name}" if self.agent_name else names.INVOKE_AGENT
        attributes: dict[str, Any] = {names.OPERATION_NAME: names.INVOKE_AGENT}
        if self.agent_name:
            attributes[names.AGENT_NAME] = self.agent_name
        if described is not None:
            attributes.update(described.run_attributes())
        # (at the span's start, where a sampler sees them, as for a model call's span)
        span = _start(self._tracer, name, None, trace.SpanKind.INTERNAL, attributes)
        if span is trace.INVALID_SPAN:  # the SDK failed: the run's calls are traced as if
            return _Run(self, span, otel_context.get_current())  # it were not there
        return _Run(self, span, trace.set_span_in_context(span), described=described is not None)


@attrs.frozen
class _Described:
    """Who a client's model calls go to, as its attributes say (each ``None`` if it says not)."""

    model: str | None
    provider: str | None
    server: tuple[str, int] | None

    @classmethod
    def of(cls, client: object) -> _Described:
        base_url = _text_attribute(client, "base_url")
        return cls(
            _text_attribute(client, "model"),
            _text_attribute(client, "provider_name"),
            _server(base_url) if base_url is not None else None,
        )

    def run_attributes(self) -> dict[str, Any]:
        """What a run's span says of them: the provider and the model."""
        attributes: dict[str, Any] = {}
        if self.provider:
            attributes[names.PROVIDER_NAME] = self.provider
        if self.model:
            attributes[names.REQUEST_MODEL] = self.model
        return attributes


@attrs.define
class _Run:
    telemetry: Telemetry
    span: trace.Span
    context: otel_context.Context
    described: bool = False
    """The run's span has the provider and the model of its inner client (from its start, or
    from its first model call when the run was started without the client)."""

    @property
    def observes_tools(self) -> bool:
        """Whether the run's tool calls are observed (the loop reads it as the run starts):
        not when no SDK is configured, for then a call's span would record nothing and its
        context would be no one's; the loop runs them with nothing around them instead."""
        return self.span.is_recording() or self.span.get_span_context().is_valid

    def chat(self, client: object, messages: Sequence[ChatMessage], options: RunOptions) -> _Chat:
        described = _Described.of(client)
        model = described.model
        name = f"{names.CHAT} {model}" if model else names.CHAT
        attributes: dict[str, Any] = {names.OPERATION_NAME: names.CHAT}
        attributes.update(described.run_attributes())
        if described.server is not None:
            attributes[names.SERVER_ADDRESS], attributes[names.SERVER_PORT] = described.server
        # (at the span's start, where a sampler sees them, as the conventions ask)
        span = _start(self.telemetry._tracer, name, self.context, trace.SpanKind.CLIENT, attributes)
        if not self.described:  # the run's span: who its model calls go to, as the first says
            self.described = True
            try:
                run_attributes = described.run_attributes()
                if run_attributes and self.span.is_recording():
                    self.span.set_attributes(run_attributes)
            except Exception:
                _failed("setting the attributes of the run's span")
        try:
            if self.telemetry.capture_content and span.is_recording():
                messages_json = _json([_message(m) for m in messages])
                span.set_attribute(names.INPUT_MESSAGES, messages_json)
        except Exception:
            _failed(f"setting the attributes of {name!r}")
        context = trace.set_span_in_context(span, self.context)
        return _Chat(self.telemetry, span, attributes, time.perf_counter(), context)

    def tool(self, call: ToolCall, tool: Tool, arguments: Mapping[str, Any]) -> _Tool | _Unsampled:
        if not self.span.is_recording():  # an SDK did not sample the run: nor are its calls
            return _Unsampled(self.context)  # (with no SDK, the loop does not ask: observes_tools)
        name = f"{names.EXECUTE_TOOL} {call.name}"
        span = _start(self.telemetry._tracer, name, self.context, trace.SpanKind.INTERNAL)
        if span is trace.INVALID_SPAN:  # the SDK failed: the call runs in the run's context
            return _Unsampled(self.context)
        try:
            if span.is_recording():
                span.set_attributes(
                    {
                        names.OPERATION_NAME: names.EXECUTE_TOOL,
                        names.TOOL_NAME: call.name,
                        names.TOOL_CALL_ID: wire_text(call.id),
                        names.TOOL_DESCRIPTION: wire_text(tool.description),
                        names.TOOL_TYPE: "function",
                    }
                )
                if self.telemetry.capture_content:
                    span.set_attribute(names.TOOL_CALL_ARGUMENTS, _json(dict(arguments)))
        except Exception:
            _failed(f"setting the attributes of {name!r}")
        context = trace.set_span_in_context(span, self.context)
        return _Tool(self.telemetry, span, context, call.arguments)

    def end(self, reason: FinishReason | None, usage: Usage | None, error: str | None) -> None:
        span = self.span
        try:
            if span.is_recording():
                _set_usage(span, usage)
                if reason is not None:
                    span.set_attribute(names.RESPONSE_FINISH_REASONS, [reason.value])
                if error is not None:
                    _fail(span, error)
        except Exception:
            _failed("setting the attributes of a run's span")
        _end(span)


@attrs.define
class _Chat:
    telemetry: Telemetry
    span: trace.Span
    attributes: dict[str, Any]
    started: float
    context: otel_context.Context
    """The run's context with this call's span current: what the inner client streams in."""
    facts: ResponseFacts = attrs.field(factory=ResponseFacts)
    """What the response says of itself (a built-in client's decoder fills it in)."""

    def running(self) -> _Current:
        return _Current(self.context, self.facts)

    def end(
        self, finish: Finish | None, message: ChatMessage | None, error: BaseException | None
    ) -> None:
        span = self.span
        usage = finish.usage if finish is not None else None
        response_model = self.facts.model
        if response_model is not None:  # (a metric attribute too; the id is not: one per call)
            self.attributes[names.RESPONSE_MODEL] = wire_text(response_model)
        metric_attributes = dict(self.attributes)
        if error is not None:
            metric_attributes[names.ERROR_TYPE] = _error_name(error)
        try:
            self.telemetry._duration.record(time.perf_counter() - self.started, metric_attributes)
            if usage is not None:
                for kind, tokens in (
                    ("input", usage.input_tokens),
                    ("output", usage.output_tokens),
                ):
                    kind_attributes = {**self.attributes, names.TOKEN_TYPE: kind}
                    self.telemetry._token_usage.record(tokens, kind_attributes)
        except Exception:
            _failed("recording a model call's metrics")
        try:
            self._describe(span, finish, message, error)
        except Exception:
            _failed("setting the attributes of a model call's span")
        _end(span)

    def _describe(
        self,
        span: trace.Span,
        finish: Finish | None,
        message: ChatMessage | None,
        error: BaseException | None,
    ) -> None:
        usage = finish.usage if finish is not None else None
        if span.is_recording():
            if names.RESPONSE_MODEL in self.attributes:
                span.set_attribute(names.RESPONSE_MODEL, self.attributes[names.RESPONSE_MODEL])
            if self.facts.id is not None:
                span.set_attribute(names.RESPONSE_ID, wire_text(self.facts.id))
            _set_usage(span, usage)
            if finish is not None:
                span.set_attribute(names.RESPONSE_FINISH_REASONS, [finish.finish_reason.value])
            if self.telemetry.capture_content and message is not None:
                reason = "error" if error is not None else FinishReason.STOP.value
                if finish is not None:  # (a stream without a Finish is the model's stop)
                    reason = finish.finish_reason.value
                span.set_attribute(names.OUTPUT_MESSAGES, _json([_message(message, reason)]))
            if error is not None:
                _fail(span, _error_name(error))


class _Current:
    """Makes ``context`` the current OpenTelemetry context while a call runs (attached and
    detached in the call's task, so the tool's code and its sync tool's thread see it).

    It also sets where a response's id and model go (``_facts.RESPONSE_FACTS``): a model
    call's ``facts``, or nowhere for a tool call -- whose task may have been started while the
    model streamed (eager start), and whose own model calls are not the run's.
    """

    __slots__ = ("_context", "_facts", "_facts_token", "_token")

    def __init__(self, context: otel_context.Context, facts: ResponseFacts | None = None) -> None:
        self._context = context
        self._facts = facts

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._context)
        self._facts_token = RESPONSE_FACTS.set(self._facts)

    def __exit__(self, *exc_info: object) -> None:
        RESPONSE_FACTS.reset(self._facts_token)
        otel_context.detach(self._token)


@attrs.define
class _Unsampled:
    """The observation of a call in a run the SDK did not sample: no span, but the call runs
    in the run's context, so spans started inside it are the run's (unsampled) children, not
    the roots of traces of their own."""

    context: otel_context.Context

    def running(self) -> _Current:
        return _Current(self.context)

    def end(self, called: ToolCalled | None, error_type: str | None) -> None:
        pass


@attrs.define
class _Tool:
    telemetry: Telemetry
    span: trace.Span
    context: otel_context.Context
    """The run's context with this call's span current: what the call runs in."""
    arguments: str
    """The call's arguments as it started, before its middleware."""

    def running(self) -> _Current:
        return _Current(self.context)

    def replaced(self, tool: Tool) -> None:
        """A middleware replaced the call's tool with ``tool``, which runs: the span is named
        after it, as the conventions name a tool's span after the tool that runs."""
        span = self.span
        try:
            if span.is_recording():
                name = wire_text(tool.name)
                span.update_name(f"{names.EXECUTE_TOOL} {name}")
                span.set_attribute(names.TOOL_NAME, name)
                span.set_attribute(names.TOOL_DESCRIPTION, wire_text(tool.description))
        except Exception:
            _failed("renaming a tool call's span")

    def end(self, called: ToolCalled | None, error_type: str | None) -> None:
        span = self.span
        try:
            if span.is_recording():
                if called is not None and self.telemetry.capture_content:
                    if called.call.arguments != self.arguments:  # a middleware changed them
                        ran_with = _json(_arguments(called.call.arguments))
                        span.set_attribute(names.TOOL_CALL_ARGUMENTS, ran_with)
                    span.set_attribute(names.TOOL_CALL_RESULT, wire_text(called.result))
                if error_type is not None:
                    _fail(span, error_type)
        except Exception:
            _failed("setting the attributes of a tool call's span")
        _end(span)
