"""Parsing and validating tool arguments: sans-IO, no Trio.

Two layers, run in this order on every tool call:

1. **Basic checks**, reported together: the arguments are a JSON object, every ``required``
   field is present, and each present field's value has a JSON type its ``properties`` entry
   allows (``"type"``: one name or a list of names). Their messages always name the field.
2. **Full JSON Schema validation** (enum, minimum, nested objects, anyOf, ...) through a
   `fastjsonschema <https://horejsek.github.io/python-fastjsonschema/>`_ validator. It runs only
   when the basic checks pass, and also reports every problem it finds.

The compiled validator is cached by the schema's canonical JSON text, so equal schemas share one
validator and a schema is compiled once per process, never per call. Hold the result of
:func:`compile_validator` to skip even the cache lookup (a loop that validates every call does).

JSON types follow fastjsonschema's default draft (2019-09; the ``type`` keyword behaves as in
draft 6 and later): ``integer`` accepts a float with no fractional part (``1.0``), ``number`` and
``integer`` never accept a boolean. A schema that declares draft 4 in ``$schema`` gets draft 4's
rule (no floats for ``integer``) in both layers.

Dialects: fastjsonschema implements drafts 4, 6 and 7. The keywords of 2019-09 and 2020-12 that
it lacks (``prefixItems``, ``dependentRequired``, ``$anchor``, a ``$ref`` beside other keywords,
...) are rewritten into their draft 7 forms before it compiles the schema, so they are checked as
their draft defines them (the list, and what is not checked, is in ``_dialect``).

Validation never raises anything but :class:`ArgumentsError`: whatever goes wrong while checking
(a recursive ``$ref`` that recurses past Python's limit on deeply nested arguments, a number too
large for ``multipleOf``'s float arithmetic, any exception from fastjsonschema's generated code)
becomes an :class:`ArgumentsError` that names the problem, so a call with such arguments gets an
error result like any invalid call.
"""

from __future__ import annotations

import decimal
import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

import fastjsonschema

from ._dialect import for_fastjsonschema, ref_overrides_siblings
from ._exceptions import ArgumentsError, ToolDefinitionError

__all__ = [
    "compile_validator",
    "json_type_name",
    "non_finite",
    "parse_arguments",
    "seed_errors",
    "validate_against_schema",
]

JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
"""The type names the ``type`` keyword knows."""

_CACHE_SIZE = 1024


def json_type_name(value: object) -> str:
    """The JSON type of a parsed JSON value, as the ``type`` keyword spells it.

    ``1`` is ``"integer"`` and ``1.0`` is ``"number"`` (the name says what was sent, even though
    ``{"type": "integer"}`` accepts ``1.0``). A value no JSON document can produce is named by its
    Python type.

    Args:
        value: Any value, typically from :func:`json.loads`.

    Returns:
        One of ``"null"``, ``"boolean"``, ``"integer"``, ``"number"``, ``"string"``, ``"array"``,
        ``"object"``, or the Python type's name.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float | decimal.Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _reject_constant(name: str) -> NoReturn:
    # json.loads accepts NaN, Infinity and -Infinity, which are not JSON.
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # json.loads reads 1e400 as inf: a number no tool can be given, refused like Infinity.
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{_preview(text)} is out of range (it overflows a 64-bit float)")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
"""One decoder for every call: ``json.loads`` with a keyword argument builds a new one."""


def _preview(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-(limit // 2) :]}"


def _describe(exc: BaseException) -> str:
    """``"TypeName: message"``, even for an exception whose ``__str__`` raises."""
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not hide the error itself
        message = ""
    name = type(exc).__name__
    return f"{name}: {_preview(message, 200)}" if message else name


def parse_arguments(raw: str) -> dict[str, Any]:
    """Parse the raw JSON text of a tool call's arguments.

    An empty or whitespace-only string means no arguments (``{}``): models send that for tools
    without parameters.

    Args:
        raw: The arguments exactly as the model streamed them.

    Returns:
        The arguments object.

    Raises:
        ArgumentsError: ``raw`` is not valid JSON (``"invalid JSON arguments: <reason>"``;
            ``NaN``, ``Infinity`` and number literals that overflow a float, such as ``1e400``,
            count as invalid), or it is JSON but not an object
            (``"arguments must be a JSON object, got array"``), or it is not a string at all.
            Nothing else is ever raised.
    """
    if not isinstance(raw, str):
        raise ArgumentsError([f"arguments must be JSON text, got {type(raw).__name__}"])
    if not raw or raw.isspace():
        return {}
    try:
        value = _DECODER.decode(raw)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise ArgumentsError([f"invalid JSON arguments: {exc}"]) from exc
    except RecursionError as exc:
        raise ArgumentsError(["invalid JSON arguments: nested too deeply"]) from exc
    except Exception as exc:  # MemoryError, or whatever else the decoder lets out
        raise ArgumentsError([f"invalid JSON arguments: {_describe(exc)}"]) from exc
    if not isinstance(value, dict):
        raise ArgumentsError([_not_an_object(value)])
    return value


def _not_an_object(value: object) -> str:
    return f"arguments must be a JSON object, got {json_type_name(value)}"


def _has_type(value: object, json_type: str, integral_floats: bool) -> bool:
    """Whether ``value`` is of ``json_type``, exactly as fastjsonschema's ``type`` check decides."""
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "object":
        return isinstance(value, dict)
    if json_type == "array":
        return isinstance(value, list | tuple)
    if json_type == "boolean":
        return isinstance(value, bool)
    if json_type == "null":
        return value is None
    if isinstance(value, bool):  # bool is an int subclass, but never a JSON number
        return False
    if json_type == "number":
        return isinstance(value, int | float | decimal.Decimal)
    # "integer"
    return isinstance(value, int) or (
        integral_floats and isinstance(value, float) and value.is_integer()
    )


class _SeedChecks:
    """The seed's checks for one schema, read out of the schema once."""

    __slots__ = ("_integral_floats", "_required", "_types")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        required = schema.get("required")
        names = required if isinstance(required, list | tuple) else ()
        # dict.fromkeys: a field listed twice is reported once, in schema order.
        self._required = tuple(dict.fromkeys(n for n in names if isinstance(n, str)))
        self._types: dict[str, tuple[str, ...]] = {}
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            ref_overrides = ref_overrides_siblings(schema)
            for field, subschema in properties.items():
                types = _declared_types(subschema, ref_overrides=ref_overrides)
                if types is not None:
                    self._types[field] = types
        draft = schema.get("$schema")
        self._integral_floats = not (isinstance(draft, str) and "draft-04" in draft)

    def errors(self, args: object) -> list[str]:
        if not isinstance(args, dict):
            return [_not_an_object(args)]
        errors = [f"missing required field {name!r}" for name in self._required if name not in args]
        if self._types:
            for field, value in args.items():
                types = self._types.get(field)
                if types is None or any(_has_type(value, t, self._integral_floats) for t in types):
                    continue
                expected = types[0] if len(types) == 1 else "one of " + ", ".join(types)
                errors.append(f"field {field!r}: expected {expected}, got {json_type_name(value)}")
        return errors


def _declared_types(subschema: object, *, ref_overrides: bool) -> tuple[str, ...] | None:
    """The JSON types a property's schema declares, or ``None`` when the seed does not check it.

    Unchecked: no ``type``, a ``type`` naming something that is not a JSON type (fastjsonschema
    rejects such a schema when it compiles it), and, when ``ref_overrides``, a ``$ref`` beside
    ``type`` (the reference overrides its siblings in drafts 4 to 7, and in fastjsonschema
    without ``$schema``; in 2019-09 and 2020-12 both apply).
    """
    if not isinstance(subschema, Mapping) or (ref_overrides and "$ref" in subschema):
        return None
    declared = subschema.get("type")
    types = [declared] if isinstance(declared, str) else declared
    if not isinstance(types, list | tuple) or not types:
        return None
    if not all(isinstance(t, str) and t in JSON_TYPES for t in types):
        return None
    return tuple(types)


def seed_errors(args: Any, schema: Mapping[str, Any]) -> list[str]:
    """The seed's checks of ``args`` against ``schema``: every problem, none raised.

    The checks: ``args`` is a JSON object (a ``dict``); every field in ``required`` is present;
    each present field that has a ``type`` in ``properties`` holds a value of that type (or of one
    of the types, for a list). Nothing else in the schema is looked at; malformed parts of it are
    skipped rather than reported (compiling the schema reports them).

    Args:
        args: Parsed arguments.
        schema: A tool's parameters schema.

    Returns:
        The error messages, required fields first (in ``required`` order), then type mismatches
        (in the arguments' order); empty when the checks pass. Formats:
        ``"arguments must be a JSON object, got array"``, ``"missing required field 'city'"``,
        ``"field 'days': expected integer, got string"``,
        ``"field 'days': expected one of integer, null, got string"``.
    """
    return _SeedChecks(schema).errors(args)


class _NoRemoteRefs(Mapping[str, Callable[[str], Any]]):
    """fastjsonschema ``handlers`` that refuse every remote ``$ref``.

    fastjsonschema fetches a ``$ref`` to another document with urllib unless a handler for its
    URI scheme is given. Validation here is sans-IO, and a tool's schema may come from a provider,
    so every scheme gets a handler that refuses.
    """

    def __contains__(self, scheme: object) -> bool:
        return True

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote_ref

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _refuse_remote_ref(uri: str) -> NoReturn:
    raise fastjsonschema.JsonSchemaDefinitionException(
        f"remote $ref {uri!r} is not fetched; inline the referenced schema"
    )


_NO_REMOTE_REFS = _NoRemoteRefs()


def _schema_error(name: str) -> str:
    """fastjsonschema's path (``data``, ``data.unit``, ``data.a.b[0]``) as our message subject."""
    path = name[4:] if name.startswith("data") else name
    if not path:
        return "arguments"
    return f"field {path.removeprefix('.')!r}"


def _value_error(exc: fastjsonschema.JsonSchemaValueException) -> str:
    # "data.unit must be one of ['c', 'f']" -> "field 'unit' must be one of ['c', 'f']"
    name = exc.name
    if exc.rule == "multipleOf" and "inifinity" in exc.message:  # sic, fastjsonschema's text
        subject = _schema_error(name) if name is not None else "a number"
        return (
            f"{subject} is too large to check against multipleOf {exc.rule_definition!r} "
            "(the quotient overflows a float)"
        )
    if exc.rule == "propertyNames" and isinstance(exc.value, dict):
        return _property_names_error(exc, _schema_error(name or "data"))
    if name is not None and exc.message.startswith(name):
        return _schema_error(name) + exc.message[len(name) :]
    if name is not None:
        return f"{_schema_error(name)}: {exc.message}"
    return exc.message


def _property_names_error(exc: fastjsonschema.JsonSchemaValueException, subject: str) -> str:
    """``propertyNames`` failed for the object at ``subject``: name the keys that break it
    (fastjsonschema says only "must be named by propertyName definition")."""
    definition = exc.rule_definition
    bad: list[str] = []
    try:
        text = json.dumps(definition, sort_keys=True)
        if '"$ref"' not in text:  # (a $ref would be read against the fragment, not the schema)
            check = _name_checker(text)
            bad = [key for key in exc.value if not check(key)]
    except Exception:  # what it cannot tell, the generic message says
        bad = []
    names = ", ".join(repr(key) for key in bad[:5]) + (", ..." if len(bad) > 5 else "")
    keys = f"key {names}" if len(bad) == 1 else f"keys {names}"
    if not bad:
        keys = "a key"
    if definition is False:
        return f"{subject}: {keys} not allowed (propertyNames is false: no keys are)"
    return f"{subject}: {keys} must match propertyNames {definition!r}"


@functools.lru_cache(maxsize=64)
def _name_checker(definition: str) -> Callable[[str], bool]:
    validate = fastjsonschema.compile(
        json.loads(definition), handlers=_NO_REMOTE_REFS, use_default=False
    )

    def check(key: str) -> bool:
        try:
            validate(key)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    return check


def _unrepresentable(value: object) -> str | None:
    """Why a number cannot take part in float arithmetic, or ``None`` if it can."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"is {value!r}, not a JSON number"
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    try:
        float(value)
    except OverflowError:
        return "is a number too large to check against the schema"
    return None


def _overflow_messages(args: object, exc: OverflowError, limit: int = 5) -> list[str]:
    """A message for each number in ``args`` that no float can hold (the first ``limit``).

    Iterative, so that arguments nested past the recursion limit are walked too.
    """
    found: list[str] = []
    stack: list[tuple[object, str]] = [(args, "data")]
    while stack and len(found) < limit:
        value, name = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{name}.{k}") for k, v in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{name}[{i}]") for i, v in reversed(list(enumerate(value))))
        elif (why := _unrepresentable(value)) is not None:
            found.append(
                f"{_schema_error(name)} {why} (it overflows a 64-bit float: {_describe(exc)})"
            )
    return found


def _unexpected_error(exc: Exception, args: object) -> list[str]:
    """Messages for an exception the validator raised instead of reporting a violation."""
    if isinstance(exc, RecursionError):
        return [
            "arguments are nested too deeply to check against the schema (its recursive $ref "
            "went past Python's recursion limit)"
        ]
    if isinstance(exc, OverflowError):
        return _overflow_messages(args, exc) or [
            "a number is too large to check against the schema's multipleOf "
            f"(it overflows a 64-bit float: {_describe(exc)})"
        ]
    return [f"arguments could not be checked against the schema: {_describe(exc)}"]


def _definition_error(exc: Exception) -> ToolDefinitionError:
    if isinstance(exc, fastjsonschema.JsonSchemaDefinitionException | ToolDefinitionError):
        text = str(exc)
    elif isinstance(exc, RecursionError):
        text = "nested too deeply to compile"
    else:  # fastjsonschema lets AttributeError, TypeError... escape
        text = _describe(exc)
    text = text.removeprefix("invalid JSON Schema: ")
    return ToolDefinitionError(f"invalid JSON Schema: {text}")


class _Validator:
    """A compiled validator for one schema: the seed's checks, then fastjsonschema's."""

    __slots__ = ("_full", "_seed", "schema")

    def __init__(self, schema: dict[str, Any], prepared: dict[str, Any]) -> None:
        # ``prepared``: an equal copy of ``schema`` (fastjsonschema rewrites the $refs of what
        # it compiles in place), rewritten into the draft 7 forms fastjsonschema checks.
        self.schema = schema
        try:
            self._full = fastjsonschema.compile(
                for_fastjsonschema(prepared),
                handlers=_NO_REMOTE_REFS,
                # Validation only checks: it never fills in defaults (the tool's own defaults
                # apply) and never changes the caller's arguments.
                use_default=False,
                # Report every problem, as the seed's checks do.
                fast_fail=False,
            )
        except Exception as exc:  # fastjsonschema lets re.error, AttributeError... escape
            raise _definition_error(exc) from exc
        self._seed = _SeedChecks(schema)

    def __call__(self, args: Any) -> None:
        if type(args) is dict:  # the common case: an object that passes, in one call
            try:
                self._full(args)
            except Exception:  # reported in full by _check below
                pass
            else:
                return
        try:
            self._check(args)
        except ArgumentsError:
            raise
        except Exception as exc:  # RecursionError, OverflowError, ZeroDivisionError...
            raise ArgumentsError(_unexpected_error(exc, args)) from exc

    def _check(self, args: Any) -> None:
        if isinstance(args, dict):
            # For an object, fastjsonschema checks all that the seed's checks do: when it passes
            # there is nothing to report; when it fails, the seed's messages come first below.
            try:
                self._full(args)
            except fastjsonschema.JsonSchemaException:
                pass
            else:
                return
        errors = self._seed.errors(args)
        if errors:
            raise ArgumentsError(errors)
        try:
            self._full(args)
        except fastjsonschema.JsonSchemaValuesException as exc:
            messages = dict.fromkeys(_value_error(e) for e in exc.errors)
            raise ArgumentsError(list(messages)) from exc
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ArgumentsError([_value_error(exc)]) from exc

    def __repr__(self) -> str:
        return f"<validator for {json.dumps(self.schema, sort_keys=True)}>"


def _canonical(schema: Mapping[str, Any]) -> str:
    def plain(value: object) -> object:
        if isinstance(value, Mapping):
            return dict(value)
        raise TypeError(f"{type(value).__name__} is not JSON")

    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"a JSON Schema must be a mapping, got {type(schema).__name__}")
    try:
        return json.dumps(schema, sort_keys=True, default=plain, allow_nan=False)
    except ValueError as exc:  # NaN or infinity, or a schema that contains itself
        where = non_finite(schema)
        problem = f"{where[1]!r} at {where[0]} is not a JSON number: " if where else ""
        raise ToolDefinitionError(f"invalid JSON Schema: not JSON ({problem}{exc})") from exc
    except (TypeError, RecursionError) as exc:
        raise ToolDefinitionError(f"invalid JSON Schema: not JSON ({exc})") from exc


def non_finite(data: Mapping[str, Any], *, fields: bool = False) -> tuple[str, float] | None:
    """Where the first NaN or infinity in ``data`` (a schema, a request body, arguments) is, in
    document order, and it; ``None`` if there is none: what ``json.dumps(..., allow_nan=False)``
    refuses. ``where`` is a JSON pointer (``#/a/b/0``), or with ``fields`` a field path as
    argument errors name fields (``a.b[0]``). Iterative; a value that contains itself is not
    JSON either, and is not followed twice."""

    def key(where: str, name: object) -> str:
        if not fields:
            return f"{where}/{name}"
        return f"{where}.{name}" if where else str(name)

    def index(where: str, position: int) -> str:
        return f"{where}[{position}]" if fields else f"{where}/{position}"

    stack: list[tuple[object, str]] = [(data, "" if fields else "#")]
    seen: set[int] = set()
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where, value
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, Mapping):
            stack.extend((v, key(where, k)) for k, v in reversed(list(value.items())))
        elif isinstance(value, list | tuple):
            stack.extend((v, index(where, i)) for i, v in reversed(list(enumerate(value))))
    return None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _validator_for(canonical: str) -> _Validator:
    return _Validator(json.loads(canonical), json.loads(canonical))


def compile_validator(schema: Mapping[str, Any]) -> Callable[[Any], None]:
    """Compile ``schema`` into a validator of tool arguments.

    The validator runs the basic checks (an object; required fields present; declared types
    match) and, when they pass, full JSON
    Schema validation; either way it reports every problem it found in one exception. Validation
    never changes the arguments.

    Compiled validators are cached (up to 1024 schemas) by the schema's canonical JSON text, so
    schemas that are equal as JSON share one validator; later changes to ``schema`` do not affect
    a validator already returned. Calling the validator does no serialising or compiling.

    Remote references (``"$ref": "https://..."``) are refused, never fetched; local ones
    (``"#/$defs/..."``) work.

    Args:
        schema: A JSON Schema (for a tool: ``"type": "object"`` with ``properties``).

    Returns:
        A callable taking parsed arguments that returns ``None`` when they are valid.

    Raises:
        ToolDefinitionError: ``schema`` is not valid JSON Schema (or not JSON at all); the
            message names the problem. Raised here, never by the returned validator.

    The returned validator raises :class:`ArgumentsError`, and nothing else, whose ``errors``
    name the field and the problem: the basic checks' own messages, and fastjsonschema's with
    the subject rewritten (``"field 'unit' must be one of ['c', 'f']"``, ``"field 'loc.lat'
    must be number"``, ``"arguments must not contain {'x'} properties"``). Arguments it cannot
    check at all get a message saying why (``"arguments are nested too deeply to check against
    the schema ..."``, ``"field 'n' is a number too large to check against the schema ..."``).

    Schemas of JSON Schema 2019-09 and 2020-12 (``$defs``, ``prefixItems``, ``const``,
    ``dependentRequired``, ``$anchor``...) are checked as those drafts define them: the keywords
    fastjsonschema (drafts 4, 6 and 7) lacks are rewritten into their draft 7 forms first. Not
    checked: ``minContains`` above 1, ``maxContains``, ``unevaluatedProperties`` and
    ``unevaluatedItems`` beside in-place applicators (``allOf``, ``$ref``...), and ``format``
    names fastjsonschema does not know.
    """
    return _validator_for(_canonical(schema))


def validate_against_schema(args: Any, schema: Mapping[str, Any]) -> None:
    """Check tool arguments against a tool's JSON Schema.

    Basic checks first (an object; required fields present; declared types match), all
    problems together; then, if those pass, full JSON Schema validation with a cached
    fastjsonschema validator. Shorthand for ``compile_validator(schema)(args)``, which serialises
    ``schema`` to find its cached validator: to validate many calls, hold
    :func:`compile_validator`'s result instead.

    Args:
        args: Parsed arguments (see :func:`parse_arguments`).
        schema: The tool's ``parameters`` schema.

    Raises:
        ArgumentsError: The arguments break the schema, or cannot be checked against it (see
            :func:`compile_validator`). ``errors`` holds one message per problem, each naming
            the field, e.g. ``"missing required field 'city'"``,
            ``"field 'days': expected integer, got string"``,
            ``"field 'unit' must be one of ['c', 'f']"``.
        ToolDefinitionError: ``schema`` itself is not valid JSON Schema.

    Example:

    >>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    >>> validate_against_schema({"n": 3}, schema)  # passes: returns None
    >>> validate_against_schema({}, schema)
    Traceback (most recent call last):
      ...
    trio_invoke.ArgumentsError: missing required field 'n'
    >>> validate_against_schema({"n": "3"}, schema)
    Traceback (most recent call last):
      ...
    trio_invoke.ArgumentsError: field 'n': expected integer, got string
    """
    compile_validator(schema)(args)
