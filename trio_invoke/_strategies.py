"""Hypothesis strategies for JSON values, tool arguments and tool schemas.

For property tests of tools, chat clients and agents; trio_invoke's own tests use them. Sizes are
bounded so that a test with the default ``max_examples`` stays fast.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["json_values", "schemas_with_arguments", "tool_arguments"]

_TYPES = ("string", "number", "integer", "boolean", "null", "array", "object")


def _json_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
    )


def json_values(*, max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers, floats, strings, arrays and objects.

    Floats are finite (no NaN or infinity, which JSON cannot carry); strings, arrays and objects
    are short.

    Args:
        max_leaves: Roughly how many scalars one value holds at most.

    Returns:
        A strategy of values that ``json.dumps`` accepts and ``json.loads`` gives back equal.
    """
    return st.recursive(
        _json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def tool_arguments() -> st.SearchStrategy[dict[str, Any]]:
    """Any JSON object with string keys, as a model may send for a tool call.

    Returns:
        A strategy of dicts of up to five keys with :func:`json_values` values.
    """
    return st.dictionaries(st.text(max_size=10), json_values(max_leaves=4), max_size=5)


def _values_of(json_type: str) -> st.SearchStrategy[Any]:
    """Values of one JSON type, as ``json.loads`` produces them."""
    if json_type == "string":
        return st.text(max_size=12)
    if json_type == "number":
        return st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False))
    if json_type == "integer":
        return st.integers()
    if json_type == "boolean":
        return st.booleans()
    if json_type == "null":
        return st.none()
    if json_type == "array":
        return st.lists(json_values(max_leaves=3), max_size=3)
    return st.dictionaries(st.text(max_size=6), json_values(max_leaves=3), max_size=3)


_names = st.from_regex(r"[a-z_][a-z0-9_]{0,9}", fullmatch=True)


@st.composite
def _property(draw: st.DrawFn) -> tuple[dict[str, Any], st.SearchStrategy[Any]]:
    """One property's schema and a strategy of values valid for it."""
    types = draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=2, unique=True))
    values = st.one_of([_values_of(t) for t in types])
    schema: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
    if types == ["array"] and draw(st.booleans()):
        item_type = draw(st.sampled_from(_TYPES))
        schema["items"] = {"type": item_type}
        values = st.lists(_values_of(item_type), max_size=3)
    if draw(st.booleans()):
        schema["description"] = draw(st.text(max_size=20))
    return schema, values


@st.composite
def _schema_with_arguments(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    names = draw(st.lists(_names, max_size=5, unique=True))
    properties: dict[str, Any] = {}
    arguments: dict[str, Any] = {}
    required: list[str] = []
    for name in names:
        schema, values = draw(_property())
        properties[name] = schema
        is_required = draw(st.booleans())
        if is_required:
            required.append(name)
        if is_required or draw(st.booleans()):
            arguments[name] = draw(values)
    schema = {"type": "object", "properties": properties, "required": required}
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema, arguments


def schemas_with_arguments() -> st.SearchStrategy[tuple[dict[str, Any], dict[str, Any]]]:
    """A tool's parameters schema, paired with arguments that are valid for it.

    The schema is ``{"type": "object", "properties": ..., "required": [...]}`` (sometimes with
    ``"additionalProperties": false``) with up to five properties named like Python identifiers.
    Each property has a ``type`` (one of string, number, integer, boolean, null, array, object, or
    a list of two), an ``items`` schema for some arrays, and sometimes a description. Every
    required field is in the arguments; each optional one sometimes is.

    Returns:
        A strategy of ``(schema, arguments)``.
    """
    return _schema_with_arguments()
