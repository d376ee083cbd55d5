"""Tool names as the model sees them: sans-IO, no MCP SDK.

MCP allows tool names of up to 128 characters from ``[A-Za-z0-9._-]`` (and servers send what
they like); model providers accept ``^[a-zA-Z0-9_-]{1,64}$``. :func:`model_name` maps one to
the other deterministically, so the same server tool has the same name in every process (an
approval answered in another process finds its call's tool).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from .._exceptions import ConfigurationError

__all__ = ["MAX_LENGTH", "model_name", "model_names"]

MAX_LENGTH = 64
"""The longest tool name the providers accept."""

_VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_INVALID_CHARACTER = re.compile(r"[^a-zA-Z0-9_-]")
_DIGEST_LENGTH = 8


def model_name(name: str, prefix: str | None = None) -> str:
    """The provider-valid name of the server tool ``name``.

    ``prefix`` comes first (``f"{prefix}_{name}"``); then every character outside
    ``[a-zA-Z0-9_-]`` becomes ``_``; a result longer than 64 characters keeps its first 55 and
    ends with ``_`` and 8 hex digits of the SHA-256 of the unshortened name, so that long names
    which share a beginning stay apart. A name that is already valid is returned as it is.

    >>> from trio_invoke.mcp import model_name
    >>> model_name("files.read")
    'files_read'
    >>> model_name("read", prefix="fs")
    'fs_read'
    """
    full = f"{prefix}_{name}" if prefix else name
    if _VALID.fullmatch(full):
        return full
    cleaned = _INVALID_CHARACTER.sub("_", full) or "_"
    if len(cleaned) <= MAX_LENGTH:
        return cleaned
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_LENGTH]
    return f"{cleaned[: MAX_LENGTH - _DIGEST_LENGTH - 1]}_{digest}"


def model_names(names: Iterable[str], prefix: str | None = None) -> Mapping[str, str]:
    """Map each model-facing name to its server tool's name (the reverse map), in order.

    Raises:
        ConfigurationError: Two server tools get one model-facing name (or the server lists
            one name twice); the message names both.
    """
    reverse: dict[str, str] = {}
    for name in names:
        mapped = model_name(name, prefix)
        other = reverse.get(mapped)
        if other is None:
            reverse[mapped] = name
        elif other == name:
            raise ConfigurationError(f"the server lists the tool {name!r} twice")
        else:
            raise ConfigurationError(
                f"the server tools {other!r} and {name!r} both become the tool name {mapped!r}; "
                "leave one out with allowed_tools"
            )
    return reverse
