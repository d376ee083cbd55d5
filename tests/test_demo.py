"""The demo: ``python -m trio_invoke`` on the embedded model."""

from __future__ import annotations

import functools
import io
import re
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from trio_invoke import ChatMessage, ReasoningDelta, TextDelta, _demo
from trio_invoke.testing import assert_transcript_valid


@pytest.fixture(autouse=True)
def note_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    note = tmp_path / "note.txt"
    monkeypatch.setattr(_demo, "NOTE_PATH", str(note))
    return note


@pytest.fixture
def demo_clock(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    # Virtual time for the tools' latency; it jumps only after 0.1 s of real idleness, since
    # the sync tools and the prompt run in worker threads, which virtual time does not wait for.
    mock_clock.autojump_threshold = 0.1
    return mock_clock


@pytest.mark.parametrize("flag", ["--yes", "--no"])
async def test_demo_conversation(
    flag: str, note_in_tmp: Path, demo_clock: trio.testing.MockClock
) -> None:
    out = io.StringIO()
    with trio.fail_after(60):
        messages = await _demo.amain(_demo.parse_args([flag]), _demo.Printer(out), delay=0)
    assert_transcript_valid(messages)
    text = out.getvalue()
    assert "<- [ok] calculate" in text
    assert "395" in text
    assert "ZeroDivisionError" in text  # an error result, not a crash
    assert "needs your approval" in text
    assert "[finish: awaiting_approval, 480 tokens]" in text
    assert "FinishReason" not in text
    assert "ignores your prompt" not in text
    assert text.rstrip().endswith("[finish: stop, 330 tokens]")
    if flag == "--yes":
        assert note_in_tmp.read_text() == "17 * 23 + 4 = 395\n"
        assert "approved: call_5" in text
    else:
        assert not note_in_tmp.exists()
        assert "rejected this call: the user said no" in messages[-2].content


BATCH = re.compile(
    r"== batch of (\d+) calls: ([\d,]+) ms wall, ([\d,]+) ms summed, ([\d.]+)x faster"
)


async def test_a_line_per_batch_shows_the_calls_overlap(
    note_in_tmp: Path, demo_clock: trio.testing.MockClock
) -> None:
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args(["--yes"]), _demo.Printer(out), delay=0)
    lines = out.getvalue().splitlines()
    batches = [m for m in map(BATCH.search, lines) if m]
    assert len(batches) == 1
    calls, wall, summed = (int(g.replace(",", "")) for g in batches[0].groups()[:3])
    assert calls == 4
    # The four calls wait 250, 250, 150 and 400 ms (virtual time): together, the longest.
    assert 400 <= wall < summed
    assert summed >= 250 + 250 + 150 + 400
    first_result = next(i for i, line in enumerate(lines) if "<- [" in line)
    assert lines.index(batches[0].string) == first_result + 8  # after the 4 results
    assert "== 1 call: 300 ms" in lines[lines.index("  approved: call_5") + 3]


async def test_tools_take_the_time_of_a_remote_service(
    demo_clock: trio.testing.MockClock,
) -> None:
    for tool in _demo.TOOLS:
        assert 0.1 <= _demo.LATENCY[tool.name] <= 0.5
        start = trio.current_time()
        if tool.name == "calculate":
            assert await tool.execute({"expression": "1 + 1"}) == 2
            assert trio.current_time() - start == pytest.approx(_demo.LATENCY["calculate"])
    by_name = {t.name: t for t in _demo.TOOLS}
    assert by_name["save_note"].requires_approval
    assert not by_name["calculate"].requires_approval
    assert by_name["calculate"].parameters == _demo.calculate.parameters
    assert by_name["clock"].description == _demo.clock.description


async def test_answer_at_the_terminal(
    monkeypatch: pytest.MonkeyPatch, note_in_tmp: Path, demo_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args([]), _demo.Printer(out), delay=0)
    assert note_in_tmp.exists()
    # Read from a pipe, the answer is written after the question; what follows has its line.
    assert "? [y/N] y\n  approved: call_5\n" in out.getvalue()


@pytest.mark.parametrize("answer", ["n\n", "maybe\n", "\n", "no"])
async def test_anything_but_yes_rejects(
    answer: str,
    monkeypatch: pytest.MonkeyPatch,
    note_in_tmp: Path,
    demo_clock: trio.testing.MockClock,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(answer))
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args([]), _demo.Printer(out), delay=0)
    assert not note_in_tmp.exists()
    assert f"? [y/N] {answer.strip()}\n  rejected: call_5\n" in out.getvalue()


async def test_end_of_input_rejects(
    monkeypatch: pytest.MonkeyPatch, note_in_tmp: Path, demo_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args([]), _demo.Printer(out), delay=0)
    assert not note_in_tmp.exists()
    assert "? [y/N] (end of input: no)\n  rejected: call_5\n" in out.getvalue()


async def test_no_standard_input_at_all_rejects(
    monkeypatch: pytest.MonkeyPatch, note_in_tmp: Path, demo_clock: trio.testing.MockClock
) -> None:
    # Started with stdin closed (`<&-`), or by pythonw: Python's sys.stdin is None.
    monkeypatch.setattr("sys.stdin", None)
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args([]), _demo.Printer(out), delay=0)
    assert not note_in_tmp.exists()
    assert "? [y/N] (end of input: no)\n  rejected: call_5\n" in out.getvalue()


async def test_a_prompt_given_to_the_scripted_model_is_said_to_be_ignored(
    demo_clock: trio.testing.MockClock,
) -> None:
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args(["--no", "What is 2 + 2?"]), _demo.Printer(out), delay=0)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("note: the scripted model ignores your prompt")
    assert "user: What is 2 + 2?" in lines


def _demo_process(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trio_invoke", *argv],
        stdin=subprocess.PIPE,  # stays open: the prompt waits
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent,
        # A shell's background job inherits SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler: give the demo the default disposition, as a terminal does.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 -- one call
    )


@pytest.mark.parametrize(
    "interrupt_after",
    ["? [y/N] ", "  -> list_directory(", "assistant:"],
    ids=["at the approval prompt", "while the tools run", "while the model streams"],
)
def test_ctrl_c_anywhere_exits_130_with_one_line(interrupt_after: str) -> None:
    # A real process and a real SIGINT: the demo reads stdin in a thread, and Ctrl-C at the
    # prompt must not wait for Enter.
    with _demo_process() as process:
        assert process.stdout is not None
        assert process.stderr is not None
        seen = ""
        try:
            while interrupt_after not in seen:
                char = process.stdout.read(1)
                assert char, f"the demo ended before {interrupt_after!r}: {seen}"
                seen += char
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)  # stdin stays open: the prompt gets no end of input
            out, err = process.stdout.read(), process.stderr.read()
        finally:
            process.kill()
    assert process.returncode == 130, err
    assert err == "interrupted\n"
    assert "Traceback" not in out


def test_python_dash_m_runs_the_demo(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_invoke", "--no"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "[finish: stop" in done.stdout


def test_a_reader_that_goes_away_ends_the_demo_quietly(tmp_path: Path) -> None:
    # `python -m trio_invoke | head -1`: the pipe closes while the demo still writes.
    with subprocess.Popen(
        [sys.executable, "-m", "trio_invoke", "--no"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        try:
            assert process.stdout.readline().startswith("model: ")
            process.stdout.close()
            process.wait(timeout=60)
            err = process.stderr.read()
        finally:
            process.kill()
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
    assert err == ""
    assert process.returncode == 1


def test_main_module_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    monkeypatch.setattr("sys.argv", ["trio_invoke", "--no"])
    monkeypatch.setattr(_demo, "scripted_model", lambda delay=0.0: _real_model(0.0))
    instant = tuple(attrs.evolve(tool, seconds=0) for tool in _demo.TOOLS)  # type: ignore[misc]
    monkeypatch.setattr(_demo, "TOOLS", instant)
    with pytest.raises(SystemExit) as info:
        runpy.run_module("trio_invoke", run_name="__main__")
    assert info.value.code == 0


_real_model = _demo.scripted_model


def test_a_missing_extra_is_one_line_naming_the_install_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if httpx were not installed: importing the client module fails.
    monkeypatch.setitem(sys.modules, "trio_invoke.providers.openai._client", None)
    code = _demo.main(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--no", "hi"])
    assert code == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("error: --base-url needs the extra trio-invoke[openai]")
    assert 'm pip install ".[openai]"' in err


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2 * (3 + 4)", 14), ("-2 ** 2", -4), ("7 // 2 % 3", 0), ("1/4", 0.25)],
)
def test_calculator(expression: str, value: float) -> None:
    assert _demo.evaluate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "2 ** 1000", "'a' * 3"])
def test_calculator_refuses_what_is_not_arithmetic(expression: str) -> None:
    with pytest.raises(ValueError, match=r"unsupported|not allowed"):
        _demo.evaluate(expression)


async def test_demo_against_a_live_openai_compatible_server(nursery: trio.Nursery) -> None:
    from sse_server import Reply, SSEServer
    from test_openai import ollama_chunk, sse

    call = {"index": 0, "id": "call_9", "type": "function",
            "function": {"name": "calculate", "arguments": '{"expression": "6 * 7"}'}}  # fmt: skip
    server = SSEServer(
        [
            Reply.error(503, b"Service Unavailable"),
            Reply([sse(ollama_chunk({"tool_calls": [call]}, "tool_calls"), "[DONE]")]),
            Reply([sse(ollama_chunk({"content": "It is 42."}, "stop"), "[DONE]")]),
        ]
    )
    await nursery.start(server.serve)
    out = io.StringIO()
    args = _demo.parse_args(["--base-url", server.url, "--model", "llama3.2", "--no", "6*7?"])
    with trio.fail_after(30):
        messages = await _demo.amain(args, _demo.Printer(out), delay=0)
    assert "model: llama3.2 at" in out.getvalue()
    assert "  retrying after HTTP 503, 1 of 2 (in " in out.getvalue()
    assert "<- [ok] calculate" in out.getvalue()
    assert messages[-1] == ChatMessage.assistant("It is 42.")
    assert [r.json["model"] for r in server.requests] == ["llama3.2"] * 3


async def test_demo_does_not_print_the_credentials_of_its_base_url(nursery: trio.Nursery) -> None:
    from sse_server import Reply, SSEServer
    from test_openai import ollama_chunk, sse

    server = SSEServer([Reply([sse(ollama_chunk({"content": "Hi."}, "stop"), "[DONE]")])])
    await nursery.start(server.serve)
    url = server.url.replace("http://", "http://me:s3cret@")
    out = io.StringIO()
    args = _demo.parse_args(["--base-url", url, "--model", "llama3.2", "--no", "hi"])
    with trio.fail_after(30):
        await _demo.amain(args, _demo.Printer(out), delay=0)
    assert "s3cret" not in out.getvalue()
    assert f"model: llama3.2 at {server.url.replace('http://', 'http://***@')}" in out.getvalue()


async def test_demo_against_anthropics_messages_api(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anthropic_streams import message_end, message_start, text_block, thinking_block, tool_block
    from sse_server import Reply, SSEServer

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-demo")
    server = SSEServer(
        [
            Reply.error(
                529,
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ),
            Reply(
                [
                    message_start()
                    + thinking_block(0, "Multiply.")
                    + tool_block(1, "toolu_9", "calculate", '{"expression": "6 * 7"}')
                    + message_end("tool_use")
                ]
            ),
            Reply([message_start() + text_block(0, "It is 42.") + message_end()]),
        ]
    )
    await nursery.start(server.serve)
    out = io.StringIO()
    argv = [
        "--provider",
        "anthropic",
        "--base-url",
        server.root,
        "--model",
        "claude-x",
        "--no",
        "6*7?",
    ]
    args = _demo.parse_args(argv)
    with trio.fail_after(30):
        messages = await _demo.amain(args, _demo.Printer(out), delay=0)
    text = out.getvalue()
    assert f"model: claude-x at {server.root}" in text
    assert "  retrying after HTTP 529, 1 of 2 (in " in text
    assert "thinking: Multiply." in text
    assert "<- [ok] calculate" in text
    assert messages[-1] == ChatMessage.assistant("It is 42.")
    assert [r.path for r in server.requests] == ["/v1/messages"] * 3
    assert server.requests[0].headers["x-api-key"] == "sk-ant-demo"
    assert server.requests[2].json["messages"][1]["content"][0]["type"] == "thinking"


def test_provider_anthropic_needs_a_model_and_defaults_its_base_url(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit):
        _demo.parse_args(["--provider", "anthropic"])
    assert "error: --provider anthropic needs --model" in capsys.readouterr().err
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    args = _demo.parse_args(["--provider", "anthropic", "--model", "claude-x"])
    assert args.live
    model = _demo._live_model(args, _demo.Printer(io.StringIO()))
    assert model.url == "https://api.anthropic.com/v1/messages"
    with pytest.raises(SystemExit):
        _demo.parse_args(["--provider", "mistral", "--model", "m"])


def test_a_missing_anthropic_extra_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "trio_invoke.providers.anthropic._client", None)
    code = _demo.main(["--provider", "anthropic", "--model", "claude-x", "--no", "hi"])
    assert code == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("error: --provider anthropic needs the extra trio-invoke[anthropic]")
    assert 'm pip install ".[anthropic]"' in err


def test_live_server_failure_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens on port 9 (discard) of loopback: the connection is refused at once; the
    # retries' backoff runs on a virtual clock.
    virtual = functools.partial(trio.run, clock=trio.testing.MockClock(autojump_threshold=0))
    monkeypatch.setattr(_demo.trio, "run", virtual)
    code = _demo.main(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--no", "hi"])
    assert code == 1
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
        (["--model", "llama3.2"], "--model needs --base-url, or --provider anthropic"),
    ],
)
def test_base_url_and_model_go_together(
    argv: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        _demo.parse_args(argv)
    assert info.value.code == 2  # argparse's usage error
    assert f"error: {why}" in capsys.readouterr().err


async def test_demo_with_an_mcp_server(nursery: trio.Nursery) -> None:
    from sse_server import Reply, SSEServer
    from test_openai import ollama_chunk, sse

    server_script = Path(__file__).with_name("mcp_server.py")
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "add", "arguments": '{"a": 40, "b": 2}'}}  # fmt: skip
    server = SSEServer(
        [
            Reply([sse(ollama_chunk({"tool_calls": [call]}, "tool_calls"), "[DONE]")]),
            Reply([sse(ollama_chunk({"content": "40 + 2 = 42."}, "stop"), "[DONE]")]),
        ]
    )
    await nursery.start(server.serve)
    out = io.StringIO()
    command = f"{sys.executable} {server_script}"
    argv = ["--base-url", server.url, "--model", "m", "--mcp", command, "--no", "40+2?"]
    with trio.fail_after(60):
        messages = await _demo.amain(_demo.parse_args(argv), _demo.Printer(out))
    assert "mcp: test-server" in out.getvalue()
    assert "<- [ok] add" in out.getvalue()
    offered = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert {"calculate", "add", "echo"} <= set(offered)
    (result,) = [m for m in messages if m.tool_call_id == "call_1"]
    assert result.content == "42"
    assert messages[-1] == ChatMessage.assistant("40 + 2 = 42.")


@pytest.mark.parametrize(
    "argv",
    [["--mcp", "python server.py"], ["--base-url", "http://x/v1", "--model", "m", "--mcp", " "]],
)
def test_mcp_needs_base_url_and_a_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        _demo.parse_args(argv)
    assert info.value.code == 2  # argparse's usage error
    assert "--mcp" in capsys.readouterr().err


def test_an_mcp_server_that_cannot_start_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--mcp", "no-such-mcp-server"]
    assert _demo.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: could not start MCP server 'no-such-mcp-server'")


async def test_the_demo_prints_the_models_reasoning(note_in_tmp: Path) -> None:
    out = io.StringIO()
    with trio.fail_after(60):
        messages = await _demo.amain(_demo.parse_args(["--no"]), _demo.Printer(out), delay=0)
    lines = out.getvalue().splitlines()
    thinking = [line for line in lines if line.startswith("  thinking: ")]
    assert thinking == [
        "  thinking: Two sums, the time and a listing: the calculator, the clock and the "
        "directory tool can all run at once."
    ]
    assert lines[lines.index(thinking[0]) + 1].startswith("Four things at once")
    assert "\x1b[" not in out.getvalue()  # not a terminal: no colour codes
    assert messages[2].reasoning is not None


def test_reasoning_is_dimmed_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    out = Terminal()
    printer = _demo.Printer(out)
    for update in [ReasoningDelta("hm"), ReasoningDelta("\nok"), TextDelta("Yes.")]:
        printer.show(update)
    assert out.getvalue() == "\x1b[2m  thinking: hm ok\x1b[0m\nYes."
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _demo.Printer(Terminal()).dim
