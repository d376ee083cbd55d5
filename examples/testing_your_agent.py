"""Testing your agent with pytest and Hypothesis: the model is a function of the conversation
(no network), and properties hold for any arguments the model may send and any script.

    python examples/testing_your_agent.py          # runs these tests with pytest
    pytest examples/testing_your_agent.py

Needs pytest and the extra trio-invoke[testing] (Hypothesis). With --base-url and --model, one
more test runs the agent against that live server and checks the transcript it leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import pytest
import trio
from hypothesis import given, settings

from trio_invoke import (
    ChatMessage,
    FunctionInvokingChatClient,
    MessageRole,
    RunOptions,
    ScriptedChatClient,
    Tool,
    ToolCall,
    tool,
)
from trio_invoke.testing import (
    FunctionChatClient,
    FunctionResponse,
    assert_transcript_valid,
    run_to_completion,
    scripted_rounds,
    tool_arguments,
    tool_calls_response,
)


# -- the agent under test ----------------------------------------------------------------------
@tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text.
    """
    return len(text.split())


@tool
async def shout(text: str) -> str:
    """The text in capitals.

    Args:
        text: The text.
    """
    return text.upper()


TOOLS: list[Tool] = [word_count, shout]


def make_agent(model: Any) -> FunctionInvokingChatClient:
    return FunctionInvokingChatClient(model, TOOLS, max_rounds=4)


# -- a model that decides from the conversation ------------------------------------------------
def counting_model(messages: tuple[ChatMessage, ...], options: RunOptions) -> FunctionResponse:
    last = messages[-1]
    if last.role is MessageRole.TOOL:
        return "Sorry, that failed." if last.text.startswith("Error") else f"{last.text} words."
    return tool_calls_response(ToolCall("call_1", "word_count", json.dumps({"text": last.text})))


def test_the_agent_answers_from_the_tool() -> None:
    agent = make_agent(FunctionChatClient(counting_model))
    result = trio.run(run_to_completion, agent, [ChatMessage.user("three little words")])
    assert result.messages[-1] == ChatMessage.assistant("3 words.")
    assert_transcript_valid(result.messages)


@given(tool_arguments())  # any JSON object a model may send, valid or not
def test_any_arguments_get_exactly_one_result(arguments: dict[str, Any]) -> None:
    def model(messages: tuple[ChatMessage, ...], options: RunOptions) -> FunctionResponse:
        if messages[-1].role is MessageRole.TOOL:
            return "ok"
        return tool_calls_response(ToolCall("c1", "word_count", json.dumps(arguments)))

    conversation = [ChatMessage.user("count")]
    result = trio.run(run_to_completion, make_agent(FunctionChatClient(model)), conversation)
    assert_transcript_valid([*conversation, *result.messages])
    assert [m.role for m in result.messages].count(MessageRole.TOOL) == 1


@settings(max_examples=50)
@given(scripted_rounds(TOOLS))  # whole scripts: broken arguments, unknown tools, text, usage
def test_every_script_leaves_a_valid_transcript(script: list[Any]) -> None:
    conversation = [ChatMessage.user("go")]
    result = trio.run(run_to_completion, make_agent(ScriptedChatClient(script)), conversation)
    assert_transcript_valid([*conversation, *result.messages])


LIVE = os.environ.get("EXAMPLE_BASE_URL")


@pytest.mark.skipif(not LIVE, reason="needs --base-url (a live model server)")
def test_a_live_model_leaves_a_valid_transcript() -> None:
    from trio_invoke import OpenAIChatClient

    model = OpenAIChatClient(os.environ["EXAMPLE_MODEL"], base_url=LIVE)
    conversation = [ChatMessage.user("How many words are in 'the quick brown fox'?")]
    result = trio.run(run_to_completion, make_agent(model), conversation)
    assert_transcript_valid([*conversation, *result.messages])
    assert result.messages[-1].role is MessageRole.ASSISTANT


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run these tests with pytest.")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint, for the live test")
    parser.add_argument("--model", default="llama3.2", help="the model at --base-url")
    args, pytest_args = parser.parse_known_args()
    if args.base_url:
        os.environ["EXAMPLE_BASE_URL"] = args.base_url
        os.environ["EXAMPLE_MODEL"] = args.model
    pytest_command = [
        sys.executable,
        "-m",
        "pytest",
        __file__,
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
    ]
    sys.exit(subprocess.run([*pytest_command, *pytest_args], check=False).returncode)
