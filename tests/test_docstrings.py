"""The examples in the public docstrings run (as in ``nox -s docs``, where Sphinx runs them)."""

from __future__ import annotations

import doctest
import re
from pathlib import Path
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


REFERENCE = {
    "trio_invoke": "api.rst",
    "trio_invoke.testing": "testing.rst",
    "trio_invoke.mcp": "mcp.rst",
    "trio_invoke.otel": "otel.rst",
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_every_public_name_is_in_the_reference(name: str) -> None:
    """docs/ has an entry for each name in the module's ``__all__`` (and its lazy names)."""
    module = pytest.importorskip(name)  # the extras' modules: the tests session has them all
    docs = Path(__file__).parent.parent / "docs"
    pages = {REFERENCE[name], "api.rst"}  # a name re-exported from trio_invoke is there
    text = "".join((docs / page).read_text() for page in pages)
    documented = {n.rsplit(".", 1)[-1] for n in re.findall(r"^\.\. auto\w+:: ([\w.]+)", text, re.M)}
    public = set(module.__all__) | set(getattr(module, "_LAZY", ()))
    assert public - documented == set(), f"docs/{REFERENCE[name]} lacks them"


def test_every_chat_clients_run_says_it_returns_an_async_context_manager() -> None:
    """``help()`` and the reference show what ``run()`` returns: an async context manager (not
    the async iterator of the generator behind it)."""
    import contextlib
    import inspect
    import typing

    clients = [
        trio_invoke.ChatClient,
        trio_invoke.FunctionInvokingChatClient,
        trio_invoke.ScriptedChatClient,
        trio_invoke.testing.FunctionChatClient,
        trio_invoke.OpenAIChatClient,
        trio_invoke.AnthropicChatClient,
    ]
    for client in clients:
        returned = typing.get_type_hints(inspect.unwrap(client.run))["return"]
        assert typing.get_origin(returned) is contextlib.AbstractAsyncContextManager, client
        assert "AbstractAsyncContextManager" in str(inspect.signature(client.run)), client


DOCS = Path(__file__).parent.parent / "docs"


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.rst")))
def test_the_docs_pages_examples_run_as_written(page: str) -> None:
    """An example on a page of docs/ runs when pasted into a fresh interpreter: it imports
    what it uses (Sphinx's doctest setup imports the public names, a reader's has nothing)."""
    failed, _ = doctest.testfile(
        str(DOCS / page), module_relative=False, globs={}, optionflags=doctest.ELLIPSIS
    )
    assert failed == 0
