"""The project's sessions: ``nox`` runs the default ones, ``nox -s NAME`` one of them.

* ``tests``: the whole suite against the built wheel, installed (not editable) with every extra,
  under branch coverage; ``nox -s tests -- -m "not slow"`` is the quick run.
* ``extras``: for no extra and for each extra alone, the wheel with only that extra, checking
  that every module imports or fails with an error naming its extra (``tests/test_extras.py``).
* ``lint`` (ruff), ``typecheck`` (mypy strict, and the typing checks of ``tests/typing``),
  ``docs`` (Sphinx: the HTML reference and the docstrings' doctests, warnings as errors).
* ``bench`` (not run by default): the benchmarks beside the bare-Trio floor.

Test and tool dependencies are PEP 735 dependency groups in ``pyproject.toml``, read here by
``nox.project.dependency_groups``, so any pip can install them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"  # nox.project.dependency_groups
nox.options.sessions = ["tests", "extras", "lint", "typecheck", "docs"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_external_run = True

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
EXTRAS = sorted(PYPROJECT["project"].get("optional-dependencies", {}))
ALL_EXTRAS = ",".join(EXTRAS)
WHEEL_DIR = ROOT / ".nox" / "_wheel"

_wheel: Path | None = None


def group(*names: str) -> tuple[str, ...]:
    """The requirements of the named dependency groups."""
    return nox.project.dependency_groups(PYPROJECT, *names)


def built_wheel(session: nox.Session) -> Path:
    """The project's wheel, built once per nox run (from the files as they are now)."""
    global _wheel  # one build shared by the sessions of one nox run
    if _wheel is None or not _wheel.exists():
        shutil.rmtree(WHEEL_DIR, ignore_errors=True)
        session.run("python", "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(WHEEL_DIR), ".")
        (_wheel,) = WHEEL_DIR.glob("trio_invoke-*.whl")
    return _wheel


def install_wheel(session: nox.Session, extras: str, *requirements: str) -> None:
    """Install the wheel (with ``extras``) and ``requirements``; the wheel is reinstalled even
    when a reused environment has the same version."""
    wheel = built_wheel(session)
    target = f"{wheel}[{extras}]" if extras else str(wheel)
    session.install(target, *requirements)
    session.install("--force-reinstall", "--no-deps", str(wheel))


def pytest_script(session: nox.Session) -> str:
    # The console script, not ``python -m pytest``: ``-m`` would put the checkout first on
    # sys.path, and the tests would import ./trio_invoke instead of the installed wheel.
    return str(Path(session.bin) / "pytest")


@nox.session
def tests(session: nox.Session) -> None:
    """The whole suite against the installed wheel with every extra, under branch coverage."""
    install_wheel(session, ALL_EXTRAS, *group("tests"))
    session.run("coverage", "erase")
    session.run(
        "coverage",
        "run",
        pytest_script(session),
        *session.posargs,
        env={"TRIO_INVOKE_EXPECT_INSTALLED": "1", "TRIO_INVOKE_EXTRAS": ALL_EXTRAS},
    )
    session.run("coverage", "combine", "--quiet")
    session.run("coverage", "report")


@nox.session
@nox.parametrize("extra", [None, *EXTRAS], ids=["none", *EXTRAS])
def extras(session: nox.Session, extra: str | None) -> None:
    """The wheel with one extra (or none): every module imports, or names the extra it needs."""
    install_wheel(session, extra or "", *group("tests-minimal"))
    session.run(
        pytest_script(session),
        "-p",
        "no:cacheprovider",
        "tests/test_extras.py",
        *session.posargs,
        env={"TRIO_INVOKE_EXPECT_INSTALLED": "1", "TRIO_INVOKE_EXTRAS": extra or ""},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install(*group("lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, strict, on the package and benchmarks/ (with the bench group, whose SDKs it
    imports); and on tests/typing and examples/, which use the API as users annotate it."""
    session.install("-e", f".[{ALL_EXTRAS}]", *group("typing", "bench"))
    session.run("mypy")
    session.run("mypy", "tests/typing", "examples")


@nox.session
def docs(session: nox.Session) -> None:
    """The API reference (docs/_build/html/index.html) and the docstrings' doctests.

    Warnings are errors, and every cross-reference must resolve (``-n``).
    """
    install_wheel(session, ALL_EXTRAS, *group("docs"))
    shutil.rmtree(ROOT / "docs" / "_build", ignore_errors=True)
    for builder in session.posargs or ["html", "doctest"]:
        session.run(
            *("python", "-P", "-m", "sphinx", "-T", "-E", "-W", "--keep-going", "-n"),
            *("-b", builder, "-d", "docs/_build/doctrees", "docs", f"docs/_build/{builder}"),
        )


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """The benchmark suite: the library beside the bare-Trio floor (not run by default)."""
    # the mcp, telemetry, process and HTTP workloads; the bench group adds the official openai SDK
    session.install(".[openai,mcp,otel,process]", *group("bench"))
    session.run("python", "-m", "benchmarks", *session.posargs)
