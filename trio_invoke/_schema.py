"""From a Python function to a tool's JSON Schema and description: sans-IO, no Trio.

The schema comes from the type hints, the description from the Google-style docstring:

=====================================  =================================================
Annotation                             JSON Schema
=====================================  =================================================
``str``, ``int``, ``float``, ``bool``  ``{"type": "string" | "integer" | "number" | "boolean"}``
``None``                               ``{"type": "null"}``
``list`` / ``list[X]``                 ``{"type": "array"}`` / ``... "items": <X>``
``dict`` / ``dict[str, X]``            ``{"type": "object"}`` / ``... "additionalProperties": <X>``
``X | Y``, ``Optional[X]``, ``Union``  ``{"type": [...]}`` when every member is a plain type,
                                       else ``{"anyOf": [...]}``
``Literal["a", "b"]``                  ``{"enum": ["a", "b"], "type": "string"}`` (with the type
                                       when every value has the same one)
an ``Enum`` subclass                   ``{"enum": [<values>], "type": ...}`` (the same)
``Annotated[X, "text"]``               ``<X>`` plus ``"description": "text"``
``typing.Any``                         ``{}`` (any JSON value)
=====================================  =================================================

A parameter with a default is optional (not in ``required``); its schema carries the default
when it is JSON (an Enum default as its value). Anything else (another class, ``tuple``, ``set``,
``bytes``, a missing annotation, ``*args``, ``**kwargs``, positional-only parameters) is a
:class:`ToolDefinitionError` naming the function and the parameter.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

import attrs

from ._exceptions import ToolDefinitionError

__all__ = [
    "FunctionDescription",
    "describe_function",
    "function_schema",
    "parameter_hints",
    "parse_docstring",
]

_PRIMITIVES: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}

_SECTIONS = (
    "Args",
    "Arguments",
    "Attributes",
    "Example",
    "Examples",
    "Keyword Args",
    "Keyword Arguments",
    "Methods",
    "Note",
    "Notes",
    "Other Parameters",
    "Parameters",
    "Raise",
    "Raises",
    "References",
    "Return",
    "Returns",
    "See Also",
    "Todo",
    "Warning",
    "Warnings",
    "Warns",
    "Yield",
    "Yields",
)
_SECTION_RE = re.compile(rf"^\s*({'|'.join(_SECTIONS)})\s*:\s*$")
_ARGS_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Keyword Args", "Keyword Arguments"})
_ARG_RE = re.compile(
    r"^\*{0,2}(?P<name>[A-Za-z_]\w*)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:(?P<text>.*)$"
)
"""``name (type): text``; the type may hold parentheses of its own (``pair (tuple(int, int)):
...``), and the text may too (``f (str): Calls g(x): ...``)."""

Converter = Callable[[Any], Any]
"""Turns a validated JSON value into what the function's annotation asks for."""


@attrs.frozen(eq=False)
class FunctionDescription:
    """What ``@tool`` reads out of a function."""

    parameters: dict[str, Any]
    """The JSON Schema of the function's parameters (``"type": "object"``)."""
    description: str
    """The docstring's summary: the text before its first section, whitespace-normalised."""
    converters: Mapping[str, Converter]
    """Per parameter that needs one: turns the JSON value into the annotated type (an Enum
    member for an Enum parameter, also inside ``Optional``, ``list`` and ``dict``; an ``int``
    for an ``int`` parameter sent as ``3.0``, which JSON Schema counts as an integer)."""


class _UnsupportedError(Exception):
    def __init__(self, annotation: object, problem: str | None = None) -> None:
        super().__init__(problem or f"unsupported annotation {annotation!r}")
        self.annotation = annotation


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Read a Google-style docstring.

    Args:
        doc: A docstring (cleaned or not), or ``None``.

    Returns:
        The description (the text before the first section such as ``Args:`` or ``Returns:``,
        whitespace-normalised) and the ``Args:`` section's description of each parameter
        (``name (type): text`` or ``name: text``; continuation lines joined).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _SECTION_RE.match(lines[i]):
        summary.append(lines[i])
        i += 1
    while i < len(lines):
        header = _SECTION_RE.match(lines[i])
        assert header is not None
        header_indent = _indent(lines[i])
        i += 1
        body_start = i
        while i < len(lines) and (
            not lines[i].strip()
            or (_indent(lines[i]) > header_indent and not _SECTION_RE.match(lines[i]))
        ):
            i += 1
        if header.group(1) in _ARGS_SECTIONS:
            params.update(_parse_args_section(lines[body_start:i]))
        while i < len(lines) and not _SECTION_RE.match(lines[i]):
            i += 1  # prose after a section at the header's own indent: not ours to read
    return " ".join(" ".join(summary).split()), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_args_section(lines: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    entry_indent: int | None = None
    current: list[str] | None = None
    for line in lines:
        if not line.strip():
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
        match = _ARG_RE.match(line.strip()) if indent <= entry_indent else None
        if match:
            current = entries.setdefault(match["name"], [])
            current.append(match["text"])
        elif current is not None and indent > entry_indent:
            current.append(line)
    return {name: " ".join(" ".join(text).split()) for name, text in entries.items()}


def _type_of_values(values: list[object]) -> str | None:
    """The one JSON type all ``values`` (JSON scalars) share, or ``None``."""
    names = set()
    for value in values:
        if value is None:
            names.add("null")
        elif isinstance(value, bool):
            names.add("boolean")
        elif isinstance(value, int):
            names.add("integer")
        elif isinstance(value, float):
            names.add("number")
        else:
            names.add("string")
    return names.pop() if len(names) == 1 else None


def _enum_schema(values: list[object]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": values}
    json_type = _type_of_values(values)
    if json_type is not None:
        schema["type"] = json_type
    return schema


def _is_plain(schema: Mapping[str, Any]) -> bool:
    return len(schema) == 1 and isinstance(schema.get("type"), str)


def _annotation_schema(annotation: object) -> dict[str, Any]:
    """The JSON Schema of values of ``annotation`` (see the module docstring for the table).

    Raises:
        _UnsupportedError: ``annotation`` (or a part of it) has no JSON Schema here.
    """
    if annotation is Any:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        schema = _annotation_schema(args[0])
        description = next((m for m in args[1:] if isinstance(m, str)), None)
        if description is not None:
            schema["description"] = description
        return schema
    if origin is Union or origin is types.UnionType:
        members = [_annotation_schema(arg) for arg in args]
        if all(_is_plain(m) for m in members):
            return {"type": list(dict.fromkeys(m["type"] for m in members))}
        return {"anyOf": members}
    if origin is Literal:
        for value in args:
            if not (value is None or isinstance(value, str | int)) or isinstance(value, enum.Enum):
                raise _UnsupportedError(annotation, f"unsupported Literal value {value!r}")
        return _enum_schema(list(args))
    if origin is list or annotation is list:
        if not args:
            return {"type": "array"}
        return {"type": "array", "items": _annotation_schema(args[0])}
    if origin is dict or annotation is dict:
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise _UnsupportedError(annotation, f"dict keys must be str in {annotation!r}")
        return {"type": "object", "additionalProperties": _annotation_schema(args[1])}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values: list[object] = [member.value for member in annotation]
        if not all(_is_json_scalar(v) for v in values):
            raise _UnsupportedError(
                annotation, f"Enum {annotation.__name__} has values that are not JSON scalars"
            )
        return _enum_schema(values)
    if isinstance(annotation, type) and annotation in _PRIMITIVES:
        return {"type": _PRIMITIVES[annotation]}
    raise _UnsupportedError(annotation)


def _is_json_scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int)  # int includes bool


def _plain_json(value: object) -> tuple[bool, object]:
    """``(True, value as JSON data)`` when ``value`` is JSON, else ``(False, None)``."""
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        return True, json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return False, None


def _fix_int(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _annotation_converter(annotation: object) -> Converter | None:
    """What turns a validated JSON value into a value of ``annotation``; ``None`` if nothing does.

    Enum parameters get the member with that value; ``int`` parameters and integer ``Literal``
    parameters get an ``int`` for an integral float; ``list``, ``dict`` and unions convert their
    contents. In a union, a value that is already an instance of a member that needs no
    conversion (``str``, ``float``, ``None``...) is left as it is; otherwise the first member
    whose conversion succeeds wins.
    """
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _annotation_converter(args[0])
    if annotation is int:
        return _fix_int
    if origin is Literal:
        # JSON Schema counts 1.0 as the integer 1, which an ``enum`` of 1 accepts.
        ints = any(isinstance(v, int) and not isinstance(v, bool) for v in args)
        return _fix_int if ints else None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation
    if origin is list and args:
        item = _annotation_converter(args[0])
        if item is None:
            return None
        return lambda value: [item(v) for v in value] if isinstance(value, list) else value
    if origin is dict and len(args) == 2:
        entry = _annotation_converter(args[1])
        if entry is None:
            return None
        return lambda value: (
            {k: entry(v) for k, v in value.items()} if isinstance(value, dict) else value
        )
    if origin is Union or origin is types.UnionType:
        return _union_converter(args)
    return None


def _union_converter(members: tuple[object, ...]) -> Converter | None:
    converters: list[Converter] = []
    as_is: list[type] = []
    for member in members:
        converter = _annotation_converter(member)
        if converter is not None:
            converters.append(converter)
            continue
        bare = get_args(member)[0] if get_origin(member) is Annotated else member
        plain = get_origin(bare) or (type(None) if bare is None else bare)
        if isinstance(plain, type):
            as_is.append(plain)
    if not converters:
        return None
    keep = tuple(as_is)

    def convert(value: Any) -> Any:
        if isinstance(value, keep) and not (isinstance(value, bool) and bool not in keep):
            return value
        for converter in converters:
            try:
                return converter(value)
            except (ValueError, TypeError):
                continue
        return value

    return convert


def _function_name(func: Callable[..., Any]) -> str:
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) else repr(func)


def _parameter_error(func_name: str, name: str, problem: str) -> ToolDefinitionError:
    return ToolDefinitionError(
        f"@tool cannot describe parameter {name!r} of function {func_name!r}: {problem}"
    )


def _wraps_with_annotations(func: object) -> bool:
    """Whether ``func`` is a decorator's object made by ``functools.update_wrapper``: it holds
    the function's own annotations, and :func:`inspect.signature` reads the function's
    parameters through its ``__wrapped__``."""
    return hasattr(func, "__wrapped__") and "__annotations__" in getattr(func, "__dict__", {})


def _hints_source(func: Callable[..., Any]) -> Callable[..., Any]:
    """Where ``typing.get_type_hints`` finds the hints of ``func``'s parameters."""
    while isinstance(func, functools.partial):
        func = func.func
    if isinstance(func, type):
        # A class: its constructor's parameters. (mypy: __init__ of an arbitrary type is fine.)
        init: Callable[..., Any] = func.__init__  # type: ignore[misc]
        return init
    if inspect.isroutine(func) or _wraps_with_annotations(func):
        return func
    call: Callable[..., Any] = type(func).__call__  # a callable object
    return call


_PROBE: Final = (lambda: None).__code__


def _parameter_hints(source: Callable[..., Any]) -> tuple[dict[str, Any] | None, str]:
    """The type hints of ``source``'s parameters, resolved one by one, its return annotation
    left out; or ``None`` and which parameter's annotation does not resolve, as the start of a
    message (``"the annotation of parameter 'x' (Missing): "``; ``""`` if it cannot tell)."""
    annotations = getattr(source, "__annotations__", None)
    namespace = getattr(inspect.unwrap(source), "__globals__", None)
    if not isinstance(annotations, dict) or not isinstance(namespace, dict):
        return None, ""
    hints: dict[str, Any] = {}
    for name, annotation in annotations.items():
        if name == "return":
            continue
        probe = types.FunctionType(_PROBE, namespace)
        probe.__annotations__ = {name: annotation}
        try:
            hints.update(typing.get_type_hints(probe, include_extras=True))
        except Exception:
            shown = annotation if isinstance(annotation, str) else repr(annotation)
            return None, f"the annotation of parameter {name!r} ({shown}): "
    return hints, ""


def parameter_hints(source: Callable[..., Any]) -> dict[str, Any]:
    """``typing.get_type_hints(source, include_extras=True)``, or, when that fails, the hints
    of the parameters alone (a return annotation that does not resolve is left out).

    Raises:
        Exception: What ``typing.get_type_hints`` raised, when a parameter's hint fails too.
    """
    try:
        return typing.get_type_hints(source, include_extras=True)
    except Exception:
        resolved, _ = _parameter_hints(source)
        if resolved is None:
            raise
        return resolved


def _doc_source(func: Callable[..., Any]) -> Callable[..., Any]:
    """Whose docstring describes ``func``: a ``functools.partial``'s own docstring is the
    generic one of its type (unless one was set), so it is its function's."""
    while isinstance(func, functools.partial) and func.__doc__ == type(func).__doc__:
        func = func.func
    return func


def describe_function(func: Callable[..., Any]) -> FunctionDescription:
    """Read a function's parameters schema, description and argument converters.

    Args:
        func: A plain or async function (or any callable with a signature and type hints).

    Returns:
        The :class:`FunctionDescription`: ``{"type": "object", "properties": ...,
        "required": [...], "additionalProperties": false}``, the docstring's summary, and the
        converters :class:`FunctionTool` applies before calling.

    Raises:
        ToolDefinitionError: A parameter cannot be described: unsupported or missing annotation,
            ``*args``/``**kwargs``, or positional-only. The message names the function and the
            parameter: ``"@tool cannot describe parameter 'x' of function 'f': unsupported
            annotation <class 'bytes'>"``. Also raised when a parameter's type hint cannot be
            resolved (the message names it); a return annotation that cannot is left alone.
    """
    func_name = _function_name(func)
    source: Callable[..., Any] | None = None
    try:
        signature = inspect.signature(func)
        source = _hints_source(func)
        # A return annotation that does not resolve (a name imported only under TYPE_CHECKING)
        # is no reason to refuse; a parameter's is, and the message names it.
        hints = parameter_hints(source)
    except Exception as exc:  # NameError for an unresolvable forward reference, TypeError, ...
        where = _parameter_hints(source)[1] if source is not None else ""
        raise ToolDefinitionError(
            f"@tool cannot read the signature of function {func_name!r}: {where}{exc}"
        ) from exc
    description, arg_docs = parse_docstring(inspect.getdoc(_doc_source(func)))
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Converter] = {}
    for name, param in signature.parameters.items():
        fail = functools.partial(_parameter_error, func_name, name)
        if param.kind is param.VAR_POSITIONAL:
            raise fail("*args is not supported; name each parameter")
        if param.kind is param.VAR_KEYWORD:
            raise fail("**kwargs is not supported; name each parameter")
        if param.kind is param.POSITIONAL_ONLY:
            raise fail("positional-only parameters are not supported (arguments come by name)")
        if name not in hints:
            raise fail("missing type annotation")
        annotation = hints[name]
        try:
            schema = _annotation_schema(annotation)
        except _UnsupportedError as exc:
            where = "" if exc.annotation is annotation else f" in {annotation!r}"
            raise fail(f"{exc}{where}") from None
        if "description" not in schema and name in arg_docs and arg_docs[name]:
            schema["description"] = arg_docs[name]
        if param.default is param.empty:
            required.append(name)
        else:
            is_json, default = _plain_json(param.default)
            if is_json:
                schema["default"] = default
        properties[name] = schema
        converter = _annotation_converter(annotation)
        if converter is not None:
            converters[name] = converter
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return FunctionDescription(parameters, description, converters)


def function_schema(func: Callable[..., Any]) -> tuple[dict[str, Any], str]:
    """The JSON Schema of a function's parameters, and its description.

    Args:
        func: A plain or async function.

    Returns:
        ``(parameters, description)``; see :func:`describe_function`.

    Raises:
        ToolDefinitionError: A parameter cannot be described; the message names the function and
            the parameter.
    """
    described = describe_function(func)
    return described.parameters, described.description
