"""Every program in examples/ runs: offline as shipped, and with --base-url against a model
server on loopback (tests/loopback_model.py), each as a real process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio
import trio.testing
from loopback_model import loopback_anthropic_model, loopback_model

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

EXPECTED = {
    "quickstart.py": [
        '[get_weather({"city": "Paris"}) -> Sunny and 21 °C in Paris]',
        "It is sunny and 21 °C in Paris.",
        "[finish: stop]",
        "4 messages in the conversation",
    ],
    "parallel_fanout.py": [
        "concurrent (the default):",
        "  batch of 5 calls: 50",  # about 500 ms: the slowest call
        "sequential:",
        "  batch of 5 calls: 16",  # about 1,600 ms: the sum
    ],
    "approval_two_processes.py": [
        "[ask] finish: awaiting_approval; stored 1 request(s)",
        "[answer] tool: sent 10 EUR to Bob",
        "[answer] nothing to answer: the stored requests were answered already",
        '[tamper] the stored call now reads {"amount": 10000, "to": "Eve"}',
        "[answer] refused, nothing ran: approval response for tool call 'call_1' does not match",
    ],
    "cancellation.py": [
        "quick_lookup: 3 index entries about trio",
        "deep_research: Error: cancelled",
        "[cancelled after 0.3 s]",
        "3 messages kept; the transcript is valid",
        "answer: From the index",
    ],
    "testing_your_agent.py": ["3 passed, 1 skipped"],
    "custom_chat_client.py": [
        "  [model call 1: 1 messages, 1 tools offered]",
        "  [model call 1 finished: tool_calls, Usage(input_tokens=10, output_tokens=9)]",
        "answer: It is ",
        "finish: stop, 2 model calls",
    ],
}
ARGS = {"cancellation.py": ["--deadline", "0.3"], "mcp_agent.py": ["--yes"]}
SUPPORT = {"mcp_notes_server.py"}  # not a program of its own: mcp_agent.py starts it
EXPECTED["mcp_agent.py"] = [
    "tools: nb_notes_add (notes.add), nb_notes_search (notes.search)",
    "assistant: Done. The note 'trio' says: Structured concurrency for Python.",
]


def test_every_example_is_listed_here() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted([*EXPECTED, *SUPPORT])


def check(output: str, expected: list[str]) -> None:
    lines = output.splitlines()
    for piece in expected:
        assert any(line.startswith(piece) for line in lines), (piece, output)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_offline(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *ARGS.get(name, [])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    check(done.stdout, EXPECTED[name])
    assert done.stderr == ""
    # Nothing left behind but Hypothesis's example database.
    assert [p.name for p in tmp_path.iterdir() if p.name != ".hypothesis"] == []


LIVE_EXPECTED = {
    "quickstart.py": [
        "[get_weather(",
        "The tools said: Sunny and 21 °C in Paris",
        "[finish: stop]",
    ],
    "parallel_fanout.py": ['  {"symbol": "Paris"}', "  batch of 1 calls:"],
    "approval_two_processes.py": [
        "[ask] finish: awaiting_approval; stored 1 request(s)",
        "[answer] tool: sent 1 EUR to Paris",
        "[answer] assistant: The tools said: sent 1 EUR to Paris",
        "[answer] nothing to answer: the stored requests were answered already",
        "[answer] refused, nothing ran",
    ],
    "cancellation.py": [
        "deep_research: Error: cancelled",
        "answer: Hello from the loopback model.",
    ],
    "testing_your_agent.py": ["4 passed"],
    "custom_chat_client.py": ["  [model call 2 finished: stop", "answer: The tools said: "],
    "mcp_agent.py": ["  nb_notes_add ", "assistant: The tools said: "],
}


@pytest.mark.parametrize("name", sorted(LIVE_EXPECTED))
async def test_example_runs_against_a_live_server(name: str, tmp_path: Path) -> None:
    server = loopback_model()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        live = ["--base-url", server.url, "--model", "loopback-model"]
        with trio.fail_after(120):
            done = await trio.run_process(
                [sys.executable, str(EXAMPLES / name), *ARGS.get(name, []), *live],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=tmp_path,
            )
        nursery.cancel_scope.cancel()
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    check(out, LIVE_EXPECTED[name])
    assert server.requests, "the example never asked the server"
    assert {r.json["model"] for r in server.requests} == {"loopback-model"}


async def test_the_quickstart_against_anthropics_messages_api(tmp_path: Path) -> None:
    server = loopback_anthropic_model()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        live = ["--provider", "anthropic", "--base-url", server.root, "--model", "claude-x"]
        with trio.fail_after(120):
            done = await trio.run_process(
                [sys.executable, str(EXAMPLES / "quickstart.py"), *live],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=tmp_path,
                env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-loopback"},
            )
        nursery.cancel_scope.cancel()
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    check(out, LIVE_EXPECTED["quickstart.py"])
    assert [r.path for r in server.requests] == ["/v1/messages"] * 2
    assert server.requests[0].headers["x-api-key"] == "sk-ant-loopback"


def test_every_example_takes_base_url_and_model() -> None:
    """The examples' convention: offline as shipped, live with --base-url URL --model NAME."""
    for name in EXPECTED:
        text = (EXAMPLES / name).read_text(encoding="utf-8")
        assert '"--base-url"' in text, name
        assert '"--model"' in text, name


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name[:-3]}", EXAMPLES / name)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("sequential", "wall"), [(False, 500), (True, 1600)])
async def test_fanout_wall_time_is_the_slowest_call_or_the_sum(
    sequential: bool,
    wall: int,
    autojump_clock: trio.testing.MockClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fanout = load("parallel_fanout.py")
    await fanout.run_batch(fanout.scripted_model(), sequential=sequential)
    assert f"batch of 5 calls: {wall} ms wall, 1600 ms summed" in capsys.readouterr().out
