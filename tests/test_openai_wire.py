"""What OpenAIChatClient sends: messages as each provider family takes them back (sans-IO)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from recorded import recorded, recorded_json

from trio_invoke import (
    CallNext,
    ChatMessage,
    ConfigurationError,
    FunctionInvokingChatClient,
    ImagePart,
    MessageRole,
    OpenAIChatClient,
    ScriptedChatClient,
    TextPart,
    ToolCall,
    ToolCalled,
    ToolContext,
    tool,
)
from trio_invoke._accumulate import ToolCallAccumulator
from trio_invoke.providers._sse import SSEParser
from trio_invoke.providers.openai._decode import ChunkDecoder
from trio_invoke.providers.openai._wire import FAMILIES, provider_family, wire_messages
from trio_invoke.testing import run_to_completion, tool_calls_response

CALL = ToolCall("call_1", "get_weather", '{"city": "Paris"}')


@pytest.mark.parametrize(
    ("base_url", "family"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://my-resource.openai.azure.com/openai/deployments/x", "openai"),
        ("https://api.deepseek.com", "deepseek"),
        ("https://api.deepseek.com/v1", "deepseek"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("https://api.moonshot.ai/v1", "moonshot"),
        ("https://api.moonshot.cn/v1", "moonshot"),
        ("http://localhost:11434/v1", "local"),
        ("http://127.0.0.1:8000/v1", "local"),
        ("http://[::1]:8080/v1", "local"),
        ("http://192.168.1.20:1234/v1", "local"),
        ("http://vllm:8000/v1", "local"),
        ("http://gpu-box.local:8000/v1", "local"),
        ("https://api.groq.com/openai/v1", "other"),
        ("https://api.mistral.ai/v1", "other"),
        ("https://api.together.xyz/v1", "other"),
        ("https://8.8.8.8/v1", "other"),
    ],
)
def test_the_family_comes_from_the_host(base_url: str, family: str) -> None:
    assert provider_family(base_url).name == family
    assert OpenAIChatClient("m", base_url=base_url).family.name == family


def assistant(
    reasoning: str | None = "I think.", field: str = "reasoning_content", **data: Any
) -> ChatMessage:
    return ChatMessage(
        MessageRole.ASSISTANT,
        "",
        (CALL,),
        reasoning=reasoning,
        reasoning_field=field,
        provider_data=data or None,
    )


def sent(base_url: str, messages: list[ChatMessage], **kwargs: Any) -> list[dict[str, Any]]:
    body = OpenAIChatClient("m", base_url=base_url, **kwargs).request_body(messages)
    result: list[dict[str, Any]] = body["messages"]
    return result


DETAILS = [{"type": "reasoning.text", "text": "I think.", "signature": "sig", "index": 0}]


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("https://api.openai.com/v1", {}),
        ("https://api.groq.com/openai/v1", {}),
        ("https://api.deepseek.com", {"reasoning_content": "I think."}),
        ("https://api.moonshot.ai/v1", {"reasoning_content": "I think."}),
        ("http://localhost:8000/v1", {"reasoning": "I think.", "reasoning_details": DETAILS}),
        ("https://openrouter.ai/api/v1", {"reasoning": "I think.", "reasoning_details": DETAILS}),
    ],
)
def test_reasoning_goes_back_by_default_where_the_family_takes_it(
    base_url: str, expected: dict[str, Any]
) -> None:
    message = assistant(field="reasoning", reasoning_details=DETAILS, refusal="n/a")
    (wire,) = sent(base_url, [message])
    extra = {k: v for k, v in wire.items() if k not in ("role", "content", "tool_calls")}
    assert extra == expected  # never `refusal` or other provider data
    assert message.to_dict()["refusal"] == "n/a"  # it stays in the transcript


@pytest.mark.parametrize(
    ("base_url", "field"),
    [
        ("https://openrouter.ai/api/v1", "reasoning"),
        ("https://api.deepseek.com", "reasoning_content"),
        ("https://api.moonshot.ai/v1", "reasoning_content"),
        ("http://localhost:8000/v1", None),
    ],
)
@pytest.mark.parametrize("came_in", ["reasoning", "reasoning_content"])
def test_reasoning_goes_back_in_the_familys_own_field_whichever_it_came_in(
    base_url: str, field: str | None, came_in: str
) -> None:
    # A conversation begun on one server (or loaded from a stored history) and continued on
    # another: the reasoning goes in the field the server reads, or as it came to a local one.
    (wire,) = sent(base_url, [assistant(field=came_in)])
    expected = field or came_in
    assert wire[expected] == "I think."
    assert ({"reasoning", "reasoning_content"} - {expected}).isdisjoint(wire)


def test_the_option_forces_reasoning_on_or_off() -> None:
    message = assistant(field="reasoning")
    (on,) = sent("https://api.groq.com/openai/v1", [message], send_reasoning=True)
    assert on["reasoning"] == "I think."
    (off,) = sent("https://api.deepseek.com", [message], send_reasoning=False)
    assert "reasoning_content" not in off
    assert "reasoning" not in off
    (local_off,) = sent("http://localhost:1234/v1", [message], send_reasoning=False)
    assert set(local_off) == {"role", "content", "tool_calls"}


def test_openai_never_gets_reasoning_and_forcing_it_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="takes no reasoning back"):
        OpenAIChatClient("gpt-4o", base_url="https://api.openai.com/v1", send_reasoning=True)
    for value in (1, "yes", 0.0):
        with pytest.raises(ConfigurationError, match="send_reasoning"):
            OpenAIChatClient("m", send_reasoning=value)  # type: ignore[arg-type]


def test_deepseek_gets_reasoning_content_on_every_tool_call_message() -> None:
    # DeepSeek refuses an assistant tool-call message without reasoning_content, also one that
    # came from elsewhere with no reasoning: it gets "".
    no_reasoning = assistant(reasoning=None)
    came_as_reasoning = assistant(field="reasoning")
    text_only = ChatMessage.assistant("Hello.")
    wire = sent("https://api.deepseek.com", [no_reasoning, came_as_reasoning, text_only])
    assert [m.get("reasoning_content") for m in wire] == ["", "I think.", None]
    # A second request DeepSeek's thinking mode accepted (recorded): its tool-call message with
    # no reasoning of its own carries "" too.
    accepted = recorded_json("deepseek/deepseek-reasoner-thinking-tool-calls.turn2.request.json")
    with_calls = [m for m in accepted["messages"] if m["role"] == "assistant" and m["tool_calls"]]
    assert [m["reasoning_content"] for m in with_calls][-1] == ""
    assert all(isinstance(m["reasoning_content"], str) for m in with_calls)
    ours = sent("https://api.deepseek.com", [ChatMessage.from_dict(m) for m in with_calls])
    assert [m["reasoning_content"] for m in ours] == [m["reasoning_content"] for m in with_calls]


PNG = ImagePart(data="iVBORw0KGgo=", media_type="image/png")


def test_an_image_a_tool_returned_goes_in_a_user_message_after_the_batch() -> None:
    calls = (CALL, ToolCall("call_2", "chart", "{}"), ToolCall("call_3", "snap", "{}"))
    messages = [
        ChatMessage.user("Weather and a chart?"),
        ChatMessage.assistant("", calls),
        ChatMessage.tool_result(calls[0], "sunny"),
        ChatMessage.tool_result(calls[1], [TextPart("the chart:"), PNG]),
        ChatMessage.tool_result(calls[2], [PNG, ImagePart(url="https://x/y.png")]),
        ChatMessage.assistant("Here."),
    ]
    wire = sent("http://localhost:8000/v1", messages)
    assert [m["role"] for m in wire] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    assert wire[2] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    assert wire[3] == {
        "role": "tool",
        "content": "the chart:\n[1 image in the user message that follows]",
        "tool_call_id": "call_2",
    }
    assert wire[4]["content"] == "[2 images in the user message that follows]"
    assert wire[5]["content"] == [
        {"type": "text", "text": "The image returned by tool call call_2 (chart):"},
        PNG.to_dict(),
        {"type": "text", "text": "The images returned by tool call call_3 (snap):"},
        PNG.to_dict(),
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    # The transcript keeps the images where they were.
    assert messages[3].to_dict()["content"][1] == PNG.to_dict()


def test_images_after_the_last_tool_message_still_go() -> None:
    wire = sent(
        "http://localhost:8000/v1",
        [ChatMessage.assistant("", [CALL]), ChatMessage.tool_result(CALL, [PNG])],
    )
    assert [m["role"] for m in wire] == ["assistant", "tool", "user"]


def test_text_parts_in_a_tool_message_go_as_parts() -> None:
    (wire,) = sent("http://localhost:8000/v1", [ChatMessage.tool_result(CALL, [TextPart("a")])])
    assert wire["content"] == [{"type": "text", "text": "a"}]


def test_a_stored_history_with_images_and_a_developer_message_goes_as_it_was() -> None:
    history = [
        {"role": "developer", "content": "Answer in French."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.jpg", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {"role": "assistant", "content": "Un chat.", "refusal": None, "annotations": []},
    ]
    messages = [ChatMessage.from_dict(m) for m in history]
    wire = sent("https://api.openai.com/v1", messages)
    assert wire[:2] == history[:2]
    assert wire[2] == {"role": "assistant", "content": "Un chat."}  # annotations stay behind
    assert [m.to_dict() for m in messages][2] == {
        "role": "assistant",
        "content": "Un chat.",
        "annotations": [],
    }


def test_every_family_is_listed() -> None:
    assert set(FAMILIES) == {"openai", "deepseek", "openrouter", "moonshot", "local", "other"}
    assert not FAMILIES["openai"].takes_reasoning


def test_wire_messages_with_no_reasoning_leave_the_message_alone() -> None:
    message = ChatMessage.assistant("plain")
    for family in FAMILIES.values():
        for option in (None, True, False):
            assert wire_messages([message], family, option) == [message.to_dict()]


def test_provider_data_whose_key_is_not_valid_unicode_is_left_out() -> None:
    # A history written elsewhere by json.dumps can name a key with an escaped lone surrogate;
    # to_dict() makes the key valid, and the provider data it names is still not sent.
    # Two such keys (built with chr(): ruff reads lone surrogates in literals as U+FFFD).
    data = {"role": "user", "content": "hi", "x_" + chr(0xDCFF): 1, "x_" + chr(0xDCFE): 2}
    message = ChatMessage.from_dict(data)
    for family in FAMILIES.values():
        assert wire_messages([message], family) == [{"role": "user", "content": "hi"}]


async def test_the_loops_is_error_marks_are_not_sent() -> None:
    # The loop marks a tool message is_error where its text says otherwise (for Anthropic's
    # tool_result blocks); the chat-completions API has no such field and never gets it.
    @tool
    def grep() -> str:
        """Search the log."""
        return "Error: 3 lines matched in app.log"

    async def deny(context: ToolContext, call_next: CallNext) -> ToolCalled:
        if context.call.id == "call_b":
            return ToolCalled(context.call, "Denied by policy.", is_error=True)
        return await call_next(context)

    calls = [ToolCall("call_a", "grep", "{}"), ToolCall("call_b", "grep", "{}")]
    model = ScriptedChatClient([tool_calls_response(*calls), "done"])
    agent = FunctionInvokingChatClient(model, [grep], middleware=[deny])
    result = await run_to_completion(agent, [ChatMessage.user("go")])
    results = [m for m in result.messages if m.role is MessageRole.TOOL]
    assert [m.provider_data.get("is_error") for m in results] == [False, True]
    unmarked = [attrs.evolve(m, provider_data=None) for m in result.messages]
    for family in FAMILIES.values():
        assert wire_messages(result.messages, family) == wire_messages(unmarked, family)
        assert not any("is_error" in m for m in wire_messages(result.messages, family))


def test_the_sans_io_halves_import_without_httpx2() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['httpx2'] = None\n"
        "from trio_invoke.providers.openai import _decode, _wire\n"
        "from trio_invoke.providers import _sse\n"
        "assert 'httpx2' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n"
        "    from trio_invoke import OpenAIChatClient\n"
        "except ImportError as exc:\n"
        "    assert 'trio-invoke[openai] @ git+' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('imported without httpx2')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("name", "base_url"),
    [
        ("openrouter/claude-sonnet-4-reasoning_details-tool-call", "https://openrouter.ai/api/v1"),
        ("zai/glm-4.5-reasoning_content-tool-call", "https://api.z.ai/api/coding/paas/v4"),
        ("llamacpp/gpt-oss-20b-reasoning_content-tool-call", "http://localhost:8080/v1"),
        ("deepseek/deepseek-reasoner-thinking-tool-calls", "https://api.deepseek.com"),
    ],
)
def test_recorded_second_requests_are_what_we_send(name: str, base_url: str) -> None:
    """Each recorded request is one the provider accepted in a later round of a tool loop; its
    messages, read and sent again, come out as the provider took them (our assistant messages
    always carry a ``content``, which some of these requests leave out when empty)."""
    accepted = recorded_json(f"{name}.turn2.request.json")
    messages = [ChatMessage.from_dict(m) for m in accepted["messages"]]
    ours = sent(base_url, messages, send_reasoning=True)

    def normal(m: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in m.items() if not (k == "content" and v in ("", None))}

    assert [normal(m) for m in ours] == [normal(m) for m in accepted["messages"]]


def test_an_anthropic_reasoning_detail_cut_short_before_its_signature_is_not_sent() -> None:
    # OpenRouter streams an Anthropic model's thinking as reasoning.text pieces and its
    # signature last; a run cancelled in between keeps an unsigned item, which OpenRouter
    # passes on and Anthropic refuses (400: Invalid signature in thinking block) in every
    # later request of the conversation. Signed items, and other models' unsigned ones, go.
    unsigned = {"type": "reasoning.text", "text": "The user", "format": "anthropic-claude-v1"}
    signed = {**unsigned, "text": "Done.", "signature": "EqQB==", "index": 1}
    glm = {"type": "reasoning.text", "text": "GLM thinks", "format": "unknown", "index": 0}
    cut = ChatMessage(
        MessageRole.ASSISTANT,
        "",
        reasoning="The user",
        reasoning_field="reasoning",
        provider_data={"reasoning_details": [unsigned]},
    )
    whole = attrs.evolve(cut, provider_data={"reasoning_details": [signed, glm]})
    family = FAMILIES["openrouter"]
    [sent_cut, sent_whole] = wire_messages([cut, whole], family)
    assert "reasoning_details" not in sent_cut
    assert sent_cut["reasoning"] == "The user"
    assert sent_whole["reasoning_details"] == [signed, glm]
    assert cut.to_dict()["reasoning_details"] == [unsigned]  # the transcript keeps it


def test_the_recorded_openrouter_stream_cut_anywhere_sends_back_no_unsigned_claude_item() -> None:
    raw = recorded("openrouter/claude-sonnet-4-reasoning_details-tool-call.sse")
    for cut in range(0, len(raw) + 1, 7):
        parser, decoder, accumulator = SSEParser(), ChunkDecoder(), ToolCallAccumulator()
        for one in parser.feed(raw[:cut]):
            for update in decoder.event(one):
                accumulator.add(update)
        message = accumulator.message(accumulator.completed())
        if message is None:
            continue
        [sent] = wire_messages([message], FAMILIES["openrouter"])
        details = sent.get("reasoning_details", [])
        assert all(d.get("signature") for d in details), cut
