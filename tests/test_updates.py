"""The updates as values; approval requests stored as JSON and rebuilt in another process."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_invoke import (
    ApprovalError,
    ChatMessage,
    FunctionInvokingChatClient,
    RunOptions,
    ScriptedChatClient,
    ToolApprovalRequest,
    ToolCall,
    tool,
)
from trio_invoke.testing import run_to_completion, tool_call_updates

calls = st.builds(ToolCall, st.text(min_size=1), st.text(min_size=1), st.text())


@given(calls)
def test_a_request_survives_json(call: ToolCall) -> None:
    request = ToolApprovalRequest(call)
    rebuilt = ToolApprovalRequest.from_dict(json.loads(json.dumps(request.to_dict())))
    assert rebuilt == request
    assert rebuilt.digest == request.digest
    assert rebuilt.approve() == request.approve()


@given(calls, calls)
def test_from_dict_keeps_the_stored_digest_whatever_the_call_says(
    shown: ToolCall, edited: ToolCall
) -> None:
    stored = ToolApprovalRequest(shown).to_dict()
    stored["call"] = edited.to_dict()
    rebuilt = ToolApprovalRequest.from_dict(stored)
    assert rebuilt.call == edited
    assert rebuilt.digest == ToolApprovalRequest(shown).digest  # never recomputed


def test_to_dict_is_plain_json_data() -> None:
    request = ToolApprovalRequest(ToolCall("c1", "transfer", '{"amount": 10}'))
    assert request.to_dict() == {
        "call": {
            "id": "c1",
            "type": "function",
            "function": {"name": "transfer", "arguments": '{"amount": 10}'},
        },
        "digest": request.digest,
    }


GOOD: dict[str, Any] = ToolApprovalRequest(ToolCall("c1", "t", "{}")).to_dict()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([GOOD], "must be a mapping"),
        ({"digest": GOOD["digest"]}, "'call' must be a tool call object"),
        ({"call": "c1", "digest": GOOD["digest"]}, "'call' must be a tool call object"),
        ({"call": GOOD["call"]}, "'digest' must be the 64 hexadecimal digits"),
        ({"call": GOOD["call"], "digest": ""}, "'digest' must be"),
        ({"call": GOOD["call"], "digest": GOOD["digest"].upper()}, "'digest' must be"),
        ({"call": GOOD["call"], "digest": GOOD["digest"][:-1]}, "'digest' must be"),
        ({"call": GOOD["call"], "digest": 7}, "'digest' must be"),
        ({"call": {"id": "c1"}, "digest": GOOD["digest"]}, "'function' object"),
    ],
)
def test_from_dict_refuses_what_to_dict_did_not_write(data: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ToolApprovalRequest.from_dict(data)


done: list[dict[str, Any]] = []


@tool(requires_approval=True)
def transfer(amount: int, to: str) -> str:
    """Send money."""
    done.append({"amount": amount, "to": to})
    return f"sent {amount} to {to}"


def agent(*responses: Any) -> FunctionInvokingChatClient:
    return FunctionInvokingChatClient(ScriptedChatClient(list(responses)), [transfer])


async def stored_pause() -> str:
    """Run until the approval pause; return what a first process would store, as JSON text."""
    conversation = [ChatMessage.user("Pay bob 10.")]
    call = tool_call_updates("t1", "transfer", '{"amount": 10, "to": "bob"}')
    result = await run_to_completion(agent(call), conversation)
    requests = [u for u in result.updates if isinstance(u, ToolApprovalRequest)]
    return json.dumps(
        {
            "conversation": [m.to_dict() for m in [*conversation, *result.messages]],
            "requests": [r.to_dict() for r in requests],
        }
    )


def load(text: str) -> tuple[list[ChatMessage], list[ToolApprovalRequest]]:
    state = json.loads(text)
    conversation = [ChatMessage.from_dict(m) for m in state["conversation"]]
    return conversation, [ToolApprovalRequest.from_dict(r) for r in state["requests"]]


async def test_approved_from_stored_requests_runs() -> None:
    done.clear()
    conversation, requests = load(await stored_pause())
    options = RunOptions(tool_approval_responses=[r.approve() for r in requests])
    result = await run_to_completion(agent("Sent."), conversation, options)
    assert done == [{"amount": 10, "to": "bob"}]
    assert result.messages[-1] == ChatMessage.assistant("Sent.")


@pytest.mark.parametrize(
    "forged",
    [
        '{"amount": 10000, "to": "bob"}',
        '{"amount": 10, "to": "mallory"}',
        '{"to":"bob","amount":10}',
    ],
)
@pytest.mark.parametrize("also_edit_the_request", [False, True])
async def test_an_edited_stored_conversation_runs_nothing(
    forged: str, also_edit_the_request: bool
) -> None:
    done.clear()
    state = json.loads(await stored_pause())
    state["conversation"][-1]["tool_calls"][0]["function"]["arguments"] = forged
    if also_edit_the_request:  # the request shown again says the same as the conversation
        state["requests"][0]["call"]["function"]["arguments"] = forged
    conversation, requests = load(json.dumps(state))
    options = RunOptions(tool_approval_responses=[r.approve() for r in requests])
    with pytest.raises(ApprovalError, match="changed after the approval request"):
        await run_to_completion(agent("Sent."), conversation, options)
    assert done == []


async def test_rejected_from_stored_requests_runs_nothing() -> None:
    done.clear()
    conversation, requests = load(await stored_pause())
    options = RunOptions(tool_approval_responses=[r.reject("no") for r in requests])
    result = await run_to_completion(agent("Not sent."), conversation, options)
    assert done == []
    assert "rejected" in result.messages[0].content


@pytest.mark.parametrize(
    ("call", "shown"),
    [(5, "5"), (None, "None"), ({"id": "c1", "name": "x", "arguments": "{}"}, "{'id': 'c1'")],
)
@pytest.mark.parametrize("digest", [None, "ab"])
def test_an_approval_request_for_something_that_is_not_a_call_is_named(
    call: Any, shown: str, digest: str | None
) -> None:
    extra = {} if digest is None else {"digest": digest}
    with pytest.raises(TypeError, match=r"^ToolApprovalRequest call must be a ToolCall, got "):
        ToolApprovalRequest(call, **extra)
    with pytest.raises(TypeError, match=re.escape(shown)):
        ToolApprovalRequest(call, **extra)
