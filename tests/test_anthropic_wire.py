"""What AnthropicChatClient sends: a conversation as the Messages API takes it (sans-IO), and the
request around it. The second-round requests the API accepted (recorded) are rebuilt exactly
from the conversation the loop keeps."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_streams import (
    WEB_SEARCH,
    decode,
    event,
    message_end,
    message_of,
    message_start,
    text_block,
    thinking_block,
    tool_block,
)
from recorded import recorded, recorded_json

from trio_invoke import (
    AnthropicChatClient,
    CallNext,
    ChatMessage,
    ConfigurationError,
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
    ToolDefinition,
    tool,
)
from trio_invoke.providers._http import encode_json
from trio_invoke.providers.anthropic._decode import AnthropicDecoder
from trio_invoke.providers.anthropic._wire import (
    wire_conversation,
    wire_tool_choice,
    wire_tools,
)
from trio_invoke.testing import run_to_completion, tool_calls_response

CALL_1 = ToolCall("toolu_1", "get_weather", '{"city": "Paris"}')
CALL_2 = ToolCall("toolu_2", "get_time", '{"zone": "Europe/Paris"}')
PNG = ImagePart(data="iVBORw0KGgo=", media_type="image/png")


def body(messages: list[ChatMessage], options: RunOptions | None = None, **kw: Any) -> Any:
    return AnthropicChatClient("claude-x", base_url="http://127.0.0.1:9", **kw).request_body(
        messages, options
    )


@pytest.fixture(autouse=True)
def _no_anthropic_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


# -- system, roles, merging ---------------------------------------------------------------------


def test_system_and_developer_messages_go_to_system_in_order() -> None:
    system, messages = wire_conversation(
        [
            ChatMessage.system("Be brief."),
            ChatMessage.user("Hi"),
            ChatMessage.developer("Use metric units."),
            ChatMessage.system(
                [TextPart("Cached.", provider_data={"cache_control": {"type": "ephemeral"}})]
            ),
        ]
    )
    assert system == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Use metric units."},
        {"type": "text", "text": "Cached.", "cache_control": {"type": "ephemeral"}},
    ]
    assert messages == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


def test_no_system_field_without_system_messages() -> None:
    assert "system" not in body([ChatMessage.user("Hi")])


def test_consecutive_messages_of_one_role_merge() -> None:
    _, messages = wire_conversation(
        [
            ChatMessage.user("One."),
            ChatMessage.user("Two."),
            ChatMessage.assistant("A."),
            ChatMessage.assistant("B."),
            ChatMessage.user("Three."),
        ]
    )
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "A."}, {"type": "text", "text": "B."}],
        },
        {"role": "user", "content": [{"type": "text", "text": "Three."}]},
    ]


def test_empty_text_and_empty_messages_are_left_out() -> None:
    _, messages = wire_conversation(
        [
            ChatMessage.user("Hi"),
            ChatMessage.assistant(""),
            ChatMessage.user(""),
            ChatMessage.user("Again"),
        ]
    )
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Again"}],
        }
    ]


# -- tool use and results ---------------------------------------------------------------------


def test_tool_calls_and_their_results_in_one_user_message_in_call_order() -> None:
    _, messages = wire_conversation(
        [
            ChatMessage.user("Weather and time?"),
            ChatMessage.assistant("Both.", [CALL_1, CALL_2]),
            ChatMessage.tool_result(CALL_1, "Sunny"),
            ChatMessage.tool_result(CALL_2, "Error: tool 'get_time' raised ValueError"),
            ChatMessage.assistant("Sunny; the clock failed."),
        ]
    )
    assert messages[1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Both."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_time",
                    "input": {"zone": "Europe/Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "Error: tool 'get_time' raised ValueError",
                    "is_error": True,
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny; the clock failed."}]},
    ]


@pytest.mark.parametrize(
    ("result", "flagged"),
    [
        (ChatMessage.tool_result(CALL_1, "Error: not run: the round limit is reached"), True),
        (ChatMessage.tool_result(CALL_1, "Error: cancelled"), True),
        (
            ChatMessage.tool_result(
                CALL_1, '[arguments replaced by the user: {"city": 5}] Error: invalid arguments'
            ),
            True,
        ),
        (ChatMessage.tool_result(CALL_1, "No errors found.", is_error=True), True),
        (ChatMessage.tool_result(CALL_1, "Errors: none"), False),
        (ChatMessage.tool_result(CALL_1, "all fine"), False),
        (
            ChatMessage(
                MessageRole.TOOL,
                "Error: but the provider said it is not one",
                tool_call_id="toolu_1",
                provider_data={"is_error": False},
            ),
            False,
        ),
    ],
)
def test_is_error_marks_error_results(result: ChatMessage, flagged: bool) -> None:
    _, messages = wire_conversation([ChatMessage.assistant("", [CALL_1]), result])
    [block] = messages[1]["content"]
    assert block.get("is_error", False) is flagged


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "Error: 3 lines matched in app.log" if key == "log" else "found"


async def deny_secrets(context: ToolContext, call_next: CallNext) -> ToolCalled:
    if context.arguments["key"] == "secret":
        return ToolCalled(context.call, "Denied by policy.", is_error=True)
    return await call_next(context)


async def test_tool_results_carry_the_loops_is_error() -> None:
    # The loop knows each result's is_error; the text need not say it: a middleware refuses in
    # its own words, a tool succeeds with text that reads "Error: ...".
    calls = [
        ToolCall("toolu_a", "lookup", '{"key": "secret"}'),
        ToolCall("toolu_b", "lookup", '{"key": "log"}'),
        ToolCall("toolu_c", "lookup", '{"key": "plain"}'),
        ToolCall("toolu_d", "nope", "{}"),  # the loop's own error result
    ]
    model = ScriptedChatClient([tool_calls_response(*calls), "done"])
    agent = FunctionInvokingChatClient(model, [lookup], middleware=[deny_secrets])
    result = await run_to_completion(agent, [ChatMessage.user("go")])
    called = {c.call.id: c.is_error for c in result.updates if isinstance(c, ToolCalled)}
    assert called == {"toolu_a": True, "toolu_b": False, "toolu_c": False, "toolu_d": True}
    sent = body([ChatMessage.user("go"), *result.messages])
    results = [b for m in sent["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert {b["tool_use_id"]: b.get("is_error", False) for b in results} == called
    assert [b.get("is_error") for b in results] == [True, None, None, True]  # only true is sent


def test_is_error_survives_storage() -> None:
    message = ChatMessage.tool_result(CALL_1, "nope", is_error=True)
    assert message.to_dict()["is_error"] is True
    assert ChatMessage.from_dict(json.loads(json.dumps(message.to_dict()))) == message


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ("", {}),
        ("{}", {}),
        ("[1]", {}),
        ('{"a": ', {}),
        ('{"a": [1]}', {"a": [1]}),
        # Python's json reads these, but they are not JSON: the loop refused them too
        ('{"a": NaN}', {}),
        ('{"a": [1, Infinity]}', {}),
        ('{"a": -Infinity}', {}),
        ('{"a": 1e400}', {}),
    ],
)
def test_tool_use_input_is_an_object(arguments: str, sent: dict[str, Any]) -> None:
    conversation = [ChatMessage.assistant("", [ToolCall("t", "f", arguments)])]
    _, messages = wire_conversation(conversation)
    assert messages[0]["content"][0]["input"] == sent
    encode_json(body(conversation))  # the request is JSON


def test_a_tools_image_goes_inside_its_tool_result() -> None:
    _, messages = wire_conversation(
        [
            ChatMessage.assistant("", [CALL_1]),
            ChatMessage.tool_result(
                CALL_1, [TextPart("the chart:"), PNG, ImagePart(url="https://x/y.png")]
            ),
        ]
    )
    assert messages[1]["content"][0]["content"] == [
        {"type": "text", "text": "the chart:"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
    ]


def test_images_and_raw_parts_in_user_messages() -> None:
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "x"},
    }
    _, messages = wire_conversation(
        [ChatMessage.user([TextPart("What is this?"), PNG, RawPart(document)])]
    )
    assert messages[0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        document,
    ]


# -- thinking blocks -----------------------------------------------------------------------------

SIGNED = {"type": "thinking", "thinking": "Weather first.", "signature": "EqQBCkYI=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgB"}


def test_thinking_blocks_go_back_first_and_unchanged() -> None:
    assistant = ChatMessage(
        MessageRole.ASSISTANT,
        "Let me check.",
        (CALL_1,),
        reasoning="Weather first.",
        provider_data={"thinking_blocks": [SIGNED, REDACTED]},
    )
    _, messages = wire_conversation([ChatMessage.user("?"), assistant])
    assert messages[1]["content"] == [
        SIGNED,
        REDACTED,
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]


def sig(n: int) -> dict[str, str]:
    return {"type": "thinking", "thinking": f"t{n}", "signature": f"S{n}"}


CALL_T = ToolCall("toolu_2", "get_time", '{"zone": "CET"}')
USE_1 = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
USE_2 = {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {"zone": "CET"}}
TEXT = {"type": "text", "text": "Let me check."}


@pytest.mark.parametrize(
    ("calls", "places", "order"),
    [
        ((CALL_1, CALL_T), [], ["S0", "S1", "S2", TEXT, USE_1, USE_2]),
        (
            (CALL_1, CALL_T),
            [
                {"block": 1, "after_calls": 0, "after_text": True},
                {"block": 2, "after_calls": 1, "after_text": True},
            ],
            ["S0", TEXT, "S1", USE_1, "S2", USE_2],
        ),
        (  # more calls before it than the message holds: after the last
            (CALL_1,),
            [{"block": 2, "after_calls": 5, "after_text": False}],
            ["S0", "S1", TEXT, USE_1, "S2"],
        ),
        ((), [{"block": 2, "after_calls": 1, "after_text": True}], ["S0", "S1", TEXT, "S2"]),
        (  # entries that are not places are left out: the block goes first
            (CALL_1,),
            [
                {"block": 9, "after_calls": 1, "after_text": True},
                {"block": True, "after_calls": 1, "after_text": True},
                {"block": 2, "after_calls": "1", "after_text": True},
                {"block": 2, "after_calls": -1, "after_text": True},
                {"block": 2, "after_calls": 1},
                "block 2",
            ],
            ["S0", "S1", "S2", TEXT, USE_1],
        ),
    ],
)
def test_thinking_blocks_go_back_in_their_places(
    calls: tuple[ToolCall, ...], places: list[Any], order: list[Any]
) -> None:
    assistant = ChatMessage(
        MessageRole.ASSISTANT,
        "Let me check.",
        calls,
        provider_data={"thinking_blocks": [sig(0), sig(1), sig(2)], "thinking_places": places},
    )
    _, messages = wire_conversation([ChatMessage.user("?"), assistant])
    expected = [sig(int(b[1:])) if isinstance(b, str) else b for b in order]
    assert messages[1]["content"] == expected


@pytest.mark.parametrize(
    ("places", "order"),
    [
        ([{"id": "toolu_1", "text_at": 6}], ["Let m", "S1", "e", USE_1, "S2", " check.", USE_2]),
        (  # no places (a transcript from before they were kept): the text before the calls
            None,
            ["Let m", "S1", "e check.", USE_1, "S2", USE_2],
        ),
        (  # entries that are not places are left out: that call goes after all the text
            [{"id": "toolu_1", "text_at": -1}, {"id": 1, "text_at": 2}, {"text_at": 2}, "x"],
            ["Let m", "S1", "e check.", USE_1, "S2", USE_2],
        ),
        (  # a place before a block's that came first (edited by hand): no earlier than it
            [{"id": "toolu_1", "text_at": 2}],
            ["Let m", "S1", USE_1, "e", "S2", " check.", USE_2],
        ),
        ([{"id": "toolu_1", "text_at": 99}], ["Let m", "S1", "e check.", USE_1, "S2", USE_2]),
    ],
)
def test_text_after_a_call_goes_back_after_it(places: Any, order: list[Any]) -> None:
    # Text, a call, more text (interleaved thinking): the API refuses the latest assistant
    # message's blocks moved; the text is cut where each call came (provider_data["tool_places"]).
    data: dict[str, Any] = {
        "thinking_blocks": [sig(0), sig(1), sig(2)],
        "thinking_places": [
            {"block": 1, "after_calls": 0, "after_text": True, "text_at": 5},
            {"block": 2, "after_calls": 1, "after_text": True, "text_at": 6},
        ],
    }
    if places is not None:
        data["tool_places"] = places
    assistant = ChatMessage(
        MessageRole.ASSISTANT, "Let me check.", (CALL_1, CALL_T), provider_data=data
    )
    _, messages = wire_conversation([ChatMessage.user("?"), assistant])
    expected = [
        sig(int(b[1:]))
        if isinstance(b, str) and b[:1] == "S" and b[1:].isdigit()
        else {"type": "text", "text": b}
        if isinstance(b, str)
        else b
        for b in order
    ]
    assert messages[1]["content"] == [sig(0), *expected]


def test_reasoning_without_signed_blocks_is_not_sent() -> None:
    from_elsewhere = ChatMessage.assistant("", [CALL_1], reasoning="I think (from DeepSeek).")
    _, messages = wire_conversation([from_elsewhere])
    assert messages[0]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    ]


@pytest.mark.parametrize(
    "blocks", ["text", [{"type": "text", "text": "x"}], [1], {"type": "thinking"}]
)
def test_thinking_blocks_that_are_not_blocks_are_a_configuration_error(blocks: Any) -> None:
    message = ChatMessage(MessageRole.ASSISTANT, "x", provider_data={"thinking_blocks": blocks})
    with pytest.raises(ConfigurationError, match="thinking_blocks"):
        wire_conversation([message])


def server_pair(index: int, n: int) -> bytes:
    """A server tool's use (its input in pieces) and its result, at ``index`` and after."""
    use = {"type": "server_tool_use", "id": f"srvtoolu_{n}", "name": "web_search", "input": {}}
    result = {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": []}
    pieces = ["", '{"query": ', f'"q{n}"}}']
    return (
        event("content_block_start", index=index, content_block=use)
        + b"".join(
            event(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": piece},
            )
            for piece in pieces
        )
        + event("content_block_stop", index=index)
        + event("content_block_start", index=index + 1, content_block=result)
        + event("content_block_stop", index=index + 1)
    )


CITATION = {
    "type": "web_search_result_location",
    "cited_text": "Claude Elwood Shannon (April 30, 1916 - February 24, 2001) was...",
    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
    "title": "Claude Shannon - Wikipedia",
    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm==",
}


def cited_block(index: int, *pieces: str, citations: int = 1) -> bytes:
    """A text block that cites a search result, as the API streams one (each citation in a
    ``citations_delta`` before the text)."""
    out = event("content_block_start", index=index, content_block={"type": "text", "text": ""})
    for n in range(citations):
        citation = {**CITATION, "encrypted_index": f"{CITATION['encrypted_index']}{n}"}
        out += event(
            "content_block_delta",
            index=index,
            delta={"type": "citations_delta", "citation": citation},
        )
    for piece in pieces:
        delta = {"type": "text_delta", "text": piece}
        out += event("content_block_delta", index=index, delta=delta)
    return out + event("content_block_stop", index=index)


def programmatic_call(index: int, call_id: str, code_id: str) -> bytes:
    """A ``tool_use`` block that code execution made (programmatic tool calling)."""
    block = {
        "type": "tool_use",
        "id": call_id,
        "name": "query_database",
        "input": {},
        "caller": {"type": "code_execution_20260120", "tool_id": code_id},
    }
    delta = {"type": "input_json_delta", "partial_json": '{"sql": "SELECT 1"}'}
    return (
        event("content_block_start", index=index, content_block=block)
        + event("content_block_delta", index=index, delta=delta)
        + event("content_block_stop", index=index)
    )


CODE_USE = {"type": "server_tool_use", "id": "srvtoolu_code", "name": "code_execution", "input": {}}


@pytest.mark.parametrize(
    "blocks",
    [
        pytest.param(lambda: WEB_SEARCH, id="recorded shape: text, search, text, call"),
        pytest.param(
            lambda: (
                text_block(0, "Looking. ")
                + server_pair(1, 1)
                + thinking_block(3, "a")
                + text_block(4, "Sunny.")
            ),
            id="thinking after a search's result, before text",
        ),
        pytest.param(
            lambda: (
                text_block(0, "Looking. ")
                + thinking_block(1, "a")
                + text_block(2, "Still looking. ")
                + server_pair(3, 1)
                + text_block(5, "Sunny.")
            ),
            id="thinking between two texts, then a search",
        ),
        pytest.param(
            lambda: (
                server_pair(0, 1)
                + text_block(2, "Based on the search results, ")
                + cited_block(3, "Claude Shannon was born ", "on April 30, 1916", citations=2)
                + text_block(4, ". He was a mathematician")
                + cited_block(5, "🧮 and engineer.")
                + server_pair(6, 2)
                + cited_block(8, "é😀")
            ),
            id="cited text blocks between plain ones (non-BMP text too)",
        ),
        pytest.param(
            lambda: (
                text_block(0, "I'll query it.")
                + event("content_block_start", index=1, content_block=CODE_USE)
                + event("content_block_stop", index=1)
                + programmatic_call(2, "toolu_1", "srvtoolu_code")
                + programmatic_call(3, "toolu_2", "srvtoolu_code")
            ),
            id="programmatic calls with their caller",
        ),
        pytest.param(
            lambda: (
                thinking_block(0, "a")
                + server_pair(1, 1)
                + thinking_block(3, "b")
                + text_block(4, "Sunny.")
                + tool_block(5, "toolu_1", "f", "{}")
            ),
            id="interleaved thinking around a search",
        ),
        pytest.param(
            lambda: (
                text_block(0, "Looking. ")
                + thinking_block(1, "a")
                + server_pair(2, 1)
                + text_block(4, "Found. ")
                + server_pair(5, 2)
                + text_block(7, "Sunny.")
            ),
            id="text, thinking, two searches",
        ),
        pytest.param(
            lambda: (
                server_pair(0, 1)
                + tool_block(2, "toolu_1", "f", "{}")
                + server_pair(3, 2)
                + tool_block(5, "toolu_2", "f", "{}")
            ),
            id="searches after calls",
        ),
    ],
)
def test_server_blocks_go_back_where_they_came(blocks: Any) -> None:
    # What the next request sends for the turn is its content as the API returned it, a
    # text block's citations with it (their encrypted_index must go back).
    decoder = AnthropicDecoder()
    stream = blocks()
    if stream is not WEB_SEARCH:
        stream = message_start() + stream + message_end("tool_use")
    message = message_of(decode([stream], decoder))
    assert message is not None
    _, messages = wire_conversation([ChatMessage.user("?"), message])
    assert messages[1]["content"] == decoder.blocks
    # And so after a round trip through JSON.
    again = ChatMessage.from_dict(json.loads(json.dumps(message.to_dict())))
    assert wire_conversation([ChatMessage.user("?"), again])[1] == messages


SERVER_USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}


@pytest.mark.parametrize(
    ("content", "entry", "order"),
    [
        # Text as a string is cut at the block's place; past its end: after it.
        (
            "Found it.",
            {"after_calls": 0, "text_at": 5, "after_thinking": 0},
            ["Found", "S", " it."],
        ),
        ("Found it.", {"after_calls": 0, "text_at": 99, "after_thinking": 0}, ["Found it.", "S"]),
        # A place missing or not a count: first (after the thinking blocks).
        ("Found it.", {"text_at": "5", "after_calls": -1}, ["S", "Found it."]),
        # Content parts are not cut: a block inside goes after them.
        ((TextPart("Found it."),), {"text_at": 5}, ["Found it.", "S"]),
        ((TextPart("Found it."),), {"text_at": 0}, ["S", "Found it."]),
    ],
)
def test_a_server_blocks_place_in_the_text(content: Any, entry: Any, order: list[str]) -> None:
    message = ChatMessage(
        MessageRole.ASSISTANT,
        content,
        provider_data={"server_blocks": [{"block": SERVER_USE, **entry}]},
    )
    _, messages = wire_conversation([message])
    expected = [SERVER_USE if b == "S" else {"type": "text", "text": b} for b in order]
    assert messages[0]["content"] == expected


@pytest.mark.parametrize(
    ("entries", "pieces"),
    [
        ([{"text_at": 6, "length": 2, "citations": [CITATION]}], ["Found ", "it", "."]),
        # Left out: not an entry, past the text's end, no citations, overlapping one before.
        ("cited", ["Found it."]),
        (["x", {"text_at": "6", "length": 3, "citations": [CITATION]}], ["Found it."]),
        ([{"text_at": 6, "length": 30, "citations": [CITATION]}], ["Found it."]),
        ([{"text_at": 6, "length": 3, "citations": []}], ["Found it."]),
        ([{"text_at": 6, "length": 3, "citations": "x"}], ["Found it."]),
        ([{"text_at": -1, "length": 3, "citations": [CITATION]}], ["Found it."]),
        (
            [
                {"text_at": 0, "length": 5, "citations": [CITATION]},
                {"text_at": 3, "length": 4, "citations": [CITATION]},
            ],
            ["Found", " it."],
        ),
    ],
)
def test_text_citations_edited_by_hand(entries: Any, pieces: list[str]) -> None:
    message = ChatMessage(
        MessageRole.ASSISTANT, "Found it.", provider_data={"text_citations": entries}
    )
    _, messages = wire_conversation([message])
    assert [b["text"] for b in messages[0]["content"]] == pieces
    cited = [b for b in messages[0]["content"] if "citations" in b]
    assert all(b["citations"] == [CITATION] for b in cited)
    assert len(cited) == (1 if len(pieces) > 1 else 0)


@pytest.mark.parametrize(
    "entries",
    [
        "callers",
        ["x"],
        [{"id": "toolu_1"}],
        [{"id": 1, "caller": {"type": "direct"}}],
        [{"id": "toolu_1", "caller": "direct"}],
        [{"id": "toolu_1", "caller": {"tool_id": "srvtoolu_1"}}],
        [{"id": "toolu_other", "caller": {"type": "direct"}}],
    ],
)
def test_tool_callers_that_are_not_entries_are_left_out(entries: Any) -> None:
    message = ChatMessage(
        MessageRole.ASSISTANT,
        "",
        tool_calls=[ToolCall("toolu_1", "f", "{}")],
        provider_data={"tool_callers": entries},
    )
    _, messages = wire_conversation([message])
    assert messages[0]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    ]


CODE_CALLER = {"type": "code_execution_20260120", "tool_id": "srvtoolu_code"}


def code_call(caller: dict[str, Any]) -> ChatMessage:
    """An assistant message whose call code execution made (programmatic tool calling)."""
    return ChatMessage(
        MessageRole.ASSISTANT,
        "I'll query it.",
        (CALL_1,),
        provider_data={
            "tool_callers": [{"id": "toolu_1", "caller": caller}],
            "container": [{"id": "cont_1", "expires_at": "2026-01-20T14:30:00Z"}],
        },
    )


@pytest.mark.parametrize(
    ("after", "kinds"),
    [
        ([ChatMessage.tool_result(CALL_1, "5"), ChatMessage.user("What next?")], "text"),
        ([ChatMessage.user("Also this."), ChatMessage.tool_result(CALL_1, "5")], "text"),
        ([ChatMessage.tool_result(CALL_1, "5"), ChatMessage.user([PNG])], "image"),
    ],
)
def test_a_user_message_while_code_waits_for_results_is_a_configuration_error(
    after: list[ChatMessage], kinds: str
) -> None:
    # The API takes only tool_result blocks in the user turn that answers calls its code
    # waits for, "not even text after the tool results"; and it would merge a user message of
    # its own into that turn.
    conversation = [ChatMessage.user("?"), code_call(CODE_CALLER), *after]
    with pytest.raises(
        ConfigurationError, match=rf"\({kinds} blocks\).*code execution \(toolu_1\)"
    ):
        wire_conversation(conversation)
    with pytest.raises(ConfigurationError, match="tool_result blocks only"):
        body(conversation)


def test_a_user_message_after_direct_calls_or_the_answer_merges_as_before() -> None:
    direct = [
        ChatMessage.user("?"),
        code_call({"type": "direct"}),
        ChatMessage.tool_result(CALL_1, "5"),
        ChatMessage.user("What next?"),
    ]
    _, messages = wire_conversation(direct)
    assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text"]
    answered = [
        ChatMessage.user("?"),
        code_call(CODE_CALLER),
        ChatMessage.tool_result(CALL_1, "5"),
        ChatMessage.assistant("C1 leads."),
        ChatMessage.user("And C2?"),
    ]
    _, messages = wire_conversation(answered)
    assert messages[-1] == {"role": "user", "content": [{"type": "text", "text": "And C2?"}]}
    waiting = [ChatMessage.user("?"), code_call(CODE_CALLER), ChatMessage.tool_result(CALL_1, "5")]
    assert body(waiting)["container"] == "cont_1"


@pytest.mark.parametrize(
    "entries",
    ["blocks", [SERVER_USE], [{"block": "x"}], [{"block": {"id": "1"}}], {"block": SERVER_USE}],
)
def test_server_blocks_that_are_not_entries_are_a_configuration_error(entries: Any) -> None:
    message = ChatMessage(MessageRole.ASSISTANT, "x", provider_data={"server_blocks": entries})
    with pytest.raises(ConfigurationError, match="server_blocks"):
        wire_conversation([message])


def test_other_provider_data_is_not_sent() -> None:
    message = ChatMessage(
        MessageRole.ASSISTANT,
        "x",
        provider_data={"reasoning_details": [{"type": "reasoning.text"}]},
    )
    _, messages = wire_conversation([message])
    assert messages == [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]


# -- tools and tool_choice ----------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = (ToolDefinition("get_weather", "The weather in a city.", SCHEMA),)


def test_tools_as_name_description_input_schema() -> None:
    assert wire_tools(TOOLS) == [
        {"name": "get_weather", "description": "The weather in a city.", "input_schema": SCHEMA}
    ]


@pytest.mark.parametrize(
    ("choice", "parallel", "sent"),
    [
        (None, None, None),
        (None, True, None),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("auto", None, {"type": "auto"}),
        ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", None, {"type": "any"}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        ("none", None, {"type": "none"}),
        ("none", False, {"type": "none"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            None,
            {"type": "tool", "name": "get_weather"},
        ),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            False,
            {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        ),
        ({"type": "tool", "name": "get_weather"}, None, {"type": "tool", "name": "get_weather"}),
        ({"type": "any"}, None, {"type": "any"}),
    ],
)
def test_tool_choice_and_parallel_tool_calls(choice: Any, parallel: bool | None, sent: Any) -> None:
    assert wire_tool_choice(choice, parallel) == sent
    request = body(
        [ChatMessage.user("?")],
        RunOptions(tools=TOOLS, tool_choice=choice, parallel_tool_calls=parallel),
    )
    assert request.get("tool_choice") == sent


@pytest.mark.parametrize(
    "choice",
    [
        "sometimes",
        {"type": "function"},
        {"type": "function", "function": {}},
        {"kind": "x"},
        {"type": "auto", "weight": float("nan")},  # not JSON
    ],
)
def test_an_unknown_tool_choice_is_a_configuration_error(choice: Any) -> None:
    with pytest.raises(ConfigurationError, match="tool_choice"):
        wire_tool_choice(choice, None)


def test_tool_choice_only_goes_with_tools() -> None:
    request = body(
        [ChatMessage.user("?")], RunOptions(tool_choice="required", parallel_tool_calls=False)
    )
    assert "tools" not in request
    assert "tool_choice" not in request


# -- the request around the messages ------------------------------------------------------------


def test_the_request_body() -> None:
    request = body(
        [ChatMessage.system("Sys."), ChatMessage.user("Hi")],
        RunOptions(tools=TOOLS, model_options={"temperature": 0, "top_k": None}),
        max_tokens=1000,
        thinking={"type": "enabled", "budget_tokens": 800},
        model_options={"metadata": {"user_id": "u1"}, "top_k": 5},
    )
    assert request == {
        "model": "claude-x",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "Sys."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "thinking": {"type": "enabled", "budget_tokens": 800},
        "tools": wire_tools(TOOLS),
        "stream": True,
        "metadata": {"user_id": "u1"},
        "temperature": 0,
    }


def test_max_tokens_per_run() -> None:
    request = body([ChatMessage.user("Hi")], RunOptions(model_options={"max_tokens": 64}))
    assert request["max_tokens"] == 64


@pytest.mark.parametrize("field", ["model", "messages", "system", "stream", "tools", "tool_choice"])
def test_model_options_may_not_set_what_the_client_sets(field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        body([ChatMessage.user("Hi")], RunOptions(model_options={field: 1}))
    with pytest.raises(ConfigurationError, match=field):
        AnthropicChatClient("m", model_options={field: 1})


# -- the recorded second rounds -----------------------------------------------------------------


def second_round(
    name: str, *, results: list[str], tools: list[dict[str, Any]], **kw: Any
) -> tuple[Any, Any]:
    """The request our client makes for the recorded exchange's second round, from the
    conversation the loop keeps (round one decoded from the recorded stream), and the recorded
    one."""
    accepted = recorded_json(f"anthropic/{name}.turn2.request.json")
    first = accepted["messages"][0]["content"][0]["text"]
    assistant = message_of(decode([recorded(f"anthropic/{name}.sse")]))
    assert assistant is not None
    conversation = [ChatMessage.user(first), assistant]
    conversation += [
        ChatMessage.tool_result(call, result)
        for call, result in zip(assistant.tool_calls or (), results, strict=True)
    ]
    system = accepted.get("system")
    if system:
        conversation.insert(0, ChatMessage.system(system[0]["text"]))
    definitions = tuple(
        ToolDefinition(t["name"], t["description"], t["input_schema"]) for t in tools
    )
    ours = AnthropicChatClient(
        accepted["model"], max_tokens=accepted["max_tokens"], **kw
    ).request_body(
        conversation, RunOptions(tools=definitions, tool_choice="auto", parallel_tool_calls=True)
    )
    return ours, accepted


def normal(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded message with its tool results' text as a string (the client that recorded it
    sent it as one text block: the same to the API)."""
    content = []
    for block in message["content"]:
        if block["type"] == "tool_result" and isinstance(block["content"], list):
            [text] = block["content"]
            content.append({**block, "content": text["text"]})
        else:
            content.append(block)
    return {**message, "content": content}


def test_the_recorded_second_round_with_parallel_results_is_what_we_send() -> None:
    accepted = recorded_json("anthropic/parallel-tool_use-after-text.turn2.request.json")
    ours, accepted = second_round(
        "parallel-tool_use-after-text", results=["5", "6"], tools=accepted["tools"]
    )
    assert ours["messages"] == [normal(m) for m in accepted["messages"]]
    assert ours["system"] == accepted["system"]
    assert ours["tools"] == accepted["tools"]


def test_the_recorded_second_round_carries_the_signed_thinking_block_back() -> None:
    accepted = recorded_json("anthropic/thinking-then-tool_use.turn2.request.json")
    ours, accepted = second_round(
        "thinking-then-tool_use",
        results=["40 C"],
        tools=accepted["tools"],
        thinking=accepted["thinking"],
    )
    assert ours["messages"] == [normal(m) for m in accepted["messages"]]
    assert ours["thinking"] == accepted["thinking"] == {"budget_tokens": 4000, "type": "enabled"}
    assert ours["messages"][1]["content"][0]["signature"].startswith("EsQDCkYICBgCKkBr9")
