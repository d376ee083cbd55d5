"""Text that is not valid Unicode: the wire rule, the digest rule, and everywhere they apply."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from trio_invoke import (
    ApprovalError,
    ChatMessage,
    FinishReason,
    FunctionInvokingChatClient,
    ImagePart,
    RawPart,
    RunOptions,
    ScriptedChatClient,
    TextPart,
    ToolApprovalRequest,
    ToolCall,
    ToolCalled,
    tool,
)
from trio_invoke._approval import call_digest
from trio_invoke._text import digest_bytes, wire_text
from trio_invoke.testing import assert_transcript_valid, run_to_completion, tool_calls_response

surrogates = st.integers(0xD800, 0xDFFF).map(chr)
any_text = st.text(st.characters() | surrogates)
"""Any ``str`` at all, lone surrogates and pairs held as two code points included."""
valid_text = st.text()  # Hypothesis leaves out surrogates by default


def strictly_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- the two rules ---------------------------------------------------------------------------


@given(any_text)
@example("\udcff")
@example("\ud83d\ude00")
@example("\ude00\ud83d")
@example("a\ud800\ud800b")
def test_wire_text_is_always_valid_and_idempotent(text: str) -> None:
    mended = wire_text(text)
    assert strictly_utf8(mended)
    assert wire_text(mended) == mended
    # Every code point that is not a surrogate survives, in order.
    assert [c for c in mended if c != "\ufffd"] == [
        c
        for c in text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        if c != "\ufffd"
    ]


@given(valid_text)
def test_wire_text_leaves_valid_text_alone(text: str) -> None:
    assert wire_text(text) is text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\udcff", "\ufffd"),  # os.fsdecode(b"\xff")
        ("report-\udce9t\udce9.txt", "report-\ufffdt\ufffd.txt"),  # latin-1 name, fsdecoded
        ("\ud83d\ude00", "😀"),  # a pair split over two chunks, then joined by the loop
        ("x\ud83d", "x\ufffd"),  # half a pair
        ("\ude00\ud83d", "\ufffd\ufffd"),  # the halves in the wrong order
        ("\ud800\ud800\udc00", "\ufffd\U00010000"),
    ],
)
def test_wire_text_examples(text: str, expected: str) -> None:
    assert wire_text(text) == expected


@given(any_text, any_text)
@example("\ud800", "\ud801")
@example("\ud800", "\ufffd")
@example("\udcff", "")
def test_digests_tell_different_texts_apart(a: str, b: str) -> None:
    same_text = wire_text(a) == wire_text(b) and digest_bytes(a) == digest_bytes(b)
    if digest_bytes(a) == digest_bytes(b):
        # Only a pair held as two code points and its character hash alike: they are one text.
        assert a.encode("utf-16-le", "surrogatepass") == b.encode("utf-16-le", "surrogatepass")
        assert same_text


@given(valid_text)
def test_digest_of_valid_text_is_its_utf8(text: str) -> None:
    assert digest_bytes(text) == text.encode("utf-8")


def test_digest_of_a_pair_is_the_digest_of_its_character() -> None:
    assert digest_bytes("\ud83d\ude00") == "😀".encode()


# --- the approval digest -----------------------------------------------------------------------


@given(any_text, any_text, any_text)
def test_call_digest_is_defined_for_any_call(call_id: str, name: str, arguments: str) -> None:
    call = ToolCall(call_id, name, arguments)
    digest = call_digest(call)
    assert len(digest) == 64
    assert digest == call_digest(ToolCall(call_id, name, arguments))  # stable


def test_call_digest_is_stable_across_versions_and_processes() -> None:
    # Valid text: exactly the digest this library always made.
    call = ToolCall("c1", "transfer", '{"to": "Zoë", "amount": 5}')
    text = json.dumps([call.id, call.name, call.arguments], ensure_ascii=False)
    assert call_digest(call) == hashlib.sha256(text.encode()).hexdigest()
    # Invalid text: the lone surrogate U+DCFF hashed as its own three bytes, ED B3 BF.
    odd = ToolCall("c1", "rm", '{"path": "/tmp/\udcff"}')
    spelled_out = b'["c1", "rm", "{\\"path\\": \\"/tmp/\xed\xb3\xbf\\"}"]'
    assert call_digest(odd) == hashlib.sha256(spelled_out).hexdigest()


@pytest.mark.parametrize(
    ("a", "b"),
    [  # built with chr(): ruff reads lone surrogates in literals as U+FFFD, alike
        ("/tmp/" + chr(0xDCFF), "/tmp/" + chr(0xDCFE)),
        ("/tmp/" + chr(0xDCFF), "/tmp/" + chr(0xFFFD)),
        ("/tmp/" + chr(0xDCFF), "/tmp/"),
        (chr(0xD800), chr(0xDC00)),
    ],
)
def test_call_digest_tells_invalid_arguments_apart(a: str, b: str) -> None:
    def call(path: str) -> ToolCall:
        return ToolCall("c1", "rm", json.dumps({"path": path}, ensure_ascii=False))

    assert call_digest(call(a)) != call_digest(call(b))


# --- to_dict ----------------------------------------------------------------------------------


@given(any_text, any_text, any_text, any_text)
def test_to_dict_always_encodes_as_utf8(content: str, call_id: str, name: str, args: str) -> None:
    call = ToolCall(call_id, name, args)
    messages = [
        ChatMessage.user(content),
        ChatMessage.assistant(content, [call]),
        ChatMessage.tool_result(call, content),
    ]
    for message in messages:
        data = message.to_dict()
        raw = json.dumps(data, ensure_ascii=False).encode("utf-8")  # never UnicodeEncodeError
        restored = ChatMessage.from_dict(json.loads(raw))
        assert restored.content == wire_text(message.content)
        assert restored.to_dict() == data  # what is stored is stable from then on


@given(valid_text, valid_text)
def test_to_dict_round_trip_stays_exact_for_valid_text(content: str, args: str) -> None:
    message = ChatMessage.assistant(content, [ToolCall("c1", "t", args)])
    assert ChatMessage.from_dict(message.to_dict()) == message


@given(any_text, any_text, any_text, any_text)
@example("\udcff", "lo\udcffw", "\ud800", "\ud83d")
def test_content_parts_to_dict_always_encode_as_utf8(
    text: str, url: str, detail: str, raw: str
) -> None:
    # A tool may return an image by URL built from a file name (os.fsdecode gives lone
    # surrogates for names that are not UTF-8): the stored message must still encode.
    parts = [
        TextPart(text, provider_data={"k": raw}),
        ImagePart(url=f"https://example.com/{url}", detail=detail),
        ImagePart(data="AAAA", media_type="image/png", detail=detail),
        RawPart({"type": "input_audio", raw: [raw]}),
    ]
    for message in (
        ChatMessage.user(parts),
        ChatMessage.tool_result(ToolCall("c", "t", ""), parts),
    ):
        data = message.to_dict()
        raw_json = json.dumps(data, ensure_ascii=False).encode("utf-8")  # never UnicodeEncodeError
        restored = ChatMessage.from_dict(json.loads(raw_json))
        assert restored.to_dict() == data  # what is stored is stable from then on


def test_to_dict_replaces_lone_surrogates_and_joins_pairs() -> None:
    call = ToolCall("c\udcff", "t", '{"p": "\ud83d\ude00\udcff"}')
    assert ChatMessage.assistant("a\ud800", [call]).to_dict() == {
        "role": "assistant",
        "content": "a\ufffd",
        "tool_calls": [
            {
                "id": "c\ufffd",
                "type": "function",
                "function": {"name": "t", "arguments": '{"p": "😀\ufffd"}'},
            }
        ],
    }


# --- through the loop --------------------------------------------------------------------------


NAMES = [os.fsdecode(b"caf\xe9.txt"), os.fsdecode(b"\xff\xfe"), "plain.txt", "😀.txt"]


@tool
async def list_files() -> list[str]:
    """List a directory whose names are not all UTF-8."""
    return NAMES


@tool
async def shout(text: str) -> str:
    """Echo in capitals."""
    return text.upper()


@tool(requires_approval=True)
async def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path!r}"


@pytest.mark.parametrize(
    "arguments",
    [
        '{"path": "/tmp/\udcff"}',  # a raw lone surrogate in the arguments text
        '{"path": "/tmp/\\udcff"}',  # a JSON escape of one (ASCII text; json.loads makes it)
        '{"path": "\ud83d\ude00"}',  # a pair held as two code points
        '{"path": "/tmp/\ud800\udbff"}',
    ],
)
async def test_approval_of_a_call_with_invalid_text_is_computed_and_resumes(
    arguments: str,
) -> None:
    call = ToolCall("c1", "delete", arguments)
    model = ScriptedChatClient([tool_calls_response(call), "done"])
    client = FunctionInvokingChatClient(model, [delete])
    user = [ChatMessage.user("clean up")]
    with trio.fail_after(10):
        paused = await run_to_completion(client, user)
        (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
        assert request.digest == call_digest(call)
        conversation = [*user, *paused.messages]
        resumed = await run_to_completion(
            client, conversation, RunOptions(tool_approval_responses=[request.approve()])
        )
    (called,) = [u for u in resumed.updates if isinstance(u, ToolCalled)]
    assert not called.is_error
    assert called.result == f"deleted {json.loads(arguments)['path']!r}"
    assert_transcript_valid([*conversation, *resumed.messages])
    for message in [*conversation, *resumed.messages]:
        json.dumps(message.to_dict(), ensure_ascii=False).encode()


async def test_a_stored_call_whose_lone_surrogate_was_replaced_no_longer_matches() -> None:
    # The call the stored conversation holds is not the call the user approved (the tool would
    # get a different path): refused, nothing runs. A split pair, stored, still matches.
    for arguments, matches in [
        ('{"path": "/tmp/\udcff"}', False),
        ('{"path": "\ud83d\ude00"}', True),
    ]:
        call = ToolCall("c1", "delete", arguments)
        client = FunctionInvokingChatClient(
            ScriptedChatClient([tool_calls_response(call), "done"]), [delete]
        )
        user = [ChatMessage.user("clean up")]
        paused = await run_to_completion(client, user)
        (request,) = [u for u in paused.updates if isinstance(u, ToolApprovalRequest)]
        stored = json.dumps([m.to_dict() for m in [*user, *paused.messages]], ensure_ascii=False)
        conversation = [ChatMessage.from_dict(m) for m in json.loads(stored.encode())]
        options = RunOptions(tool_approval_responses=[request.approve()])
        if matches:
            await run_to_completion(client, conversation, options)
        else:
            with pytest.raises(ApprovalError, match="changed after the approval request"):
                await run_to_completion(client, conversation, options)


async def test_tool_results_and_text_with_invalid_unicode_keep_the_conversation_alive() -> None:
    calls = tool_calls_response(
        ToolCall("c1", "list_files", ""), ToolCall("c2", "shout", '{"text": "h\udcffi"}')
    )
    model = ScriptedChatClient([calls, "Here: caf\udce9.txt \ud83d", "bye"])
    client = FunctionInvokingChatClient(model, [list_files, shout])
    user = [ChatMessage.user("ls")]
    first = await run_to_completion(client, user)
    results = {u.call.id: u for u in first.updates if isinstance(u, ToolCalled)}
    assert not results["c1"].is_error
    assert not results["c2"].is_error
    assert json.loads(results["c1"].result) == NAMES  # the tool's own text, unchanged
    conversation = [*user, *first.messages, ChatMessage.user("again")]
    second = await run_to_completion(client, conversation)
    assert second.updates[-1].finish_reason is FinishReason.STOP  # type: ignore[union-attr]
    stored = [m.to_dict() for m in conversation]
    assert "\ufffd" in json.dumps(stored, ensure_ascii=False)
    json.dumps(stored, ensure_ascii=False).encode("utf-8")


def test_what_os_listdir_gives_is_what_these_tests_use(tmp_path: Any) -> None:
    if os.name != "posix":  # pragma: no cover
        pytest.skip("bytes file names are a POSIX thing")
    (tmp_path / os.fsdecode(b"caf\xe9.txt")).touch()
    (name,) = os.listdir(tmp_path)
    assert name == NAMES[0]
    assert not strictly_utf8(name)
    assert wire_text(name) == "caf\ufffd.txt"
