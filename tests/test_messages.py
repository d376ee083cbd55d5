"""ChatMessage, ToolCall and Usage: values and the OpenAI wire format."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import ChatMessage, MessageRole, ToolCall, Usage

texts = st.text(max_size=20)
calls = st.builds(ToolCall, id=texts, name=texts, arguments=texts)
messages = st.builds(
    ChatMessage,
    role=st.sampled_from(MessageRole),
    content=texts,
    tool_calls=st.none() | st.lists(calls, max_size=3).map(tuple),
    name=st.none() | texts,
    tool_call_id=st.none() | texts,
)


@given(messages)
def test_round_trip_is_exact(message: ChatMessage) -> None:
    wire = json.loads(json.dumps(message.to_dict()))
    assert ChatMessage.from_dict(wire) == message
    again = ChatMessage.from_dict(wire)
    assert type(again.tool_calls) is type(message.tool_calls)  # tuples stay tuples, None None


def test_openai_shapes() -> None:
    call = ToolCall("c1", "add", '{"a": 1}')
    assert ChatMessage.assistant("", [call]).to_dict() == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        ],
    }
    assert ChatMessage.tool_result(call, "2").to_dict() == {
        "role": "tool",
        "content": "2",
        "name": "add",
        "tool_call_id": "c1",
    }
    assert ChatMessage.system("s").to_dict() == {"role": "system", "content": "s"}
    assert ChatMessage.user("u").role is MessageRole.USER


def test_from_dict_reads_provider_variants() -> None:
    message = ChatMessage.from_dict(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": None}}],
        }
    )
    assert message == ChatMessage.assistant("", [ToolCall("c", "f", "")])
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert ChatMessage.from_dict(parts).content == "ab"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"content": "x"}, "'role' must be one of"),
        ({"role": "robot"}, "'robot'"),
        ({"role": "user", "content": 3}, "'content' must be a string"),
        ({"role": "user", "content": [{"type": "image_url"}]}, "text parts"),
        ({"role": "assistant", "tool_calls": {}}, "'tool_calls' must be a list"),
        ({"role": "assistant", "tool_calls": [{"id": "c"}]}, "'function' object"),
        ({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}, "'id' must be"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": 1}}]},
            "'function.name' must be",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}],
            },
            "'function.arguments' must be a JSON string",
        ),
        ({"role": "tool", "tool_call_id": 5}, "'tool_call_id' must be a string"),
    ],
)
def test_from_dict_names_what_is_wrong(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ChatMessage.from_dict(data)


def test_usage_adds_up() -> None:
    total = Usage(1, 2) + Usage(10, 20)
    assert total == Usage(input_tokens=11, output_tokens=22)
    assert total.total_tokens == 33
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_values_are_frozen() -> None:
    import attrs

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ChatMessage.user("x").content = "y"  # type: ignore[misc]
