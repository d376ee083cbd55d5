"""Content parts (text, images, raw parts) and tools that return images."""

from __future__ import annotations

import base64
import json
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    CallNext,
    ChatMessage,
    FunctionInvokingChatClient,
    ImagePart,
    MessageRole,
    RawPart,
    RunOptions,
    ScriptedChatClient,
    TextPart,
    ToolCall,
    ToolCalled,
    ToolContext,
    tool,
)
from trio_invoke._content import part_from_dict, tool_result_content
from trio_invoke.testing import assert_transcript_valid, tool_calls_response

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
PNG_B64 = base64.b64encode(PNG).decode()


# -- the parts --------------------------------------------------------------------------------


def test_image_from_bytes_and_its_data_url() -> None:
    image = ImagePart.from_bytes(PNG, "image/png", detail="low")
    assert image.data == PNG_B64
    assert image.media_type == "image/png"
    assert image.data_url == f"data:image/png;base64,{PNG_B64}"
    assert image.to_dict() == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG_B64}", "detail": "low"},
    }
    web = ImagePart(url="https://example.com/cat.jpg")
    assert web.data_url == "https://example.com/cat.jpg"
    assert web.to_dict() == {"type": "image_url", "image_url": {"url": web.url}}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of url and data"),
        ({"url": "https://x/y.png", "data": PNG_B64, "media_type": "image/png"}, "exactly one"),
        ({"data": PNG_B64}, "media_type"),
        ({"data": PNG_B64, "media_type": "png"}, "media_type"),
        ({"data": "not base64!", "media_type": "image/png"}, "base64"),
        ({"url": "https://x/y.png", "media_type": "image/png"}, "no media_type"),
        ({"url": 5}, "url must be a string"),
        ({"url": "https://x/y.png", "provider_data": {"type": "x"}}, "may not set 'type'"),
    ],
)
def test_bad_images_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ImagePart(**kwargs)


@pytest.mark.parametrize("text", [None, 5, b"bytes", ["a"]])
def test_a_text_part_of_something_that_is_not_text_is_refused(text: Any) -> None:
    # Refused where it is made, not later when the message is stored or sent (to_dict).
    with pytest.raises(TypeError, match="TextPart text must be a str"):
        TextPart(text)


def test_parts_keep_their_unmodelled_keys_and_hash() -> None:
    part = TextPart("hello", provider_data={"cache_control": {"type": "ephemeral"}})
    assert part.to_dict() == {
        "type": "text",
        "text": "hello",
        "cache_control": {"type": "ephemeral"},
    }
    assert hash(part) == hash(TextPart("hello", provider_data={"cache_control": {}}))
    assert part != TextPart("hello")
    raw = RawPart({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}})
    assert raw.to_dict()["input_audio"] == {"data": "AAAA", "format": "wav"}
    with pytest.raises(ValueError, match="string 'type'"):
        RawPart({"input_audio": {}})
    with pytest.raises(ValueError, match="JSON values only"):
        TextPart("x", provider_data={"when": object()})


@pytest.mark.parametrize(
    "part",
    [
        TextPart("hi", provider_data={"cache_control": None, "x": 1}),
        ImagePart(url="https://example.com/a.png", provider_data={"cache_control": None}),
        RawPart({"type": "input_audio", "input_audio": None}),
    ],
    ids=["TextPart", "ImagePart", "RawPart"],
)
def test_a_part_leaves_out_keys_whose_value_is_none(part: TextPart | ImagePart | RawPart) -> None:
    # As a message's provider_data does: to_dict would write null, which reads as absent, so
    # the part would not come back equal.
    assert None not in part.to_dict().values()
    assert part_from_dict(json.loads(json.dumps(part.to_dict()))) == part
    assert ChatMessage.from_dict(ChatMessage.user([part]).to_dict()) == ChatMessage.user([part])


@pytest.mark.parametrize(
    "data",
    [
        {"type": "text", "text": "hi"},
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
        {"type": "text"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
        {"type": "image_url", "image_url": {}},
        {"type": "image_url"},
    ],
)
def test_a_raw_part_of_a_modelled_shape_is_refused(data: dict[str, Any]) -> None:
    # part_from_dict would read it back as a TextPart or an ImagePart (or refuse it).
    with pytest.raises(ValueError, match=r"parts are (TextPart|ImagePart)s: use that"):
        RawPart(data)


def test_a_raw_part_holds_what_image_part_cannot_write() -> None:
    for data in (
        {"type": "image_url", "image_url": "https://example.com/a.png"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "format": "png"}},
        {"type": "image_url", "image_url": {"url": 1, "format": "png"}},
    ):
        part = RawPart(data)
        assert part_from_dict(json.loads(json.dumps(part.to_dict()))) == part


def test_an_image_url_that_is_base64_data_is_inline_data() -> None:
    url = f"data:image/png;base64,{PNG_B64}"
    image = ImagePart(url=url, detail="low")
    assert image == ImagePart(data=PNG_B64, media_type="image/png", detail="low")
    assert (image.url, image.data_url) == (None, url)
    assert part_from_dict(json.loads(json.dumps(image.to_dict()))) == image
    message = ChatMessage.user([image])
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    for other in ("data:image/png;base64,@@@", "data:text/plain,hello", "data:image/png,AAAA"):
        kept = ImagePart(url=other)  # not base64 data: a URL, as part_from_dict reads it
        assert (kept.url, kept.data) == (other, None)
        assert part_from_dict(kept.to_dict()) == kept


OPENAI_PARTS = [
    {"type": "text", "text": "What is in this image?"},
    {"type": "text", "text": "cached", "cache_control": {"type": "ephemeral"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "high"}},
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
    {
        "type": "image_url",
        "image_url": {"url": f"data:image/jpeg;base64,{PNG_B64}", "detail": "low"},
    },
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}},  # not base64
    {"type": "image_url", "image_url": "https://example.com/a.png"},  # a string, not an object
    {"type": "image_url", "image_url": {"url": "https://x/a.png", "format": "png"}},  # extra key
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    {"type": "file", "file": {"file_id": "file-abc"}},
    {"type": "refusal", "refusal": "I can't."},
]


@pytest.mark.parametrize("data", OPENAI_PARTS)
def test_openai_parts_round_trip_exactly(data: dict[str, Any]) -> None:
    part = part_from_dict(data)
    assert part.to_dict() == data
    assert part_from_dict(json.loads(json.dumps(part.to_dict()))) == part


def test_what_each_openai_part_becomes() -> None:
    kinds = [type(part_from_dict(d)).__name__ for d in OPENAI_PARTS]
    assert kinds == [
        "TextPart",
        "TextPart",
        "ImagePart",
        "ImagePart",
        "ImagePart",
        "ImagePart",
        "ImagePart",  # a data: URL that is no base64 stays a URL
        "RawPart",
        "RawPart",
        "RawPart",
        "RawPart",
        "RawPart",
    ]
    inline = part_from_dict(OPENAI_PARTS[4])
    assert isinstance(inline, ImagePart)
    assert (inline.data, inline.media_type, inline.url) == (PNG_B64, "image/png", None)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("text", "must be an object"),
        ([{"type": "text"}], "must be an object"),
        ({"text": "no type"}, "string 'type'"),
        ({"type": 3}, "string 'type'"),
        ({"type": "text", "text": None}, r"'content part\.text' must be a string"),
        ({"type": "text", "text": 5}, r"'content part\.text' must be a string"),
        ({"type": "image_url"}, r"'content part\.image_url' must be an object"),
        ({"type": "image_url", "image_url": {"url": 1}}, r"image_url\.url' must be a string"),
        ({"type": "image_url", "image_url": {}}, r"image_url\.url' must be a string"),
        (
            {"type": "image_url", "image_url": {"url": "u", "detail": 2}},
            r"image_url\.detail' must be a string",
        ),
    ],
)
def test_bad_parts_name_the_field(data: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        part_from_dict(data)


# -- a tool's return value ------------------------------------------------------------------


def test_tool_results_become_text_or_parts() -> None:
    image = ImagePart.from_bytes(PNG, "image/png")
    assert tool_result_content("plain") == ("plain", ())
    assert tool_result_content({"a": [1, "é"]}) == ('{"a":[1,"é"]}', ())
    assert tool_result_content(["a", "b"]) == ('["a","b"]', ())  # strings are not parts
    assert tool_result_content([]) == ("[]", ())
    assert tool_result_content(image) == ("[image]", (image,))
    assert tool_result_content([TextPart("chart: "), image]) == (
        "chart: [image]",
        (TextPart("chart: "), image),
    )
    assert tool_result_content((TextPart("t"),)) == ("t", (TextPart("t"),))
    with pytest.raises(TypeError):
        tool_result_content([image, object()])  # not only parts: JSON, which fails


@tool
async def render_chart(title: str) -> list[TextPart | ImagePart]:
    """Render a chart."""
    return [TextPart(f"{title}: "), ImagePart.from_bytes(PNG, "image/png")]


@tool
def snapshot() -> ImagePart:
    """Take a snapshot."""
    return ImagePart(url="https://example.com/snap.png")


async def test_a_tool_that_returns_an_image_answers_with_parts() -> None:
    model = ScriptedChatClient(
        [
            tool_calls_response(
                ToolCall("c1", "render_chart", '{"title": "sales"}'), ToolCall("c2", "snapshot", "")
            ),
            "Here they are.",
        ]
    )
    agent = FunctionInvokingChatClient(model, [render_chart, snapshot])
    with trio.fail_after(10):
        response = await agent.get_response([ChatMessage.user("Chart please")])
    assert_transcript_valid(list(response.messages))
    tool_messages = [m for m in response.messages if m.role is MessageRole.TOOL]
    assert [m.content for m in tool_messages] == [
        (TextPart("sales: "), ImagePart.from_bytes(PNG, "image/png")),
        (ImagePart(url="https://example.com/snap.png"),),
    ]
    assert [m.text for m in tool_messages] == ["sales: ", ""]
    # The second model call saw the images, in the tool messages.
    seen = model.calls[1].messages
    assert [m.content for m in seen if m.role is MessageRole.TOOL] == [
        m.content for m in tool_messages
    ]
    # JSON-serialisable, and back.
    wire = json.loads(json.dumps([m.to_dict() for m in response.messages]))
    assert tuple(ChatMessage.from_dict(d) for d in wire) == response.messages


async def test_tool_called_carries_the_parts_and_a_text_summary() -> None:
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("c1", "render_chart", '{"title": "t"}')), "ok"]
    )
    agent = FunctionInvokingChatClient(model, [render_chart])
    called: list[ToolCalled] = []
    with trio.fail_after(10):
        async with agent.run([ChatMessage.user("x")]) as stream:
            async for update in stream:
                if isinstance(update, ToolCalled):
                    called.append(update)
    assert [(c.result, c.is_error) for c in called] == [("t: [image]", False)]
    assert called[0].parts == (TextPart("t: "), ImagePart.from_bytes(PNG, "image/png"))
    assert called[0].content == called[0].parts


async def test_a_middleware_that_changes_an_image_results_text_is_what_the_model_reads() -> None:
    # attrs.evolve(called, result=...) is how a middleware changes a result (the README's
    # word); for a tool that returned an image, the tool message must say that too, not hold
    # the parts the middleware replaced. A middleware that keeps the text keeps the parts.
    async def redact(context: ToolContext, call_next: CallNext) -> ToolCalled:
        called = await call_next(context)
        if context.call.id == "c1":
            return attrs.evolve(called, result="[redacted]")
        return attrs.evolve(called, is_error=False)

    calls = [ToolCall("c1", "snapshot", ""), ToolCall("c2", "snapshot", "")]
    model = ScriptedChatClient([tool_calls_response(*calls), "ok"])
    agent = FunctionInvokingChatClient(model, [snapshot], middleware=[redact])
    with trio.fail_after(10):
        response = await agent.get_response([ChatMessage.user("x")])
    tool_messages = [m for m in response.messages if m.role is MessageRole.TOOL]
    assert [m.content for m in tool_messages] == [
        "[redacted]",
        (ImagePart(url="https://example.com/snap.png"),),
    ]
    seen = model.calls[1].messages
    assert [m.content for m in seen if m.role is MessageRole.TOOL] == [
        m.content for m in tool_messages
    ]


@given(st.binary(max_size=64), st.sampled_from(["image/png", "image/jpeg", "image/webp"]))
def test_any_image_bytes_round_trip(data: bytes, media_type: str) -> None:
    part = ImagePart.from_bytes(data, media_type)
    assert part_from_dict(part.to_dict()) == part
    assert base64.b64decode(part.data or "") == data


@tool(requires_approval=True)
async def plot(title: str) -> ImagePart:
    """Plot something (asks first)."""
    return ImagePart(url=f"https://example.com/{title}.png")


async def test_an_image_result_with_replaced_arguments_says_so_first() -> None:
    model = ScriptedChatClient(
        [tool_calls_response(ToolCall("c1", "plot", '{"title": "a"}')), "ok"]
    )
    agent = FunctionInvokingChatClient(model, [plot])
    with trio.fail_after(10):
        paused = await agent.get_response([ChatMessage.user("plot")])
        (request,) = paused.approval_requests
        resumed = await agent.get_response(
            [ChatMessage.user("plot"), *paused.messages],
            RunOptions(tool_approval_responses=[request.approve(arguments={"title": "b"})]),
        )
    tool_message = resumed.messages[0]
    assert tool_message.content == (
        TextPart('[arguments replaced by the user: {"title":"b"}] '),
        ImagePart(url="https://example.com/b.png"),
    )
