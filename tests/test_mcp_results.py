"""What the model reads of an MCP tool result (trio_invoke/mcp/_results.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from trio_invoke.mcp._results import convert, media_text

PNG = base64.b64encode(b"p" * 1000).decode()


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def image(size: int = 1000, mime_type: str = "image/png") -> ImageContent:
    data = base64.b64encode(b"p" * size).decode()
    return ImageContent(type="image", data=data, mime_type=mime_type)


@given(st.lists(st.text(), min_size=1, max_size=6))
def test_text_blocks_are_joined_in_order(texts: list[str]) -> None:
    result = convert(CallToolResult(content=[text(t) for t in texts]))
    assert result.text == "\n".join(texts)
    assert not result.is_error


@given(st.integers(0, 5000))
def test_image_sizes_are_the_decoded_sizes(size: int) -> None:
    assert media_text(image(size)) == f"[image: image/png, {size} bytes]"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (image(3, "image/jpeg"), "[image: image/jpeg, 3 bytes]"),
        (
            AudioContent(
                type="audio", data=base64.b64encode(b"a" * 10).decode(), mime_type="audio/ogg"
            ),
            "[audio: audio/ogg, 10 bytes]",
        ),
        (
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///a.md", mime_type="text/markdown", text="# A"
                ),
            ),
            "[resource: file:///a.md (text/markdown, 3 characters)]\n# A",
        ),
        (
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="mem://empty", text=""),
            ),
            "[resource: mem://empty (unknown type, 0 characters)]",
        ),
        (
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///b.pdf",
                    mime_type="application/pdf",
                    blob=base64.b64encode(b"%PDF").decode(),
                ),
            ),
            "[resource: file:///b.pdf (application/pdf, 4 bytes)]",
        ),
        (
            ResourceLink(type="resource_link", uri="https://x.test/r", name="report"),
            "[resource link: report <https://x.test/r>]",
        ),
    ],
)
def test_media_blocks_become_a_short_text(block: Any, expected: str) -> None:
    assert media_text(block) == expected
    assert convert(CallToolResult(content=[text("before"), block])).text == f"before\n{expected}"


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4))
def test_structured_content_alone_is_read_as_compact_json(value: dict[str, Any]) -> None:
    result = convert(CallToolResult(content=[], structured_content=value))
    assert json.loads(result.text) == value
    assert result.text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert result.structured == value


def test_text_wins_over_structured_content() -> None:
    result = convert(
        CallToolResult(content=[text("the answer is 42")], structured_content={"answer": 42})
    )
    assert result.text == "the answer is 42"
    assert result.structured == {"answer": 42}


def test_structured_content_with_only_media_comes_first() -> None:
    result = convert(CallToolResult(content=[image(2)], structured_content={"n": 1}))
    assert result.text == '{"n":1}\n[image: image/png, 2 bytes]'


@pytest.mark.parametrize("is_error", [True, False])
def test_is_error_is_kept(is_error: bool) -> None:
    result = convert(CallToolResult(content=[text("boom")], is_error=is_error))
    assert result.is_error is is_error
    assert result.text == "boom"


def test_nothing_at_all_is_empty_text() -> None:
    assert convert(CallToolResult(content=[])).text == ""
