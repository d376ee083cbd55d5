"""Sessions: `nox` runs tests, lint and typecheck; `nox -s bench` runs the benchmarks."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite under coverage, with branch coverage reported (floor in pyproject.toml)."""
    session.install("-e", ".[test]")
    session.run("coverage", "erase")
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "report")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, strict, on the package."""
    session.install("-e", ".[test]", "mypy>=1.10")
    session.run("mypy")


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """The benchmark suite: the library beside the bare-Trio floor (not run by default)."""
    session.install("-e", ".[process]")  # the process workload compares threads and processes
    session.run("python", "-m", "benchmarks", *session.posargs)
