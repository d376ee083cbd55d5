"""The demo: ``python -m trio_invoke`` on the embedded model."""

from __future__ import annotations

import functools
import io
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("flag", ["--yes", "--no"])
async def test_demo_conversation(flag: str, note_in_tmp: Path) -> None:
    # The clock and directory tools are sync (they run in threads), so no virtual clock here:
    # the scripted model streams without delay instead.
    out = io.StringIO()
    with trio.fail_after(60):
        messages = await _demo.amain(_demo.parse_args([flag]), _demo.Printer(out), delay=0)
    assert_transcript_valid(messages)
    text = out.getvalue()
    assert "<- [ok] calculate" in text
    assert "395" in text
    assert "ZeroDivisionError" in text  # an error result, not a crash
    assert "needs your approval" in text
    assert text.rstrip().endswith("[finish: stop, 330 tokens]")
    if flag == "--yes":
        assert note_in_tmp.read_text() == "17 * 23 + 4 = 395\n"
        assert "approved: call_5" in text
    else:
        assert not note_in_tmp.exists()
        assert "rejected this call: the user said no" in messages[-2].content


async def test_answer_at_the_terminal(monkeypatch: pytest.MonkeyPatch, note_in_tmp: Path) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    out = io.StringIO()
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args([]), _demo.Printer(out), delay=0)
    assert note_in_tmp.exists()


async def test_end_of_input_rejects(monkeypatch: pytest.MonkeyPatch, note_in_tmp: Path) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with trio.fail_after(60):
        await _demo.amain(_demo.parse_args([]), _demo.Printer(io.StringIO()), delay=0)
    assert not note_in_tmp.exists()


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


def test_main_module_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    monkeypatch.setattr("sys.argv", ["trio_invoke", "--no"])
    monkeypatch.setattr(_demo, "scripted_model", lambda delay=0.0: _real_model(0.0))
    with pytest.raises(SystemExit) as info:
        runpy.run_module("trio_invoke", run_name="__main__")
    assert info.value.code == 0


_real_model = _demo.scripted_model


async def test_demo_against_a_live_openai_compatible_server(nursery: trio.Nursery) -> None:
    from sse_server import Reply, SSEServer
    from test_openai import ollama_chunk, sse

    call = {"index": 0, "id": "call_9", "type": "function",
            "function": {"name": "calculate", "arguments": '{"expression": "6 * 7"}'}}  # fmt: skip
    server = SSEServer(
        [
            Reply([sse(ollama_chunk({"tool_calls": [call]}, "tool_calls"), "[DONE]")]),
            Reply([sse(ollama_chunk({"content": "It is 42."}, "stop"), "[DONE]")]),
        ]
    )
    await nursery.start(server.serve)
    out = io.StringIO()
    args = _demo.parse_args(["--base-url", server.url, "--model", "llama3.2", "--no", "6*7?"])
    with trio.fail_after(30):
        messages = await _demo.amain(args, _demo.Printer(out))
    assert "model: llama3.2 at" in out.getvalue()
    assert "<- [ok] calculate" in out.getvalue()
    assert messages[-1] == ChatMessage.assistant("It is 42.")
    assert [r.json["model"] for r in server.requests] == ["llama3.2", "llama3.2"]


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


@pytest.mark.parametrize("argv", [["--base-url", "http://127.0.0.1:9/v1"], ["--model", "llama3.2"]])
def test_base_url_and_model_go_together(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        _demo.parse_args(argv)


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
