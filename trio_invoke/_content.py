"""Content parts: what a message (or a tool's result) holds besides plain text.

Almost every message is text, and ``ChatMessage.content`` stays a ``str`` for them. A message with
an image holds a tuple of parts instead, in the OpenAI chat-completions shapes:

* :class:`TextPart` -- ``{"type": "text", "text": ...}``
* :class:`ImagePart` -- ``{"type": "image_url", "image_url": {"url": ..., "detail": ...}}``,
  the URL either a web address or base64 data (``data:image/png;base64,...``), which the part
  keeps as ``data`` and ``media_type`` so that other providers' formats can be written from it.
* :class:`RawPart` -- any other part (``input_audio``, ``file``, ``refusal``, ...), kept exactly as
  it came so that a stored conversation loads and goes back unchanged.

Keys of a part that trio_invoke does not model (``cache_control`` for prompt caching, say) are kept
in the part's ``provider_data`` and written back beside the modelled ones: ``part_from_dict(d)``
and ``part.to_dict()`` round-trip exactly. See ``_messages`` for the same rule on messages (and
the same normalisation: a key whose value is ``null`` or ``None`` is absent).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeAlias

import attrs

from ._text import wire_json, wire_text

__all__ = [
    "ContentPart",
    "ImagePart",
    "RawPart",
    "TextPart",
    "json_copy",
    "json_object",
    "optional_str_field",
    "part_from_dict",
    "parts_text",
    "preview",
    "reduce_value",
    "show",
    "str_field",
    "to_parts",
    "tool_result_content",
    "without_nulls",
]

EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_DATA_URL: Final = re.compile(
    r"data:([A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+);base64,(.*)", re.S
)
_MEDIA_TYPE: Final = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+")


def show(value: Mapping[str, Any]) -> str:
    """A mapping field in a repr: as a plain dict."""
    return repr(dict(value))


def reduce_value(value: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``__reduce__`` for a frozen value that holds read-only mappings: ``MappingProxyType``
    neither pickles nor deep-copies, so the value is rebuilt through its constructor, from its
    fields with those mappings as plain dicts (the constructor makes them read-only again)."""
    fields = {
        field.alias: dict(item) if isinstance(item, MappingProxyType) else item
        for field in attrs.fields(type(value))
        if field.init
        for item in (getattr(value, field.name),)
    }
    return _rebuild, (type(value), fields)


def _rebuild(cls: type[Any], fields: dict[str, Any]) -> Any:
    return cls(**fields)


def json_copy(value: Any, where: str) -> Any:
    """A deep copy of a JSON value (tuples become lists).

    Raises:
        ValueError: ``value`` holds something JSON cannot carry (NaN and the infinities
            included), or is nested too deeply to copy; the message names ``where``.
    """
    try:
        return _json_copy(value, where)
    except RecursionError:
        raise ValueError(f"{where} is nested too deeply") from None


def _json_copy(value: Any, where: str) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} holds {value!r}, which is not JSON")
        return value
    if isinstance(value, Mapping):
        copy: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a key that is not a string: {key!r}")
            copy[key] = _json_copy(item, f"{where}.{key}")
        return copy
    if isinstance(value, list | tuple):
        return [_json_copy(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise ValueError(f"{where} must hold JSON values only, got a {type(value).__name__}")


def json_object(value: Mapping[str, Any] | None, where: str) -> Mapping[str, Any]:
    """``value`` (a mapping of JSON values) as a read-only copy; ``None`` is empty."""
    if value is None or value is EMPTY or (isinstance(value, Mapping) and not value):
        return EMPTY
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a mapping, got {value!r}")
    copied: dict[str, Any] = json_copy(value, where)
    return MappingProxyType(copied)


def merged(base: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``more``'s keys set over it (a new dict; neither is changed): where both
    hold an object under a key, the two objects are merged the same way, key by key; any
    other value of ``more`` replaces ``base``'s. For data that arrives in pieces."""
    result = dict(base)
    for key, value in more.items():
        before = result.get(key)
        if isinstance(before, Mapping) and isinstance(value, Mapping):
            result[key] = merged(before, value)
        else:
            result[key] = value
    return result


def without_nulls(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``value`` without its top-level ``None`` values: in ``provider_data`` a ``None`` is
    absent, as on the wire ``null`` is (``to_dict`` would write it, ``from_dict`` drop it)."""
    if isinstance(value, Mapping) and any(v is None for v in value.values()):
        return {k: v for k, v in value.items() if v is not None}
    return value


def _check_extra(data: Mapping[str, Any], modelled: frozenset[str], where: str) -> None:
    clash = sorted(modelled.intersection(data))
    if clash:
        raise ValueError(
            f"{where} may not set {', '.join(map(repr, clash))}: the part models "
            f"{'it' if len(clash) == 1 else 'them'} itself"
        )


def _text_extra(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    data = json_object(without_nulls(value), "TextPart.provider_data")
    _check_extra(data, frozenset({"type", "text"}), "TextPart.provider_data")
    return data


def _image_extra(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    data = json_object(without_nulls(value), "ImagePart.provider_data")
    _check_extra(data, frozenset({"type", "image_url"}), "ImagePart.provider_data")
    return data


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def str_field(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A validator: the field is a ``str`` (the message names the class and the field, as
    the other checks of the values do; attrs' own would show its ``Attribute``)."""
    if not isinstance(value, str):
        raise TypeError(
            f"{type(instance).__name__} {attribute.name} must be a str, got {preview(value)}"
        )


def optional_str_field(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """A validator: the field is a ``str`` or ``None``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(
            f"{type(instance).__name__} {attribute.name} must be a str or None, got "
            f"{preview(value)}"
        )


@attrs.frozen
class TextPart:
    """A piece of text in a message of several parts.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """

    text: str = attrs.field(validator=str_field)
    """The text."""
    provider_data: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_text_extra, hash=False, repr=show
    )
    """The part's keys beyond ``type`` and ``text`` (``cache_control``, ...), kept unchanged
    (a key whose value is ``None`` is left out, as on the wire ``null`` reads as absent)."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)

    def to_dict(self) -> dict[str, Any]:
        """This part in the OpenAI format."""
        return {"type": "text", "text": wire_text(self.text), **wire_json(self.provider_data)}


@attrs.frozen
class ImagePart:
    """An image: a URL, or base64 data with its media type. Use it in user messages and as (or
    in) a tool's return value.

    Build one with ``ImagePart(url="https://...")``, ``ImagePart(data=b64, media_type="image/png")``
    or :meth:`from_bytes`. A base64 ``data:`` URL given as ``url`` is inline data:
    ``ImagePart(url="data:image/png;base64,iVBO...")`` is the part of that ``data`` and
    ``media_type`` (equal to it, and read back so); a ``data:`` URL that is not base64 stays a URL.

    Raises:
        ValueError: neither or both of ``url`` and ``data``; ``data`` without a ``media_type``
            such as ``"image/png"``, or data that is not base64.
    """

    url: str | None = attrs.field(default=None, kw_only=True)
    """Where the image is (``https://...``), or ``None`` for inline data (a base64 ``data:``
    URL given here is kept as ``data`` and ``media_type``)."""
    data: str | None = attrs.field(default=None, kw_only=True)
    """The image's bytes as base64 text, or ``None`` for a URL."""
    media_type: str | None = attrs.field(default=None, kw_only=True)
    """With ``data``: its type, such as ``"image/png"``."""
    detail: str | None = attrs.field(default=None, kw_only=True)
    """OpenAI's ``detail`` hint (``"low"``, ``"high"``, ``"auto"``), if any."""
    provider_data: Mapping[str, Any] = attrs.field(
        default=EMPTY, kw_only=True, converter=_image_extra, hash=False, repr=show
    )
    """The part's keys beyond ``type`` and ``image_url``, kept unchanged (a key whose value is
    ``None`` is left out)."""

    def __attrs_post_init__(self) -> None:
        for name in ("url", "data", "media_type", "detail"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"ImagePart {name} must be a string, got {value!r}")
        if (self.url is None) == (self.data is None):
            raise ValueError("an ImagePart needs exactly one of url and data")
        if self.url is not None and self.media_type is None and self.url.startswith("data:"):
            found = _DATA_URL.fullmatch(self.url)
            if found is not None and _is_base64(found.group(2)):  # inline data after all
                object.__setattr__(self, "url", None)
                object.__setattr__(self, "data", found.group(2))
                object.__setattr__(self, "media_type", found.group(1))
        if self.data is not None:
            if self.media_type is None or not _MEDIA_TYPE.fullmatch(self.media_type):
                raise ValueError(
                    "an ImagePart with data needs a media_type such as 'image/png', "
                    f"got {self.media_type!r}"
                )
            if not _is_base64(self.data):
                raise ValueError("ImagePart data must be base64 text")
        elif self.media_type is not None:
            raise ValueError("an ImagePart with a url takes no media_type (the server knows it)")

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str, *, detail: str | None = None) -> ImagePart:
        """An image from its bytes (``ImagePart.from_bytes(png, "image/png")``)."""
        return cls(
            data=base64.b64encode(data).decode("ascii"), media_type=media_type, detail=detail
        )

    @property
    def data_url(self) -> str:
        """The image as one URL: ``url``, or ``data:{media_type};base64,{data}``."""
        if self.url is not None:
            return self.url
        return f"data:{self.media_type};base64,{self.data}"

    def to_dict(self) -> dict[str, Any]:
        """This part in the OpenAI format (inline data as a ``data:`` URL; text made valid
        Unicode, as ``ChatMessage.to_dict`` says)."""
        image: dict[str, Any] = {"url": wire_text(self.data_url)}
        if self.detail is not None:
            image["detail"] = wire_text(self.detail)
        return {"type": "image_url", "image_url": image, **wire_json(self.provider_data)}


def _raw(value: Mapping[str, Any]) -> Mapping[str, Any]:
    data = json_object(without_nulls(value), "RawPart.data")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"RawPart.data needs a string 'type', got {dict(data)!r}")
    if kind == "text" or (kind == "image_url" and not _raw_image(data.get("image_url"))):
        raise ValueError(
            f"{kind!r} parts are {'TextPart' if kind == 'text' else 'ImagePart'}s: use that "
            "(a RawPart holds an image_url only in a shape ImagePart cannot write: the URL "
            "alone, or keys beyond 'url' and 'detail')"
        )
    return data


def _raw_image(image: object) -> bool:
    """Whether an ``image_url`` value is one :class:`ImagePart` cannot write back exactly."""
    return isinstance(image, str) or (
        isinstance(image, Mapping) and not set(image) <= {"url", "detail"}
    )


@attrs.frozen
class RawPart:
    """A content part trio_invoke does not model (audio, a file, a refusal, ...), kept as it came
    and sent as it is.

    Raises:
        ValueError: ``data`` has no string ``type``, or is a part :class:`TextPart` or
            :class:`ImagePart` models (``"text"``; ``"image_url"`` with an object of ``url``
            and ``detail``), which ``part_from_dict`` would read back as that.
    """

    data: Mapping[str, Any] = attrs.field(converter=_raw, hash=False, repr=show)
    """The part, in the OpenAI format: a JSON object with a ``type`` (a key whose value is
    ``None`` is left out)."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return reduce_value(self)

    def to_dict(self) -> dict[str, Any]:
        """The part as it came (its text made valid Unicode, as ``ChatMessage.to_dict`` says)."""
        copied: dict[str, Any] = wire_json(self.data)
        return copied


ContentPart: TypeAlias = TextPart | ImagePart | RawPart
"""One part of a message's content."""
_PARTS: Final = (TextPart, ImagePart, RawPart)


def part_from_dict(data: object, where: str = "content part") -> ContentPart:
    """Read a part in the OpenAI format; ``part.to_dict()`` gives ``data`` back exactly.

    Raises:
        ValueError: ``data`` is not an object with a string ``type``, or a text or image part has
            the wrong shape; the message names ``where``.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"{_q(where)} must be an object, got {preview(data)}")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ValueError(f"{_q(where)} needs a string 'type', got {preview(kind)}")
    if kind == "text":
        text = data.get("text")
        if not isinstance(text, str):
            raise ValueError(f"{_q(where, 'text')} must be a string, got {preview(text)}")
        extra = {k: v for k, v in data.items() if k not in ("type", "text")}
        return TextPart(text, provider_data=_extra(extra, where))
    if kind == "image_url":
        image = data.get("image_url")
        if _raw_image(image):  # the URL alone (some clients write that), or more keys: a shape
            return RawPart(_extra(data, where))  # the part cannot write back exactly
        if not isinstance(image, Mapping):
            raise ValueError(
                f"{_q(where, 'image_url')} must be an object with a 'url', got {preview(image)}"
            )
        url, detail = image.get("url"), image.get("detail")
        if not isinstance(url, str):
            raise ValueError(f"{_q(where, 'image_url.url')} must be a string, got {preview(url)}")
        if detail is not None and not isinstance(detail, str):
            raise ValueError(
                f"{_q(where, 'image_url.detail')} must be a string, got {preview(detail)}"
            )
        extra = {k: v for k, v in data.items() if k not in ("type", "image_url")}
        # A base64 data: URL becomes data and media_type, as ImagePart(url=...) says.
        return ImagePart(url=url, detail=detail, provider_data=_extra(extra, where))
    return RawPart(_extra(data, where))


def _q(where: str, field: str = "") -> str:
    return f"message '{where}.{field}'" if field else f"message '{where}'"


def preview(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (for error messages)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _extra(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    copied: dict[str, Any] = json_copy(without_nulls(data), where)
    return copied


def to_parts(value: Iterable[ContentPart], where: str = "content") -> tuple[ContentPart, ...]:
    """``value`` as a tuple of parts.

    Raises:
        TypeError: an item is not a :data:`ContentPart`; the message names its index.
    """
    if type(value) is tuple and not value:  # the common case: no parts
        return ()
    parts = tuple(value)
    for index, part in enumerate(parts):
        if not isinstance(part, _PARTS):
            raise TypeError(
                f"{where}[{index}] must be a TextPart, ImagePart or RawPart, "
                f"got {type(part).__name__}: {part!r}"
            )
    return parts


def parts_text(parts: Iterable[ContentPart]) -> str:
    """The text of ``parts``: their text parts, joined."""
    return "".join(part.text for part in parts if isinstance(part, TextPart))


def tool_result_content(value: Any) -> tuple[str, tuple[ContentPart, ...]]:
    """A tool's return value as the model reads it: ``(text, parts)``.

    A ``str`` goes as it is; an :class:`ImagePart` or :class:`TextPart`, or a list or tuple made
    only of parts, becomes those parts (``text`` then says what they hold, with ``[image]`` for
    each image); anything else is compact JSON, with no parts.

    Raises:
        TypeError, ValueError, RecursionError: the value is not JSON-serialisable.
    """
    if isinstance(value, str):
        return str.__str__(value), ()  # a subclass's own __str__ may raise or say anything
    if isinstance(value, _PARTS):
        parts: tuple[ContentPart, ...] = (value,)
    elif isinstance(value, list | tuple) and value and all(isinstance(v, _PARTS) for v in value):
        parts = tuple(value)
    else:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False), ()
    text = "".join(
        part.text
        if isinstance(part, TextPart)
        else "[image]"
        if isinstance(part, ImagePart)
        else f"[{part.data['type']}]"
        for part in parts
    )
    return text, parts
