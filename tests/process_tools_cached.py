"""Process tools under ``functools`` caches, for ``test_process.py`` (imported by one test, so
that a failure to decorate them fails that test alone)."""

from __future__ import annotations

import functools
import os

from trio_invoke import tool


@tool(isolation="process")
@functools.cache
def cached_cube(x: int) -> dict[str, int]:
    """Cube, under functools.cache (a wrapper that pickles by its qualified name)."""
    return {"cube": x**3, "pid": os.getpid()}


@tool(isolation="process")
@functools.lru_cache(maxsize=8)
def lru_negate(x: int) -> int:
    """Negate, under functools.lru_cache."""
    return -x
