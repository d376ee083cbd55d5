"""ChatMessage, ToolCall and Usage: values and the OpenAI wire format."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ChatMessage,
    ImagePart,
    MessageRole,
    ProviderDataDelta,
    RawPart,
    RunOptions,
    TextPart,
    ToolApprovalRequest,
    ToolCall,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from trio_invoke.testing import json_values

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
    loaded = ChatMessage.from_dict(parts)
    assert loaded.text == "ab"
    assert loaded.content == (TextPart("a"), TextPart("b"))
    assert loaded.to_dict() == parts  # the list stays a list
    assert ChatMessage.from_dict({"role": "developer", "content": "be brief"}) == (
        ChatMessage.developer("be brief")
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"content": "x"}, "'role' must be one of"),
        ({"role": "robot"}, "'robot'"),
        ({"role": None, "content": "x"}, "'role' must be one of"),
        ({"role": ["user"]}, "'role' must be one of"),
        ({"role": "user", "content": 3}, "'content' must be a string"),
        ({"role": "user", "content": {"type": "text", "text": "x"}}, "'content' must be a string"),
        ({"role": "user", "content": [{"type": "image_url"}]}, r"'content\[0\]\.image_url'"),
        ({"role": "user", "content": ["plain"]}, r"'content\[0\]' must be an object"),
        ({"role": "user", "content": [{"type": "text", "text": 1}]}, r"'content\[0\]\.text'"),
        ({"role": "user", "content": [{"text": "t"}]}, r"'content\[0\]' needs a string 'type'"),
        ({"role": "assistant", "tool_calls": {}}, "'tool_calls' must be a list"),
        ({"role": "assistant", "tool_calls": "c1"}, "'tool_calls' must be a list"),
        ({"role": "assistant", "tool_calls": [["c1", "f"]]}, r"must be an object.*tool_calls\[0\]"),
        ({"role": "assistant", "tool_calls": ["c1"]}, r"must be an object.*tool_calls\[0\]"),
        ({"role": "assistant", "tool_calls": [None]}, r"must be an object.*tool_calls\[0\]"),
        (
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}, 7]},
            r"must be an object.*tool_calls\[1\]",
        ),
        ({"role": "assistant", "tool_calls": [{"id": "c"}]}, "'function' object"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]},
            "'function' object",
        ),
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
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]},
            "'type' must be 'function'",
        ),
        ({"role": "tool", "tool_call_id": 5}, "'tool_call_id' must be a string"),
        ({"role": "tool", "name": ["n"]}, "'name' must be a string"),
        ({"role": "assistant", "reasoning_content": 5}, "'reasoning_content' must be a string"),
        ({"role": "assistant", "reasoning": {"text": "x"}}, "'reasoning' must be a string"),
        ({"role": "assistant", "reasoning_details": {1, 2}}, "JSON values only"),
    ],
)
def test_from_dict_names_what_is_wrong(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ChatMessage.from_dict(data)


@pytest.mark.parametrize("data", [[], ["role", "user"], "user: hi", 3, None, ("role", "user")])
def test_from_dict_of_something_that_is_not_an_object(data: Any) -> None:
    with pytest.raises(ValueError, match="a message must be a JSON object"):
        ChatMessage.from_dict(data)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"role": "user", "content": "hi", "extra": "DEEP"}, "message"),
        ({"role": "user", "content": [{"type": "text", "text": "hi", "x": "DEEP"}]}, "content"),
        ({"role": "user", "content": [{"type": "file", "file": "DEEP"}]}, "content"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f"}, "x": "DEEP"}],
            },
            "tool call",
        ),
    ],
)
def test_from_dict_of_json_nested_too_deeply_is_a_value_error(
    data: dict[str, Any], where: str
) -> None:
    # json.loads reads it; the copy of it must be a clear refusal, not a RecursionError.
    text = json.dumps(data).replace('"DEEP"', "[" * 700 + "]" * 700)
    with pytest.raises(ValueError, match=f"{where}.* is nested too deeply"):
        ChatMessage.from_dict(json.loads(text))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("build", "where"),
    [
        (lambda v: ChatMessage(MessageRole.USER, "hi", provider_data={"x": [v]}), "provider_data"),
        (lambda v: ToolCall("c", "f", "{}", provider_data={"x": {"y": v}}), "provider_data"),
        (lambda v: TextPart("hi", provider_data={"x": v}), "TextPart.provider_data"),
        (lambda v: ImagePart(url="https://x/y.png", provider_data={"x": v}), "ImagePart"),
        (lambda v: RawPart({"type": "file", "file": {"size": v}}), "RawPart.data"),
        (lambda v: ChatMessage.from_dict({"role": "user", "score": v}), "message.score"),
        (
            lambda v: ChatMessage.from_dict(
                {"role": "user", "content": [{"type": "file", "x": v}]}
            ),
            "content",
        ),
        (
            lambda v: ChatMessage.from_dict(
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f"}, "x": v}],
                }
            ),
            "tool call",
        ),
    ],
)
def test_nan_and_infinities_are_not_json_values(
    build: Callable[[float], object], where: str, value: float
) -> None:
    # json.dumps writes them as NaN and Infinity, which are not JSON: a transcript holding one
    # could not be stored and sent again (json.loads reads them, so from_dict must refuse too).
    with pytest.raises(ValueError, match=rf"{where}.* holds {value!r}, which is not JSON"):
        build(value)


def test_reasoning_keeps_its_field_and_provider_data_its_keys() -> None:
    deepseek = {"role": "assistant", "content": "4", "reasoning_content": "2 + 2"}
    openrouter = {
        "role": "assistant",
        "content": "",
        "reasoning": "think",
        "reasoning_details": [{"type": "reasoning.encrypted", "data": "eyJ", "index": 0}],
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": "{}"},
                "extra_content": {"google": {"thought_signature": "sig"}},
            }
        ],
    }
    for data in (deepseek, openrouter):
        message = ChatMessage.from_dict(data)
        assert message.to_dict() == data
        assert ChatMessage.from_dict(message.to_dict()) == message
    assert ChatMessage.from_dict(deepseek).reasoning == "2 + 2"
    loaded = ChatMessage.from_dict(openrouter)
    assert (loaded.reasoning, loaded.reasoning_field) == ("think", "reasoning")
    assert loaded.provider_data == {"reasoning_details": openrouter["reasoning_details"]}
    assert loaded.tool_calls is not None
    assert loaded.tool_calls[0].provider_data == {
        "extra_content": {"google": {"thought_signature": "sig"}}
    }


def test_a_tool_calls_other_function_keys_are_kept() -> None:
    data = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "f", "arguments": "{}", "strict": True, "x": {"y": [1]}},
                "extra_content": {"google": {"thought_signature": "sig"}},
            }
        ],
    }
    message = ChatMessage.from_dict(data)
    assert message.to_dict() == data
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    assert message.tool_calls is not None
    (call,) = message.tool_calls
    assert (call.name, call.arguments) == ("f", "{}")
    assert call.provider_data == {
        "extra_content": {"google": {"thought_signature": "sig"}},
        "function": {"strict": True, "x": {"y": [1]}},
    }
    assert ToolCall.from_dict(call.to_dict()) == call


def test_a_tool_calls_function_data_is_checked() -> None:
    built = ToolCall("c", "f", "{}", provider_data={"function": {"strict": False, "n": None}})
    assert built.to_dict()["function"] == {"name": "f", "arguments": "{}", "strict": False}
    # Nothing beyond name and arguments, or only nulls: nothing to keep (as on the wire).
    assert ToolCall("c", "f", "{}", provider_data={"function": {}}).provider_data == {}
    assert ToolCall("c", "f", "{}", provider_data={"function": {"n": None}}) == ToolCall(
        "c", "f", "{}"
    )
    wire = {"id": "c", "function": {"name": "f", "arguments": "", "n": None}}
    assert ToolCall.from_dict(wire) == ToolCall("c", "f", "")
    for start in (ToolCall, ToolCallStart):
        where = f"{start.__name__}.provider_data"
        args = ("c", "f", "{}") if start is ToolCall else ("c", "f")
        with pytest.raises(ValueError, match=rf"{where} may not set 'function\.arguments'"):
            start(*args, provider_data={"function": {"arguments": "{}"}})
        with pytest.raises(ValueError, match=rf"{where} 'function' must be an object"):
            start(*args, provider_data={"function": "f"})
        with pytest.raises(ValueError, match=rf"{where} may not set 'id'"):
            start(*args, provider_data={"id": "d"})


def test_reasoning_under_both_names_is_read_once_or_refused() -> None:
    same = {"role": "assistant", "content": "x", "reasoning_content": "a", "reasoning": "a"}
    message = ChatMessage.from_dict(same)
    assert (message.reasoning, message.reasoning_field, dict(message.provider_data)) == (
        "a",
        "reasoning_content",
        {},
    )
    different = {**same, "reasoning": "b"}
    with pytest.raises(ValueError, match="different reasoning under 'reasoning_content' and"):
        ChatMessage.from_dict(different)


@pytest.mark.parametrize("field", [None, "reasoning_content", "reasoning"])
@pytest.mark.parametrize("name", ["reasoning_content", "reasoning"])
def test_provider_data_may_hold_neither_reasoning_name(field: str | None, name: str) -> None:
    # from_dict reads the reasoning from either name, so one in provider_data, whichever field
    # the message's own reasoning uses, would come back as the reasoning.
    reasoning = {} if field is None else {"reasoning": "mine", "reasoning_field": field}
    with pytest.raises(ValueError, match=f"may not set '{name}'"):
        ChatMessage(
            MessageRole.ASSISTANT,
            "answer",
            provider_data={name: "other"},
            **reasoning,  # type: ignore[arg-type]
        )


def test_nulls_read_as_absent() -> None:
    data = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "audio": None,
        "function_call": None,
        "tool_calls": None,
        "reasoning_content": None,
        "name": None,
    }
    assert ChatMessage.from_dict(data) == ChatMessage.assistant("")
    assert ChatMessage.from_dict(data).to_dict() == {"role": "assistant", "content": ""}


def test_construction_checks() -> None:
    with pytest.raises(TypeError, match="content must be a str"):
        ChatMessage(MessageRole.USER, {"type": "text", "text": "x"})
    with pytest.raises(TypeError, match=r"content\[1\] must be a TextPart"):
        ChatMessage.user([TextPart("a"), "b"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="reasoning_field"):
        ChatMessage(MessageRole.ASSISTANT, "x", reasoning="r", reasoning_field="thoughts")
    with pytest.raises(ValueError, match="may not set 'content'"):
        ChatMessage(MessageRole.USER, "x", provider_data={"content": "y"})
    with pytest.raises(ValueError, match="may not set 'reasoning_content'"):
        ChatMessage(MessageRole.ASSISTANT, "x", provider_data={"reasoning_content": "y"})
    with pytest.raises(ValueError, match=r"may not set 'function\.name'"):
        ToolCall("c", "f", "{}", provider_data={"function": {"name": "g"}})
    assert ChatMessage.user(ImagePart(url="https://x/y.png")).content == (
        ImagePart(url="https://x/y.png"),
    )
    # Without reasoning, the field name is the default: equal messages stay equal.
    assert ChatMessage(MessageRole.ASSISTANT, "x", reasoning_field="reasoning") == (
        ChatMessage.assistant("x")
    )


# -- the round trip, both ways, over generated messages ------------------------------------

non_null = json_values(max_leaves=6).filter(lambda v: v is not None)
text_part = st.builds(
    lambda text, extra: {"type": "text", "text": text, **extra},
    texts,
    st.just({}) | st.just({"cache_control": {"type": "ephemeral"}}),
)
image_part = st.builds(
    lambda url, detail: {
        "type": "image_url",
        "image_url": {"url": url, **({"detail": detail} if detail else {})},
    },
    st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo="]),
    st.sampled_from([None, "low", "high", "auto"]),
)
raw_part = st.builds(
    lambda data: {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
    st.sampled_from(["AAAA", "UklGRg=="]),
)
openai_calls = st.lists(
    st.builds(
        lambda call_id, name, arguments, extra, more: {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments, **more},
            **extra,
        },
        texts,
        texts,
        texts,
        st.just({}) | st.dictionaries(st.just("extra_content"), non_null, max_size=1),
        st.just({}) | st.dictionaries(st.sampled_from(["strict", "x_"]), non_null, max_size=2),
    ),
    max_size=3,
)
extra_keys = st.dictionaries(
    st.sampled_from(["refusal", "annotations", "reasoning_details", "audio", "x_custom"]),
    non_null,
    max_size=2,
)


@st.composite
def openai_messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    content = draw(texts | st.lists(text_part | image_part | raw_part, max_size=4))
    data: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        calls = draw(st.none() | openai_calls)
        if calls is not None:
            data["tool_calls"] = calls
        reasoning = draw(st.sampled_from([(), ("reasoning_content",), ("reasoning",)]))
        for field in reasoning:
            data[field] = draw(texts)
    if role == "tool":
        data["tool_call_id"] = draw(texts)
        if draw(st.booleans()):
            data["name"] = draw(texts)
    data.update(draw(extra_keys))
    return data


@given(openai_messages())
def test_any_openai_format_message_round_trips_exactly(data: dict[str, Any]) -> None:
    message = ChatMessage.from_dict(data)
    assert message.to_dict() == data
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_dict()))) == message
    hash(message)  # values stay hashable


@given(openai_messages())
def test_every_message_read_from_the_wire_round_trips_as_a_value(data: dict[str, Any]) -> None:
    message = ChatMessage.from_dict(data)
    again = ChatMessage.from_dict(message.to_dict())
    assert again == message
    assert again.text == message.text
    assert again.reasoning == message.reasoning


def test_usage_adds_up() -> None:
    total = Usage(1, 2) + Usage(10, 20)
    assert total == Usage(input_tokens=11, output_tokens=22)
    assert total.total_tokens == 33
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_usage_carries_cache_counts_and_adds_them_up() -> None:
    cached = Usage(2300, 5, cache_read_input_tokens=2000, cache_creation_input_tokens=300)
    total = cached + Usage(10, 20) + cached
    assert total == Usage(4610, 30, cache_read_input_tokens=4000, cache_creation_input_tokens=600)
    assert total.total_tokens == 4640
    assert Usage(1, 2) == Usage(1, 2, cache_read_input_tokens=0)
    assert Usage(1, 2) != Usage(1, 2, cache_creation_input_tokens=1)
    assert repr(Usage(1, 2)) == "Usage(input_tokens=1, output_tokens=2)"
    assert repr(Usage(3, 4, cache_read_input_tokens=5)) == (
        "Usage(input_tokens=3, output_tokens=4, cache_read_input_tokens=5)"
    )
    assert Usage().cache_read_input_tokens == Usage().cache_creation_input_tokens == 0
    with pytest.raises(TypeError):
        Usage(1, 2, 3)  # type: ignore[call-arg]  # the cache counts are keyword-only


def test_values_are_frozen() -> None:
    import attrs

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ChatMessage.user("x").content = "y"  # type: ignore[misc]


def test_more_construction_checks_and_views() -> None:
    class Text(str):
        pass

    message = ChatMessage.user(Text("hi"))
    assert type(message.content) is str
    assert message.parts == (TextPart("hi"),)
    assert ChatMessage.user("").parts == ()
    photo = ChatMessage.user([TextPart("a"), ImagePart(url="https://x/y.png")])
    assert photo.parts == photo.content
    with pytest.raises(TypeError, match="reasoning must be a str"):
        ChatMessage(MessageRole.ASSISTANT, "x", reasoning=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="may not set 'reasoning'"):
        ChatMessage(MessageRole.ASSISTANT, "x", reasoning="r", provider_data={"reasoning": 1})
    with pytest.raises(ValueError, match="key that is not a string"):
        ChatMessage(MessageRole.ASSISTANT, "x", provider_data={"a": {1: 2}})
    with pytest.raises(ValueError, match="must be a mapping"):
        ToolCall("c", "f", "{}", provider_data=[("a", 1)])  # type: ignore[arg-type]
    shown = repr(ChatMessage(MessageRole.USER, "x", provider_data={"refusal": "no"}))
    assert "provider_data={'refusal': 'no'}" in shown
    with pytest.raises(ValueError, match="must be a mapping"):
        ChatMessage(MessageRole.USER, "x", provider_data=["a"])  # type: ignore[arg-type]


def test_tool_calls_and_the_string_fields_are_checked_at_construction() -> None:
    wire = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with pytest.raises(TypeError, match=r"tool_calls\[0\] must be a ToolCall, got .*from_dict"):
        ChatMessage(MessageRole.ASSISTANT, "", [wire])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"tool_calls\[0\] must be a ToolCall, got 'a'"):
        ChatMessage.assistant("", "ab")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool_calls must be an iterable of ToolCall"):
        ChatMessage.assistant("", ToolCall("c", "f", "{}"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tool_call_id must be a str or None, got 5"):
        ChatMessage(MessageRole.TOOL, "r", tool_call_id=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name must be a str or None, got b'f'"):
        ChatMessage(MessageRole.TOOL, "r", name=b"f")  # type: ignore[arg-type]
    for fields in [(1, "f", "{}"), ("c", None, "{}"), ("c", "f", {"a": 1})]:
        with pytest.raises(TypeError, match="must be a str"):
            ToolCall(*fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ToolCall(1, "f", "{}"), "ToolCall id must be a str, got 1"),
        (lambda: ToolCall("c", None, "{}"), "ToolCall name must be a str, got None"),
        (lambda: ToolCall("c", "f", {"a": 1}), "ToolCall arguments must be a str, got {'a': 1}"),
        (
            lambda: attrs.evolve(ToolCall("c", "f", "{}"), id=2),
            "ToolCall id must be a str, got 2",
        ),
        (
            lambda: ChatMessage(MessageRole.TOOL, "r", tool_call_id=5),
            "ChatMessage tool_call_id must be a str or None, got 5",
        ),
        (
            lambda: ChatMessage(MessageRole.TOOL, "r", name=b"f"),
            "ChatMessage name must be a str or None, got b'f'",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_named_as_the_other_checks_name_theirs(
    build: Any, message: str
) -> None:
    # As "ChatMessage reasoning must be a str, got 5" and "TextPart text must be a str, ...":
    # one line naming the class and the field, not attrs' tuple with its Attribute repr.
    with pytest.raises(TypeError) as caught:
        build()
    assert str(caught.value) == message
    assert ChatMessage.assistant("", iter([ToolCall("c", "f", "{}")])).tool_calls == (
        ToolCall("c", "f", "{}"),
    )


# -- copies and pickles ---------------------------------------------------------------------


def _every_kind_of_value() -> list[object]:
    call = ToolCall("c1", "f", '{"a": 1}', provider_data={"extra_content": {"k": [1, None]}})
    parts = (
        TextPart("look", provider_data={"cache_control": {"type": "ephemeral"}}),
        ImagePart.from_bytes(b"\x89PNG", "image/png", detail="low"),
        ImagePart(url="https://example.com/a.png"),
        RawPart({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
    )
    return [
        ChatMessage.user("hi"),
        ChatMessage.user(parts),
        ChatMessage.assistant("", [call], reasoning="why"),
        ChatMessage(
            MessageRole.ASSISTANT,
            "x",
            reasoning="r",
            reasoning_field="reasoning",
            provider_data={"reasoning_details": [{"type": "reasoning.encrypted", "data": "e"}]},
        ),
        ChatMessage.tool_result(call, parts, is_error=True),
        call,
        *parts,
        ToolApprovalRequest(call),
        ProviderDataDelta("reasoning_details", "k", update={"a": 1}, extend={"text": "t"}),
        ToolCallStart("c1", "f", provider_data={"extra_content": {"k": [1, None]}}),
        ToolCallEnd("c1", provider_data={"extra_content": {"k": [1, None]}}),
        # A ScriptedChatClient's calls hold one: ``copy.deepcopy(model.calls)``.
        RunOptions(),
        RunOptions(model_options={"temperature": 0.2}, tool_choice="required", approval="batch"),
    ]


@pytest.mark.parametrize("value", _every_kind_of_value(), ids=lambda v: type(v).__name__)
def test_values_copy_and_pickle(value: object) -> None:
    # A conversation is deep-copied, cached with pickle, or sent to a worker process (a process
    # tool's result may be an image): every value survives, equal, with its mappings read-only.
    for copied in (copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
        assert copied == value
        assert type(copied) is type(value)
        assert repr(copied) == repr(value)


@pytest.mark.parametrize(
    "field",
    ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"],
)
@pytest.mark.parametrize(
    ("value", "error", "shown"),
    [
        ("12", TypeError, "'12'"),
        (1.5, TypeError, "1.5"),
        (math.nan, TypeError, "nan"),
        (None, TypeError, "None"),
        (True, TypeError, "True"),
        (-1, ValueError, "-1"),
    ],
)
def test_a_usage_count_that_is_not_an_int_of_zero_or_more_is_named(
    field: str, value: object, error: type[Exception], shown: str
) -> None:
    with pytest.raises(error, match=rf"^Usage {field} must be an int >= 0, got {re.escape(shown)}"):
        Usage(**{field: value})  # type: ignore[arg-type]
    assert Usage(**{field: 0}) + Usage(**{field: 7}) == Usage(**{field: 7})
