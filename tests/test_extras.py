"""Optional dependencies: every module imports, or fails with an error that names its extra.

nox's ``extras`` sessions run this file against the wheel installed with each extra alone and
with none, so an import that needs an extra is caught where it is missing for real. In the
main suite, where every extra is installed, the same check also runs in subprocesses that
block the modules of the other extras.

Run as a script (``python tests/test_extras.py [blocked module ...]``) it prints the check's
findings as JSON: what the tests below read.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import json
import os
import pkgutil
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DISTRIBUTION = "trio-invoke"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def extra_requirements() -> dict[str, list[str]]:
    """Each extra of the installed distribution, with the distributions it requires."""
    extras: dict[str, list[str]] = {
        extra: [] for extra in importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra")
    }
    for requirement in importlib.metadata.requires(DISTRIBUTION) or []:
        marker = _EXTRA_MARKER.search(requirement)
        name = _NAME.match(requirement)
        if marker and name:
            extras[marker.group(1)].append(name.group(0))
    return extras


def top_modules(distribution: str) -> set[str]:
    """The top-level modules a distribution provides (empty if it is not installed)."""
    key = distribution.lower().replace("_", "-")
    return {
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if any(d.lower().replace("_", "-") == key for d in dists)
    }


def installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


class _Blocker(importlib.abc.MetaPathFinder):
    """Makes the given top-level modules unimportable, as if not installed."""

    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def _modules(package: ModuleType) -> list[str]:
    names = [package.__name__]
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name.endswith(".__main__"):
            continue  # importing it runs the demo
        if info.ispkg:
            try:
                names += _modules(importlib.import_module(info.name))
            except ImportError:
                names.append(info.name)
        else:
            names.append(info.name)
    return names


def findings(blocked: Sequence[str] = ()) -> dict[str, str | None]:
    """Import every module of trio_invoke and read every public name of its public modules.

    Returns ``{"module" or "module:name": None if it worked, else the ImportError's text}``.
    """
    sys.meta_path.insert(0, _Blocker(set(blocked)))
    import trio_invoke

    result: dict[str, str | None] = {}
    for name in _modules(trio_invoke):
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            result[name] = str(exc)
            continue
        result[name] = None
        if any(part.startswith("_") for part in name.split(".")):
            continue
        for attribute in sorted(set(getattr(module, "__all__", ())) | set(dir(module))):
            if attribute.startswith("_"):
                continue
            try:
                getattr(module, attribute)
            except ImportError as exc:
                result[f"{name}:{attribute}"] = str(exc)
            else:
                result[f"{name}:{attribute}"] = None
    return result


def installs_from_pypi(error: str) -> list[str]:
    """The ``pip install`` commands of ``error`` that ask PyPI for trio_invoke, which is not on
    PyPI: an install command must name a checkout (``".[openai]"``) or the git URL."""
    return [
        argument
        for argument in re.findall(r'pip install ("[^"]*"|\S+)', error)
        if re.search(r"trio[-_]invoke", argument) and not re.search(r"@\s*git\+https://", argument)
    ]


def problems(found: dict[str, str | None], available: set[str], extras: set[str]) -> list[str]:
    """What is wrong with ``found``, given the extras that are available."""
    missing = extras - available
    wrong = []
    for where, error in found.items():
        if error is None:
            continue
        named = {
            extra
            for extra in missing
            if f"trio_invoke[{extra}]" in error or f"trio-invoke[{extra}]" in error
        }
        if not named:
            wrong.append(f"{where}: {error} (names no missing extra; missing: {sorted(missing)})")
        if installs_from_pypi(error):
            wrong.append(f"{where}: {error} (installs trio_invoke from PyPI, where it is not)")
    return wrong


def run_check(blocked: Sequence[str], cwd: Path) -> dict[str, str | None]:
    done = subprocess.run(
        [sys.executable, __file__, *blocked],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, str | None] = json.loads(done.stdout)
    return found


EXTRAS = extra_requirements()
AVAILABLE = {extra for extra, dists in EXTRAS.items() if all(installed(d) for d in dists)}


def test_the_environment_is_the_one_the_session_asked_for() -> None:
    asked = os.environ.get("TRIO_INVOKE_EXTRAS")
    if asked is None:
        pytest.skip("not run by nox (TRIO_INVOKE_EXTRAS names the extras a session installed)")
    wanted = asked.split(",") if asked else []
    # An extra's own dependencies may bring another's (the mcp SDK brings httpx2 and
    # opentelemetry-api): those are available too, and nothing else is.
    brought = requirement_closure([dist for extra in wanted for dist in EXTRAS[extra]])
    expected = {
        extra
        for extra, dists in EXTRAS.items()
        if extra in wanted or all(normalised(dist) in brought for dist in dists)
    }
    assert sorted(expected) == sorted(AVAILABLE)


def test_every_module_imports_or_names_its_missing_extra(tmp_path: Path) -> None:
    found = run_check((), tmp_path)
    assert "trio_invoke" in found
    assert problems(found, AVAILABLE, set(EXTRAS)) == []
    if set(EXTRAS) == AVAILABLE:
        assert [where for where, error in found.items() if error] == []


def normalised(distribution: str) -> str:
    """A distribution's name as PEP 503 compares names."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def requirement_closure(distributions: Sequence[str]) -> set[str]:
    """``distributions`` and everything they require, transitively (by normalised name;
    requirements under an ``extra`` marker left out: installing the extra does not bring them)."""
    seen: set[str] = set()
    todo = list(distributions)
    while todo:
        name = normalised(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if "extra ==" not in requirement:
                todo.append(re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0])
    return seen


@pytest.mark.parametrize("alone", [None, *sorted(EXTRAS)], ids=lambda e: e or "none")
def test_with_other_extras_blocked(alone: str | None, tmp_path: Path) -> None:
    # Simulates an environment with only `alone` (or no extra), by blocking the modules of the
    # other extras' distributions -- except those that `alone`'s own distributions need (the
    # mcp SDK brings opentelemetry-api, for one), which an install of `alone` has too.
    kept = requirement_closure(EXTRAS.get(alone, []) if alone else [])
    blocked = sorted(
        module
        for extra, dists in EXTRAS.items()
        if extra != alone
        for dist in dists
        if normalised(dist) not in kept
        for module in top_modules(dist)
    )
    found = run_check(blocked, tmp_path)
    available = AVAILABLE & ({alone} if alone else set())
    assert problems(found, available, set(EXTRAS)) == []
    failed = {where for where, error in found.items() if error}
    if set(EXTRAS) - available:
        assert failed, "blocking an extra's modules made no import fail: is the block working?"


def test_a_missing_extra_names_a_command_that_installs_it(tmp_path: Path) -> None:
    # Every extra's modules blocked: each error's command must work as written, so it installs
    # from git or a checkout, never `pip install "trio_invoke[openai]"` (not on PyPI).
    blocked = sorted(
        module for dists in EXTRAS.values() for dist in dists for module in top_modules(dist)
    )
    errors = [error for error in run_check(blocked, tmp_path).values() if error]
    assert errors, "blocking every extra's modules made no import fail: is the block working?"
    assert [command for error in errors for command in installs_from_pypi(error)] == []
    assert all(
        re.search(r'pip install "trio-invoke\[\w+\] @ git\+https://\S+"', error) for error in errors
    ), errors


def test_the_demo_runs_and_a_missing_extra_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_invoke", "--no"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    if "openai" in AVAILABLE:
        return
    live = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "hi"]
    done = subprocess.run(
        [sys.executable, "-m", "trio_invoke", *live],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert '".[openai]"' in done.stderr


if __name__ == "__main__":
    print(json.dumps(findings(sys.argv[1:])))
