"""The public surface of ``trio_invoke`` and ``trio_invoke.testing``: what SPEC.md fixes, each
``__all__`` equal to the module's public names, and every public object reporting the public
module it is imported from (so reprs and tracebacks show the public path)."""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

import trio_invoke
import trio_invoke.testing

SPEC_NAMES = [
    *("MessageRole", "ToolCall", "ChatMessage", "Usage", "FinishReason", "TextDelta"),
    *("ToolCallStart", "ToolCallArgs", "ToolCallEnd", "ToolApprovalRequest", "ToolCalled"),
    *("Finish", "Error", "ChatClient", "RunOptions", "ToolApprovalResponse"),
    *("FunctionInvokingChatClient", "ScriptedChatClient", "Tool", "tool"),
    *("ApprovalRequiredTool", "AccumulatedToolCall", "validate_against_schema", "ChatResponse"),
]


def test_spec_names_are_importable() -> None:
    for name in SPEC_NAMES:
        assert name in trio_invoke.__all__, name
        assert hasattr(trio_invoke, name), name


def test_all_is_sorted_and_complete() -> None:
    assert list(trio_invoke.__all__) == sorted(trio_invoke.__all__)
    public = {n for n in dir(trio_invoke) if not n.startswith("_")}
    submodules = {"testing", "providers", "mcp", "otel"}
    # they need the openai or anthropic extra: importable, but not in __all__
    lazy = {"OpenAIChatClient", "AnthropicChatClient"}
    assert public - submodules - lazy == set(trio_invoke.__all__)
    assert lazy <= set(dir(trio_invoke))


def test_star_import_needs_no_extra() -> None:
    namespace: dict[str, object] = {}
    exec("from trio_invoke import *", namespace)
    assert "FunctionInvokingChatClient" in namespace


TESTING_NAMES = [
    *("ScriptedChatClient", "FunctionChatClient", "tool_call_updates", "tool_calls_response"),
    *("run_to_completion", "assert_transcript_valid", "json_values", "tool_arguments"),
    *("schemas_with_arguments", "tool_call_streams", "scripted_rounds"),
]


def public_names(module: types.ModuleType) -> set[str]:
    return {name for name in dir(module) if not name.startswith("_")}


def test_testing_names_are_importable() -> None:
    for name in TESTING_NAMES:
        assert name in trio_invoke.testing.__all__, name
        assert hasattr(trio_invoke.testing, name), name


def test_testing_all_is_sorted_and_complete() -> None:
    testing = trio_invoke.testing
    assert list(testing.__all__) == sorted(testing.__all__)
    assert len(set(testing.__all__)) == len(testing.__all__)
    assert public_names(testing) == set(testing.__all__)  # no helper import leaks


def home(name: str) -> str:
    """The public module an object of that public name reports: ``trio_invoke`` for what the
    top level exports (also when ``trio_invoke.testing`` re-exports it), else the test kit."""
    return "trio_invoke" if name in trio_invoke.__all__ else "trio_invoke.testing"


def assert_reports(obj: Any, name: str, module: str) -> None:
    assert obj.__module__ == module, (name, obj.__module__)
    assert obj.__qualname__ == name
    assert getattr(importlib.import_module(module), name) is obj


PUBLIC = [
    (module.__name__, name)
    for module in (trio_invoke, trio_invoke.testing)
    for name in module.__all__
]


@pytest.mark.parametrize(("module", "name"), PUBLIC)
def test_every_public_object_reports_its_public_module(module: str, name: str) -> None:
    obj = getattr(importlib.import_module(module), name)
    if isinstance(obj, type) or inspect.isfunction(obj):
        assert_reports(obj, name, home(name))
        return
    # A type alias has no module of its own (a union reports "types"): the classes of ours it
    # names must report theirs.
    ours = list(classes_of_ours(obj))
    assert ours, (name, obj)
    for member in ours:
        assert_reports(member, member.__qualname__, home(member.__qualname__))


def classes_of_ours(alias: object) -> Iterator[type]:
    """The classes from ``trio_invoke`` that a type alias names, however deeply."""
    for arg in alias if isinstance(alias, list) else typing.get_args(alias):
        if isinstance(arg, list) or typing.get_args(arg):  # Callable's parameters, X[...]
            yield from classes_of_ours(arg)
        elif isinstance(arg, type) and arg.__module__.partition(".")[0] == "trio_invoke":
            yield arg


def test_the_lazy_client_reports_the_public_module() -> None:
    try:
        client = trio_invoke.OpenAIChatClient
    except ImportError:
        pytest.skip("needs the openai extra")
    assert_reports(client, "OpenAIChatClient", "trio_invoke")


def test_exceptions_derive_from_one_root() -> None:
    errors = [
        getattr(trio_invoke, n)
        for n in trio_invoke.__all__
        if n.endswith("Error") and n != "Error" and isinstance(getattr(trio_invoke, n), type)
    ]
    assert len(errors) >= 7
    for error in errors:
        assert issubclass(error, trio_invoke.TrioInvokeError), error
    assert issubclass(trio_invoke.ConfigurationError, ValueError)
    assert issubclass(trio_invoke.ApprovalError, ValueError)
    assert issubclass(trio_invoke.ToolDefinitionError, TypeError)


def test_py_typed_ships() -> None:
    from importlib.resources import files

    assert files("trio_invoke").joinpath("py.typed").is_file()
