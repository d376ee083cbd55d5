"""``FunctionInvokingChatClient``: the public surface of the tool-calling loop.

The loop is the seed's state machine, ``Looping -> Streaming -> Looping -> ... -> Done``, mapped
onto Trio's structured concurrency:

* **Looping** (``_run.Run``): resume the calls a conversation ends with, ask the policy
  (``_policy``) whether there is a round and whether its tools are withheld, play it, append its
  messages, ask the policy whether to go on.
* **Streaming** (``_round.Round``): a nursery with an ``events`` channel (256) and a
  ``messages`` channel (1); a consumer task streams the model and starts the calls as sibling
  tasks; the loop side forwards the events to the caller. Every task of the round holds a clone
  of the ``events`` send channel, so its ``EndOfChannel`` is the round's end.
* **Done**: a final ``Finish`` (``STOP``, ``LENGTH``, ``CONTENT_FILTER``, ``AWAITING_APPROVAL`` or
  ``MAX_ROUNDS``), ``Error("cancelled")``, or the exception that ended the run.

The whole run lives in a nursery owned by the caller's ``async with``; this module checks what
the caller gives, builds the run and hands the caller its stream (``_stream``).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal

import trio

from .._approval import match_approvals, pending_calls
from .._checks import check_flag
from .._client import ChatClient
from .._exceptions import ConfigurationError
from .._messages import ChatMessage, MessageRole, first_not_a_message, is_conversation
from .._middleware import ToolMiddleware
from .._once import Once
from .._options import RunOptions
from .._threads import ToolThreads
from .._tools import Tool, ToolDefinition, check_tool
from .._updates import Error, Finish, ToolApprovalRequest
from ._channels import channel_pair, reraise_single
from ._hooks import Observer, observe_run
from ._invoke import Entry, Limits
from ._policy import Policy
from ._round import EVENT_BUFFER
from ._run import Delivery, Run
from ._stream import ChatResponse, InvocationStream

__all__ = ["FunctionInvokingChatClient"]

_NO_OPTIONS = RunOptions()
_SETTINGS = frozenset(
    {
        "inner",
        "max_rounds",
        "on_max_rounds",
        "tool_timeout",
        "max_concurrency",
        "sequential",
        "max_tool_calls",
        "max_consecutive_errors",
        "include_detailed_errors",
        "eager_tools",
        "approval",
        "middleware",
        "telemetry",
        "max_tool_threads",
    }
)
"""The constructor's arguments that stay attributes of the client (all but ``tools``)."""


def _merge_tools(static: Mapping[str, Entry], provider: Iterable[Tool]) -> dict[str, Entry]:
    """Static tools plus provider tools: new names add; an existing name is replaced only by a
    version that requires approval (the seed's rule)."""
    merged = dict(static)
    for tool in provider:
        check_tool(tool, "provider tool")
        if tool.name not in merged or tool.requires_approval:
            merged[tool.name] = Entry.of(tool)
    return merged


def _checked_middleware(middleware: Sequence[ToolMiddleware]) -> tuple[ToolMiddleware, ...]:
    if callable(middleware) or not isinstance(middleware, Iterable):
        raise TypeError(f"middleware must be a sequence of middleware, got {middleware!r:.80}")
    checked = tuple(middleware)
    for index, item in enumerate(checked):
        if not callable(item):
            raise TypeError(
                f"middleware[{index}] is a {type(item).__name__}, not a middleware (async def "
                "middleware(context, call_next) -> ToolCalled)"
            )
    return checked


def _check_has_run(name: str, value: object, what: str) -> None:
    """``value`` is an object (not a class) with a ``run`` method, else a ``TypeError``
    naming ``name`` (at construction: later it would be an ``AttributeError`` of the run)."""
    if isinstance(value, type):
        raise TypeError(f"{name} must be {what}, got the class {value.__name__}: pass an instance")
    if not callable(getattr(value, "run", None)):
        raise TypeError(f"{name} must be {what}, got {value!r:.80}")


def _checked_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    if not is_conversation(messages):
        raise TypeError(
            f"messages must be a sequence of ChatMessage, got a {type(messages).__name__}"
        )
    conversation = list(messages)
    stranger = first_not_a_message(conversation)
    if stranger is not None:
        index, message = stranger
        raise TypeError(
            f"messages[{index}] is a {type(message).__name__}, not a ChatMessage "
            "(build it with ChatMessage.user(...) or ChatMessage.from_dict(...))"
        )
    return conversation


def _check(name: str, value: float | None, minimum: int, *, integer: bool = True) -> None:
    """``value`` must be ``None`` or a number (an int if ``integer``) of at least ``minimum``
    (above it, for a float)."""
    if value is None:
        return
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds) or not value >= minimum:
        raise ConfigurationError(
            f"{name} must be {'an integer' if integer else 'a number'} >= {minimum} or None, "
            f"got {value!r}"
        )
    if not integer and value <= minimum:
        raise ConfigurationError(f"{name} must be a number > {minimum} or None, got {value!r}")


class FunctionInvokingChatClient:
    """Wraps a :class:`ChatClient` and runs the tools its model calls, round after round.

    Itself a :class:`ChatClient`, so decorators stack. See the module docstring for the loop.

    Args:
        inner: The chat client that talks to the model.
        tools: The tools the model may call; names must be unique.
        max_rounds: The most model calls one run makes with tools offered (default 10).
        on_max_rounds: At the round cap, ``"finish"`` (default) ends with ``Finish(MAX_ROUNDS)``;
            ``"answer"`` first makes one more model call with the tools withheld (still listed,
            with ``tool_choice="none"``) so the user gets an answer (calls the model still makes
            get a "not run" result), then ends with ``Finish(MAX_ROUNDS)``.
        tool_timeout: Seconds each call may run (a tool's own ``timeout`` attribute wins;
            ``RunOptions.tool_timeout`` overrides per run). A call that runs out gets an error
            result naming the limit; its siblings go on. ``None``: no limit. A sync tool's
            thread cannot be interrupted: it is abandoned and runs to its end in the
            background, holding a token of its tool-thread limiter (``max_tool_threads``)
            until then; a process tool's worker is killed.
        max_concurrency: The most calls that execute at once: an int (per run) or a
            ``trio.CapacityLimiter`` to share one cap between runs and clients. ``None``: no cap.
            A round's calls queued for a slot start in call order (with ``eager_tools`` too: a
            call whose arguments end first still waits for the calls streamed before it); runs
            that share a limiter take its slots by turns. Waiting for a slot is not run time
            (``tool_timeout`` starts once the call has its slot).
        sequential: Run each round's calls one by one in call order instead of concurrently.
        max_tool_calls: The most calls one run answers, counted across rounds in call order
            (every call the model makes counts, rejected and invalid ones too); calls over the
            budget are not run and get an error result saying so
            (``RunOptions.max_tool_calls`` overrides per run). ``None``: no budget.
        max_consecutive_errors: After this many rounds in a row in which every call failed,
            the next model call is made with the tools withheld, and the run ends after it.
            ``None``: never.
        include_detailed_errors: Send the model the message of a tool's exception, not only its
            type (messages can hold secrets, so off by default). Argument errors always go to
            the model in full; the caller always gets the exception on ``ToolCalled.exception``.
        eager_tools: Start each call as soon as its ``ToolCallEnd`` arrives, while the model
            still streams the rest. Calls from the first one that needs approval on wait for the
            end of the response; results keep call order in the transcript. Ignored when
            ``sequential``.
        approval: How a batch with calls that need approval pauses: ``"batch"`` (default)
            runs none of its calls before the pause; ``"per_call"`` runs the calls that need no
            approval and answers them before the pause, and only the others wait (the assistant
            message then lists the waiting calls last, so that the transcript stays in call
            order). ``RunOptions.approval`` overrides per run.
        middleware: Code of yours around every call that runs, outermost first: ``async def
            middleware(context: ToolContext, call_next) -> ToolCalled`` (see
            :class:`ToolContext`). It runs inside the call's concurrency slot and time limit,
            after approval; calls that are not run (unknown tool, invalid arguments, budget
            spent, tools withheld, rejected) never reach it. ``RunOptions.middleware`` replaces
            it per run.
        telemetry: An observer of every run, model call and tool call, such as
            ``trio_invoke.otel.Telemetry()`` (OpenTelemetry spans and metrics).
        max_tool_threads: The most worker threads the sync tools of this client's runs use at
            once (``@tool`` on a plain function without its own ``limiter``): an int (one
            limiter per client and Trio run) or a ``trio.CapacityLimiter`` to share. ``None``:
            :func:`current_default_tool_thread_limiter` (40 per Trio run). Tool threads never
            take Trio's own thread slots, so abandoned ones (timed out or cancelled, still
            running) can hold up other sync tools, never the rest of the program.

    Each argument but ``tools`` is an attribute of the same name. One assigned later
    (``agent.max_rounds = 3``) is checked as the constructor checks it, and takes effect from
    the next run; runs already going keep what they started with.

    Raises:
        ConfigurationError: an option is out of range, two tools share a name, or ``inner`` is
            itself a ``FunctionInvokingChatClient`` (its calls would run twice) -- a
            ``ValueError``. Other decorators (logging, retries, caching) stack freely.
    """

    def __init__(
        self,
        inner: ChatClient,
        tools: Iterable[Tool] = (),
        *,
        max_rounds: int = 10,
        on_max_rounds: Literal["finish", "answer"] = "finish",
        tool_timeout: float | None = None,
        max_concurrency: int | trio.CapacityLimiter | None = None,
        sequential: bool = False,
        max_tool_calls: int | None = None,
        max_consecutive_errors: int | None = 3,
        include_detailed_errors: bool = False,
        eager_tools: bool = False,
        approval: Literal["batch", "per_call"] = "batch",
        middleware: Sequence[ToolMiddleware] = (),
        telemetry: Observer | None = None,
        max_tool_threads: int | trio.CapacityLimiter | None = None,
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ConfigurationError(f"max_rounds must be an integer >= 1, got {max_rounds!r}")
        if isinstance(inner, FunctionInvokingChatClient):
            raise ConfigurationError(
                "the inner client is itself a FunctionInvokingChatClient: the outer loop would "
                "run its tool calls again; give all the tools to one loop"
            )
        _check_has_run(
            "inner", inner, "a chat client (an object with a run(messages, options) method)"
        )
        if telemetry is not None:
            _check_has_run("telemetry", telemetry, "None or an observer such as Telemetry(...)")
        if on_max_rounds not in ("finish", "answer"):
            raise ConfigurationError(
                f"on_max_rounds must be 'finish' or 'answer', got {on_max_rounds!r}"
            )
        _check("tool_timeout", tool_timeout, 0, integer=False)
        if not isinstance(max_concurrency, trio.CapacityLimiter):
            _check("max_concurrency", max_concurrency, 1)
        _check("max_tool_calls", max_tool_calls, 0)
        if approval not in ("batch", "per_call"):
            raise ConfigurationError(f"approval must be 'batch' or 'per_call', got {approval!r}")
        self.approval = approval
        self.middleware = _checked_middleware(middleware)
        self.telemetry = telemetry
        _check("max_consecutive_errors", max_consecutive_errors, 1)
        for flag, value in (
            ("sequential", sequential),
            ("include_detailed_errors", include_detailed_errors),
            ("eager_tools", eager_tools),
        ):
            check_flag(flag, value)
        self.inner = inner
        self.max_rounds = max_rounds
        self.on_max_rounds = on_max_rounds
        self.tool_timeout = tool_timeout
        self.max_concurrency = max_concurrency
        self.sequential = sequential
        self.max_tool_calls = max_tool_calls
        self.max_consecutive_errors = max_consecutive_errors
        self.include_detailed_errors = include_detailed_errors
        self.eager_tools = eager_tools  # (ignored while sequential: see ``_run``)
        self.max_tool_threads = max_tool_threads
        self._tool_threads = ToolThreads.of(max_tool_threads)
        if isinstance(tools, Tool | str) or callable(tools) or not isinstance(tools, Iterable):
            raise TypeError(f"tools must be an iterable of tools, got {tools!r:.80}")
        self._tools: dict[str, Entry] = {}
        for tool in tools:
            check_tool(tool, "tool")
            if tool.name in self._tools:
                raise ConfigurationError(f"two tools are named {tool.name!r}; names must be unique")
            self._tools[tool.name] = Entry.of(tool)
        self._plain_options = RunOptions()  # the model's options when the caller gives none
        self._definitions(self._tools)

    def __setattr__(self, name: str, value: object) -> None:
        # A setting changed once ``__init__`` has set them all (a subclass may set one first)
        if name in _SETTINGS and _SETTINGS.issubset(self.__dict__):
            settings: dict[str, object] = {key: getattr(self, key) for key in _SETTINGS}
            settings[name] = value
            checked = FunctionInvokingChatClient(**settings)  # type: ignore[arg-type]
            value = checked.__dict__[name]  # as the constructor keeps it (middleware: a tuple)
            if name == "max_tool_threads":
                object.__setattr__(self, "_tool_threads", checked._tool_threads)
        object.__setattr__(self, name, value)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The static tools, in the order given."""
        return tuple(entry.tool for entry in self._tools.values())

    def __repr__(self) -> str:
        return (
            f"FunctionInvokingChatClient({self.inner!r}, tools=[{', '.join(self._tools)}], "
            f"max_rounds={self.max_rounds})"
        )

    # -- the public surface --------------------------------------------------------------------

    def run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> AbstractAsyncContextManager[InvocationStream]:
        """Run the loop on ``messages``: an async context manager whose value is an
        :class:`InvocationStream` of updates (``async with agent.run(messages) as stream:``).

        Raises:
            ApprovalError: the conversation ends with calls waiting for approval and the
                approval responses do not match them (raised on entry; nothing has run).
            RuntimeError: the value ``run()`` returned is entered a second time (each is one
                run: call ``run()`` again).

        Cancellation: cancelling ``options.cancel_scope`` stops the model stream and the tools
        promptly; the stream then ends with ``Error("cancelled")``, after a ``ToolCalled`` for
        each call it cut short. Leaving the ``async with`` early (``break``, an exception, an
        outer cancellation) cancels everything the run started before the block exits. Either
        way :attr:`InvocationStream.messages` is a valid transcript: the text received so far,
        the calls that were complete (each answered, ``"Error: cancelled"`` if it never
        finished), nothing of calls the model had not finished sending. (A run that had already
        paused for approval when it was left keeps its pause: its pending calls await answers,
        as after ``Finish(AWAITING_APPROVAL)``.)
        """
        return Once(self._run(messages, options), "agent.run(...)")

    @asynccontextmanager
    async def _run(
        self, messages: Sequence[ChatMessage], options: RunOptions | None
    ) -> AsyncIterator[InvocationStream]:
        if options is None:
            options = _NO_OPTIONS
        elif not isinstance(options, RunOptions):
            raise TypeError(f"options must be a RunOptions or None, got {options!r:.80}")
        conversation = _checked_messages(messages)
        tools = self._static_tools()
        if options.provider_tools:
            tools = _merge_tools(tools, options.provider_tools)
        pending = pending_calls(conversation)
        decisions = match_approvals(
            pending,
            lambda call: call.name in tools and tools[call.name].tool.requires_approval,
            options.tool_approval_responses,
        )
        definitions = self._definitions(tools)
        if options is _NO_OPTIONS:
            inner_options = self._plain_options  # (no provider tools: the static ones)
        else:
            inner_options = options.evolve(
                tools=definitions,
                tool_approval_responses=(),
                provider_tools=(),
                cancel_scope=None,
            )
        send: trio.MemorySendChannel[Delivery]
        receive: trio.MemoryReceiveChannel[Delivery]
        send, receive = channel_pair(EVENT_BUFFER)  # trio.open_memory_channel, made faster
        limits, policy = self._limits(options)
        approval = options.approval if options.approval is not None else self.approval
        run = Run(
            self.inner,
            conversation,
            tools,
            inner_options,
            send,
            limits,
            policy,
            sequential=self.sequential,
            eager=self.eager_tools and not self.sequential,
            per_call_approval=approval == "per_call",
            observation=(
                observe_run(self.telemetry, conversation, self.inner) if self.telemetry else None
            ),
        )
        stream = InvocationStream(receive, run)
        try:
            async with trio.open_nursery() as nursery:
                entered = trio.Event()  # (as nursery.start, without the nursery it opens)
                with self._tool_threads.installed():  # for the run's tasks, started here
                    nursery.start_soon(run.drive, options.cancel_scope, pending, decisions, entered)
                # Entering is a checkpoint, and the body runs once the driver is inside the
                # run's cancel scope and has gone on to its first wait (a caller's scope that
                # was entered before fails the driver instead, and that is raised here).
                await entered.wait()
                yield stream
                if not stream._ended:  # left early: stop whatever still runs
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            reraise_single(group)
        finally:
            stream._leave()
            interrupt = run.take_interrupt()
            if interrupt is not None:  # the stream has not raised it: never lost
                raise interrupt

    def _static_tools(self) -> dict[str, Entry]:
        """The static tools, each with a validator of its schema and its time limit as they are
        now: a tool's schema or ``timeout`` may be replaced between runs (the model is told the
        schema of the run, so its calls are checked against that one). A new dict when one was
        replaced, so that runs going on keep theirs.

        Raises:
            ToolDefinitionError, ConfigurationError: a replaced schema or time limit that
                cannot work (as at construction).
        """
        tools = self._tools
        if any(entry.stale() for entry in tools.values()):
            fresh = dict(tools)
            for name, entry in tools.items():
                if entry.stale():
                    check_tool(entry.tool, "tool")
                    fresh[name] = Entry.of(entry.tool)
            tools = self._tools = fresh
        return tools

    def _definitions(self, tools: Mapping[str, Entry]) -> tuple[ToolDefinition, ...]:
        """What the model is told of ``tools``, as they are now: a tool's description or schema
        may be replaced between runs. The static tools' definitions (and the model's options
        when the caller gives none) are rebuilt only when one of them was."""
        if tools is not self._tools:  # provider tools merged in
            return tuple(ToolDefinition.of(entry.tool) for entry in tools.values())
        defined = self._plain_options.tools
        if len(defined) == len(tools) and all(
            definition.description is entry.tool.description
            and definition.parameters is entry.tool.parameters
            for definition, entry in zip(defined, tools.values(), strict=True)
        ):
            return defined
        self._plain_options = RunOptions(
            tools=tuple(ToolDefinition.of(entry.tool) for entry in tools.values())
        )
        return self._plain_options.tools

    def _limits(self, options: RunOptions) -> tuple[Limits, Policy]:
        limiter = self.max_concurrency
        if isinstance(limiter, int):
            limiter = trio.CapacityLimiter(limiter)
        timeout = options.tool_timeout if options.tool_timeout is not None else self.tool_timeout
        budget = (
            options.max_tool_calls if options.max_tool_calls is not None else self.max_tool_calls
        )
        policy = Policy(
            self.max_rounds,
            self.on_max_rounds,
            self.max_consecutive_errors,
            math.inf if budget is None else budget,
        )
        middleware = self.middleware
        if options.middleware is not None:
            middleware = _checked_middleware(options.middleware)
        limits = Limits(timeout, limiter, self.include_detailed_errors, middleware)
        return limits, policy

    @trio.lowlevel.enable_ki_protection  # the caller's stream, read by the loop's own code
    async def get_response(
        self, messages: Sequence[ChatMessage], options: RunOptions | None = None
    ) -> ChatResponse:
        """Run the loop to its end and collect it into a :class:`ChatResponse`.

        Raises:
            ApprovalError: as for :meth:`run`.
            TrioInvokeError: the inner chat client failed (``ChatClientError`` or its own).

        Cancellation: through ``options.cancel_scope`` the response comes back with
        ``error="cancelled"`` and a valid transcript; an outer cancellation propagates and the
        run's partial result is lost.
        """
        requests: list[ToolApprovalRequest] = []
        finish: Finish | None = None
        error: str | None = None
        async with self.run(messages, options) as stream:
            async for update in stream:
                if isinstance(update, ToolApprovalRequest):
                    requests.append(update)
                elif isinstance(update, Finish):
                    finish = update
                elif isinstance(update, Error):
                    error = update.message
        added = stream.messages
        text = next((m.text for m in reversed(added) if m.role is MessageRole.ASSISTANT), "")
        return ChatResponse(
            tuple(added),
            text,
            finish.finish_reason if finish else None,
            finish.usage if finish else stream.usage,
            tuple(requests),
            error,
        )
