from __future__ import annotations

import enum
import functools
import re
from typing import Annotated, Any, Literal, Optional, Union

import pytest

from trio_invoke._exceptions import ToolDefinitionError
from trio_invoke._schema import describe_function, function_schema, parse_docstring
from trio_invoke._validate import compile_validator


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    A = "a"
    B = 2


class Ratio(enum.Enum):
    HALF = 0.5
    MORE = 1.5


class Opaque(enum.Enum):
    A = object()


class Pair(enum.Enum):
    A = (1, 2)


def schema_of(annotation: Any) -> dict[str, Any]:
    """The property schema ``@tool`` gives a required parameter annotated ``annotation``."""

    def f(x: Any) -> None:
        pass

    f.__annotations__ = {"x": annotation}
    parameters, _ = function_schema(f)
    assert parameters["required"] == ["x"]
    compile_validator(parameters)  # every schema we produce is one fastjsonschema compiles
    schema: dict[str, Any] = parameters["properties"]["x"]
    return schema


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (
            list[list[str]],
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        ),
        (dict, {"type": "object"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict[str, Any], {"type": "object", "additionalProperties": {}}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the spelling under test
        (int | None, {"type": ["integer", "null"]}),
        (Union[int, str, None], {"type": ["integer", "string", "null"]}),  # noqa: UP007
        (
            list[int] | None,
            {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
        ),
        (
            Color | int,
            {"anyOf": [{"enum": ["red", "green"], "type": "string"}, {"type": "integer"}]},
        ),
        (Literal["c", "f"], {"enum": ["c", "f"], "type": "string"}),
        (Literal[1, 2], {"enum": [1, 2], "type": "integer"}),
        (Literal[True], {"enum": [True], "type": "boolean"}),
        (Literal["a", 1, None], {"enum": ["a", 1, None]}),
        (Color, {"enum": ["red", "green"], "type": "string"}),
        (Level, {"enum": [1, 2], "type": "integer"}),
        (Mixed, {"enum": ["a", 2]}),
        (Ratio, {"enum": [0.5, 1.5], "type": "number"}),
        (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
        (
            Annotated[int, 42, "The first str."],
            {"type": "integer", "description": "The first str."},
        ),
        (Annotated[int, 42], {"type": "integer"}),
        (
            Annotated[int | None, "Maybe."],
            {"type": ["integer", "null"], "description": "Maybe."},
        ),
        (
            list[Annotated[str, "A tag."]],
            {"type": "array", "items": {"type": "string", "description": "A tag."}},
        ),
    ],
)
def test_annotation_schemas(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


class Point:
    pass


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        (bytes, "unsupported annotation <class 'bytes'>"),
        (Point, "unsupported annotation <class 'test_schema.Point'>"),
        (tuple[int, int], "unsupported annotation tuple[int, int]"),
        (set[str], "unsupported annotation set[str]"),
        (list[bytes], "unsupported annotation <class 'bytes'> in list[bytes]"),
        (int | bytes, "unsupported annotation <class 'bytes'> in int | bytes"),
        (dict[int, str], "dict keys must be str in dict[int, str]"),
        (Literal[b"x"], "unsupported Literal value b'x'"),
        (Literal[Color.RED], "unsupported Literal value <Color.RED: 'red'>"),
        (Opaque, "Enum Opaque has values that are not JSON scalars"),
        (Pair, "Enum Pair has values that are not JSON scalars"),
        (Annotated[bytes, "doc"], "unsupported annotation <class 'bytes'>"),
    ],
)
def test_unsupported_annotations_name_function_and_parameter(annotation: Any, problem: str) -> None:
    def f(x: Any) -> None:
        pass

    f.__annotations__ = {"x": annotation}
    with pytest.raises(ToolDefinitionError) as info:
        function_schema(f)
    message = str(info.value)
    assert message.startswith("@tool cannot describe parameter 'x' of function 'f': ")
    assert problem in message


def test_the_exact_message() -> None:
    def f(x: bytes) -> None:
        pass

    with pytest.raises(
        ToolDefinitionError,
        match=re.escape(
            "@tool cannot describe parameter 'x' of function 'f': "
            "unsupported annotation <class 'bytes'>"
        ),
    ):
        function_schema(f)


def test_missing_annotation() -> None:
    def f(a: int, b) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(
        ToolDefinitionError,
        match=r"^@tool cannot describe parameter 'b' of function 'f': missing type annotation$",
    ):
        function_schema(f)


def test_var_positional() -> None:
    def f(*args: int) -> None:
        pass

    with pytest.raises(ToolDefinitionError, match=r"parameter 'args' of function 'f': \*args"):
        function_schema(f)


def test_var_keyword() -> None:
    def f(**options: str) -> None:
        pass

    with pytest.raises(
        ToolDefinitionError, match=r"parameter 'options' of function 'f': \*\*kwargs"
    ):
        function_schema(f)


def test_positional_only() -> None:
    def f(a: int, /, b: int) -> None:
        pass

    with pytest.raises(ToolDefinitionError, match="parameter 'a' of function 'f': positional-only"):
        function_schema(f)


def test_unresolvable_hint_names_the_function() -> None:
    def f(a: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(ToolDefinitionError, match=r"signature of function 'f': .*Missing"):
        function_schema(f)


def test_an_unresolvable_hint_names_the_parameter() -> None:
    def f(a: int, b: Missing = None, *, c: list[Gone]) -> Nowhere:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(ToolDefinitionError) as info:
        function_schema(f)
    message = str(info.value)
    assert "signature of function 'f'" in message
    assert "parameter 'b' (Missing)" in message
    assert "name 'Missing' is not defined" in message

    # The return annotation is not the schema's business: one that does not resolve (a name
    # imported under TYPE_CHECKING) is left out.
    def g(a: int, b: Color = Color.RED) -> Nowhere:  # type: ignore[name-defined]  # noqa: F821
        """G."""

    parameters, description = function_schema(g)
    assert parameters["properties"]["a"] == {"type": "integer"}
    assert describe_function(g).converters["b"]("green") is Color.GREEN
    assert description == "G."

    class Box:
        def method(self, size: Absent) -> None:  # type: ignore[name-defined]  # noqa: F821
            pass

    with pytest.raises(ToolDefinitionError, match=r"parameter 'size' \(Absent\)"):
        function_schema(Box().method)


def test_object_schema_shape_and_defaults() -> None:
    def search(
        query: str,
        limit: int = 10,
        *,
        exact: bool = False,
        color: Color = Color.RED,
        tags: list[str] | None = None,
        since: float = float("nan"),
        marker: object = object(),  # not JSON: no "default"
    ) -> list[str]:
        return []

    search.__annotations__["marker"] = Any
    parameters, description = function_schema(search)
    assert description == ""
    assert parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "exact": {"type": "boolean", "default": False},
            "color": {"enum": ["red", "green"], "type": "string", "default": "red"},
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
            "since": {"type": "number"},  # NaN is not JSON
            "marker": {},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_no_parameters() -> None:
    def now() -> str:
        return ""

    assert function_schema(now)[0] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_docstring_description_and_parameter_docs() -> None:
    def get_weather(
        city: str,
        days: int = 1,
        unit: Annotated[Literal["c", "f"], "Annotated wins."] = "c",
        note: str = "",
    ) -> str:
        """Current weather   in a city,
        for the next few days.

        Args:
            city (str): The city's name,
                e.g. "Paris".
            days: How many days
                (1 to 7).
            unit: Ignored, Annotated wins.
            note:

        Returns:
            The forecast.

        Raises:
            ValueError: never.
        """
        return ""

    parameters, description = function_schema(get_weather)
    assert description == "Current weather in a city, for the next few days."
    properties = parameters["properties"]
    assert properties["city"] == {
        "type": "string",
        "description": 'The city\'s name, e.g. "Paris".',
    }
    assert properties["days"] == {
        "type": "integer",
        "description": "How many days (1 to 7).",
        "default": 1,
    }
    assert properties["unit"]["description"] == "Annotated wins."
    assert "description" not in properties["note"]


def test_parse_docstring_edges() -> None:
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("") == ("", {})
    assert parse_docstring("One line.") == ("One line.", {})
    doc = """Summary.

    Paragraph two.

    Note:
        Not a parameter: x.

    Arguments:
        a: First.
        *args: Rest.

    Prose after, at the section's own indent.

    Keyword Args:
        b (int, optional): Second.

            Still second.
    """
    assert parse_docstring(doc) == (
        "Summary. Paragraph two.",
        {"a": "First.", "args": "Rest.", "b": "Second. Still second."},
    )


def test_an_arg_type_may_hold_parentheses() -> None:
    doc = """Look something up.

    Args:
        pair (tuple(int, int)): Two numbers.
        key (str): Calls f(x): the key.
        fn (Callable[(int), int], optional): A function.
    """
    assert parse_docstring(doc)[1] == {
        "pair": "Two numbers.",
        "key": "Calls f(x): the key.",
        "fn": "A function.",
    }


def test_describe_function_converters_only_where_needed() -> None:
    def f(
        *,
        a: str,
        b: int,
        c: Color,
        d: Color | None,
        e: list[Color],
        f: dict[str, Level],
        g: list[str],
        h: Annotated[Color, "x"],
    ) -> None:
        pass

    converters = describe_function(f).converters
    assert sorted(converters) == ["b", "c", "d", "e", "f", "h"]
    assert converters["b"](3.0) == 3
    assert type(converters["b"](3.0)) is int
    assert converters["b"](3) == 3
    assert converters["c"]("red") is Color.RED
    assert converters["d"](None) is None
    assert converters["d"]("green") is Color.GREEN
    assert converters["e"](["red", "green"]) == [Color.RED, Color.GREEN]
    assert converters["f"]({"x": 2}) == {"x": Level.HIGH}
    assert converters["h"]("red") is Color.RED


def test_union_conversion_prefers_values_that_already_fit() -> None:
    def f(a: str | Color, b: float | int, c: Color | Level, d: int | None) -> None:
        pass

    converters = describe_function(f).converters
    assert converters["a"]("red") == "red"  # already a str: left alone
    assert converters["b"](2.0) == 2.0
    assert type(converters["b"](2.0)) is float
    assert converters["c"](1) is Level.LOW  # Color(1) fails, Level(1) fits
    assert converters["c"]("red") is Color.RED
    assert converters["c"]("blue") == "blue"  # nothing fits: unchanged (validation's job)
    assert converters["d"](4.0) == 4
    assert converters["d"](None) is None


def test_an_integer_literal_sent_as_an_integral_float_becomes_the_int() -> None:
    def f(
        a: Literal[1, 2], b: Literal["x", 3] | None, c: list[Literal[1, 2]], d: Literal["x"]
    ) -> None:
        pass

    converters = describe_function(f).converters
    assert sorted(converters) == ["a", "b", "c"]  # a str-only Literal needs nothing
    assert type(converters["a"](1.0)) is int
    assert converters["a"](2.0) == 2
    assert type(converters["b"](3.0)) is int
    assert converters["b"]("x") == "x"
    assert converters["b"](None) is None
    assert [type(v) for v in converters["c"]([1.0, 2])] == [int, int]
    assert converters["a"](True) is True  # not an int: validation refuses it, never turned


def test_the_description_of_a_partial_is_its_function_docstring() -> None:
    def scale(x: int, factor: int) -> int:
        """Scale a number.

        Args:
            x: The number.
            factor: By how much.
        """
        return x * factor

    parameters, description = function_schema(functools.partial(scale, factor=2))
    assert description == "Scale a number."
    assert parameters["properties"]["x"]["description"] == "The number."
    nested = functools.partial(functools.partial(scale), factor=3)
    assert function_schema(nested)[1] == "Scale a number."
    own = functools.partial(scale, factor=2)
    own.__doc__ = "Double a number."
    assert function_schema(own)[1] == "Double a number."
