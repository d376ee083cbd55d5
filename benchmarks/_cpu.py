"""CPU-bound and trivial tools for the ``process`` workload, in threads and in processes.

A module of its own, at the top level of the ``benchmarks`` package, so that worker processes
can import it (a process tool's function goes to its worker by reference). Importing it needs
trio-parallel (the extra ``trio_invoke[process]``).
"""

from __future__ import annotations

from trio_invoke import tool

__all__ = ["crunch", "crunch_in_thread", "trivial", "trivial_in_thread", "work"]


def work(n: int) -> int:
    """``n`` iterations of pure-Python arithmetic: CPU-bound, holding the GIL throughout."""
    total = 0
    for i in range(n):
        total = (total + i * i) % 1_000_003
    return total


@tool(isolation="process", name="crunch")
def crunch(n: int) -> int:
    """CPU-bound work, in a worker process."""
    return work(n)


@tool(name="crunch")
def crunch_in_thread(n: int) -> int:
    """The same work, in a worker thread."""
    return work(n)


@tool(isolation="process", name="trivial")
def trivial() -> int:
    """Nothing, in a worker process: the cost of the trip."""
    return 0


@tool(name="trivial")
def trivial_in_thread() -> int:
    """Nothing, in a worker thread."""
    return 0
