"""The benchmark suite (``python -m benchmarks``) measures what it says it measures: light runs
of its workloads, shrunk so that they take seconds, not the suite's minutes."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_invoke import FunctionInvokingChatClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's benchmarks/

from benchmarks import _http, _workloads, instructions
from benchmarks.__main__ import load_client
from benchmarks._harness import Row, Settings, duplicate_measures, format_table, machine_info
from benchmarks._workloads import Context

pytest.importorskip("httpx2")


def test_the_http_workloads_server_leaves_nothing_open() -> None:
    with _http.openai_server() as base_url:
        assert base_url.startswith("http://127.0.0.1:")
    gc.collect()  # an unclosed pipe to the server would warn here (warnings are errors)


class Recording(FunctionInvokingChatClient):
    """The loop, counting the runs it was asked for: what ``--client`` would give."""

    runs = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        type(self).runs += 1
        return super().run(*args, **kwargs)


@pytest.mark.parametrize("workload", ["conversations", "agents"])
def test_the_http_workloads_measure_the_client_given_with_dash_dash_client(
    workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http, "_sizes", lambda ctx: [2, 3])
    monkeypatch.setattr(Recording, "runs", 0)
    ctx = Context(Settings(repeat=1, min_sample=0.001, quick=True), Recording)
    outcome = getattr(_http, workload)(ctx)
    assert outcome.rows
    # Every batch of the loop's side (the warm-up and the sample, N = 2 and 3) went through
    # the class the table's header names, not the stock FunctionInvokingChatClient.
    assert Recording.runs >= 2 * (2 + 3)


@pytest.mark.parametrize("workload", ["conversations", "agents"])
def test_the_http_workloads_say_how_many_samples_their_rows_are_the_median_of(
    workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The table's header gives the other workloads' samples per side (--repeat, 3 with
    # --quick); these take 1 sample with --quick and 3 otherwise, which their note must say.
    monkeypatch.setattr(_http, "_sizes", lambda ctx: [2, 3])
    ctx = Context(Settings(repeat=3, min_sample=0.001, quick=True))
    first = next(row for row in getattr(_http, workload)(ctx).rows if row.note)
    assert first.note is not None
    assert "median of 1 sample per side, each a batch of N runs" in first.note


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("trio_invoke:NoSuchLoop", "trio_invoke has no 'NoSuchLoop'"),
        ("no_such_module_here:Loop", "cannot load no_such_module_here: No module named"),
        ("/no/such/dir/loop.py:Loop", "cannot load /no/such/dir/loop.py: [Errno 2]"),
        ("FunctionInvokingChatClient", "--client takes MODULE:NAME"),
    ],
)
def test_a_client_that_cannot_be_loaded_is_one_line(spec: str, says: str) -> None:
    with pytest.raises(SystemExit) as info:
        load_client(spec)
    assert says in str(info.value.code)


def test_dash_dash_client_loads_a_module_or_a_file(tmp_path: Path) -> None:
    assert load_client("trio_invoke:FunctionInvokingChatClient") is FunctionInvokingChatClient
    (tmp_path / "my_loop.py").write_text(
        "from trio_invoke import FunctionInvokingChatClient\n"
        "class Mine(FunctionInvokingChatClient): pass\n"
    )
    assert load_client(f"{tmp_path / 'my_loop.py'}:Mine").__name__ == "Mine"


@pytest.mark.parametrize(("library", "floor"), [(-2e-6, 3e-6), (0.0, 3e-6), (-2e-6, -3e-6)])
def test_a_time_of_zero_or_less_is_noise_not_a_target_met(library: float, floor: float) -> None:
    # With --quick, "per call" = (N-call run - 1-call run) / (N - 1) can come out negative from
    # noise: it is no measurement, so its row neither meets the target nor shows a ratio.
    row = Row("fan-out", "per call, N=1,000", library, floor, target=1.5)
    assert row.ok is None
    assert row.ratio is None
    line = format_table([row], Settings(repeat=3, min_sample=0.01, quick=True), INFO, []).split(
        "\n"
    )[-1]
    assert "ok" not in line.split()
    assert "noise" in line


def test_a_positive_time_still_meets_or_misses_its_target() -> None:
    assert Row("fan-out", "per call", 1e-6, 1e-6, target=1.5).ok is True
    assert Row("fan-out", "per call", 2e-6, 1e-6, target=1.5).ok is False


INFO = {
    "python": "3",
    "implementation": "cpython",
    "trio": "0",
    "trio_invoke": "0",
    "cpus": 2,
    "processor": "cpu",
    "platform": "linux",
    "load_average": None,
}


class Unknowing(FunctionInvokingChatClient):
    """The loop without the benchmarks' tools: every call it runs is an error result."""

    def __init__(self, inner: Any, tools: Any = (), **options: Any) -> None:
        super().__init__(inner, (), **options)


@pytest.mark.parametrize("workload", ["memory", "telemetry"])
def test_a_workload_whose_library_runs_fail_says_so(workload: str) -> None:
    # A run whose every call failed is no measurement of the fan-out: the workload refuses it,
    # as fan-out, rounds and streaming do, instead of printing its numbers.
    if workload == "telemetry":
        pytest.importorskip("opentelemetry")
    ctx = Context(Settings(repeat=1, min_sample=0.001, quick=True), Unknowing)
    with pytest.raises(RuntimeError, match="tool errors"):
        getattr(_workloads, workload)(ctx)


@pytest.mark.parametrize("only", [[","], [""], [" , "], ["", ","]])
def test_dash_dash_only_with_no_name_is_an_error_not_the_whole_suite(only: list[str]) -> None:
    # ``--only ,`` (say, from an empty shell variable) names no workload: it must not run all
    # thirteen, some ten minutes of a shared machine.
    with pytest.raises(ValueError, match="--only needs a workload name; choose from fan-out"):
        _workloads.select(only)
    assert _workloads.select([]) == list(_workloads.WORKLOADS)  # no --only: the whole suite


def test_the_agents_latencies_are_of_the_timed_batches_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The memory batch runs under tracemalloc (several times slower) and its warm batch has
    # 10 runs: neither is one of the samples the latency rows say they are over.
    monkeypatch.setattr(_http, "_sizes", lambda ctx: [2, 3])
    ctx = Context(Settings(repeat=1, min_sample=0.001, quick=True))
    rows = _http.agents(ctx).rows
    rounds = {row.measure: row.extra["rounds"] for row in rows if "rounds" in row.extra}
    # 1 sample (--quick) of a batch of N runs, 4 rounds each (3 of tools, then the answer)
    assert rounds == {
        "latency per round p50, 2 at once": 4 * 2,
        "latency per round p99, 2 at once": 4 * 2,
        "latency per round p50, 3 at once": 4 * 3,
        "latency per round p99, 3 at once": 4 * 3,
    }


@pytest.mark.parametrize("workload", ["conversations", "agents"])
def test_the_http_batch_workloads_take_the_samples_dash_dash_repeat_asks_for(
    workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --repeat 2 --quick: two batches per side and size, not --quick's default of one.
    settings = Settings.from_options(2, quick=True)
    assert (settings.repeat, settings.batches) == (2, 2)
    assert Settings.from_options(None, quick=True).batches == 1
    assert Settings.from_options(None, quick=False).batches == 3
    monkeypatch.setattr(_http, "_sizes", lambda ctx: [2, 3])
    rows = getattr(_http, workload)(Context(settings)).rows
    counts = {
        (row.measure, side): len(samples)
        for row in rows
        if "samples" in row.extra
        for side, samples in row.extra["samples"].items()
    }
    assert counts
    assert set(counts.values()) == {2}, counts
    first = next(row for row in rows if row.note)
    assert first.note is not None
    assert "median of 2 samples per side" in first.note


def test_an_openai_sdk_older_than_the_first_on_httpx2_is_left_out_with_a_line_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # openai 1.40 (what the bench group allowed) builds an httpx client with proxies=, which a
    # current httpx refuses: the http workload crashed. 2.x runs on httpx, not on httpx2 as
    # every other side does. An installed SDK of that age is skipped, the version named.
    (tmp_path / "openai").mkdir()
    (tmp_path / "openai" / "__init__.py").write_text(
        '__version__ = "1.40.0"\n'
        "class AsyncOpenAI:\n"
        "    def __init__(self, **kwargs):\n"
        "        raise TypeError(\"AsyncClient.__init__() got an unexpected keyword 'proxies'\")\n"
    )
    (tmp_path / "openai-1.40.0.dist-info").mkdir()
    (tmp_path / "openai-1.40.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: openai\nVersion: 1.40.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "openai", raising=False)
    sdk, skipped = _http._sdk()
    assert sdk is None
    assert skipped == (
        "http: the official openai SDK 1.40.0 is older than 3.0, the first on httpx2 "
        "(pip install 'openai>=3')"
    )


# Each a second or two at these sizes; mcp, process and http take 5-15 s each, and their rows
# come from fixed labels (python -m benchmarks refuses a workload whose rows share a key).
CHEAP = [
    "fan-out",
    "rounds",
    "streaming",
    "concurrency",
    "validation",
    "memory",
    "eager",
    "telemetry",
    "conversations",
    "agents",
]


@pytest.mark.parametrize("workload", CHEAP)
def test_no_two_rows_of_a_workload_share_a_measure(
    workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The JSON file and comparisons over time tell rows apart by (workload, measure): two
    # validation rows were both "parse + cached validator", one beside compiling, one beside
    # parsing alone.
    monkeypatch.setattr(_http, "_sizes", lambda ctx: [2, 3])
    ctx = Context(Settings(repeat=1, min_sample=0.0001, quick=True))
    rows = _workloads.WORKLOADS[workload](ctx).rows
    assert rows or workload == "telemetry"  # telemetry: skipped without opentelemetry
    assert duplicate_measures(rows) == []
    assert {row.workload for row in rows} <= {workload}


def test_rows_that_share_a_measure_are_found() -> None:
    rows = [Row("w", "a", 1.0, 1.0), Row("w", "b", 1.0, 1.0), Row("w", "a", 2.0, 1.0)]
    assert duplicate_measures(rows) == [("w", "a")]
    assert duplicate_measures([*rows[:2], Row("v", "a", 1.0, 1.0)]) == []


ROOT = Path(__file__).resolve().parent.parent


def _session(sid: int) -> list[tuple[int, str]]:
    """The live processes of session ``sid`` but its leader: (pid, command line). A zombie is
    not live (its parent is gone: init reaps it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == sid:
            continue
        try:
            if os.getsid(int(entry.name)) != sid:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile
            continue
        if state != "Z":
            found.append((int(entry.name), command))
    return found


async def _until(condition: Callable[[], bool]) -> None:
    """Poll another process's state (no event to wait on), on the real clock."""
    while not condition():  # noqa: ASYNC110 -- the state is in /proc, not in this process
        await trio.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("to", ["group", "leader"], ids=["ctrl-c in a terminal", "kill -INT"])
async def test_ctrl_c_stops_the_suite_and_its_server_with_one_line_and_130(
    to: str, tmp_path: Path
) -> None:
    # A real run, a real SIGINT once the workload's server runs: to the whole process group,
    # as a terminal's Ctrl-C sends it, or to the benchmark alone.
    command = [sys.executable, "-m", "benchmarks", "--only", "rounds,conversations", "--quick"]
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                [*command, "--json", str(tmp_path / "out.json")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                check=False,
                cwd=ROOT,
                start_new_session=True,
                # A background job inherits SIGINT ignored: give it a terminal's disposition.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        )
        assert process.stderr is not None
        err = b""
        try:
            with trio.fail_after(60):
                while b"conversations: " not in err:
                    piece = await process.stderr.receive_some()
                    assert piece, f"the suite ended before conversations: {err!r}"
                    err += piece
                await _until(lambda: any("openai_server.py" in c for _, c in _session(process.pid)))
            if to == "group":
                os.killpg(process.pid, signal.SIGINT)
            else:
                process.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                async for piece in process.stderr:
                    err += piece
                await process.wait()
            with trio.fail_after(10):
                await _until(lambda: not _session(process.pid))
        finally:
            for pid, _ in _session(process.pid):
                os.kill(pid, signal.SIGKILL)
            process.kill()
    text = err.decode()
    assert process.returncode == 130, text
    assert "Traceback" not in text
    assert "Exception ignored" not in text
    assert text.endswith("  conversations: interrupted (no results written); finished: rounds\n")
    assert not (tmp_path / "out.json").exists()


GC_INTERRUPT = """
import gc, signal, sys, time, types
import trio
sys.path.insert(0, sys.argv[1])
from benchmarks import _http

fired = False

def perf_counter():  # the collector callback's clock: Ctrl-C lands inside the callback
    global fired
    if not fired:
        fired = True
        signal.raise_signal(signal.SIGINT)
    return time.perf_counter()

async def main():
    _http.time = types.SimpleNamespace(perf_counter=perf_counter)
    with _http._CollectorTime():
        gc.collect()
    for _ in range(3):
        await trio.lowlevel.checkpoint()
    print("the interrupt was lost")

try:
    trio.run(main)
except KeyboardInterrupt:
    print("interrupted")
"""


async def test_a_ctrl_c_during_a_collection_the_http_samples_time_is_not_lost() -> None:
    # Python drops an exception out of a gc callback (it prints "Exception ignored"): a Ctrl-C
    # that landed in the agents workload's collector timer went unseen, the run went on. In a
    # process of its own: the interrupt is real.
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", GC_INTERRUPT, str(ROOT)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    assert done.stdout.decode() == "interrupted\n", done.stderr.decode()
    assert done.stderr == b""


@pytest.mark.parametrize("where", ["write_text", "replace"])
def test_a_ctrl_c_while_the_results_are_written_leaves_the_last_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from benchmarks import __main__ as cli

    path = tmp_path / "latest.json"
    ctx = Context(Settings(repeat=1, min_sample=0.001, quick=True))
    info = machine_info()
    cli.run(ctx, [], info=info, timings={}, path=path, argv=[])
    before = path.read_text(encoding="utf-8")
    original = getattr(Path, where)

    def interrupted(self: Path, *args: Any, **kwargs: Any) -> Any:
        if where == "write_text":
            original(self, "{", encoding="utf-8")  # half of it is out
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, where, interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.run(ctx, [], info={**info, "machine": "another"}, timings={}, path=path, argv=[])
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.json"]


@pytest.mark.parametrize(
    ("workload", "side"),
    [("rounds", "library"), ("rounds", "skeleton"), ("rounds", "floor"), ("streaming", "library")],
)
def test_the_instruction_count_runs_what_it_counts(workload: str, side: str) -> None:
    """What ``python -m benchmarks.instructions`` runs under callgrind, without callgrind: runs
    of the side, each to its end."""
    assert instructions._child(workload, side, 0) == 0
    assert instructions._child(workload, side, 2) == 2


def test_the_instruction_count_without_valgrind_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SystemExit, match=r"needs valgrind \(Debian: apt install valgrind\)"):
        instructions.main(["--only", "rounds"], echo=lambda line: None)
