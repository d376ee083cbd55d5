from __future__ import annotations

import json
import math
from typing import Any

import fastjsonschema
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from trio_invoke._exceptions import ArgumentsError, ToolDefinitionError
from trio_invoke._validate import (
    compile_validator,
    json_type_name,
    parse_arguments,
    seed_errors,
    validate_against_schema,
)
from trio_invoke.testing import json_values, schemas_with_arguments, tool_arguments

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
        ({"type": "object", "properties": {"a": {"pattern": "("}}}, "(error)"),
        ({"type": "object", "properties": 5}, "(AttributeError)"),
        ({"type": "object", "properties": {"a": {"$ref": "#/nope"}}}, "nope"),
        ({"type": "object", "properties": {"a": {"enum": [math.nan]}}}, "not JSON"),
        ({"type": "object", "properties": {"a": {"enum": [b"x"]}}}, "not JSON"),
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
