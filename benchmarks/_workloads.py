"""The workloads: each runs through the library and through the floor, and returns table rows.

The library side uses the public API only: a ``FunctionInvokingChatClient`` (or the class given
with ``--client``) over a ``ScriptedChatClient``, with plain objects implementing the ``Tool``
protocol (and ``@tool`` for the validation workload). Options the loop may or may not take are
looked up in its signature, so the suite keeps working as the loop gains options.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import json
import statistics
import time
import timeit
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import attrs
import fastjsonschema
import trio

from trio_invoke import (
    AgentResponseUpdate,
    ChatClient,
    ChatMessage,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    ScriptedChatClient,
    TextDelta,
    Tool,
    ToolCalled,
    tool,
    validate_against_schema,
)
from trio_invoke.testing import tool_call_updates

from ._floor import floor_run
from ._harness import Measured, Row, Settings, Side, measure_pair
from ._skeleton import skeleton_run

__all__ = ["WORKLOADS", "Context", "Outcome"]

USER = (ChatMessage.user("go"),)
Script = list[Any]  # one scripted response per model call, as ScriptedChatClient takes them


# -- tools: plain objects implementing the Tool protocol ---------------------------------------


class NoopTool:
    """A no-op async tool: returns at once, without a checkpoint."""

    name = "noop"
    description = "Does nothing."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"i": {"type": "integer"}},
        "required": ["i"],
    }
    requires_approval = False
    timeout: float | None = None

    async def execute(self, arguments: dict[str, Any]) -> Any:
        return "ok"


class SleepTool(NoopTool):
    """Sleeps on the current clock, then answers."""

    name = "sleep"
    description = "Sleeps."

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def execute(self, arguments: dict[str, Any]) -> Any:
        await trio.sleep(self.seconds)
        return "ok"


# -- scripts -----------------------------------------------------------------------------------


def fan_out_script(calls: int, name: str = "noop") -> Script:
    """One round of ``calls`` parallel calls, then a final answer."""
    updates: list[AgentResponseUpdate] = []
    for index in range(calls):
        updates += tool_call_updates(f"call_{index}", name, f'{{"i": {index}}}')
    return [[*updates, Finish(FinishReason.TOOL_CALLS)], "done"]


def rounds_script(rounds: int) -> Script:
    """``rounds`` rounds of one call each, then a final answer."""
    script: Script = [
        [*tool_call_updates(f"call_{r}", "noop", f'{{"i": {r}}}'), Finish(FinishReason.TOOL_CALLS)]
        for r in range(rounds)
    ]
    return [*script, "done"]


def streaming_script(deltas: int) -> Script:
    """One response of ``deltas`` text deltas of 5 characters."""
    return [[*(TextDelta("abcde") for _ in range(deltas)), Finish(FinishReason.STOP)]]


# -- the two sides -----------------------------------------------------------------------------


@attrs.frozen
class Context:
    """What every workload gets."""

    settings: Settings
    client_cls: Callable[..., ChatClient] = FunctionInvokingChatClient
    """The loop to measure: ``FunctionInvokingChatClient`` or a compatible class (``--client``)."""

    def accepts(self, option: str) -> bool:
        """Whether the loop takes the keyword ``option``."""
        try:
            parameters = inspect.signature(self.client_cls).parameters
        except (TypeError, ValueError):
            return False
        return option in parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
        )

    def library(self, script: Script, tools: Sequence[Tool], **options: Any) -> Side:
        def setup() -> Callable[[], Any]:
            client = self.client_cls(ScriptedChatClient(script), tools, **options)

            async def run() -> None:
                async with client.run(USER) as stream:
                    async for _ in stream:
                        pass

            return run

        return setup

    @staticmethod
    def skeleton(script: Script, tools: Sequence[Tool]) -> Side:
        """The round's structure alone (:mod:`benchmarks._skeleton`), in the library's place."""
        return _bare_side(skeleton_run, script, tools)

    @staticmethod
    def floor(script: Script, tools: Sequence[Tool]) -> Side:
        return _bare_side(floor_run, script, tools)

    def check(self, script: Script, tools: Sequence[Tool], **options: Any) -> None:
        """Both sides give the caller the same kinds and numbers of updates, with no errors:
        otherwise the comparison would be of different work."""

        async def collect(library: bool) -> list[AgentResponseUpdate]:
            out: list[AgentResponseUpdate] = []
            if library:
                client = self.client_cls(ScriptedChatClient(script), tools, **options)
                async with client.run(USER) as stream:
                    out.extend([u async for u in stream])
            else:
                model = ScriptedChatClient(script)
                async with floor_run(model, USER, {t.name: t for t in tools}) as stream:
                    out.extend([u async for u in stream])
            return out

        library, floor = trio.run(collect, True), trio.run(collect, False)
        errors = [u for u in library if isinstance(u, ToolCalled) and u.is_error]
        if errors:
            raise RuntimeError(f"the library side reported tool errors, e.g. {errors[0]!r}")
        if not isinstance(library[-1], Finish) or library[-1].finish_reason != FinishReason.STOP:
            raise RuntimeError(f"the library side ended with {library[-1]!r}, not Finish(STOP)")
        kinds = Counter(type(u).__name__ for u in library)
        floor_kinds = Counter(type(u).__name__ for u in floor)
        if kinds != floor_kinds:
            raise RuntimeError(f"library and floor differ: {dict(kinds)} vs {dict(floor_kinds)}")

    def measure(self, script: Script, tools: Sequence[Tool], **options: Any) -> Measured:
        self.check(script, tools, **options)

        async def both() -> Measured:
            library = self.library(script, tools, **options)
            return await measure_pair(library, self.floor(script, tools), self.settings)

        return trio.run(both)


def _bare_side(loop: Callable[..., Any], script: Script, tools: Sequence[Tool]) -> Side:
    """A side that runs ``loop`` (the floor or the skeleton) on a fresh scripted model."""
    by_name = {t.name: t for t in tools}

    def setup() -> Callable[[], Any]:
        model = ScriptedChatClient(script)

        async def run() -> None:
            async with loop(model, USER, by_name) as stream:
                async for _ in stream:
                    pass

        return run

    return setup


@attrs.frozen
class Outcome:
    rows: list[Row] = attrs.field(factory=list)
    skipped: list[str] = attrs.field(factory=list)


# -- the workloads -----------------------------------------------------------------------------

TOOLS: tuple[Tool, ...] = (NoopTool(),)


def fan_out(ctx: Context) -> Outcome:
    sizes = [1, 10, 100, 1_000] + ([] if ctx.settings.quick else [10_000])
    measured = {n: ctx.measure(fan_out_script(n), TOOLS) for n in sizes}
    base = measured[1]
    rows = [
        Row("fan-out", "one run, N=1", base.library_median, base.floor_median, data=base),
    ]
    per_call: dict[int, tuple[float, float]] = {}
    for n in sizes[1:]:
        m = measured[n]
        lib = (m.library_median - base.library_median) / (n - 1)
        flo = (m.floor_median - base.floor_median) / (n - 1)
        per_call[n] = (lib, flo)
        rows.append(
            Row(
                "fan-out",
                f"per call, N={n:,}",
                lib,
                flo,
                target=1.5 if n >= 1_000 else None,
                data=m,
                extra={"n": n, "run_library": m.library_median, "run_floor": m.floor_median},
            )
        )
    last = sizes[-1]
    if last > 100:
        (lib_lo, flo_lo), (lib_hi, flo_hi) = per_call[100], per_call[last]
        rows.append(
            Row(
                "fan-out",
                f"per-call growth, N=100 to {last:,}",
                lib_hi - lib_lo,
                flo_hi - flo_lo,
                note=(
                    f"flatness: per-call cost at N={last:,} minus per-call cost at N=100, each "
                    "side (garbage collection and cache misses grow the floor's too); a term "
                    "growing with N in the library would show here and in the per-call ratio "
                    f"at N={last:,}"
                ),
            )
        )
    return Outcome(rows)


def rounds(ctx: Context) -> Outcome:
    count = 50
    script = rounds_script(count)
    options = {"max_rounds": count + 1} if ctx.accepts("max_rounds") else {}
    m = ctx.measure(script, TOOLS, **options)
    _same_updates(script)
    bare = trio.run(
        measure_pair, ctx.skeleton(script, TOOLS), ctx.floor(script, TOOLS), ctx.settings
    )
    return Outcome(
        [
            Row(
                "rounds",
                f"per round, {count} rounds of 1 call",
                m.library_median / count,
                m.floor_median / count,
                target=1.0,
                data=m,
                note=f"one run of {count} tool rounds and a final answer, divided by {count}",
            ),
            Row(
                "rounds",
                "per round, the round's structure alone",
                bare.library_median / count,
                bare.floor_median / count,
                data=bare,
                note=(
                    "library column: the skeleton (benchmarks/_skeleton.py), the structure the "
                    "design fixes for a round -- a nursery, an events channel of 256 and a "
                    "messages channel of 1, a consumer task that runs the first call and starts "
                    "the others as sibling tasks, the caller reading each round's channel -- "
                    "with none of the loop's checks and bookkeeping"
                ),
            ),
        ]
    )


def _same_updates(script: Script) -> None:
    """The skeleton gives the caller what the floor does (else it would measure other work)."""

    async def collect(run: Any) -> list[str]:
        async with run(ScriptedChatClient(script), USER, {t.name: t for t in TOOLS}) as stream:
            return [type(u).__name__ async for u in stream]

    skeleton, floor = trio.run(collect, skeleton_run), trio.run(collect, floor_run)
    if Counter(skeleton) != Counter(floor):
        raise RuntimeError(f"skeleton and floor differ: {Counter(skeleton)} vs {Counter(floor)}")


def streaming(ctx: Context) -> Outcome:
    deltas = 10_000
    m = ctx.measure(streaming_script(deltas), TOOLS)
    return Outcome(
        [
            Row(
                "streaming",
                f"per delta, {deltas:,} deltas",
                m.library_median / deltas,
                m.floor_median / deltas,
                target=1.0,
                data=m,
            )
        ]
    )


def concurrency(ctx: Context) -> Outcome:
    calls, seconds = 100, 0.05
    tools = (SleepTool(seconds),)
    m = ctx.measure(fan_out_script(calls, "sleep"), tools)
    return Outcome(
        [
            Row(
                "concurrency",
                f"wall, {calls} calls x {seconds * 1e3:g} ms sleep",
                m.library_median,
                m.floor_median,
                data=m,
            )
        ]
    )


@tool
async def get_weather(
    city: str, unit: Literal["c", "f"] = "c", days: int = 1, hourly: bool = False
) -> str:
    """The weather forecast for a city."""
    return "sunny"


def validation(ctx: Context) -> Outcome:
    raw = '{"city": "Paris", "unit": "f", "days": 3, "hourly": true}'
    schema = get_weather.parameters
    cached = get_weather.validate  # compiled once, when the tool was built

    def with_cached() -> None:
        cached(json.loads(raw))

    def with_lookup() -> None:
        validate_against_schema(json.loads(raw), schema)

    def compiling() -> None:
        fastjsonschema.compile(schema)(json.loads(raw))

    def parse_only() -> None:
        json.loads(raw)

    def per_call(func: Callable[[], None], min_time: float) -> tuple[float, ...]:
        timer = timeit.Timer(func)
        number, _ = timer.autorange()
        number = max(1, int(number * min_time / 0.2))
        return tuple(t / number for t in timer.repeat(ctx.settings.repeat, number))

    min_time = ctx.settings.min_sample
    samples = {
        name: per_call(func, min_time)
        for name, func in [
            ("cached", with_cached),
            ("lookup", with_lookup),
            ("compile", compiling),
            ("parse", parse_only),
        ]
    }
    med = {name: statistics.median(values) for name, values in samples.items()}

    def data(a: str, b: str) -> Measured:
        return Measured(samples[a], samples[b], (0, 0))

    return Outcome(
        [
            Row(
                "validation",
                "parse + cached validator, beside compiling per call",
                med["cached"],
                med["compile"],
                data=data("cached", "compile"),
                note="floor column: json.loads + fastjsonschema.compile(schema) on every call",
            ),
            Row(
                "validation",
                "parse + validate_against_schema",
                med["lookup"],
                med["compile"],
                data=data("lookup", "compile"),
                note="floor column: json.loads + fastjsonschema.compile(schema) on every call; "
                "validate_against_schema finds the cached validator by the schema's canonical "
                "JSON on every call",
            ),
            Row(
                "validation",
                "parse + cached validator, beside parsing alone",
                med["cached"],
                med["parse"],
                data=data("cached", "parse"),
                note="floor column: json.loads alone (what validation adds to parsing)",
            ),
        ]
    )


def memory(ctx: Context) -> Outcome:
    calls = 1_000 if ctx.settings.quick else 10_000
    script = fan_out_script(calls)

    def peak(side: Side) -> int:
        run = side()
        gc.collect()
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            trio.run(run)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    ctx.check(script, TOOLS)  # the runs traced do the fan-out, without errors
    library = peak(ctx.library(script, TOOLS))
    floor = peak(ctx.floor(script, TOOLS))
    return Outcome(
        [
            Row(
                "memory",
                f"peak traced, fan-out N={calls:,}",
                float(library),
                float(floor),
                unit="B",
                target=None if ctx.settings.quick else 100e6,
                note="tracemalloc peak over one run (the script itself is built before tracing)",
            )
        ]
    )


def eager(ctx: Context) -> Outcome:
    if not ctx.accepts("eager_tools"):
        name = getattr(ctx.client_cls, "__name__", repr(ctx.client_cls))
        return Outcome(
            skipped=[f"eager: {name} takes no eager_tools option (nothing to compare yet)"]
        )
    calls, delay, seconds = 20, 0.005, 0.02
    script = fan_out_script(calls, "sleep")
    tools = (SleepTool(seconds),)

    async def once(eager_tools: bool) -> tuple[float, float, float]:
        """Seconds to the end, to the first ``ToolCalled`` and to a ``ToolCalled`` on average."""
        client = ctx.client_cls(
            ScriptedChatClient(script, delay=delay), tools, eager_tools=eager_tools
        )
        start = time.perf_counter()
        results: list[float] = []
        async with client.run(USER) as stream:
            async for update in stream:
                if isinstance(update, ToolCalled):
                    results.append(time.perf_counter() - start)
        if len(results) != calls:
            raise RuntimeError(f"eager: expected {calls} results, got {len(results)}")
        return time.perf_counter() - start, results[0], statistics.mean(results)

    async def sample() -> dict[bool, list[tuple[float, float, float]]]:
        out: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
        await once(True)  # warm-up
        for index in range(ctx.settings.repeat):
            for flag in (True, False) if index % 2 == 0 else (False, True):
                out[flag].append(await once(flag))
        return out

    results = trio.run(sample)

    def med(flag: bool, which: int) -> float:
        return statistics.median(r[which] for r in results[flag])

    note = (
        f"{calls} calls streamed with {delay * 1e3:g} ms before each update, tools sleeping "
        f"{seconds * 1e3:g} ms, real clock; library: eager_tools=True, floor column: "
        "eager_tools=False"
    )
    return Outcome(
        [
            Row("eager", "wall to the end", med(True, 0), med(False, 0), note=note),
            Row("eager", "wall to the first ToolCalled", med(True, 1), med(False, 1)),
            Row("eager", "wall to a ToolCalled, mean", med(True, 2), med(False, 2)),
        ]
    )


def telemetry(ctx: Context) -> Outcome:
    """Fan-out per call with ``Telemetry()`` beside the same run without it: with no
    OpenTelemetry SDK configured (the API's no-op tracer), and with the SDK and an in-memory
    exporter and metric reader."""
    try:
        from trio_invoke.otel import Telemetry  # noqa: PLC0415 -- needs the otel extra
    except ImportError:
        return Outcome(skipped=["telemetry: needs trio_invoke[otel] (opentelemetry-api)"])
    if not ctx.accepts("telemetry"):
        return Outcome(skipped=["telemetry: the loop takes no telemetry option"])
    n = 100 if ctx.settings.quick else 1_000
    script = fan_out_script(n)
    ctx.check(script, TOOLS)  # both sides do the fan-out, without errors
    without = ctx.library(script, TOOLS)
    note = "floor column: the same fan-out without telemetry; per call = a whole run / N"
    sides: list[tuple[str, Callable[[], Telemetry]]] = [("Telemetry(), no SDK", Telemetry)]
    try:
        from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
            InMemorySpanExporter,
        )
    except ImportError:
        skipped = ["telemetry with the SDK: opentelemetry-sdk is not installed"]
    else:
        skipped = []
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

        def with_sdk() -> Telemetry:
            exporter.clear()  # spans of earlier runs are not kept
            return Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)

        sides.append(("Telemetry(), SDK + in-memory exporter", with_sdk))
    rows = []
    for label, make in sides:

        def observed(make: Callable[[], Telemetry] = make) -> Callable[[], Any]:
            return ctx.library(script, TOOLS, telemetry=make())()

        ctx.check(script, TOOLS, telemetry=make())
        m = trio.run(measure_pair, observed, without, ctx.settings)
        target = 1.05 if label.endswith("no SDK") else None
        rows.append(
            Row(
                "telemetry",
                f"per call, N={n:,}, {label}",
                m.library_median / n,
                m.floor_median / n,
                target=target,
                note=note,
                data=m,
            )
        )
    return Outcome(rows, skipped)


def mcp(ctx: Context) -> Outcome:
    from ._mcp import mcp as run  # noqa: PLC0415 -- it imports this module

    return run(ctx)


def cpu_script(calls: int, n: int) -> Script:
    """One round of ``calls`` parallel calls of ``crunch(n)``, then a final answer."""
    updates: list[AgentResponseUpdate] = []
    for index in range(calls):
        updates += tool_call_updates(f"call_{index}", "crunch", f'{{"n": {n}}}')
    return [[*updates, Finish(FinishReason.TOOL_CALLS)], "done"]


def process(ctx: Context) -> Outcome:
    """CPU-bound sync tools in worker processes (``@tool(isolation="process")``) beside the
    same tools in worker threads (the default): wall time of 4 calls of ~200 ms of CPU each,
    of 1 such call, the per-call cost of a trivial tool, and the first call in a new worker."""
    try:
        trio_parallel: Any = importlib.import_module("trio_parallel")
        from . import _cpu  # noqa: PLC0415 - needs trio-parallel
    except ImportError as exc:
        return Outcome(skipped=[f"process: {exc}"])
    target = 0.05 if ctx.settings.quick else 0.2

    def seconds(n: int) -> float:
        """The work's time in this process: the least of 5 runs, the one least disturbed by
        whatever else the machine runs."""
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            _cpu.work(n)
            runs.append(time.perf_counter() - start)
        return min(runs)

    probe = 200_000
    n = max(1, round(probe * target / seconds(probe)))
    one_call = seconds(n)  # in this process, no thread, no worker: the floor of the work

    async def checked(tool_: Tool, script: Script) -> None:
        client = ctx.client_cls(ScriptedChatClient(script), (tool_,))
        async with client.run(USER) as stream:
            errors = [u async for u in stream if isinstance(u, ToolCalled) and u.is_error]
        if errors:
            raise RuntimeError(f"process: the run reported tool errors, e.g. {errors[0]!r}")

    def wall(calls: int) -> Measured:
        script = cpu_script(calls, n)

        async def both() -> Measured:
            await checked(_cpu.crunch, script)  # also starts the workers
            await checked(_cpu.crunch_in_thread, script)
            library = ctx.library(script, (_cpu.crunch,))
            floor = ctx.library(script, (_cpu.crunch_in_thread,))
            return await measure_pair(library, floor, ctx.settings)

        return trio.run(both)

    def trip(tool_: Tool) -> Side:
        def setup() -> Callable[[], Any]:
            async def run() -> None:
                await tool_.execute({})

            return run

        return setup

    async def trips() -> tuple[Measured, int]:
        await _cpu.trivial.execute({})  # a warm worker
        tokens = trio_parallel.current_default_worker_limiter().total_tokens
        measured = await measure_pair(
            trip(_cpu.trivial), trip(_cpu.trivial_in_thread), ctx.settings
        )
        return measured, tokens

    async def first_calls() -> tuple[list[float], list[float]]:
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(ctx.settings.repeat):
            async with trio_parallel.cache_scope():  # a new worker context: no worker yet
                start = time.perf_counter()
                await _cpu.trivial.execute({})
                cold.append(time.perf_counter() - start)
                start = time.perf_counter()
                await _cpu.trivial.execute({})
                warm.append(time.perf_counter() - start)
        return cold, warm

    four, single = wall(4), wall(1)
    per_trip, tokens = trio.run(trips)
    cold, warm = trio.run(first_calls)
    first = Measured(tuple(cold), tuple(warm), (1, 1))
    note = (
        f"library column: @tool(isolation='process'); floor column: the same tool in a worker "
        f"thread (the default); each call {n:,} iterations of pure-Python arithmetic, "
        f"{one_call * 1e3:.0f} ms called directly in this process; at most {tokens} worker "
        "processes at once (trio-parallel's default limiter: one per CPU)"
    )
    return Outcome(
        [
            Row(
                "process",
                f"wall, 4 calls x {one_call * 1e3:.0f} ms CPU",
                four.library_median,
                four.floor_median,
                data=four,
                note=note,
                extra={"iterations": n, "one_call_in_process": one_call},
            ),
            Row(
                "process",
                f"wall, 1 call x {one_call * 1e3:.0f} ms CPU",
                single.library_median,
                single.floor_median,
                data=single,
            ),
            Row(
                "process",
                "per call, trivial tool, warm worker",
                per_trip.library_median,
                per_trip.floor_median,
                data=per_trip,
            ),
            Row(
                "process",
                "first call in a new worker",
                first.library_median,
                first.floor_median,
                data=first,
                note="floor column here: the next call in the same worker (a fresh "
                "trio_parallel.cache_scope() per sample; the worker starts a Python interpreter "
                "and imports the tool's module)",
            ),
        ]
    )


def http(ctx: Context) -> Outcome:
    from ._http import http as run  # noqa: PLC0415 -- it imports this module

    return run(ctx)


def conversations(ctx: Context) -> Outcome:
    from ._http import conversations as run  # noqa: PLC0415 -- it imports this module

    return run(ctx)


def agents(ctx: Context) -> Outcome:
    from ._http import agents as run  # noqa: PLC0415 -- it imports this module

    return run(ctx)


WORKLOADS: Mapping[str, Callable[[Context], Outcome]] = {
    "fan-out": fan_out,
    "rounds": rounds,
    "streaming": streaming,
    "concurrency": concurrency,
    "validation": validation,
    "memory": memory,
    "eager": eager,
    "telemetry": telemetry,
    "mcp": mcp,
    "process": process,
    "http": http,
    "conversations": conversations,
    "agents": agents,
}


def select(names: Iterable[str]) -> list[str]:
    """Workload names from ``--only`` values (comma-separated or repeated), in suite order."""
    names = list(names)
    wanted = {n.strip() for name in names for n in name.split(",") if n.strip()}
    if names and not wanted:
        raise ValueError(f"--only needs a workload name; choose from {', '.join(WORKLOADS)}")
    unknown = wanted - WORKLOADS.keys()
    if unknown:
        raise ValueError(
            f"unknown workload(s) {', '.join(sorted(unknown))}; choose from {', '.join(WORKLOADS)}"
        )
    return [name for name in WORKLOADS if name in wanted] if wanted else list(WORKLOADS)
