"""``python -m benchmarks``: run the suite, print the table, write the JSON."""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from trio_invoke import ChatClient, FunctionInvokingChatClient

from ._harness import Row, Settings, duplicate_measures, format_table, machine_info
from ._workloads import (
    TOOLS,
    WORKLOADS,
    Context,
    fan_out_script,
    rounds_script,
    select,
    streaming_script,
)

DEFAULT_JSON = Path(__file__).parent / "results" / "latest.json"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="trio_invoke's tool-calling loop beside the bare-Trio floor.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 3 samples, short samples, N up to 1,000",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these workloads (repeat or comma-separate): {', '.join(WORKLOADS)}",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        metavar="PATH",
        help="where to write the results (default: benchmarks/results/latest.json)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="R",
        help="samples per side (default 9, 3 with --quick; for conversations and agents, whose "
        "sample is a batch of N runs, 3, 1 with --quick)",
    )
    parser.add_argument(
        "--client",
        metavar="MODULE:NAME",
        help="measure this FunctionInvokingChatClient-compatible class instead (a module path "
        "or a .py file, then the class name), e.g. to try a change on a copy of the loop",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of measuring, profile the library side of fan-out (N=1,000), rounds and "
        "streaming with pyinstrument (pip install pyinstrument); with --only, just those",
    )
    return parser


def load_client(spec: str) -> Callable[..., ChatClient]:
    """``package.module:Name`` or ``path/to/file.py:Name``."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise SystemExit(f"--client takes MODULE:NAME, got {spec!r}")
    try:
        if where.endswith(".py"):
            path = Path(where).resolve()
            module_name = f"_bench_client_{path.stem}"
            loader = importlib.util.spec_from_file_location(module_name, path)
            if loader is None or loader.loader is None:
                raise SystemExit(f"cannot load {path}")
            module = importlib.util.module_from_spec(loader)
            sys.modules[module_name] = module
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except (ImportError, OSError) as exc:
        raise SystemExit(f"--client {spec}: cannot load {where}: {exc}") from None
    client: Callable[..., ChatClient] | None = getattr(module, name, None)
    if client is None:
        raise SystemExit(f"--client {spec}: {where} has no {name!r}")
    return client


def profile(ctx: Context, names: Sequence[str]) -> None:
    try:
        from pyinstrument import Profiler  # noqa: PLC0415 - optional, only for --profile
    except ImportError:
        raise SystemExit("--profile needs pyinstrument: pip install pyinstrument") from None
    targets = {
        "fan-out": ("fan-out, N=1,000", ctx.library(fan_out_script(1_000), TOOLS), 20),
        "rounds": ("rounds, 50", ctx.library(rounds_script(50), TOOLS, max_rounds=51), 40),
        "streaming": ("streaming, 10,000 deltas", ctx.library(streaming_script(10_000), TOOLS), 20),
    }
    for name in names:
        if name not in targets:
            continue
        title, side, runs = targets[name]
        prepared = [side() for _ in range(runs)]

        async def main(prepared: Sequence[Callable[[], Any]] = prepared) -> None:
            for run in prepared:
                await run()

        profiler = Profiler(interval=0.0002, async_mode="disabled")
        with profiler:
            trio.run(main)
        print(f"==== {title}: {runs} runs, library side")
        # The call tree, library frames folded; the scheduler's own time (trio's run loop) shows
        # as "[self]" of this module's frame, since every task step starts there.
        print(profiler.output_text(unicode=True, color=False, time="percent_of_total"))


INTERRUPTED = 130
"""The exit status after Ctrl-C: 128 + SIGINT, the shell's convention."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite; 0, or :data:`INTERRUPTED` after Ctrl-C (no traceback, no results file:
    the workloads that finished are named, and the servers the workloads started are stopped
    on the way out)."""
    args = _parser().parse_args(argv)
    try:
        names = select(args.only)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if args.repeat is not None and args.repeat < 1:
        raise SystemExit("--repeat takes a number >= 1")
    settings = Settings.from_options(args.repeat, args.quick)
    client_cls = load_client(args.client) if args.client else FunctionInvokingChatClient
    ctx = Context(settings, client_cls)
    timings: dict[str, float] = {}  # the workloads finished, and how long each took
    try:
        if args.profile:
            profile(ctx, names)
            return 0
        info = machine_info()
        if args.client:
            info["client"] = args.client
        run(ctx, names, info=info, timings=timings, path=args.json, argv=argv)
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        # The line of the workload that was running is still open ("  NAME: "): this ends it.
        finished = ", ".join(name for name in names if name in timings) or "none"
        print(
            "interrupted"
            if args.profile
            else f"interrupted (no results written); finished: {finished}",
            file=sys.stderr,
        )
        return INTERRUPTED
    return 0


def _interrupted(exc: BaseException) -> bool:
    """A Ctrl-C: ``KeyboardInterrupt``, alone or out of a Trio nursery (in a group)."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)


def run(
    ctx: Context,
    names: Sequence[str],
    *,
    info: dict[str, Any],
    timings: dict[str, float],
    path: Path,
    argv: Sequence[str] | None,
) -> None:
    """Run the workloads ``names``, each one's seconds into ``timings`` as it finishes; print
    the table (its header from ``info``) and write the JSON file at ``path``."""
    settings = ctx.settings
    rows: list[Row] = []
    skipped: list[str] = []
    for name in names:
        print(f"  {name}: ", end="", file=sys.stderr, flush=True)
        start = time.perf_counter()
        outcome = WORKLOADS[name](ctx)
        seconds = time.perf_counter() - start
        rows += outcome.rows
        shared = duplicate_measures(rows)
        if shared:
            raise RuntimeError(
                f"{name}: more than one row measures {', '.join(map(repr, shared))}; each "
                "(workload, measure) must name one row of the results"
            )
        skipped += outcome.skipped
        timings[name] = seconds
        print(f"{seconds:.1f} s", file=sys.stderr)
    print(format_table(rows, settings, info, skipped))
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            ["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": info,
        "settings": {
            "repeat": settings.repeat,
            "min_sample": settings.min_sample,
            "quick": settings.quick,
            "batches": settings.batches,
        },
        "seconds_per_workload": timings,
        "rows": [row.to_json() for row in rows],
        "skipped": skipped,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside it, then renamed over it: a Ctrl-C while writing leaves the file as it was.
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    print(f"\nresults written to {path}")


if __name__ == "__main__":
    sys.exit(main())
