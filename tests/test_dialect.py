"""JSON Schema 2019-09 / 2020-12 keywords, checked through fastjsonschema (``_dialect``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import ArgumentsError, ToolDefinitionError, validate_against_schema
from trio_invoke._dialect import for_fastjsonschema, ref_overrides_siblings
from trio_invoke._validate import compile_validator, seed_errors

DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_04 = "http://json-schema.org/draft-04/schema#"


def errors_of(args: Any, schema: dict[str, Any]) -> tuple[str, ...]:
    with pytest.raises(ArgumentsError) as info:
        validate_against_schema(args, schema)
    return info.value.errors


def passes(args: Any, schema: dict[str, Any]) -> bool:
    try:
        validate_against_schema(args, schema)
    except ArgumentsError:
        return False
    return True


def wrap(field: dict[str, Any], dialect: str | None = DRAFT_2020) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"t": field}}
    if dialect is not None:
        schema["$schema"] = dialect
    return schema


# --- what a 2020-12 server sends ----------------------------------------------------------------

# The shape pydantic (and so the MCP SDK's FastMCP) gives a tool taking a model argument.
PYDANTIC_STYLE = {
    "$schema": DRAFT_2020,
    "type": "object",
    "$defs": {
        "Point": {
            "type": "object",
            "title": "Point",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        "Shape": {"type": "string", "enum": ["circle", "square"]},
    },
    "properties": {
        "at": {"$ref": "#/$defs/Point", "description": "Where"},
        "kind": {"$ref": "#/$defs/Shape", "default": "circle"},
        "label": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "version": {"const": 2},
    },
    "required": ["at", "version"],
}


@pytest.mark.parametrize("dialect", [DRAFT_2020, DRAFT_2019, None])
def test_a_2020_12_tool_schema_compiles_and_validates(dialect: str | None) -> None:
    schema = {k: v for k, v in PYDANTIC_STYLE.items() if k != "$schema"}
    if dialect is not None:
        schema["$schema"] = dialect
    validate_against_schema({"at": {"x": 1, "y": 2.5}, "version": 2}, schema)
    validate_against_schema({"at": {"x": 1, "y": 2}, "kind": "square", "version": 2}, schema)
    assert errors_of({"at": {"x": 1}, "version": 2}, schema) == (
        "field 'at' must contain ['y'] properties",
    )
    assert errors_of({"at": {"x": 1, "y": 2, "z": 3}, "version": 2}, schema) == (
        "field 'at' must not contain {'z'} properties",
    )
    assert errors_of({"at": {"x": 1, "y": 2}, "kind": "hexagon", "version": 2}, schema) == (
        "field 'kind' must be one of ['circle', 'square']",
    )
    assert errors_of({"at": {"x": 1, "y": 2}, "version": 3}, schema) == (
        "field 'version' must be same as const definition: 2",
    )
    assert errors_of({"version": 2}, schema) == ("missing required field 'at'",)


@pytest.mark.parametrize(
    "uri",
    [
        DRAFT_2020,
        "https://json-schema.org/draft/2020-12/schema#",
        "http://json-schema.org/draft/2020-12/schema",
        DRAFT_2019,
        "https://json-schema.org/schema",  # the latest, whatever it is
        "urn:example:unknown-dialect",
    ],
)
def test_any_schema_uri_compiles_and_is_not_fetched(uri: str) -> None:
    schema = {"$schema": uri, "type": "object", "properties": {"n": {"type": "integer"}}}
    validate_against_schema({"n": 1}, schema)
    assert errors_of({"n": "1"}, schema) == ("field 'n': expected integer, got string",)


# --- prefixItems -------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", [DRAFT_2020, None])
def test_prefix_items_with_items_false_is_a_tuple(dialect: str | None) -> None:
    schema = wrap(
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        dialect,
    )
    validate_against_schema({"t": ["a", 1]}, schema)
    validate_against_schema({"t": ["a"]}, schema)  # prefixItems never requires the items
    assert errors_of({"t": [1, "a"]}, schema) == (
        "field 't[0]' must be string",
        "field 't[1]' must be integer",
    )
    assert errors_of({"t": ["a", 1, 2]}, schema) == ("field 't' must contain only specified items",)


@pytest.mark.parametrize("dialect", [DRAFT_2020, None])
def test_items_beside_prefix_items_checks_only_the_rest(dialect: str | None) -> None:
    schema = wrap({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, dialect)
    validate_against_schema({"t": ["a", 1, 2]}, schema)
    assert errors_of({"t": ["a", "b"]}, schema) == ("field 't[1]' must be integer",)
    assert errors_of({"t": [1]}, schema) == ("field 't[0]' must be string",)


def test_prefix_items_alone_leaves_the_rest_free() -> None:
    schema = wrap({"prefixItems": [{"type": "string"}]})
    validate_against_schema({"t": ["a", 1, None, {}]}, schema)


def test_draft_07_keeps_its_own_meaning_of_items() -> None:
    # In draft 7, prefixItems is an unknown keyword and items applies to every item.
    schema = wrap({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, DRAFT_07)
    validate_against_schema({"t": [1, 2]}, schema)
    assert errors_of({"t": ["a"]}, schema) == ("field 't[0]' must be integer",)
    tuple_schema = wrap({"items": [{"type": "string"}], "additionalItems": False}, DRAFT_07)
    validate_against_schema({"t": ["a"]}, tuple_schema)
    assert errors_of({"t": ["a", 1]}, tuple_schema)


item_kinds = st.sampled_from(["string", "integer", "boolean", "null"])
sample_values = {"string": "s", "integer": 3, "boolean": True, "null": None}


@given(
    prefix=st.lists(item_kinds, max_size=4),
    rest=st.sampled_from([None, False, True, *sample_values]),
    kinds=st.lists(item_kinds, max_size=6),
)
def test_prefix_items_agree_with_a_reference(
    prefix: list[str], rest: bool | str | None, kinds: list[str]
) -> None:
    """Against the 2020-12 rule, written out: item i < len(prefix) has type prefix[i]; later
    items match ``items`` (``False``: there are none; absent or ``True``: anything)."""
    field: dict[str, Any] = {"type": "array", "prefixItems": [{"type": k} for k in prefix]}
    if rest is not None:
        field["items"] = rest if isinstance(rest, bool) else {"type": rest}
    array = [sample_values[k] for k in kinds]
    expected = all(k == p for k, p in zip(kinds, prefix, strict=False))
    later = kinds[len(prefix) :]
    if rest is False:
        expected = expected and not later
    elif isinstance(rest, str):
        expected = expected and all(k == rest for k in later)
    assert passes({"t": array}, wrap(field)) == expected


# --- the other 2019-09 / 2020-12 keywords -----------------------------------------------------


COUNT = "https://example.com/count"
EMBEDDED = [
    pytest.param(
        {"$id": COUNT, "$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"},
        id="a $ref beside the resource's own $defs",
    ),
    pytest.param(
        {
            "$id": COUNT,
            "$defs": {"n": {"type": "integer"}},
            "type": "object",
            "properties": {"v": {"$ref": "#/$defs/n"}},
            "required": ["v"],
        },
        id="a $ref in a subschema of the resource",
    ),
    pytest.param(
        {"$id": COUNT, "$defs": {"n": {"$anchor": "num", "type": "integer"}}, "$ref": "#num"},
        id="a $ref to an $anchor of the resource",
    ),
    pytest.param(
        {
            "$id": COUNT,
            "$defs": {
                "inner": {
                    "$id": "inner",  # relative: https://example.com/inner
                    "$defs": {"n": {"type": "integer"}},
                    "$ref": "#/$defs/n",
                }
            },
            "$ref": "#/$defs/inner",
        },
        id="a resource inside a resource, with a relative $id",
    ),
]


@pytest.mark.parametrize("dialect", [DRAFT_2020, DRAFT_2019])
@pytest.mark.parametrize("field", EMBEDDED)
def test_a_reference_inside_an_embedded_resource_resolves_against_its_id(
    dialect: str, field: dict[str, Any]
) -> None:
    """A subschema with an absolute ``$id`` is a schema resource of its own; a fragment-only
    ``$ref`` in it points into it (2020-12 section 8.2.1): what schema bundlers write."""
    schema = wrap(field, dialect)
    good, bad = (5, "five") if "properties" not in field else ({"v": 5}, {"v": "five"})
    assert passes({"t": good}, schema)
    assert not passes({"t": bad}, schema)


@pytest.mark.parametrize("dialect", [DRAFT_2020, DRAFT_2019])
def test_ref_siblings_apply_in_2019_09_and_2020_12(dialect: str) -> None:
    schema = {
        "$schema": dialect,
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {
            "big": {"$ref": "#/$defs/n", "minimum": 10},
            "typed": {"$ref": "#/$defs/n", "type": "integer", "allOf": [{"maximum": 5}]},
        },
    }
    validate_against_schema({"big": 11, "typed": 4}, schema)
    assert errors_of({"big": 9}, schema) == ("field 'big' must be bigger than or equal to 10",)
    assert errors_of({"big": "x"}, schema) == ("field 'big' must be integer",)
    assert errors_of({"typed": 6}, schema) == ("field 'typed' must be smaller than or equal to 5",)
    # The seed's type check sees the sibling type too.
    assert seed_errors({"typed": "x"}, schema) == ["field 'typed': expected integer, got string"]


@pytest.mark.parametrize("dialect", [DRAFT_07, None])
def test_ref_overrides_siblings_in_draft_7_and_by_default(dialect: str | None) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "definitions": {"n": {"type": "integer"}},
        "properties": {"big": {"$ref": "#/definitions/n", "minimum": 10, "type": "string"}},
    }
    if dialect:
        schema["$schema"] = dialect
    assert ref_overrides_siblings(schema)
    validate_against_schema({"big": 1}, schema)
    assert seed_errors({"big": 1}, schema) == []


@pytest.mark.parametrize("dialect", [DRAFT_2020, DRAFT_2019, None])
def test_dependent_required_and_dependent_schemas(dialect: str | None) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "dependentRequired": {"card": ["expiry"]},
        "dependentSchemas": {"discount": {"required": ["code"]}},
    }
    if dialect:
        schema["$schema"] = dialect
    validate_against_schema({"card": 1, "expiry": 2}, schema)
    validate_against_schema({"discount": 1, "code": "x"}, schema)
    validate_against_schema({}, schema)
    assert errors_of({"card": 1}, schema) == ("arguments missing dependency expiry for card",)
    assert errors_of({"discount": 1}, schema) == ("arguments must contain ['code'] properties",)


def test_dependencies_of_every_kind_for_one_name_all_apply() -> None:
    schema = {
        "type": "object",
        "dependencies": {"a": ["b"]},
        "dependentRequired": {"a": ["c"]},
        "dependentSchemas": {"a": {"properties": {"d": {"type": "integer"}}}},
    }
    validate_against_schema({"a": 1, "b": 1, "c": 1, "d": 1}, schema)
    assert not passes({"a": 1, "c": 1}, schema)
    assert not passes({"a": 1, "b": 1}, schema)
    assert not passes({"a": 1, "b": 1, "c": 1, "d": "x"}, schema)


@pytest.mark.parametrize("keyword", ["$anchor", "$dynamicAnchor"])
def test_a_ref_to_an_anchor_resolves(keyword: str) -> None:
    schema = {
        "$schema": DRAFT_2020,
        "type": "object",
        "$defs": {"count": {keyword: "count", "type": "integer", "minimum": 0}},
        "properties": {"n": {"$ref": "#count"}},
    }
    validate_against_schema({"n": 1}, schema)
    assert errors_of({"n": -1}, schema) == ("field 'n' must be bigger than or equal to 0",)


def test_dynamic_ref_is_followed_as_a_static_ref() -> None:
    tree = {
        "$schema": DRAFT_2020,
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
        },
    }
    validate_against_schema({"value": 1, "children": [{"value": 2, "children": []}]}, tree)
    assert errors_of({"value": 1, "children": [{"value": "x"}]}, tree) == (
        "field 'children[0].value' must be integer",
    )


def test_recursive_ref_of_2019_09_is_followed() -> None:
    tree = {
        "$schema": DRAFT_2019,
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {"next": {"$recursiveRef": "#"}, "n": {"type": "integer"}},
    }
    assert errors_of({"next": {"next": {"n": "x"}}}, tree) == (
        "field 'next.next.n' must be integer",
    )


def test_unevaluated_properties_without_applicators_is_additional_properties() -> None:
    schema = {
        "$schema": DRAFT_2020,
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {"^x-": {}},
        "unevaluatedProperties": False,
    }
    validate_against_schema({"a": 1, "x-b": 2}, schema)
    assert errors_of({"a": 1, "c": 2}, schema) == ("arguments must not contain {'c'} properties",)
    typed = {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}}
    assert errors_of({"b": 1}, typed) == ("field 'b' must be string",)


def test_unevaluated_properties_beside_applicators_is_not_checked() -> None:
    # Its meaning depends on what allOf evaluated: not checked rather than checked wrongly.
    schema = {
        "$schema": DRAFT_2020,
        "type": "object",
        "allOf": [{"properties": {"a": {}}}],
        "unevaluatedProperties": False,
    }
    validate_against_schema({"a": 1}, schema)
    validate_against_schema({"a": 1, "b": 2}, schema)


def test_unevaluated_items() -> None:
    after_prefix = wrap({"prefixItems": [{"type": "string"}], "unevaluatedItems": False})
    validate_against_schema({"t": ["a"]}, after_prefix)
    assert errors_of({"t": ["a", 1]}, after_prefix) == (
        "field 't' must contain only specified items",
    )
    every = wrap({"unevaluatedItems": {"type": "integer"}})
    assert errors_of({"t": [1, "x"]}, every) == ("field 't[1]' must be integer",)
    evaluated = wrap({"items": {"type": "integer"}, "unevaluatedItems": False})
    validate_against_schema({"t": [1, 2]}, evaluated)


def test_min_contains_zero_makes_contains_no_constraint() -> None:
    schema = wrap({"type": "array", "contains": {"type": "integer"}, "minContains": 0})
    validate_against_schema({"t": ["a"]}, schema)
    validate_against_schema({"t": []}, schema)
    strict = wrap({"type": "array", "contains": {"type": "integer"}})
    assert errors_of({"t": ["a"]}, strict)


def test_a_ref_into_a_rewritten_place_still_resolves() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pair": {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
            "first": {"$ref": "#/properties/pair/prefixItems/0"},
            "rest": {"$ref": "#/properties/more/items"},
            "more": {"prefixItems": [{}], "items": {"type": "boolean"}},
        },
    }
    validate_against_schema({"first": "a", "rest": True, "pair": ["a", 1]}, schema)
    assert errors_of({"first": 1}, schema) == ("field 'first' must be string",)
    assert errors_of({"rest": 1}, schema) == ("field 'rest' must be boolean",)


def test_a_ref_relative_to_an_embedded_resource() -> None:
    schema = {
        "$schema": DRAFT_2020,
        "type": "object",
        "properties": {
            "inner": {
                "$id": "https://example.com/inner",
                "$defs": {"flag": {"$anchor": "flag", "type": "boolean"}},
                "type": "object",
                "properties": {"on": {"$ref": "#flag"}, "pair": {"$ref": "#/$defs/flag"}},
            }
        },
    }
    validate_against_schema({"inner": {"on": True, "pair": False}}, schema)
    assert errors_of({"inner": {"on": 1}}, schema) == ("field 'inner.on' must be boolean",)


def test_an_anchor_that_does_not_exist_is_a_definition_error() -> None:
    schema = {"$schema": DRAFT_2020, "properties": {"n": {"$ref": "#nowhere"}}}
    with pytest.raises(ToolDefinitionError, match="nowhere"):
        compile_validator(schema)


def test_the_rewrite_leaves_the_schema_alone() -> None:
    schema = {
        "$schema": DRAFT_2020,
        "properties": {
            "t": {"prefixItems": [{"type": "string"}], "items": False},
            "r": {"$ref": "#/$defs/a", "minimum": 1},
        },
        "dependentRequired": {"a": ["b"]},
        "$defs": {"a": {"$anchor": "a", "type": "integer"}},
    }
    before = copy.deepcopy(schema)
    rewritten = for_fastjsonschema(schema)
    assert schema == before
    assert rewritten["properties"]["t"] == {"items": [{"type": "string"}], "additionalItems": False}
    assert rewritten["properties"]["r"] == {"minimum": 1, "allOf": [{"$ref": "#/$defs/a"}]}
    assert rewritten["dependencies"] == {"a": ["b"]}
    json.dumps(rewritten)  # still plain JSON


def test_older_drafts_are_not_rewritten() -> None:
    schema = {
        "$schema": DRAFT_07,
        "properties": {"t": {"prefixItems": [{"type": "string"}], "items": {}}},
        "dependentRequired": {"a": ["b"]},
    }
    assert for_fastjsonschema(schema) == schema


def test_dependencies_schemas_are_rewritten_and_checked_too() -> None:
    schema = {
        "type": "object",
        "dependencies": {"pair": {"properties": {"pair": {"prefixItems": [{"type": "string"}]}}}},
    }
    assert errors_of({"pair": [1]}, schema) == ("field 'pair[0]' must be string",)
    with pytest.raises(ToolDefinitionError, match="multipleOf at #/dependentSchemas/a must be"):
        compile_validator({"dependentSchemas": {"a": {"multipleOf": 0}}})


def test_unevaluated_items_after_2019_09_tuple_items() -> None:
    schema = wrap({"items": [{"type": "string"}], "unevaluatedItems": False}, DRAFT_2019)
    validate_against_schema({"t": ["a"]}, schema)
    assert errors_of({"t": ["a", 1]}, schema) == ("field 't' must contain only specified items",)
    closed = wrap(
        {"items": [{"type": "string"}], "additionalItems": True, "unevaluatedItems": False},
        DRAFT_2019,
    )
    validate_against_schema({"t": ["a", 1]}, closed)  # additionalItems evaluated the rest


@pytest.mark.parametrize("junk", [{"allOf": 5}, {"oneOf": 3}, {"properties": 5}, {"allOf": [3]}])
def test_junk_where_schemas_belong_is_a_definition_error(junk: dict[str, Any]) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid JSON Schema"):
        compile_validator({"type": "object", **junk})


# OpenAPI 3.0 (and so many generated tool schemas) writes draft 4's boolean exclusive bounds,
# with or without a $schema that says so; in later drafts the keywords take numbers.
@pytest.mark.parametrize(
    "dialect", [None, DRAFT_04, DRAFT_07, DRAFT_2019, DRAFT_2020, "https://x/any"]
)
def test_boolean_exclusive_bounds_have_their_draft_4_meaning(dialect: str | None) -> None:
    schema = wrap(
        {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 10,
         "exclusiveMaximum": False},
        dialect,
    )  # fmt: skip
    for good in (0.5, 1, 5, 10):
        validate_against_schema({"t": good}, schema)
    assert errors_of({"t": 0}, schema) == ("field 't' must be bigger than 0",)
    assert errors_of({"t": 11}, schema) == ("field 't' must be smaller than or equal to 10",)
    upper = wrap({"type": "integer", "maximum": 3, "exclusiveMaximum": True}, dialect)
    validate_against_schema({"t": 2}, upper)
    assert errors_of({"t": 3}, upper) == ("field 't' must be smaller than 3",)
    # Without the bound it modifies, a boolean means nothing.
    validate_against_schema({"t": -5}, wrap({"exclusiveMinimum": True}, dialect))
    validate_against_schema({"t": 5}, wrap({"exclusiveMaximum": False}, dialect))


def test_numeric_exclusive_bounds_are_left_alone() -> None:
    schema = wrap({"type": "number", "exclusiveMinimum": 0, "minimum": -1})
    assert for_fastjsonschema(schema) == schema
    assert errors_of({"t": 0}, schema) == ("field 't' must be bigger than 0",)
