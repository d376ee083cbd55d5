"""Shared test configuration: Hypothesis profiles, and where trio_invoke is imported from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from sse_server import SSEServer

import trio_invoke

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the extras sessions run tests/test_extras.py without Hypothesis
    pass
else:
    settings.register_profile("default", deadline=None)
    settings.register_profile(
        "ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile("dev", deadline=None, max_examples=20)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

CHECKOUT = Path(__file__).resolve().parent.parent
PACKAGE = Path(trio_invoke.__file__).resolve().parent


def pytest_report_header() -> str:
    where = "the checkout" if PACKAGE.parent == CHECKOUT else "installed"
    return f"trio_invoke {trio_invoke.__version__} from {PACKAGE} ({where})"


def pytest_configure(config: pytest.Config) -> None:
    # nox's sessions test the built wheel; importing ./trio_invoke instead would test nothing new.
    if os.environ.get("TRIO_INVOKE_EXPECT_INSTALLED") and PACKAGE.parent == CHECKOUT:
        raise pytest.UsageError(
            f"trio_invoke was imported from the checkout ({PACKAGE}), not the installed wheel"
        )


PROXY_VARIABLES = tuple(
    case(f"{kind}_proxy") for kind in ("http", "https", "all") for case in (str.lower, str.upper)
)
"""The variables httpx2 (trust_env, its default) would send requests through a proxy for."""


@pytest.fixture(autouse=True, scope="session")
def _no_proxy_from_the_environment() -> Iterator[None]:
    """The tests' HTTP goes to their own servers on 127.0.0.1, never through a proxy that the
    machine's environment names (which would get every request, and fail the test)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in PROXY_VARIABLES:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture
async def server(nursery: trio.Nursery) -> SSEServer:
    """A loopback HTTP server replaying scripted SSE bodies (``tests/sse_server.py``), stopped
    with the test."""
    srv = SSEServer()
    await nursery.start(srv.serve)
    return srv
