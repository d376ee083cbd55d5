"""The public surface: what SPEC.md fixes, and nothing private leaking."""

from __future__ import annotations

import typing

import trio_invoke

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
    lazy = {"OpenAIChatClient"}  # needs the openai extra: importable, but not in __all__
    assert public - submodules - lazy == set(trio_invoke.__all__)
    assert "OpenAIChatClient" in dir(trio_invoke)


def test_star_import_needs_no_extra() -> None:
    namespace: dict[str, object] = {}
    exec("from trio_invoke import *", namespace)
    assert "FunctionInvokingChatClient" in namespace


def test_public_objects_report_the_public_module() -> None:
    for name in trio_invoke.__all__:
        obj = getattr(trio_invoke, name)
        module = getattr(obj, "__module__", None)
        if typing.get_origin(obj) is not None:
            continue  # a type alias (the update union, the middleware signature)
        if isinstance(obj, type) or callable(obj):
            assert module == "trio_invoke", (name, module)


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
