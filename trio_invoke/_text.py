"""Text that is not valid Unicode: what goes on the wire, and what a digest covers (sans-IO).

A Python ``str`` may hold lone surrogates (U+D800 to U+DFFF) that no UTF-8 encoder accepts:
``os.listdir`` and ``os.fsdecode`` give them for file names that are not UTF-8 (the
``surrogateescape`` error handler), and a model's stream gives them when a server splits a
character's UTF-16 surrogate pair across two chunks (``"\\ud83d"`` then ``"\\ude00"``) or sends
half of one. Such text reaches tool results, assistant text and tool-call arguments.

Two rules, one per purpose:

* **On the wire and in storage** (:func:`wire_text`, used by ``ChatMessage.to_dict()`` and by
  the HTTP clients' request encoding): a surrogate pair held as two code points becomes the
  character it encodes, and every remaining lone surrogate becomes U+FFFD REPLACEMENT CHARACTER,
  as UTF-8 decoders do with bytes they cannot read. Escaping (``"\\udcff"`` in the JSON) would
  keep the information, but the JSON it produces is refused by strict parsers (serde_json,
  nlohmann::json), so a server could answer every later request with HTTP 400; replacement
  always gives valid UTF-8. Valid text is never changed.
* **In the approval digest** (:func:`digest_bytes`): lossless. Pairs are joined as above, but a
  lone surrogate is encoded as itself (UTF-8 with ``surrogatepass``), so calls that differ only
  in their invalid code points have different digests, and valid text hashes exactly as its UTF-8
  bytes (digests made before this rule existed still match).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["digest_bytes", "wire_json", "wire_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogates(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def wire_text(text: str) -> str:
    """``text`` as valid Unicode: surrogate pairs joined, lone surrogates replaced by U+FFFD.

    Valid text comes back unchanged (the same object). Idempotent.

    Example::

        wire_text("caf\\u00e9 \\udcff \\ud83d\\ude00")  # "café \\ufffd 😀"
    """
    if not _has_surrogates(text):
        return text
    # UTF-16 with surrogatepass writes each code point as its code unit(s); decoding joins the
    # pairs and replaces each unit that is not part of one.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def wire_json(value: Any) -> Any:
    """A copy of a JSON value (tuples become lists) with every string in it, keys too, made
    valid as :func:`wire_text` makes it."""
    if isinstance(value, str):
        return wire_text(value)
    if isinstance(value, Mapping):
        return {wire_text(key): wire_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [wire_json(item) for item in value]
    return value


def digest_bytes(text: str) -> bytes:
    """``text`` as bytes to hash: UTF-8, with pairs joined and lone surrogates kept distinct.

    Equal to ``text.encode("utf-8")`` for valid text; never raises.
    """
    if not _has_surrogates(text):
        return text.encode("utf-8")
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return joined.encode("utf-8", "surrogatepass")
