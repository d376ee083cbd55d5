"""Timing, results and the table: the parts of the suite that know nothing about the loop."""

from __future__ import annotations

import gc
import math
import os
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import Any

import attrs
import trio

__all__ = [
    "Measured",
    "Row",
    "Settings",
    "Side",
    "duplicate_measures",
    "format_table",
    "machine_info",
    "measure_pair",
]

Run = Callable[[], Awaitable[object]]
"""One run of a workload, ready to go (its model and client already built)."""
Side = Callable[[], Run]
"""Builds a fresh run of one side of a workload: untimed set-up, then the timed run."""


@attrs.frozen
class Settings:
    """How hard to measure."""

    repeat: int
    """Samples per side; the table gives their median."""
    min_sample: float
    """Seconds a sample lasts at least: short runs are repeated within one sample."""
    quick: bool
    batches: int = attrs.field(
        default=attrs.Factory(lambda self: 1 if self.quick else 3, takes_self=True)
    )
    """Samples per side of the workloads whose one sample is a batch of N concurrent runs
    (``conversations``, ``agents``): ``--repeat`` when it is given, else 1 with ``--quick`` and
    3 (a batch of 1,000 runs is many runs already)."""

    @classmethod
    def from_options(cls, repeat: int | None, quick: bool) -> Settings:
        """The settings of ``--repeat R`` (``None`` when not given) and ``--quick``."""
        return cls(
            repeat=repeat or (3 if quick else 9),
            min_sample=0.01 if quick else 0.05,
            quick=quick,
            **({} if repeat is None else {"batches": repeat}),
        )


@attrs.frozen
class Measured:
    """The samples of one workload configuration, both sides: seconds per run."""

    library: tuple[float, ...]
    floor: tuple[float, ...]
    runs_per_sample: tuple[int, int]

    @property
    def library_median(self) -> float:
        return statistics.median(self.library)

    @property
    def floor_median(self) -> float:
        return statistics.median(self.floor)

    def to_json(self) -> dict[str, Any]:
        return {
            "library": list(self.library),
            "floor": list(self.floor),
            "runs_per_sample": list(self.runs_per_sample),
        }


async def _sample(side: Side, number: int) -> float:
    runs = [side() for _ in range(number)]  # set-up is not timed
    gc.collect()
    start = time.perf_counter()
    for run in runs:
        await run()
    return (time.perf_counter() - start) / number


async def measure_pair(library: Side, floor: Side, settings: Settings) -> Measured:
    """Median-ready samples of both sides, interleaved so that drift hits both alike.

    One warm-up run per side (which also sets how many runs a sample takes), then
    ``settings.repeat`` samples per side, alternating which side goes first.
    """
    numbers = []
    for side in (library, floor):
        warm = await _sample(side, 1)
        numbers.append(max(1, min(10_000, math.ceil(settings.min_sample / max(warm, 1e-9)))))
    lib_samples: list[float] = []
    floor_samples: list[float] = []
    for index in range(settings.repeat):
        if index % 2 == 0:
            lib_samples.append(await _sample(library, numbers[0]))
            floor_samples.append(await _sample(floor, numbers[1]))
        else:
            floor_samples.append(await _sample(floor, numbers[1]))
            lib_samples.append(await _sample(library, numbers[0]))
    return Measured(tuple(lib_samples), tuple(floor_samples), (numbers[0], numbers[1]))


@attrs.frozen
class Row:
    """One line of the table."""

    workload: str
    measure: str
    library: float | None
    floor: float | None
    unit: str = "s"
    """``"s"`` (printed as ns/µs/ms/s), ``"B"`` (printed as MB), ``"x"`` (a plain factor) or
    ``"/s"`` (a rate: more is better)."""
    target: float | None = None
    """The most the library may take, as a ratio to the floor (or, for ``"B"``, in bytes); for
    a rate, the least ratio it must reach."""
    note: str | None = None
    """Printed under the table: what the floor column means when it is not the floor."""
    data: Measured | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)

    @property
    def noise(self) -> bool:
        """A time of zero or less: a difference of two runs (``per call``) that noise outweighed
        (likely with ``--quick``), which no target can judge."""
        return self.unit == "s" and any(
            v is not None and v <= 0 for v in (self.library, self.floor)
        )

    @property
    def ratio(self) -> float | None:
        if self.library is None or self.floor is None or self.floor <= 0 or self.noise:
            return None
        return self.library / self.floor

    @property
    def ok(self) -> bool | None:
        if self.target is None or self.library is None or self.noise:
            return None
        if self.unit == "B":
            return self.library < self.target
        ratio = self.ratio
        if ratio is None:
            return None
        return ratio >= self.target if self.unit == "/s" else ratio <= self.target

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "measure": self.measure,
            "unit": self.unit,
            "library": self.library,
            "floor": self.floor,
            "ratio": self.ratio,
            "target": self.target,
            "ok": self.ok,
            "note": self.note,
            "samples": self.data.to_json() if self.data else None,
            **self.extra,
        }


def duplicate_measures(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """The ``(workload, measure)`` keys more than one row has: the JSON file and comparisons
    over time tell rows apart by that key, so each must be one row's."""
    counts = Counter((row.workload, row.measure) for row in rows)
    return [key for key, count in counts.items() if count > 1]


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "B":
        return f"{value / 1e6:.1f} MB"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "/s":
        return f"{value:.0f}/s"
    for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {suffix}".replace("e+0", "e")
    return f"{value / 1e-9:.3g} ns"


def _target(row: Row) -> str:
    if row.target is None:
        return ""
    if row.unit == "B":
        limit = f"< {row.target / 1e6:.0f} MB"
    else:
        limit = f"{'>=' if row.unit == '/s' else '<='} {row.target:g}x"
    if row.noise:
        return f"{limit}  not judged: a time <= 0 is noise"
    return f"{limit}  {'ok' if row.ok else 'MISSED'}"


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    try:
        version = metadata.version("trio-invoke")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        version = "unknown"
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "trio": trio.__version__,
        "trio_invoke": version,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _processor(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def _processor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def format_table(
    rows: Sequence[Row], settings: Settings, info: dict[str, Any], skipped: Sequence[str]
) -> str:
    """The table, its header (what, where, how often) and its notes."""
    lines = [
        "trio_invoke benchmarks: the library beside the bare-Trio floor "
        f"(ratio = library / floor){' [--quick]' if settings.quick else ''}",
        f"Python {info['python']} ({info['implementation']}), trio {info['trio']}, "
        f"trio_invoke {info['trio_invoke']}",
        f"{info['cpus']} CPUs, {info['processor']}, {info['platform']}"
        + (
            f", load average {info['load_average'][0]:.2f} at start" if info["load_average"] else ""
        ),
        *([f"library side: --client {info['client']}"] if info.get("client") else []),
        f"median of {settings.repeat} samples per side after 1 warm-up run; a sample repeats a "
        f"short run until it lasts >= {settings.min_sample * 1e3:g} ms",
        "",
    ]
    header = ("workload", "measure", "library", "floor", "ratio", "target")
    table = [header]
    notes: list[str] = []
    for row in rows:
        measure = row.measure
        if row.note is not None:
            notes.append(row.note)
            measure += f" [{len(notes)}]"
        ratio = row.ratio
        table.append(
            (
                row.workload,
                measure,
                format_value(row.library, row.unit),
                format_value(row.floor, row.unit),
                "-" if ratio is None else f"{ratio:.2f}x",
                _target(row),
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for index, line in enumerate(table):
        cells = [
            cell.ljust(width) if i < 2 or i == 5 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    lines.extend(f"[{i}] {note}" for i, note in enumerate(notes, 1))
    lines.extend(f"skipped: {reason}" for reason in skipped)
    return "\n".join(lines)
