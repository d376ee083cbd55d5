"""``python -m benchmarks.instructions``: instructions per unit of work, counted by callgrind.

Time on a shared 2-core machine moves by 10-20% from one run to the next; the instructions a
run executes do not (``valgrind --tool=callgrind`` counts them the same whatever else the machine
is doing). This runs each side of a workload under callgrind twice -- ``SMALL`` runs, then
``LARGE`` runs, the same ``LARGE`` set-ups built before either -- and divides the difference by
the runs and the unit (a round, a delta): start-up, imports and set-up cancel out. Instructions
are not time (the same count can take longer when the code has more branches the processor
mispredicts or touches more memory), so this says how much work each side does, and the
timed table says what it costs.

Needs ``valgrind`` (Debian's package); about a minute per workload.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import trio

from ._harness import Settings, Side
from ._workloads import TOOLS, Context, rounds_script, streaming_script

SMALL, LARGE = 4, 12
ROUNDS, DELTAS = 50, 1_000


def _sides() -> dict[str, tuple[int, str, dict[str, Side]]]:
    """Workload -> (units per run, unit, side name -> side)."""
    ctx = Context(Settings.from_options(None, quick=True))
    rounds, streaming = rounds_script(ROUNDS), streaming_script(DELTAS)
    return {
        "rounds": (
            ROUNDS,
            "round",
            {
                "library": ctx.library(rounds, TOOLS, max_rounds=ROUNDS + 1),
                "skeleton": ctx.skeleton(rounds, TOOLS),
                "floor": ctx.floor(rounds, TOOLS),
            },
        ),
        "streaming": (
            DELTAS,
            "delta",
            {"library": ctx.library(streaming, TOOLS), "floor": ctx.floor(streaming, TOOLS)},
        ),
    }


def _child(workload: str, side: str, runs: int) -> int:
    """Build ``LARGE`` runs of ``side``, then do ``runs`` of them in one Trio run; the runs
    done."""
    built = [_sides()[workload][2][side]() for _ in range(LARGE)]
    done = 0

    async def main() -> None:
        nonlocal done
        for run in built[:runs]:
            await run()
            done += 1

    trio.run(main)
    return done


def _count(workload: str, side: str, runs: int, out: Path) -> int:
    """The instructions of a process that does ``runs`` runs of ``side``, all told."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "benchmarks.instructions",
        "--child",
        workload,
        side,
        str(runs),
    ]
    try:
        # (one hash seed: str hashes, and with them dict probing, the same in every count)
        subprocess.run(
            command, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"}
        )
    except FileNotFoundError:
        raise SystemExit(
            "python -m benchmarks.instructions needs valgrind (Debian: apt install valgrind)"
        ) from None
    totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    if totals is None:
        raise RuntimeError(f"no instruction total in {out}")
    return int(totals.group(1))


def main(argv: list[str] | None = None, echo: Callable[[str], object] = print) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--only", choices=["rounds", "streaming"], action="append")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        workload, side, runs = args.child
        _child(workload, side, int(runs))
        return
    with tempfile.TemporaryDirectory() as scratch:
        for workload, (units, unit, sides) in _sides().items():
            if args.only and workload not in args.only:
                continue
            counts = {}
            for side in sides:
                small, large = (
                    _count(workload, side, n, Path(scratch) / f"{side}.{n}") for n in (SMALL, LARGE)
                )
                counts[side] = (large - small) / (LARGE - SMALL) / units
            floor = counts["floor"]
            for side, count in counts.items():
                echo(
                    f"{workload:9}  {side:8}  {count:>10,.0f} instructions per {unit}"
                    f"  {count / floor:5.2f}x the floor"
                )


if __name__ == "__main__":
    main()
