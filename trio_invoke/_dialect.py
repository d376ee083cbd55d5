"""JSON Schema dialects: a tool's schema in the form fastjsonschema checks (sans-IO, no Trio).

fastjsonschema implements drafts 4, 6 and 7 (its newest code generator, "2019-09", is draft 7
with more formats). Tool schemas from MCP servers and generators such as pydantic use
2020-12: ``$defs`` (which works as it is: a local ``$ref`` is a JSON pointer), ``prefixItems``,
``dependentRequired``, ``$anchor``... Left as they are, fastjsonschema ignores the keywords it
does not know, and reads ``items`` beside ``prefixItems`` with draft 7's meaning (every item),
which refuses valid arguments. :func:`for_fastjsonschema` rewrites those keywords into their
draft 7 equivalents, so that they are checked as 2020-12 defines them:

==========================================  ================================================
2019-09 / 2020-12                           checked as
==========================================  ================================================
``prefixItems`` and ``items``               ``items`` (a list) and ``additionalItems``
``dependentRequired``, ``dependentSchemas``  ``dependencies``
``$anchor``, ``$dynamicAnchor``             ``$ref`` to ``#name`` becomes a JSON pointer
``$dynamicRef``, ``$recursiveRef``           a static ``$ref`` (exact for one document)
``$ref`` beside other keywords              ``allOf: [{"$ref": ...}]`` beside them
``contains`` with ``minContains: 0``        no constraint
``unevaluatedProperties`` / ``Items``       ``additionalProperties`` / ``additionalItems``
                                            when no in-place applicator is beside them
==========================================  ================================================

Which rules apply depends on the root's ``$schema``: all of them for 2019-09 and 2020-12 (where
``prefixItems`` and ``$dynamicRef`` exist only in 2020-12); none for drafts 4, 6 and 7; and
without ``$schema`` (or with an unknown one) all but the ``$ref`` rule, since there the keywords
exist only in the newer drafts, whereas a ``$ref`` overriding its siblings is draft 7's rule and
fastjsonschema's default.

Not checked (ignored, so never a reason to refuse arguments): ``minContains`` above 1 and
``maxContains``, ``unevaluatedProperties`` / ``unevaluatedItems`` beside ``allOf``, ``anyOf``,
``oneOf``, ``not``, ``if``, ``$ref`` or dependencies, the dynamic scope of ``$dynamicRef``
across documents, and ``format`` names fastjsonschema does not know. ``pattern`` is a Python
regular expression: an ECMA-262 pattern Python cannot compile (``\\p{L}``) makes the schema
invalid.

In every dialect but draft 4 (which fastjsonschema reads itself), draft 4's boolean
``exclusiveMinimum`` / ``exclusiveMaximum`` (OpenAPI 3.0 writes them, often without
``$schema``) become the numbers later drafts take: ``true`` makes ``minimum`` / ``maximum``
exclusive, ``false`` is dropped.

The same pass refuses a ``multipleOf`` that is not a number above zero (fastjsonschema compiles
it, then divides by it on every call) and an empty ``type`` list, and names the place of a
``pattern`` that Python's ``re`` cannot compile.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

from ._exceptions import ToolDefinitionError

__all__ = ["for_fastjsonschema", "ref_overrides_siblings"]

_Path = tuple[str, ...]

_ONE_SCHEMA = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose value is one schema (``items`` is handled on its own: a schema or a list)."""
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP = frozenset(
    {"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties", "properties"}
)
"""Keywords whose value maps names to schemas (``dependencies``: or to lists of names)."""
_IN_PLACE = frozenset(
    {
        "$dynamicRef",
        "$recursiveRef",
        "$ref",
        "allOf",
        "anyOf",
        "dependencies",
        "dependentSchemas",
        "else",
        "if",
        "not",
        "oneOf",
        "then",
    }
)
"""Applicators whose annotations ``unevaluated*`` would have to follow."""
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")


def _dialect(schema: Mapping[str, Any]) -> str:
    uri = schema.get("$schema")
    if not isinstance(uri, str):
        return "unspecified"
    if any(f"draft-0{n}" in uri for n in (4, 6, 7)):
        return "draft-07"
    if "2019-09" in uri:
        return "2019-09"
    if "2020-12" in uri:
        return "2020-12"
    return "unspecified"


def ref_overrides_siblings(schema: Mapping[str, Any]) -> bool:
    """Whether a ``$ref`` makes its sibling keywords void in ``schema`` (a root schema).

    True for drafts 4 to 7 and without ``$schema``, as fastjsonschema reads them; false for
    2019-09 and 2020-12, where the siblings apply as well.
    """
    return _dialect(schema) not in ("2019-09", "2020-12")


def _where(path: _Path) -> str:
    return "#" + "".join("/" + _escape(segment) for segment in path)


def _escape(segment: str) -> str:
    return quote(segment.replace("~", "~0").replace("/", "~1"), safe="$!&'()*+,;=:@-._~")


def _check_multiple_of(node: Mapping[str, Any], path: _Path) -> None:
    if "multipleOf" not in node:
        return
    value = node["multipleOf"]
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or (isinstance(value, float) and math.isnan(value)) or value <= 0:
        raise ToolDefinitionError(
            f"invalid JSON Schema: multipleOf at {_where(path)} must be a number > 0, got {value!r}"
        )


def _check_patterns(node: Mapping[str, Any], path: _Path) -> None:
    pattern = node.get("pattern")
    patterns = [("pattern", pattern)] if isinstance(pattern, str) else []
    keyed = node.get("patternProperties")
    if isinstance(keyed, Mapping):
        patterns += [("patternProperties", key) for key in keyed if isinstance(key, str)]
    for keyword, text in patterns:
        try:
            re.compile(text)
        except re.error as exc:
            raise ToolDefinitionError(
                f"invalid JSON Schema: {keyword} {text!r} at {_where(path)} is not a regular "
                f"expression Python can compile ({exc}); JSON Schema patterns are ECMA-262, "
                "and Python's re lacks some of it, such as \\p{...}"
            ) from exc


class _Rewriter:
    """One pass over a schema: the rewritten copy, and where every subschema went."""

    def __init__(self, dialect: str, *, draft_4: bool = False) -> None:
        self.draft_4 = draft_4
        self.rewrite = dialect != "draft-07"
        self.prefix_items = dialect in ("2020-12", "unspecified")
        self.ref_siblings = dialect in ("2019-09", "2020-12")
        self.moved: dict[_Path, _Path] = {}
        """Original path of every subschema -> its path in the rewritten schema."""
        self.anchors: dict[_Path, dict[str, _Path]] = {}
        """Resource (original path) -> anchor name -> original path of its subschema."""
        self.refs: list[tuple[dict[str, Any], _Path]] = []
        """Rewritten nodes holding a ``$ref``, with their resource (original path)."""
        self.ids: dict[_Path, str] = {}
        """Resource (original path) -> its base URI, as its ``$id`` and those around it say."""

    def schema(self, node: object, orig: _Path, new: _Path, resource: _Path) -> object:
        if not isinstance(node, Mapping):
            return node  # a boolean schema, or something fastjsonschema reports
        self.moved[orig] = new
        _check_multiple_of(node, orig)
        if node.get("type") == []:  # fastjsonschema would refuse every value, saying "must be "
            raise ToolDefinitionError(
                f"invalid JSON Schema: type at {_where(orig)} is [], which names no type"
            )
        _check_patterns(node, orig)
        node_id = node.get("$id")
        if isinstance(node_id, str) and not node_id.startswith("#"):
            base = urljoin(self.ids.get(resource, ""), node_id)
            if orig:
                resource = orig
            self.ids[resource] = base
        if not self.rewrite:
            return self._copy(node, {}, orig, new, resource)
        for keyword in ("$anchor", "$dynamicAnchor"):
            name = node.get(keyword)
            if isinstance(name, str):
                self.anchors.setdefault(resource, {}).setdefault(name, orig)
        return self._copy(node, self._renames(node), orig, new, resource)

    def _renames(self, node: Mapping[str, Any]) -> dict[str, str | None]:
        """Keyword -> the keyword it becomes in this node (``None``: dropped)."""
        renames: dict[str, str | None] = {}
        tuple_items = isinstance(node.get("items"), list)
        if self.prefix_items and isinstance(node.get("prefixItems"), list) and not tuple_items:
            renames["prefixItems"] = "items"
            renames["additionalItems"] = None  # not a 2020-12 keyword
            if "items" in node:
                renames["items"] = "additionalItems"
            tuple_items, rest = True, "items" in node
        elif tuple_items:
            rest = "additionalItems" in node
        else:
            rest = "items" in node
        if isinstance(node.get("dependentSchemas"), Mapping):
            renames["dependentSchemas"] = "dependencies"
        if node.get("minContains") == 0 and "maxContains" not in node:
            renames["contains"] = None
        simple = _IN_PLACE.isdisjoint(node)
        if simple and "unevaluatedProperties" in node:
            evaluated = "additionalProperties" in node
            renames["unevaluatedProperties"] = None if evaluated else "additionalProperties"
        if simple and "unevaluatedItems" in node and "contains" not in node:
            if rest:  # every item is evaluated already
                renames["unevaluatedItems"] = None
            else:
                renames["unevaluatedItems"] = "additionalItems" if tuple_items else "items"
        return renames

    def _copy(
        self,
        node: Mapping[str, Any],
        renames: Mapping[str, str | None],
        orig: _Path,
        new: _Path,
        resource: _Path,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in node.items():
            target = renames.get(key, key)
            if target is None:
                continue
            child_orig, child_new = (*orig, key), (*new, target)
            if (key == "items" and isinstance(value, list)) or key in _SCHEMA_LIST:
                out[target] = self._list(value, child_orig, child_new, resource)
            elif key in _ONE_SCHEMA or key == "items":
                out[target] = self.schema(value, child_orig, child_new, resource)
            elif key in _SCHEMA_MAP and isinstance(value, Mapping):
                merged = out.get(target) if target == "dependencies" else None
                entries = merged if isinstance(merged, dict) else {}
                out[target] = self._map(value, entries, child_orig, child_new, resource)
            elif key == "dependentRequired" and self.rewrite and isinstance(value, Mapping):
                merged = out.setdefault("dependencies", {})
                if isinstance(merged, dict):
                    for name, required in value.items():
                        _merge_dependency(merged, name, required)
            else:
                out[target] = value
        if not self.draft_4:
            _exclusive_bounds(out)
        if self.rewrite:
            self._refs(out, resource)
        return out

    def _list(self, value: object, orig: _Path, new: _Path, resource: _Path) -> object:
        if not isinstance(value, list):
            return value
        return [
            self.schema(item, (*orig, str(i)), (*new, str(i)), resource)
            for i, item in enumerate(value)
        ]

    def _map(
        self,
        value: Mapping[str, Any],
        entries: dict[str, Any],
        orig: _Path,
        new: _Path,
        resource: _Path,
    ) -> dict[str, Any]:
        """A map of schemas into ``entries``, which may hold dependencies already."""
        for name, sub in value.items():
            if isinstance(sub, list):  # a dependencies entry: names of required properties
                _merge_dependency(entries, name, sub)
            elif name in entries:
                # A dependentSchemas and a dependencies entry for one name: both apply. (A
                # $ref into the first one, now under allOf/0, is not followed there.)
                checked = self.schema(sub, (*orig, name), (*new, name, "allOf", "1"), resource)
                entries[name] = {"allOf": [_as_schema(entries[name]), checked]}
            else:
                entries[name] = self.schema(sub, (*orig, name), (*new, name), resource)
        return entries

    def _refs(self, out: dict[str, Any], resource: _Path) -> None:
        """Turn the dynamic references into static ones, and a ``$ref`` with siblings into an
        ``allOf`` beside them (2019-09 and 2020-12)."""
        refs = [out.pop(k) for k in _REFS if isinstance(out.get(k), str)]
        if not refs:
            return
        if self.ref_siblings and out:
            existing = out.get("allOf")
            wrapped = [{"$ref": ref} for ref in refs]
            out["allOf"] = [*existing, *wrapped] if isinstance(existing, list) else wrapped
            self.refs.extend((ref_node, resource) for ref_node in wrapped)
            return
        out["$ref"] = refs[0]  # $ref first; without siblings' rule, it overrides the rest
        self.refs.append((out, resource))

    def new_path(self, orig: _Path) -> _Path:
        """Where the subschema at ``orig`` (or the value under it) is in the rewritten schema."""
        for length in range(len(orig), -1, -1):
            moved = self.moved.get(orig[:length])
            if moved is not None:
                return moved + orig[length:]
        return orig  # pragma: no cover -- the root is always in ``moved``

    def fix_refs(self) -> None:
        """Point every local ``$ref`` at where its target went."""
        for node, resource in self.refs:
            ref = node["$ref"]
            if not ref.startswith("#"):
                continue
            fragment = ref[1:]
            if fragment.startswith("/") or not fragment:
                segments = [
                    unquote(s).replace("~1", "/").replace("~0", "~")
                    for s in fragment[1:].split("/")
                ]
                target: _Path | None = (*resource, *segments) if fragment else resource
            else:
                target = self.anchors.get(resource, {}).get(unquote(fragment))
            if target is None:
                continue  # fastjsonschema reports the unresolvable reference
            base = self.new_path(resource)
            relative = self.new_path(target)[len(base) :]
            uri = urldefrag(self.ids.get(resource, "")).url if resource else ""
            if urlsplit(uri).scheme:
                # Inside an embedded resource (a subschema with an absolute $id), fastjsonschema
                # resolves a reference against that $id only when it is written in full.
                node["$ref"] = uri + _where(relative)
                continue
            if fragment.startswith("/") and relative == target[len(resource) :]:
                continue  # nothing on its way moved: keep the reference as it was written
            node["$ref"] = _where(relative)


def _exclusive_bounds(out: dict[str, Any]) -> None:
    """Draft 4's boolean ``exclusiveMinimum`` / ``exclusiveMaximum`` (OpenAPI 3.0 writes them,
    often without a ``$schema``) in the numeric form of later drafts: ``true`` makes the bound
    beside it exclusive, ``false`` is no constraint. (Read as numbers, ``true`` is 1 and
    ``false`` 0, which would refuse valid arguments.)"""
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = out.get(exclusive)
        if not isinstance(flag, bool):
            continue
        del out[exclusive]
        limit = out.get(bound)
        if flag and isinstance(limit, int | float) and not isinstance(limit, bool):
            out[exclusive] = out.pop(bound)


def _as_schema(dependency: object) -> object:
    return {"required": dependency} if isinstance(dependency, list) else dependency


def _merge_dependency(target: dict[str, Any], name: str, required: object) -> None:
    if name not in target:
        target[name] = required
    elif isinstance(target[name], list) and isinstance(required, list):
        target[name] = [*target[name], *(r for r in required if r not in target[name])]
    else:
        target[name] = {"allOf": [_as_schema(target[name]), _as_schema(required)]}


def for_fastjsonschema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten so that fastjsonschema checks it as its dialect defines it.

    Args:
        schema: A root JSON Schema (plain JSON values; it is not changed).

    Returns:
        A new schema (sharing the unchanged JSON values of ``schema``).

    Raises:
        ToolDefinitionError: a ``multipleOf`` is not a number above zero, or a ``pattern`` is
            not a regular expression Python can compile; the message gives its place as a JSON
            pointer.
    """
    uri = schema.get("$schema")
    rewriter = _Rewriter(_dialect(schema), draft_4=isinstance(uri, str) and "draft-04" in uri)
    out = rewriter.schema(schema, (), (), ())
    assert isinstance(out, dict)
    rewriter.fix_refs()
    return out
