"""The HTTP workloads: ``OpenAIChatClient`` against a loopback OpenAI-compatible server.

The server (:mod:`benchmarks.openai_server`) runs in a process of its own, started and stopped
here, and serves prebuilt bodies; so the client's interpreter does the client's work only. Every
side of a workload talks to the same server in the same run, on httpx2 with the same timeouts
and the same pool limits (httpx2's defaults: 100 connections):

* the library: ``OpenAIChatClient`` (one client, opened once, so one connection pool), alone or
  under ``FunctionInvokingChatClient`` (or the class given with ``--client``);
* the floor: a bare ``httpx2.AsyncClient`` that posts the same request body, splits the body
  into lines and ``json.loads`` each ``data:`` line -- the least any client of this protocol
  does, with nothing done about the chunks (no decoding into updates, no error checks);
* the official ``openai`` SDK (``AsyncOpenAI``, which runs on Trio through anyio and httpx2),
  when it is installed: the optional ``bench`` dependency group (``pip install 'openai>=3'``;
  3.0 is the first release on httpx2, an older one is left out with a line saying so).

Workloads (``--only NAME``):

* ``http``: per chunk, one response at a time: 10,000 text deltas, and 1,000 parallel tool calls
  of 9 chunks each (a usage chunk and ``[DONE]`` after both). CPU time of this process per chunk
  (the measure of the target) and wall time.
* ``conversations``: N concurrent runs through one shared client, each one response of 200 text
  chunks; runs per second at N = 100, 300 and 1,000, and the connections the server counted.
* ``agents``: N concurrent agent runs through one shared pool, each 3 rounds of 4 parallel tool
  calls and a final answer (4 requests); runs per second, cost per run from N = 100 to 1,000,
  p50/p99 latency per round (the time from the end of one round to the end of the next, as the
  caller sees it), peak traced memory. The floor is a hand-written agent loop on bare httpx2.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import trio

from trio_invoke import (
    ChatMessage,
    Finish,
    FinishReason,
    TextDelta,
    ToolCallArgs,
    ToolCalled,
    ToolCallStart,
)

from ._harness import Row
from ._workloads import Context, NoopTool, Outcome

SERVER = str(Path(__file__).with_name("openai_server.py"))
USER = (ChatMessage.user("go"),)
TEXT, TOOLS = "text-10000", "tools-1000-9"
CONVERSATION = "text-200"
AGENT = "agent-3-4"  # 3 rounds of 4 parallel calls, then the answer
CALLS_PER_ROUND = 4
PER_CHUNK_TARGET = 1.3
THROUGHPUT_TARGET = 0.8


# -- the server ----------------------------------------------------------------------------------


@contextlib.contextmanager
def openai_server() -> Iterator[str]:
    """Start the server in its own process; the value is its ``base_url``. Stopped on exit."""
    process = subprocess.Popen(
        [sys.executable, SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # Out of the terminal's process group: a Ctrl-C stops the benchmark, which stops the
        # server here, on its way out (the server would die of it mid-import, with a traceback).
        process_group=0,
    )
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None
    assert stdout is not None
    try:
        line = stdout.readline().decode()
        match = re.fullmatch(r"port (\d+)\s*", line)
        if match is None:
            raise RuntimeError(f"the benchmark's OpenAI server did not start: {line!r}")
        yield f"http://127.0.0.1:{match.group(1)}/v1"
    finally:
        stdin.close()  # the server stops when its standard input closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stdout.close()


async def connections(base_url: str) -> int:
    """How many connections the server has accepted so far (this request's own included)."""
    import httpx2  # noqa: PLC0415 -- the openai extra, checked before

    async with httpx2.AsyncClient() as fresh:  # its own connection: not one of the pool's
        response = await fresh.get(base_url.removesuffix("/v1") + "/stats")
    count: int = response.json()["connections"]
    return count


# -- the floor -----------------------------------------------------------------------------------

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


async def floor_response(
    http: Any, url: str, content: bytes, chunks: list[Any] | None = None
) -> int:
    """Post ``content``, read the body to its end: lines split, each ``data:`` line parsed (and
    kept in ``chunks``, if given); the number of chunks."""
    count = 0
    async with http.stream("POST", url, content=content, headers=HEADERS) as response:
        if response.status_code != 200:
            raise RuntimeError(f"the server answered {response.status_code}")
        buffer = b""
        async for piece in response.aiter_bytes():
            buffer += piece
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    chunk = json.loads(line[6:])
                    count += 1
                    if chunks is not None:
                        chunks.append(chunk)
    return count


def request_body(model: str, messages: Sequence[Mapping[str, Any]]) -> bytes:
    body = {
        "model": model,
        "messages": list(messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return json.dumps(body, separators=(",", ":")).encode()


async def floor_agent(http: Any, url: str, tool: NoopTool, marks: list[float]) -> None:
    """A hand-written agent run on bare httpx2: stream a response, gather its calls by index,
    run them in a nursery, append the messages, ask again; ``marks`` gets the end of each
    round. As honest and as bare as ``benchmarks._floor``: no validation, no error handling."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    while True:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        chunks: list[Any] = []
        await floor_response(http, url, request_body(AGENT, messages), chunks)
        for chunk in chunks:
            for choice in chunk["choices"]:
                delta = choice["delta"]
                if delta.get("content"):
                    text.append(delta["content"])
                for piece in delta.get("tool_calls") or ():
                    call = calls.setdefault(piece["index"], {"arguments": []})
                    if "id" in piece:
                        call["id"], call["name"] = piece["id"], piece["function"]["name"]
                    call["arguments"].append(piece["function"]["arguments"])
        if not calls:
            marks.append(time.perf_counter())
            return
        done = [
            {"id": c["id"], "name": c["name"], "arguments": "".join(c["arguments"])}
            for c in calls.values()
        ]
        results: dict[str, str] = {}

        async def run(call: dict[str, Any], results: dict[str, str] = results) -> None:
            results[call["id"]] = await tool.execute(json.loads(call["arguments"]))

        async with trio.open_nursery() as nursery:
            for call in done:
                nursery.start_soon(run, call)
        marks.append(time.perf_counter())
        messages.append(
            {
                "role": "assistant",
                "content": "".join(text),
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in done
                ],
            }
        )
        messages.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": results[c["id"]]} for c in done
        )


# -- sampling ------------------------------------------------------------------------------------

Run = Callable[[], Awaitable[object]]


class _CollectorTime:
    """Seconds the garbage collector ran, while counting (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    # Python ignores (prints and drops) an exception out of a gc callback: a Ctrl-C that lands
    # here would be lost, and the run go on. Trio's KI protection defers it to the next
    # checkpoint instead (no other way: the callback runs wherever a collection starts).
    @trio.lowlevel.enable_ki_protection
    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> _CollectorTime:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


Sample = tuple[float, float, float]
"""Wall, CPU and garbage-collector seconds per run."""


async def _sample(run: Run, number: int) -> Sample:
    """Wall, CPU and collector seconds per run, over ``number`` runs."""
    gc.collect()
    with _CollectorTime() as collector:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(number):
            await run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall / number, cpu / number, collector.seconds / number


async def interleaved(
    sides: Mapping[str, Run], repeat: int, number: int = 1, limited: Mapping[str, int] = {}
) -> dict[str, list[Sample]]:
    """``repeat`` samples of each side after one warm-up run, the order rotating each time so
    that drift hits every side alike; a side in ``limited`` takes at most that many samples."""
    names = list(sides)
    for run in sides.values():
        await run()
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for index in range(repeat):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            if len(samples[name]) < limited.get(name, repeat):
                samples[name].append(await _sample(sides[name], number))
    return samples


def _median(samples: Sequence[Sample], which: int) -> float:
    return statistics.median(sample[which] for sample in samples)


OPENAI_SDK_FIRST = 3
"""The first major release of the ``openai`` SDK on httpx2 (3.0.0; 2.x and 1.x run on httpx)."""


def _sdk() -> tuple[Any, str | None]:
    """The official ``openai`` module, or ``None`` and the line that says why it is left out:
    not installed, older than 3.0 (on httpx, not the httpx2 every other side runs on; 1.x does
    not even start on a current httpx), or not importable."""
    try:
        version = metadata.version("openai")
    except metadata.PackageNotFoundError:
        return None, "http: the official openai SDK is not installed (pip install 'openai>=3')"
    major = re.match(r"\d+", version)
    if major is None or int(major.group()) < OPENAI_SDK_FIRST:
        return None, (
            f"http: the official openai SDK {version} is older than {OPENAI_SDK_FIRST}.0, the "
            "first on httpx2 (pip install 'openai>=3')"
        )
    try:
        import openai  # noqa: PLC0415 -- the optional bench group
    except ImportError as exc:
        return None, f"http: the official openai SDK {version} cannot be imported: {exc}"
    return openai, None


def _missing() -> Outcome | None:
    try:
        import httpx2  # noqa: F401, PLC0415
    except ImportError:
        return Outcome(skipped=["http: needs httpx2 (pip install -e '.[openai]' in a checkout)"])
    return None


def _timeout() -> Any:
    from trio_invoke.providers.openai._client import DEFAULT_TIMEOUT  # noqa: PLC0415

    return DEFAULT_TIMEOUT


# -- http: per chunk -----------------------------------------------------------------------------


def http(ctx: Context) -> Outcome:
    missing = _missing()
    if missing is not None:
        return missing
    import httpx2  # noqa: PLC0415

    from trio_invoke import OpenAIChatClient  # noqa: PLC0415

    openai, sdk_skipped = _sdk()
    bodies = {
        TEXT: ("10,000 text deltas", 10_000 + 4),  # events: role, deltas, finish, usage, [DONE]
        TOOLS: ("1,000 tool calls x 9 chunks", 9_000 + 3),
    }
    repeat = ctx.settings.repeat
    rows: list[Row] = []
    skipped: list[str] = []
    if sdk_skipped is not None:
        skipped.append(sdk_skipped)

    async def main(base_url: str) -> None:
        url = f"{base_url}/chat/completions"
        for name, (label, events) in bodies.items():
            async with (
                OpenAIChatClient(name, base_url=base_url) as model,
                httpx2.AsyncClient(timeout=_timeout()) as bare,
                contextlib.AsyncExitStack() as stack,
            ):
                content = json.dumps(model.request_body(USER), separators=(",", ":")).encode()

                async def library(model: OpenAIChatClient = model) -> int:
                    count = 0
                    async with model.run(USER) as stream:
                        async for _ in stream:
                            count += 1
                    return count

                async def floor(content: bytes = content) -> int:
                    return await floor_response(bare, url, content)

                async with model.run(USER) as stream:
                    updates = [update async for update in stream]
                chunks: list[Any] = []
                await floor_response(bare, url, content, chunks)
                _check(name, updates, chunks)
                del updates, chunks
                sides: dict[str, Run] = {"library": library, "floor": floor}
                if openai is not None:
                    sdk = await stack.enter_async_context(
                        openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
                    )

                    async def official(sdk: Any = sdk, name: str = name) -> int:
                        stream = await sdk.chat.completions.create(
                            model=name,
                            messages=[{"role": "user", "content": "go"}],
                            stream=True,
                            stream_options={"include_usage": True},
                        )
                        return len([chunk async for chunk in stream])

                    sides["openai SDK"] = official
                samples = await interleaved(sides, repeat, limited={"openai SDK": min(repeat, 3)})
                for which, measure in ((1, "CPU"), (0, "wall")):
                    lib = _median(samples["library"], which) / events
                    flo = _median(samples["floor"], which) / events
                    extra: dict[str, Any] = {
                        "events": events,
                        "samples": dict(samples),
                    }
                    note = None
                    if "openai SDK" in samples:
                        sdk_value = _median(samples["openai SDK"], which) / events
                        extra["openai_sdk"] = sdk_value
                        note = (
                            f"official openai SDK {openai.__version__} (AsyncOpenAI on Trio), "
                            f"{measure} per chunk: {sdk_value * 1e6:.0f} µs, "
                            f"{sdk_value / flo:.1f}x the floor"
                        )
                    rows.append(
                        Row(
                            "http",
                            f"{measure} per chunk, {label}",
                            lib,
                            flo,
                            target=PER_CHUNK_TARGET if which == 1 else None,
                            note=note,
                            extra=extra,
                        )
                    )

    with openai_server() as base_url:
        trio.run(main, base_url)
    rows.append(
        Row(
            "http",
            "(what the floor is)",
            None,
            None,
            note="http floor: a bare httpx2.AsyncClient posting the same body, splitting the "
            "body into lines and json.loads-ing each data: line; server in its own process, "
            "each event its own HTTP chunk; CPU = this process's time",
        )
    )
    return Outcome(rows, skipped)


def _check(name: str, updates: list[Any], chunks: list[Any]) -> None:
    """Both sides read the whole response, and the library made every update of it."""
    kinds = {kind: sum(type(u) is kind for u in updates) for kind in (TextDelta, ToolCallArgs)}
    if name == TEXT:
        ok = kinds[TextDelta] == 10_000 and len(chunks) == 10_003
    else:
        starts = sum(type(u) is ToolCallStart for u in updates)
        ok = starts == 1_000 and kinds[ToolCallArgs] == 8_000 and len(chunks) == 9_002
    if not ok or not isinstance(updates[-1], Finish) or updates[-1].usage is None:
        raise RuntimeError(f"http {name}: the sides did not read the same response")


# -- conversations: N at once through one client ------------------------------------------------


def _sizes(ctx: Context) -> list[int]:
    return [100, 300] if ctx.settings.quick else [100, 300, 1_000]


def conversations(ctx: Context) -> Outcome:
    missing = _missing()
    if missing is not None:
        return missing
    import httpx2  # noqa: PLC0415

    from trio_invoke import OpenAIChatClient  # noqa: PLC0415

    repeat = ctx.settings.batches
    results: dict[int, dict[str, list[Sample]]] = {}
    opened: dict[int, dict[str, int]] = {}

    async def main(base_url: str) -> None:
        url = f"{base_url}/chat/completions"
        async with (
            OpenAIChatClient(CONVERSATION, base_url=base_url) as model,
            httpx2.AsyncClient(timeout=_timeout()) as bare,
        ):
            loop = ctx.client_cls(model, [NoopTool()])
            content = json.dumps(model.request_body(USER), separators=(",", ":")).encode()

            async def client_run() -> None:
                async with model.run(USER) as stream:
                    async for _ in stream:
                        pass

            async def loop_run() -> None:
                async with loop.run(USER) as stream:
                    async for _ in stream:
                        pass

            async def floor_run() -> None:
                await floor_response(bare, url, content)

            for n in _sizes(ctx):

                def many(one: Run, n: int = n) -> Run:
                    async def run() -> None:
                        async with trio.open_nursery() as nursery:
                            for _ in range(n):
                                nursery.start_soon(one)

                    return run

                sides = {
                    "OpenAIChatClient": many(client_run),
                    "FunctionInvokingChatClient": many(loop_run),
                    "bare httpx2": many(floor_run),
                }
                before = {}
                counts: dict[str, int] = {}
                for name, side in sides.items():
                    before[name] = await connections(base_url)
                    await side()  # also the warm-up
                    # (less the one that asked)
                    counts[name] = await connections(base_url) - before[name] - 1
                opened[n] = counts
                results[n] = await _interleave_no_warmup(sides, repeat)

    with openai_server() as base_url:
        trio.run(main, base_url)
    rows: list[Row] = []
    for n, samples in results.items():
        floor_rate = n / _median(samples["bare httpx2"], 0)
        for name in ("OpenAIChatClient", "FunctionInvokingChatClient"):
            rate = n / _median(samples[name], 0)
            rows.append(
                Row(
                    "conversations",
                    f"runs/s, {n:,} at once, {name}",
                    rate,
                    floor_rate,
                    unit="/s",
                    target=THROUGHPUT_TARGET if n == max(results) else None,
                    extra={
                        "n": n,
                        "connections": opened[n],
                        "samples": dict(samples),
                    },
                )
            )
    low, high = min(results), max(results)
    for name in ("OpenAIChatClient", "FunctionInvokingChatClient", "bare httpx2"):
        rows.append(
            Row(
                "conversations",
                f"flatness, runs/s at {high:,} / at {low:,}, {name}",
                (high / _median(results[high][name], 0)) / (low / _median(results[low][name], 0)),
                None,
                unit="x",
            )
        )
    rows[0] = _with_note(
        rows[0],
        "conversations: each run one response of 200 text chunks, all through one client (one "
        f"pool of 100 connections); {_samples(repeat)}; floor = bare httpx2 + line split + "
        "json.loads; connections the server accepted per batch: "
        + "; ".join(
            f"N={n:,}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
            for n, counts in opened.items()
        ),
    )
    return Outcome(rows)


def _samples(repeat: int) -> str:
    """What the rows are the median of: not the table header's samples, which are the other
    workloads'."""
    return (
        f"median of {repeat} sample{'s' if repeat != 1 else ''} per side, each a batch of N "
        "runs, after a warm-up batch"
    )


def _with_note(row: Row, note: str) -> Row:
    import attrs  # noqa: PLC0415

    return attrs.evolve(row, note=note)


async def _interleave_no_warmup(sides: Mapping[str, Run], repeat: int) -> dict[str, list[Sample]]:
    names = list(sides)
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for index in range(repeat):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            samples[name].append(await _sample(sides[name], 1))
    return samples


# -- agents: the full workload -------------------------------------------------------------------


def _latencies(starts: Sequence[float], marks: Sequence[Sequence[float]]) -> list[float]:
    out: list[float] = []
    for start, times in zip(starts, marks, strict=True):
        previous = start
        for mark in times:
            out.append(mark - previous)
            previous = mark
    return out


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def agents(ctx: Context) -> Outcome:
    missing = _missing()
    if missing is not None:
        return missing
    import httpx2  # noqa: PLC0415

    from trio_invoke import OpenAIChatClient  # noqa: PLC0415

    repeat = ctx.settings.batches
    tool = NoopTool()
    sizes = _sizes(ctx)
    timing: dict[int, dict[str, list[Sample]]] = {}
    latency: dict[int, dict[str, list[float]]] = {}
    peaks: dict[str, int] = {}

    async def main(base_url: str, memory: bool) -> None:
        url = f"{base_url}/chat/completions"
        async with (
            OpenAIChatClient(AGENT, base_url=base_url) as model,
            httpx2.AsyncClient(timeout=_timeout()) as bare,
        ):
            loop = ctx.client_cls(model, [tool])

            async def library_run(marks: list[float]) -> None:
                calls = 0
                last = None
                async with loop.run(USER) as stream:
                    async for update in stream:
                        last = update
                        if type(update) is ToolCalled:
                            calls += 1
                            if calls % CALLS_PER_ROUND == 0:
                                marks.append(time.perf_counter())
                        elif type(update) is Finish:
                            marks.append(time.perf_counter())
                finished = isinstance(last, Finish) and last.finish_reason == FinishReason.STOP
                if not finished or calls != 12:
                    raise RuntimeError(f"agents: the run ended with {last!r}, {calls} calls")

            async def floor_run(marks: list[float]) -> None:
                await floor_agent(bare, url, tool, marks)

            sides = {"library": library_run, "floor": floor_run}

            def many(
                one: Callable[[list[float]], Awaitable[None]],
                n: int,
                into: str,
                record: bool = True,
            ) -> Run:
                async def run() -> None:
                    starts: list[float] = []
                    marks: list[list[float]] = [[] for _ in range(n)]
                    async with trio.open_nursery() as nursery:
                        for index in range(n):
                            starts.append(time.perf_counter())
                            nursery.start_soon(one, marks[index])
                    if any(len(m) != 4 for m in marks):
                        raise RuntimeError(f"agents: a {into} run did not make 4 rounds")
                    if record:
                        latency.setdefault(n, {}).setdefault(into, []).extend(
                            _latencies(starts, marks)
                        )

                return run

            if memory:
                n = sizes[-1]
                for name, one in sides.items():
                    await many(one, 10, name, False)()  # warm: connections open, paths hot
                    gc.collect()
                    tracemalloc.start()
                    try:
                        tracemalloc.reset_peak()
                        await many(one, n, name, False)()
                        peaks[name] = tracemalloc.get_traced_memory()[1]
                    finally:
                        tracemalloc.stop()
                return
            for n in sizes:
                runs = {name: many(one, n, name) for name, one in sides.items()}
                for run in runs.values():
                    await run()  # warm-up
                latency.pop(n, None)
                timing[n] = await _interleave_no_warmup(runs, repeat)

    with openai_server() as base_url:
        trio.run(main, base_url, False)
        trio.run(main, base_url, True)
    rows: list[Row] = []
    note = (
        "agents: each run 3 rounds of 4 parallel no-op tool calls and a final answer (4 "
        "requests), all runs through one OpenAIChatClient (one pool of 100 connections); floor "
        "= a hand-written agent loop on bare httpx2 (line split, json.loads, calls gathered by "
        "index, run in a nursery); latency per round = from the end of the previous round (or "
        "the run's start) to the end of this one, as the caller sees it, over every round of "
        f"every sample; {_samples(repeat)}"
    )
    for n in sizes:
        samples = timing[n]
        lib_wall, flo_wall = _median(samples["library"], 0), _median(samples["floor"], 0)
        rows.append(
            Row(
                "agents",
                f"runs/s, {n:,} at once",
                n / lib_wall,
                n / flo_wall,
                unit="/s",
                note=note if not rows else None,
                extra={"n": n, "samples": dict(samples)},
            )
        )
        rows.append(Row("agents", f"wall per run, {n:,} at once", lib_wall / n, flo_wall / n))
        rows.append(
            Row(
                "agents",
                f"CPU per run, {n:,} at once",
                _median(samples["library"], 1) / n,
                _median(samples["floor"], 1) / n,
            )
        )
        rows.append(
            Row(
                "agents",
                f"of which garbage collection, {n:,} at once",
                _median(samples["library"], 2) / n,
                _median(samples["floor"], 2) / n,
            )
        )
        lib_lat, flo_lat = latency[n]["library"], latency[n]["floor"]
        for q, label in ((0.5, "p50"), (0.99, "p99")):
            lib_q, flo_q = _quantile(lib_lat, q), _quantile(flo_lat, q)
            rows.append(
                Row(
                    "agents",
                    f"latency per round {label}, {n:,} at once",
                    lib_q,
                    flo_q,
                    extra={"added": lib_q - flo_q, "rounds": len(lib_lat)},
                )
            )
            rows.append(
                Row(
                    "agents", f"added latency per round {label}, {n:,} at once", lib_q - flo_q, None
                )
            )
    low, high = sizes[0], sizes[-1]
    for side in ("library", "floor"):
        per_run = {n: _median(timing[n][side], 1) / n for n in (low, high)}
        rows.append(
            Row(
                "agents",
                f"CPU per run at {high:,} / at {low:,}, {side}",
                per_run[high] / per_run[low],
                None,
                unit="x",
            )
        )
        outside = {
            n: statistics.median(cpu - collector for _, cpu, collector in timing[n][side]) / n
            for n in (low, high)
        }
        rows.append(
            Row(
                "agents",
                f"the same, less garbage collection, {side}",
                outside[high] / outside[low],
                None,
                unit="x",
            )
        )
    rows.append(
        Row(
            "agents",
            f"peak traced memory, {high:,} at once",
            float(peaks["library"]),
            float(peaks["floor"]),
            unit="B",
            note="tracemalloc peak over one batch (after a warm batch of 10)",
        )
    )
    return Outcome(rows)
