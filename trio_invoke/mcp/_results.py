"""What the model reads of an MCP ``tools/call`` result: plain synchronous code, no I/O.

The rules (the README's "MCP servers" section says the same):

* Text blocks are joined with newlines, in the order the server sent them.
* ``structuredContent`` is used only when the result has no text block: then the model reads it
  as compact JSON. The MCP specification asks a server that returns structured content to send
  its JSON as a text block too, so the text is the whole answer whenever it is there (and what
  a server chose to show). The structured value itself is on :class:`MCPResult`.
* Image, audio and resource blocks become a short bracketed text saying what they were, in
  their place among the text blocks: ``[image: image/png, 24 bytes]``, ``[audio: audio/wav,
  3000 bytes]``, ``[resource: file:///a.txt (text/plain, 120 characters)]`` followed by the
  text of an embedded text resource, ``[resource: file:///b.bin (application/pdf, 5000
  bytes)]`` for a binary one, and ``[resource link: report <file:///r.pdf> (application/pdf)]``.
  Tool messages in the chat-completions format carry only text; :func:`media_text` is the one
  place to change once messages can carry images.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

__all__ = ["MCPResult", "convert", "media_text"]


@attrs.frozen
class MCPResult:
    """One ``tools/call`` result as the loop uses it."""

    text: str
    """What the model reads (see the module's rules)."""
    is_error: bool
    """The server's ``isError``."""
    structured: Any = None
    """The server's ``structuredContent``, if it sent one."""


def _decoded_size(data: str) -> int:
    """Bytes in base64 ``data`` (without decoding it)."""
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def media_text(block: ContentBlock) -> str:
    """The text that stands for a non-text content block.

    This is the seam for richer messages: when a tool result can carry an image value, an
    ``ImageContent`` becomes that value here instead of a description.
    """
    match block:
        case ImageContent(mime_type=mime_type, data=data):
            return f"[image: {mime_type}, {_decoded_size(data)} bytes]"
        case AudioContent(mime_type=mime_type, data=data):
            return f"[audio: {mime_type}, {_decoded_size(data)} bytes]"
        case EmbeddedResource(resource=resource):
            mime_type = resource.mime_type or "unknown type"
            if isinstance(resource, BlobResourceContents):
                size = _decoded_size(resource.blob)
                return f"[resource: {resource.uri} ({mime_type}, {size} bytes)]"
            head = f"[resource: {resource.uri} ({mime_type}, {len(resource.text)} characters)]"
            return f"{head}\n{resource.text}" if resource.text else head
        case ResourceLink(name=name, uri=uri, mime_type=mime_type):
            kind = f" ({mime_type})" if mime_type else ""
            return f"[resource link: {name} <{uri}>{kind}]"
        case _:  # a block type this SDK version parses but we do not know
            return f"[{getattr(block, 'type', type(block).__name__)} content]"


def convert(result: CallToolResult) -> MCPResult:
    """The model's view of ``result`` (see the module's rules)."""
    content = result.content
    structured = result.structured_content
    # The common answer, one text block, without building lists.
    if len(content) == 1 and isinstance(content[0], TextContent):
        return MCPResult(content[0].text, bool(result.is_error), structured)
    has_text = any(isinstance(block, TextContent) for block in content)
    parts = [
        block.text if isinstance(block, TextContent) else media_text(block) for block in content
    ]
    if not has_text and structured is not None:
        parts.insert(0, json.dumps(structured, separators=(",", ":"), ensure_ascii=False))
    return MCPResult("\n".join(parts), bool(result.is_error), structured)
