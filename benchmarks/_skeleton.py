"""The skeleton: the structure the loop's design fixes for a round, and nothing else.

What ``SPEC.md`` asks of every round, as the loop builds it (``trio_invoke/_loop/_round.py``):
a nursery per round with an events channel of 256 and a messages channel of 1; a consumer task
in it that hands the caller the events channel's receive end (a run channel carries it), streams
the model into the events channel and accumulates the calls by id, sends the
round's calls once into the messages channel, starts each call but the first as a sibling task
holding its own clone of the events channel and runs the first itself; the caller reading each
round's events channel directly, the loop side taking the calls from the messages channel once
the nursery is done. Nothing of the library's bookkeeping: no validation, no policy, no approval,
no budget, no timing of results, no settling of a round cut short, no error handling. It opens
each round's two channels and takes from them as the loop does (the loop's ``channel_pair``,
``trio.open_memory_channel`` without its typing call, and ``poll``, ``receive_nowait`` without
its exceptions).

The ``rounds`` workload measures it beside the floor (:mod:`benchmarks._floor`) to show how much
of the loop's cost per round is that structure, and how much is the rest.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_invoke import (
    AgentResponseUpdate,
    ChatClient,
    ChatMessage,
    Finish,
    FinishReason,
    MessageRole,
    RunOptions,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallArgs,
    ToolCalled,
    ToolCallStart,
)
from trio_invoke._loop._channels import EMPTY, ENDED, channel_pair, poll  # as the loop's

__all__ = ["skeleton_run"]

EVENTS = 256
Events = trio.MemorySendChannel[AgentResponseUpdate]


@asynccontextmanager
async def skeleton_run(
    model: ChatClient, messages: Sequence[ChatMessage], tools: Mapping[str, Tool]
) -> AsyncIterator[_Stream]:
    """Run the skeleton; the value is its stream of updates to ``async for`` over."""
    send, receive = trio.open_memory_channel[Any](EVENTS)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_drive, model, list(messages), tools, send)
        yield _Stream(receive)
        nursery.cancel_scope.cancel()


class _Stream:
    """The caller's side: each round's events channel in turn, then the run's last update,
    handed over as the loop's stream does (what is buffered without a schedule point)."""

    def __init__(self, run: trio.MemoryReceiveChannel[Any]) -> None:
        self._run = run
        self._round: trio.MemoryReceiveChannel[Any] | None = None

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> AgentResponseUpdate:
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            source = self._round if self._round is not None else self._run
            item = poll(source)
            if item is EMPTY:
                try:
                    item = await source.receive()
                except trio.EndOfChannel:
                    item = ENDED
            if item is ENDED:
                if source is self._run:
                    raise StopAsyncIteration
                self._round = None
            elif type(item) is trio.MemoryReceiveChannel:
                self._round = item
            else:
                return item  # type: ignore[no-any-return]


async def _drive(
    model: ChatClient,
    messages: list[ChatMessage],
    tools: Mapping[str, Tool],
    run: trio.MemorySendChannel[Any],
) -> None:
    options = RunOptions()
    with run:
        while True:
            round_ = _Round(model, messages, options, tools)
            events: Events
            events, receive = channel_pair(EVENTS)
            turns: Turns
            turns, turn = channel_pair(1)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(round_.consume, events, turns, nursery, run, receive)
            text, calls = turn.receive_nowait()
            if not calls:
                messages.append(ChatMessage(MessageRole.ASSISTANT, text))
                run.send_nowait(Finish(FinishReason.STOP))
                return
            messages.append(ChatMessage(MessageRole.ASSISTANT, text, calls))
            messages.extend(
                ChatMessage.tool_result(call, round_.results[call.id]) for call in calls
            )


Turns = trio.MemorySendChannel[tuple[str, tuple[ToolCall, ...]]]


class _Round:
    def __init__(
        self,
        model: ChatClient,
        messages: list[ChatMessage],
        options: RunOptions,
        tools: Mapping[str, Tool],
    ) -> None:
        self.model, self.messages, self.options, self.tools = model, messages, options, tools
        self.results: dict[str, str] = {}

    async def consume(
        self,
        events: Events,
        turns: Turns,
        nursery: trio.Nursery,
        run: trio.MemorySendChannel[Any],
        receive: trio.MemoryReceiveChannel[AgentResponseUpdate],
    ) -> None:
        with events, turns:
            run.send_nowait(receive)  # (the run channel holds at most one round and the end)
            pieces: dict[str, tuple[str, list[str]]] = {}  # id -> (name, argument pieces)
            text: list[str] = []
            async with self.model.run(self.messages, self.options) as updates:
                async for update in updates:
                    if type(update) is Finish:
                        continue
                    try:
                        events.send_nowait(update)
                        full = False
                    except trio.WouldBlock:
                        full = True
                    if full:
                        await events.send(update)
                    if type(update) is ToolCallArgs:
                        pieces[update.id][1].append(update.args_delta)
                    elif type(update) is ToolCallStart:
                        pieces[update.id] = (update.name, [])
                    elif type(update) is TextDelta:
                        text.append(update.text)
            calls = tuple(ToolCall(i, name, "".join(args)) for i, (name, args) in pieces.items())
            turns.send_nowait(("".join(text), calls))
            for call in calls[1:]:
                nursery.start_soon(self.call, call, events.clone())
            if calls:
                await self.answer(calls[0], events)

    async def call(self, call: ToolCall, events: Events) -> None:
        with events:
            await self.answer(call, events)

    async def answer(self, call: ToolCall, events: Events) -> None:
        result = await self.tools[call.name].execute(json.loads(call.arguments))
        self.results[call.id] = result
        called = ToolCalled(call, result, False)
        if not _offer(events, called):
            await events.send(called)


def _offer(events: Events, item: AgentResponseUpdate) -> bool:
    try:
        events.send_nowait(item)
    except trio.WouldBlock:
        return False
    return True
