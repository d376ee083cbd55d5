"""The examples in the public docstrings run (as in ``nox -s docs``, where Sphinx runs them)."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest
import trio

import trio_invoke
import trio_invoke.testing


@pytest.mark.parametrize("module", [trio_invoke, trio_invoke.testing], ids=lambda m: m.__name__)
def test_docstring_examples_run(module: ModuleType) -> None:
    globs = {name: getattr(trio_invoke, name) for name in trio_invoke.__all__}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = doctest.DocTestFinder().find(module, globs={**globs, "trio": trio})
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0
    if module is trio_invoke:
        assert results.attempted >= 9  # FinishReason, ToolApprovalRequest, validate_against_schema
