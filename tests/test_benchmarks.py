"""The benchmark suite (``python -m benchmarks``) measures what it says it measures: light runs
of its workloads, shrunk so that they take seconds, not the suite's minutes."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's benchmarks/

from benchmarks import _http

pytest.importorskip("httpx2")


def test_the_http_workloads_server_leaves_nothing_open() -> None:
    with _http.openai_server() as base_url:
        assert base_url.startswith("http://127.0.0.1:")
    gc.collect()  # an unclosed pipe to the server would warn here (warnings are errors)
