from __future__ import annotations

import copy
import json
import math
import pickle
from typing import Any

import fastjsonschema
import pytest
import trio
from hypothesis import assume, example, given
from hypothesis import strategies as st

from trio_invoke import ChatMessage, FunctionInvokingChatClient, ToolCall, ToolCalled
from trio_invoke._exceptions import ArgumentsError, ToolDefinitionError
from trio_invoke._validate import (
    compile_validator,
    json_type_name,
    parse_arguments,
    seed_errors,
    validate_against_schema,
)
from trio_invoke.testing import (
    ScriptedChatClient,
    assert_transcript_valid,
    json_values,
    run_to_completion,
    schemas_with_arguments,
    tool_arguments,
    tool_calls_response,
)

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "unit": {"type": "string", "enum": ["c", "f"]},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


def errors_of(args: Any, schema: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(ArgumentsError) as info:
        validate_against_schema(args, schema)
    return info.value.errors


# --- parse_arguments -------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", " ", "\n\t "])
def test_parse_empty_means_no_arguments(raw: str) -> None:
    assert parse_arguments(raw) == {}


def test_parse_object() -> None:
    assert parse_arguments(' {"city": "Paris", "days": 3} ') == {"city": "Paris", "days": 3}


@pytest.mark.parametrize("raw", ['{"city": ', "{city: 1}", "nope", '{"a": 1} x'])
def test_parse_invalid_json(raw: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments(raw)
    (message,) = info.value.errors
    assert message.startswith("invalid JSON arguments: ")
    assert "line 1 column" in message  # json's own explanation of where


@pytest.mark.parametrize("raw", ["NaN", '{"x": Infinity}', '{"x": -Infinity}'])
def test_parse_rejects_non_json_constants(raw: str) -> None:
    with pytest.raises(
        ArgumentsError, match=r"^invalid JSON arguments: -?(NaN|Infinity) is not valid JSON$"
    ):
        parse_arguments(raw)


def test_parse_deeply_nested_is_an_arguments_error() -> None:
    with pytest.raises(ArgumentsError, match="invalid JSON arguments"):
        parse_arguments("[" * 100_000)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("[1, 2]", "array"),
        ('"text"', "string"),
        ("1.5", "number"),
        ("3", "integer"),
        ("true", "boolean"),
        ("null", "null"),
    ],
)
def test_parse_non_object(raw: str, kind: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments(raw)
    assert info.value.errors == (f"arguments must be a JSON object, got {kind}",)
    assert str(info.value) == f"arguments must be a JSON object, got {kind}"


@pytest.mark.parametrize(
    "copy_of", [copy.copy, copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))]
)
def test_arguments_error_survives_copy_and_pickle(copy_of: Any) -> None:
    # A process tool's exception crosses back by pickle.
    with pytest.raises(ArgumentsError) as info:
        validate_against_schema({"a": "x"}, {"type": "object", "required": ["b"], **INTEGER_A})
    again = copy_of(info.value)
    assert type(again) is ArgumentsError
    assert again.errors == ("missing required field 'b'", "field 'a': expected integer, got string")
    assert str(again) == str(info.value)
    assert again.args == info.value.args


@given(tool_arguments())
def test_parse_round_trips_any_object(arguments: dict[str, Any]) -> None:
    assert parse_arguments(json.dumps(arguments)) == arguments


def test_json_type_name() -> None:
    values: list[object] = [None, True, 1, 1.0, "", [], (), {}, b""]
    assert [json_type_name(v) for v in values] == [
        "null",
        "boolean",
        "integer",
        "number",
        "string",
        "array",
        "array",
        "object",
        "bytes",
    ]


# --- the seed's checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kind"), [([], "array"), ("x", "string"), (None, "null"), (2, "integer")]
)
def test_seed_arguments_must_be_an_object(args: object, kind: str) -> None:
    assert seed_errors(args, WEATHER) == [f"arguments must be a JSON object, got {kind}"]
    assert errors_of(args, WEATHER) == (f"arguments must be a JSON object, got {kind}",)


def test_seed_reports_every_missing_field_in_schema_order() -> None:
    assert seed_errors({}, WEATHER) == [
        "missing required field 'city'",
        "missing required field 'days'",
    ]


def test_seed_reports_required_then_types_in_argument_order() -> None:
    args = {"unit": 1, "days": "3"}
    assert seed_errors(args, WEATHER) == [
        "missing required field 'city'",
        "field 'unit': expected string, got integer",
        "field 'days': expected integer, got string",
    ]
    with pytest.raises(ArgumentsError) as info:
        validate_against_schema(args, WEATHER)
    assert str(info.value) == "; ".join(seed_errors(args, WEATHER))


def test_seed_type_list_message() -> None:
    schema = {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}
    assert seed_errors({"n": None}, schema) == []
    assert seed_errors({"n": 2}, schema) == []
    assert seed_errors({"n": "2"}, schema) == [
        "field 'n': expected one of integer, null, got string"
    ]


def test_seed_required_field_listed_twice_is_reported_once() -> None:
    schema = {"type": "object", "required": ["a", "a", 3]}
    assert seed_errors({}, schema) == ["missing required field 'a'"]


def test_seed_present_null_counts_as_present() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "null"}}, "required": ["a"]}
    assert seed_errors({"a": None}, schema) == []


@pytest.mark.parametrize(
    ("json_type", "good", "bad"),
    [
        ("string", ["", "x"], [1, None, True, [], {}]),
        ("integer", [0, -3, 10**30, 2.0, 1e20], [1.5, True, False, "1", None]),
        ("number", [0, 1.5, -2, 10**30], [True, "1.5", None, []]),
        ("boolean", [True, False], [0, 1, "true", None]),
        ("null", [None], [0, "", False, []]),
        ("array", [[], [1, "a"]], [{}, "[]", None]),
        ("object", [{}, {"a": 1}], [[], "{}", None]),
    ],
)
def test_seed_json_types(json_type: str, good: list[object], bad: list[object]) -> None:
    schema = {"type": "object", "properties": {"v": {"type": json_type}}}
    reference = fastjsonschema.compile(schema)
    for value in good:
        assert seed_errors({"v": value}, schema) == [], value
        reference({"v": value})  # fastjsonschema agrees
    for value in bad:
        (message,) = seed_errors({"v": value}, schema)
        assert message == f"field 'v': expected {json_type}, got {json_type_name(value)}"
        with pytest.raises(fastjsonschema.JsonSchemaValueException):
            reference({"v": value})


def test_fastjsonschema_default_draft_counts_integral_floats_as_integers() -> None:
    # What the seed's integer check is built to agree with: fastjsonschema's default draft
    # (2019-09 code generator, draft 6 type rules) accepts 1.0 as an integer, not 1.5 nor True.
    validate = fastjsonschema.compile({"type": "integer"})
    assert validate(1.0) == 1.0
    for value in (1.5, True):
        with pytest.raises(fastjsonschema.JsonSchemaValueException):
            validate(value)


def test_draft_04_schema_rejects_integral_floats_in_both_layers() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer"}},
    }
    assert seed_errors({"n": 2.0}, schema) == ["field 'n': expected integer, got number"]
    assert errors_of({"n": 2.0}, schema) == ("field 'n': expected integer, got number",)
    validate_against_schema({"n": 2}, schema)


def test_seed_ignores_what_it_does_not_check() -> None:
    schema = {
        "type": "object",
        "properties": {
            "free": {},
            "ref": {"$ref": "#/$defs/n", "type": "string"},  # $ref overrides its siblings
            "weird": {"type": "decimal"},
            "listed": {"type": []},
            "flag": True,
        },
        "$defs": {"n": {"type": "integer"}},
    }
    args = {"free": [1], "ref": 3, "weird": "x", "listed": 1, "flag": 1, "extra": 1}
    assert seed_errors(args, schema) == []
    assert seed_errors({}, {"required": "city", "properties": ["x"]}) == []


# --- full validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("valid", "near_miss", "error"),
    [
        (
            {"city": "Paris", "days": 3},
            {"city": "Paris", "days": 3.5},
            "field 'days': expected integer, got number",
        ),
        (
            {"city": "Paris", "days": 3.0, "unit": "f"},
            {"city": "Paris", "days": 3, "unit": "F"},
            "field 'unit' must be one of ['c', 'f']",
        ),
        (
            {"city": "", "days": 1},
            {"city": "", "days": 0},
            "field 'days' must be bigger than or equal to 1",
        ),
        (
            {"city": "Oslo", "days": 2, "unit": "c"},
            {"city": "Oslo", "days": 2, "units": "c"},
            "arguments must not contain {'units'} properties",
        ),
    ],
    ids=["an integral float", "an enum value", "the minimum", "the known fields"],
)
def test_valid_arguments_pass(valid: dict[str, Any], near_miss: dict[str, Any], error: str) -> None:
    before = json.loads(json.dumps(valid))
    assert validate_against_schema(valid, WEATHER) is None
    assert compile_validator(WEATHER)(valid) is None
    assert valid == before  # passed as they are, nothing filled in or coerced
    # The same arguments one field off fail, naming it: the pass above is a real check.
    assert errors_of(near_miss, WEATHER) == (error,)


def test_enum_error_names_the_field() -> None:
    assert errors_of({"city": "Paris", "days": 3, "unit": "k"}, WEATHER) == (
        "field 'unit' must be one of ['c', 'f']",
    )


def test_every_full_validation_error_is_reported() -> None:
    errors = errors_of({"city": "Paris", "days": 0, "unit": "k", "extra": 1}, WEATHER)
    assert set(errors) == {
        "field 'days' must be bigger than or equal to 1",
        "field 'unit' must be one of ['c', 'f']",
        "arguments must not contain {'extra'} properties",
    }


def test_seed_errors_come_alone() -> None:
    # The full validation (which would also complain about "extra") runs only on success.
    assert errors_of({"days": 0, "extra": 1}, WEATHER) == ("missing required field 'city'",)


def test_nested_errors_name_the_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "loc": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "tags": {"items": {"type": "string"}}},
                "required": ["lat"],
            }
        },
    }
    assert errors_of({"loc": {"lat": "north", "tags": ["a", 2]}}, schema) == (
        "field 'loc.lat' must be number",
        "field 'loc.tags[1]' must be string",
    )
    assert errors_of({"loc": {}}, schema) == ("field 'loc' must contain ['lat'] properties",)


def test_anyof_error_names_the_field() -> None:
    schema = {
        "type": "object",
        "properties": {"when": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    }
    validate_against_schema({"when": None}, schema)
    assert errors_of({"when": 3}, schema) == ("field 'when' cannot be validated by any definition",)


def test_validation_does_not_change_the_arguments() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 5}}}
    args: dict[str, Any] = {}
    validate_against_schema(args, schema)
    assert args == {}  # fastjsonschema would fill in defaults; we ask it not to


def test_local_refs_work() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/small"}},
        "$defs": {"small": {"type": "integer", "maximum": 3}},
    }
    validate_against_schema({"n": 2}, schema)
    assert errors_of({"n": 9}, schema) == ("field 'n' must be smaller than or equal to 3",)


# --- invalid schemas -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"type": "decimal"}}}, "Unknown type"),
        ({"type": "object", "properties": {"a": {"minimum": "x"}}}, "minimum must be a number"),
        ({"type": "object", "properties": {"a": {"enum": 5}}}, "enum must be an array"),
        ({"type": "object", "required": "a"}, "required must be an array"),
        ({"type": "object", "properties": {"a": {"pattern": "("}}}, "is not a regular expression"),
        ({"type": "object", "properties": 5}, "AttributeError"),
        ({"type": "object", "properties": {"a": {"$ref": "#/nope"}}}, "nope"),
        ({"type": "object", "properties": {"a": {"enum": [math.nan]}}}, "not JSON"),
        ({"type": "object", "properties": {"a": {"enum": [b"x"]}}}, "not JSON"),
        ({"type": "object", "properties": {"a": {"type": []}}}, "type at #/properties/a is []"),
        ({"type": []}, "type at # is []"),
    ],
)
def test_invalid_schema_is_a_tool_definition_error(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid JSON Schema") as info:
        compile_validator(schema)
    assert problem in str(info.value)
    with pytest.raises(ToolDefinitionError):
        validate_against_schema({}, schema)


def test_schema_must_be_a_mapping() -> None:
    with pytest.raises(ToolDefinitionError, match="must be a mapping, got list"):
        compile_validator([])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ref", ["http://127.0.0.1:9/schema.json", "https://example.com/s.json", "file:///etc/passwd"]
)
def test_remote_refs_are_refused_not_fetched(ref: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
    with pytest.raises(ToolDefinitionError, match=r"remote \$ref .* is not fetched"):
        compile_validator(schema)


def test_any_mapping_is_a_schema() -> None:
    from types import MappingProxyType

    schema = MappingProxyType({"type": "object", "required": ["a"]})
    assert errors_of({}, schema) == ("missing required field 'a'",)  # type: ignore[arg-type]


# --- the cache -------------------------------------------------------------------------------


@pytest.fixture
def compile_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    real = fastjsonschema.compile

    def spy(definition: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(definition)
        return real(definition, *args, **kwargs)

    monkeypatch.setattr(fastjsonschema, "compile", spy)
    return calls


def fresh_schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    # A schema no other test compiled (the cache is per process).
    return {
        "type": "object",
        "description": request.node.nodeid,
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }


def test_compiled_once_for_many_calls(
    compile_calls: list[dict[str, Any]], request: pytest.FixtureRequest
) -> None:
    schema = fresh_schema(request)
    for n in range(50):
        validate_against_schema({"n": n}, schema)
    with pytest.raises(ArgumentsError):
        validate_against_schema({"n": "x"}, schema)
    assert compile_calls == [schema]


def test_equal_schemas_share_one_validator(
    compile_calls: list[dict[str, Any]], request: pytest.FixtureRequest
) -> None:
    schema = fresh_schema(request)
    reordered = dict(reversed(list(schema.items())))
    validator = compile_validator(schema)
    assert compile_validator(reordered) is validator
    assert compile_validator(json.loads(json.dumps(schema))) is validator
    assert len(compile_calls) == 1


def test_held_validator_does_not_follow_schema_changes(request: pytest.FixtureRequest) -> None:
    schema = fresh_schema(request)
    validator = compile_validator(schema)
    schema["required"] = []
    with pytest.raises(ArgumentsError, match="missing required field 'n'"):
        validator({})
    validate_against_schema({}, schema)  # the changed schema has its own validator


def test_validator_repr_shows_the_schema() -> None:
    assert repr(compile_validator({"type": "object"})) == '<validator for {"type": "object"}>'


# --- properties ------------------------------------------------------------------------------


@given(json_values())
def test_json_values_round_trip(value: Any) -> None:
    assert json.loads(json.dumps(value)) == value


@given(schemas_with_arguments())
def test_generated_valid_arguments_pass(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, arguments = case
    assert seed_errors(arguments, schema) == []
    validate_against_schema(arguments, schema)
    fastjsonschema.compile(schema)(arguments)  # the reference agrees they are valid


@given(schemas_with_arguments(), st.data())
def test_removing_a_required_field_fails_naming_it(
    case: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    schema, arguments = case
    assume(schema["required"])
    field = data.draw(st.sampled_from(schema["required"]))
    del arguments[field]
    assert errors_of(arguments, schema) == (f"missing required field {field!r}",)


WRONG_VALUES: dict[str, object] = {
    "string": "text",
    "number": 1.5,
    "integer": 7,
    "boolean": True,
    "null": None,
    "array": [1],
    "object": {"k": 1},
}


def accepts(types: list[str], kind: str) -> bool:
    return kind in types or (kind == "integer" and "number" in types)


@given(schemas_with_arguments(), st.data())
def test_a_value_of_the_wrong_type_fails_naming_the_field(
    case: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    schema, arguments = case
    assume(arguments)
    field = data.draw(st.sampled_from(sorted(arguments)))
    declared = schema["properties"][field]["type"]
    types = [declared] if isinstance(declared, str) else declared
    wrong = [kind for kind in WRONG_VALUES if not accepts(types, kind)]
    arguments[field] = WRONG_VALUES[data.draw(st.sampled_from(wrong))]
    errors = errors_of(arguments, schema)
    assert len(errors) == 1
    assert errors[0].startswith(f"field {field!r}: expected ")


@st.composite
def seed_level_cases(draw: st.DrawFn) -> tuple[dict[str, Any], object]:
    """A schema using only type/required/properties, and arguments that may or may not fit."""
    names = draw(st.lists(st.sampled_from("abcde"), max_size=4, unique=True))
    kinds = st.sampled_from(sorted(WRONG_VALUES))
    properties: dict[str, Any] = {}
    for name in names:
        types = draw(st.lists(kinds, min_size=1, max_size=3, unique=True))
        properties[name] = draw(st.sampled_from([{}, {"type": types}, {"type": types[0]}]))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from("abcdef"), max_size=4, unique=True))
    near_fields = st.sampled_from("abcdef") | st.text(max_size=3)
    args = draw(st.dictionaries(near_fields, json_values(max_leaves=3), max_size=5) | json_values())
    return schema, args


INTEGER_A = {"type": "object", "properties": {"a": {"type": "integer"}}}


@given(seed_level_cases())
@example((INTEGER_A, {"a": 1.0}))  # accepted by both
@example((INTEGER_A, {"a": True}))  # rejected by both
@example(({**INTEGER_A, "required": ["b"]}, {"a": 2}))
@example((INTEGER_A, [1]))
def test_seed_checks_agree_with_fastjsonschema(case: tuple[dict[str, Any], object]) -> None:
    schema, args = case
    try:
        fastjsonschema.compile(schema)(args)
    except fastjsonschema.JsonSchemaValueException:
        reference_accepts = False
    else:
        reference_accepts = True
    assert (seed_errors(args, schema) == []) == reference_accepts


# --- hostile arguments: nothing but ArgumentsError ---------------------------------------------


SELF_REF = {
    "type": "object",
    "properties": {"n": {"$ref": "#/$defs/node"}},
    "$defs": {"node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/node"}}}},
}
ROOT_REF = {"type": "object", "properties": {"n": {"$ref": "#"}}}
CHAIN_OF_TWO = {
    "type": "object",
    "properties": {"n": {"$ref": "#/definitions/a"}},
    "definitions": {
        "a": {"type": "object", "properties": {"n": {"$ref": "#/definitions/b"}}},
        "b": {"type": "object", "properties": {"n": {"$ref": "#/definitions/a"}}},
    },
}
CHAIN_OF_THREE = {
    "type": "object",
    "properties": {"n": {"$ref": "#/$defs/a"}},
    "$defs": {
        "a": {"$ref": "#/$defs/b"},
        "b": {"$ref": "#/$defs/c"},
        "c": {"type": "object", "properties": {"n": {"$ref": "#/$defs/a"}}},
    },
}
ALIASED = {
    "type": "object",
    "properties": {"n": {"$ref": "#/$defs/alias"}},
    "$defs": {
        "alias": {"$ref": "#/$defs/node"},
        "node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/alias"}}},
    },
}
THROUGH_ITEMS = {
    "type": "object",
    "properties": {"n": {"$ref": "#/$defs/list"}},
    "$defs": {"list": {"type": "array", "items": {"$ref": "#/$defs/list"}}},
}
THROUGH_ANY_OF = {
    "type": "object",
    "properties": {"n": {"$ref": "#/$defs/t"}},
    "$defs": {
        "t": {
            "anyOf": [
                {"type": "null"},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/t"}},
            ]
        }
    },
}
RECURSIVE_SCHEMAS = {
    "self": SELF_REF,
    "root": ROOT_REF,
    "chain of two": CHAIN_OF_TWO,
    "chain of three": CHAIN_OF_THREE,
    "aliased": ALIASED,
    "items": THROUGH_ITEMS,
    "anyOf": THROUGH_ANY_OF,
}


def nest(depth: int, *, array: bool = False) -> dict[str, Any]:
    """``{"n": {"n": ... {} ...}}`` (or lists) ``depth`` levels deep, built without recursion."""
    inner: Any = [] if array else {}
    for _ in range(depth):
        inner = [inner] if array else {"n": inner}
    return {"n": inner} if array else inner


@pytest.mark.parametrize("name", sorted(RECURSIVE_SCHEMAS))
@pytest.mark.parametrize("depth", [2_000, 20_000, 200_000])
def test_recursive_ref_with_deeply_nested_arguments_is_an_arguments_error(
    name: str, depth: int
) -> None:
    schema = RECURSIVE_SCHEMAS[name]
    validate = compile_validator(schema)
    validate(nest(5, array=name == "items"))  # shallow arguments pass
    with pytest.raises(ArgumentsError) as info:
        validate(nest(depth, array=name == "items"))
    (message,) = info.value.errors
    assert message.startswith("arguments are nested too deeply to check against the schema")
    assert isinstance(info.value.__cause__, RecursionError)


def test_a_ref_cycle_that_never_reaches_data_is_an_arguments_error() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
    }
    with pytest.raises(ArgumentsError, match="nested too deeply"):
        validate_against_schema({"n": 1}, schema)


def multiple_of(step: float) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"type": "number", "multipleOf": step}}}


BIG = 10**400


@pytest.mark.parametrize("step", [0.5, 0.1, 1e-300, 2.5, 3.0])
@pytest.mark.parametrize("value", [BIG, -BIG, 10**309 + 1, 7 * 10**399])
def test_a_number_too_large_for_multiple_of_is_an_arguments_error(step: float, value: int) -> None:
    with pytest.raises(ArgumentsError) as info:
        validate_against_schema({"x": value}, multiple_of(step))
    (message,) = info.value.errors
    assert message.startswith("field 'x' is a number too large to check against the schema")
    assert "OverflowError" in message


@pytest.mark.parametrize("value", [3.5, 0.1, 1e300, -2.25])
def test_a_huge_integer_multiple_of_with_a_float_is_an_arguments_error(value: float) -> None:
    schema = {"type": "object", "properties": {"x": {"multipleOf": BIG}}}
    with pytest.raises(ArgumentsError, match="too large to check against the schema's multipleOf"):
        validate_against_schema({"x": value}, schema)
    validate_against_schema({"x": 2 * BIG}, schema)  # int with int: exact, no float involved
    assert errors_of({"x": BIG + 1}, schema)[0].startswith("field 'x' must be multiple of")


@pytest.mark.parametrize(("step", "value"), [(0.1, 1e308), (1e-300, 1e300), (0.5, 1.5e308)])
def test_an_overflowing_quotient_names_the_field_and_multiple_of(step: float, value: float) -> None:
    assert errors_of({"x": value}, multiple_of(step)) == (
        f"field 'x' is too large to check against multipleOf {step!r} "
        "(the quotient overflows a float)",
    )


class LengthlessText(str):
    __slots__ = ()

    def __len__(self) -> int:
        raise RuntimeError("no length for me")


class KeylessDict(dict[str, Any]):
    def keys(self) -> Any:
        raise LookupError("no keys for me")


@pytest.mark.parametrize(
    ("schema", "args", "problem"),
    [
        (multiple_of(0.5), {"x": math.nan}, "ValueError"),
        (multiple_of(0.5), {"x": math.inf}, "field 'x' is inf, not a JSON number"),
        (multiple_of(3), {"x": -math.inf}, "field 'x' is -inf, not a JSON number"),
        (
            {"properties": {"x": {"maxLength": 3}}},
            {"x": LengthlessText("abcd")},
            "arguments could not be checked against the schema: RuntimeError: no length for me",
        ),
        (
            {"properties": {"x": {"required": ["a"]}}},
            {"x": KeylessDict(a=1)},
            "LookupError: no keys for me",
        ),
    ],
)
def test_any_exception_from_the_validator_is_an_arguments_error(
    schema: dict[str, Any], args: dict[str, Any], problem: str
) -> None:
    # Not JSON values, but a caller of validate_against_schema may pass anything.
    with pytest.raises(ArgumentsError) as info:
        validate_against_schema(args, schema)
    assert problem in str(info.value)


numbers = (
    st.integers()
    | st.integers(min_value=10**300, max_value=10**420).map(lambda n: n * 1 if n % 2 else -n)
    | st.floats(allow_nan=False, allow_infinity=False)
)
steps = (
    st.floats(min_value=1e-320, max_value=1e308, exclude_min=False)
    | st.integers(min_value=1, max_value=10**5)
    | st.integers(min_value=10**300, max_value=10**420)
)


@given(steps, st.lists(numbers, min_size=1, max_size=3))
@example(0.5, [BIG])
@example(BIG, [0.5])
@example(1e-300, [1e308])
def test_multiple_of_raises_nothing_but_arguments_errors(step: float, values: list[float]) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "array", "items": {"multipleOf": step}}},
    }
    errors: tuple[str, ...] = ()
    try:
        validate_against_schema({"x": values}, schema)
    except ArgumentsError as exc:
        errors = exc.errors
    assert all(e.startswith(("field 'x[", "a number")) for e in errors), errors


@pytest.mark.parametrize(
    "raw",
    [
        '{"x": 1e400}',
        '{"x": -1e400}',
        '{"x": 1E+400}',
        '{"x": 123456789e303}',
        '{"x": 0.1e310}',
        '{"a": [1, {"b": 9.9e999}]}',
        '{"x": -' + "9" * 400 + ".5}",
    ],
)
def test_parse_rejects_numbers_that_overflow_a_float(raw: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments(raw)
    (message,) = info.value.errors
    assert message.startswith("invalid JSON arguments: ")
    assert message.endswith("is out of range (it overflows a 64-bit float)")
    literal = message.removeprefix("invalid JSON arguments: ").split(" is out of range")[0]
    assert literal.rstrip(".").split("...")[0] in raw  # names the literal (shortened if long)


def test_parse_keeps_what_a_float_can_hold() -> None:
    assert parse_arguments('{"a": 1e-400, "b": 1.7e308, "c": 5e-324}') == {
        "a": 0.0,
        "b": 1.7e308,
        "c": 5e-324,
    }
    assert parse_arguments('{"n": ' + "9" * 400 + "}") == {"n": int("9" * 400)}  # ints are exact


def non_finite(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


exponents = st.integers(min_value=-400, max_value=400).map(lambda e: f"e{e}")
number_literals = st.builds(
    lambda sign, digits, exponent: f"{sign}{digits}{exponent}",
    st.sampled_from(["", "-"]),
    st.from_regex(r"\A[1-9][0-9]{0,3}(\.[0-9]{1,3})?\Z"),
    exponents,
)


@given(st.lists(number_literals, min_size=1, max_size=4))
def test_no_tool_ever_receives_a_non_finite_number(literals: list[str]) -> None:
    raw = '{"values": [' + ", ".join(literals) + "]}"
    overflows = any(math.isinf(float(literal)) for literal in literals)
    if overflows:
        with pytest.raises(ArgumentsError, match="out of range"):
            parse_arguments(raw)
        return
    parsed = parse_arguments(raw)
    assert not non_finite(parsed)
    assert len(parsed["values"]) == len(literals)


@given(st.text())
@example("[" * 100_000)
@example('{"a": NaN}')
@example('{"a": 1e999}')
@example("\ud800")
def test_parse_raises_nothing_but_arguments_errors(raw: str) -> None:
    try:
        parsed = parse_arguments(raw)
    except ArgumentsError:
        return
    assert isinstance(parsed, dict)
    assert not non_finite(parsed)


@pytest.mark.parametrize("raw", [None, 3, b'{"a": 1}', {"a": 1}])
def test_parse_of_something_that_is_not_text_is_an_arguments_error(raw: object) -> None:
    with pytest.raises(
        ArgumentsError, match=f"arguments must be JSON text, got {type(raw).__name__}"
    ):
        parse_arguments(raw)  # type: ignore[arg-type]


# --- schemas fastjsonschema would compile, then trip over ---------------------------------------


@pytest.mark.parametrize("step", [0, -2, 0.0, -0.5, "2", True, None, math.nan])
def test_multiple_of_must_be_a_number_above_zero(step: object) -> None:
    schema = {"type": "object", "properties": {"x": {"items": {"multipleOf": step}}}}
    with pytest.raises(ToolDefinitionError) as info:
        compile_validator(schema)
    message = str(info.value)
    if isinstance(step, float) and math.isnan(step):
        assert "nan at #/properties/x/items/multipleOf is not a JSON number" in message
    else:
        assert message == (
            "invalid JSON Schema: multipleOf at #/properties/x/items must be a number > 0, "
            f"got {step!r}"
        )


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"properties": {"w": {"pattern": r"^\p{L}+$"}}}, r"pattern '^\\p{L}+$' at #/properties/w"),
        (
            {"properties": {"w": {"pattern": "(?<name>x)"}}},
            "pattern '(?<name>x)' at #/properties/w",
        ),
        ({"$defs": {"d": {"pattern": "["}}}, "pattern '[' at #/$defs/d"),
        ({"patternProperties": {"^(a": {}}}, "patternProperties '^(a' at #"),
    ],
)
def test_a_pattern_python_cannot_compile_is_named(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        compile_validator(schema)
    assert where in str(info.value)
    assert "is not a regular expression Python can compile" in str(info.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"properties": {"x": {"multipleOf": 1e400}}}', "#/properties/x/multipleOf"),
        ('{"properties": {"x": {"maximum": -1e999}}}', "#/properties/x/maximum"),
        ('{"enum": [1, 2, 1e400]}', "#/enum/2"),
    ],
)
def test_a_schema_holding_infinity_names_where(text: str, where: str) -> None:
    schema = json.loads(text)  # what json.loads makes of a server's schema
    with pytest.raises(ToolDefinitionError, match="invalid JSON Schema: not JSON") as info:
        compile_validator(schema)
    assert f"at {where} is not a JSON number" in str(info.value)


# --- through the loop: a call's error result, never a crash ------------------------------------


class SchemaTool:
    """A tool with a hand-written schema that records what it was given."""

    def __init__(self, name: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = "test tool"
        self.parameters = parameters
        self.requires_approval = False
        self.received: list[dict[str, Any]] = []

    async def execute(self, arguments: dict[str, Any]) -> str:
        self.received.append(arguments)
        return "ran"


HOSTILE_CALLS = [
    ("deep", CHAIN_OF_THREE, '{"n": ' * 400 + "{}" + "}" * 400, "nested too deeply"),
    ("deep", ALIASED, '{"n": ' * 700 + "{}" + "}" * 700, "nested too deeply"),
    ("step", multiple_of(0.5), '{"x": ' + "7" * 400 + "}", "field 'x' is a number too large"),
    ("step", multiple_of(0.1), '{"x": -' + "1" * 310 + "}", "field 'x' is a number too large"),
    ("step", multiple_of(0.1), '{"x": 1e308}', "field 'x' is too large to check"),
    ("step", {"properties": {"x": {"multipleOf": BIG}}}, '{"x": 0.5}', "multipleOf"),
    ("step", multiple_of(0.5), '{"x": 1e400}', "1e400 is out of range"),
    ("step", multiple_of(0.5), '{"x": [-1e400]}', "-1e400 is out of range"),
    ("step", {"type": "object"}, '{"x": {"y": 2E999}}', "2E999 is out of range"),
]


@pytest.mark.parametrize(("name", "schema", "arguments", "problem"), HOSTILE_CALLS)
async def test_hostile_arguments_become_that_calls_error_result(
    name: str, schema: dict[str, Any], arguments: str, problem: str
) -> None:
    hostile, sibling = SchemaTool(name, schema), SchemaTool("plain", {"type": "object"})
    model = ScriptedChatClient(
        [
            tool_calls_response(ToolCall("c1", name, arguments), ToolCall("c2", "plain", "{}")),
            "done",
        ]
    )
    client = FunctionInvokingChatClient(model, [hostile, sibling])
    with trio.fail_after(30):
        result = await run_to_completion(client, [ChatMessage.user("go")])
    called = {u.call.id: u for u in result.updates if isinstance(u, ToolCalled)}
    assert called["c1"].is_error
    assert called["c1"].result.startswith(f"Error: invalid arguments for tool {name!r}: ")
    assert problem in called["c1"].result
    assert isinstance(called["c1"].exception, ArgumentsError)
    assert (called["c2"].result, called["c2"].is_error) == ("ran", False)
    assert hostile.received == []  # the tool never saw the arguments, nor an inf
    assert result.messages[-1].content == "done"
    assert_transcript_valid([ChatMessage.user("go"), *result.messages])


def nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    inner = schema
    for _ in range(depth):
        inner["properties"] = {"a": {}}
        inner = inner["properties"]["a"]
    return schema


@pytest.mark.parametrize("depth", [200, 300, 400, 2_000])
def test_a_schema_too_deep_to_compile_is_a_definition_error(depth: int) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid JSON Schema: "):
        compile_validator(nested_schema(depth))


def test_a_schema_that_contains_itself_is_a_definition_error() -> None:
    schema: dict[str, Any] = {"type": "object"}
    schema["properties"] = {"self": schema}
    with pytest.raises(ToolDefinitionError, match=r"not JSON \(Circular reference detected\)"):
        compile_validator(schema)


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


class ExplodingText(str):
    __slots__ = ()

    def __len__(self) -> int:
        raise UnprintableError


def test_an_exception_that_cannot_even_be_shown_is_named_by_its_type() -> None:
    schema = {"properties": {"x": {"maxLength": 3}}}
    assert errors_of({"x": ExplodingText("abcd")}, schema) == (
        "arguments could not be checked against the schema: UnprintableError",
    )


def test_whatever_else_the_decoder_lets_out_is_an_arguments_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import trio_invoke._validate as module

    class Decoder:
        def decode(self, raw: str) -> Any:
            raise MemoryError("out of memory")

    monkeypatch.setattr(module, "_DECODER", Decoder())
    with pytest.raises(
        ArgumentsError, match=r"^invalid JSON arguments: MemoryError: out of memory$"
    ):
        parse_arguments('{"a": 1}')


def test_only_the_numbers_too_large_are_named() -> None:
    args = {"flag": True, "name": "n", "small": 3, "list": [1.5, BIG], "big": -BIG}
    schema = {"properties": {"list": {"items": {"multipleOf": 0.5}}, "big": {"multipleOf": 0.5}}}
    errors = errors_of(args, schema)
    assert [e.split(" is ")[0] for e in errors] == ["field 'list[1]'", "field 'big'"]


@pytest.mark.parametrize(
    ("schema", "arguments", "message"),
    [
        (
            {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
            {"ok": 1, "Bad": 2},
            "arguments: key 'Bad' must match propertyNames {'pattern': '^[a-z]+$'}",
        ),
        (
            {"type": "object", "propertyNames": {"maxLength": 2}},
            {"abc": 1, "ab": 2, "wxyz": 3},
            "arguments: keys 'abc', 'wxyz' must match propertyNames {'maxLength': 2}",
        ),
        (
            {
                "type": "object",
                "properties": {"tags": {"type": "object", "propertyNames": {"enum": ["a", "b"]}}},
            },
            {"tags": {"a": 1, "c": 2}},
            "field 'tags': key 'c' must match propertyNames {'enum': ['a', 'b']}",
        ),
        (
            {"type": "object", "propertyNames": False},
            {"x": 1},
            "arguments: key 'x' not allowed (propertyNames is false: no keys are)",
        ),
    ],
)
def test_property_names_errors_name_the_keys(
    schema: dict[str, Any], arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ArgumentsError) as caught:
        validate_against_schema(arguments, schema)
    assert str(caught.value) == message
