"""Process tools: ``@tool(isolation="process")``.

Real worker processes need real time: there is no virtual clock here, and every wait is bounded
by ``trio.fail_after``. The tools live in ``process_tools`` (importable by the workers).
"""

from __future__ import annotations

import enum
import functools
import json
import os
import pickle
import signal
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("trio_parallel")

import process_tools as pt

from trio_invoke import (
    ChatMessage,
    Error,
    Finish,
    FinishReason,
    FunctionInvokingChatClient,
    FunctionTool,
    ImagePart,
    RunOptions,
    ScriptedChatClient,
    TextPart,
    ToolCalled,
    ToolCallEnd,
    ToolDefinitionError,
    ToolError,
    ToolProcessError,
    ToolTimeoutError,
    tool,
)
from trio_invoke._process import Reference, _death, run_in_worker, unpickle_outcome
from trio_invoke.testing import assert_transcript_valid, tool_call_updates

USER = [ChatMessage.user("go")]
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="checks pids with os.kill(pid, 0)")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process (a zombie counts: a killed worker must also be reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def calls(*specs: tuple[str, dict[str, Any]]) -> list[Any]:
    """A script: one round with these calls (ids call_0, call_1...), then a final answer."""
    updates: list[Any] = []
    for index, (name, arguments) in enumerate(specs):
        updates += tool_call_updates(f"call_{index}", name, json.dumps(arguments))
    return [[*updates, Finish(FinishReason.TOOL_CALLS)], "done"]


async def run_all(client: FunctionInvokingChatClient, options: RunOptions | None = None) -> Any:
    async with client.run(USER, options) as stream:
        updates = [update async for update in stream]
    return updates, stream.messages


async def wait_for_file(path: Path) -> str:
    """Poll for a file another process writes (no trio.Event reaches across processes)."""
    while not path.exists() or not path.read_text(encoding="utf-8"):  # noqa: ASYNC110
        await trio.sleep(0.01)
    return path.read_text(encoding="utf-8")


# -- decoration --------------------------------------------------------------------------------


def test_a_process_tool_is_a_function_tool() -> None:
    assert isinstance(pt.add, FunctionTool)
    assert pt.add.isolation == "process"
    assert pt.add.is_async is False
    assert pt.add.parameters["required"] == ["a"]
    assert "isolation='process'" in repr(pt.add)
    assert tool(pt.scale).isolation == "thread"
    assert "isolation" not in repr(tool(pt.scale))


def test_calling_it_directly_runs_here() -> None:
    assert pt.pid() == os.getpid()
    assert pt.add(2, 3) == 5


def test_isolation_must_be_thread_or_process() -> None:
    for bad in ("processes", "Thread", None, 1):
        with pytest.raises(ToolDefinitionError, match="isolation must be 'thread' or 'process'"):
            tool(isolation=bad)(pt.scale)  # type: ignore[call-overload]


def test_async_functions_cannot_be_process_tools() -> None:
    async def fetch(url: str) -> str:
        return url

    class AsyncCallable:
        __name__ = "acall"

        async def __call__(self, x: int) -> int:
            return x

    for func in (fetch, AsyncCallable()):
        with pytest.raises(ToolDefinitionError, match=r"isolation='process'\) is for sync"):
            tool(isolation="process")(func)
        with pytest.raises(ToolDefinitionError, match=r"limiter=\.\.\.\) is for sync"):
            tool(limiter=trio.CapacityLimiter(1))(func)


class HoldsALock:
    """A module-level class whose instances do not pickle."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def method(self, x: int) -> int:
        return x

    def __call__(self, x: int) -> int:
        return x


def _interactive_function(x: int) -> int:
    return x


class RefusesToReduce:
    """A decorator's wrapper (it has ``__wrapped__``) whose ``__reduce_ex__`` raises."""

    __wrapped__ = staticmethod(_interactive_function)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("no reducing this")

    def __call__(self, x: int) -> int:
        return x


def _unsendable_cases() -> list[tuple[str, Any, str]]:
    """(case, callable, what the message must say)."""
    outer = 3

    def closure(x: int) -> int:
        return x + outer

    def local(x: int) -> int:
        return x

    class LocalClass:
        def __init__(self, x: int) -> None:
            self.x = x

        def method(self, x: int) -> int:
            return x

    lam: Any = lambda x: x  # noqa: E731 - the case under test
    lam.__annotations__ = {"x": int}
    return [
        ("lambda", lam, "a lambda cannot be pickled"),
        ("closure", closure, "defined inside another function"),
        ("local function", local, "defined inside another function"),
        ("local class", LocalClass, "defined inside another function"),
        ("bound method, unpicklable object", HoldsALock().method, "does not pickle"),
        ("bound method, local class", LocalClass(1).method, "does not pickle"),
        ("callable object, unpicklable", HoldsALock(), "does not pickle"),
        ("partial of a local function", functools.partial(local, x=1), "does not pickle"),
        ("partial of a lambda", functools.partial(lam, x=1), "does not pickle"),
        ("wrapper that cannot reduce", RefusesToReduce(), "no reducing this"),
        ("decorator object of a local function", pt.Counted(local), "inside another function"),
    ]


@pytest.mark.parametrize(
    ("case", "func", "why"), _unsendable_cases(), ids=[c[0] for c in _unsendable_cases()]
)
def test_what_cannot_reach_a_worker_fails_at_decoration(case: str, func: Any, why: str) -> None:
    with pytest.raises(ToolDefinitionError, match=r"cannot send .* to a worker process: ") as info:
        tool(isolation="process", name="f")(func)
    assert why in str(info.value), case
    tool(name="f")(func)  # the same function is fine in a thread


def test_a_function_of_an_interactive_session_fails_at_decoration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main = types.ModuleType("__main__")  # no __file__: a REPL, python -c, a notebook
    monkeypatch.setitem(sys.modules, "__main__", main)
    func = types.FunctionType(_interactive_function.__code__, vars(main), "interactive")
    func.__annotations__ = {"x": int}
    assert func.__module__ == "__main__"
    with pytest.raises(ToolDefinitionError, match="interactive session"):
        tool(isolation="process")(func)


def test_a_function_of_a_program_read_from_stdin_fails_at_decoration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``python - < agent.py``: ``__main__.__file__`` is ``"<stdin>"``, no file a worker can
    import (every worker would die at its start)."""
    main = types.ModuleType("__main__")
    main.__file__ = "<stdin>"
    monkeypatch.setitem(sys.modules, "__main__", main)
    func = types.FunctionType(_interactive_function.__code__, vars(main), "from_stdin")
    func.__annotations__ = {"x": int}
    with pytest.raises(ToolDefinitionError, match=r"interactive session .*'<stdin>'"):
        tool(isolation="process")(func)


def test_a_function_of_no_imported_module_fails_at_decoration() -> None:
    namespace: dict[str, Any] = {"__name__": "not_a_module"}
    exec("def made(x: int) -> int:\n    return x\n", namespace)
    with pytest.raises(ToolDefinitionError, match="'not_a_module' is not an imported module"):
        tool(isolation="process")(namespace["made"])


def test_a_local_enum_parameter_fails_at_decoration() -> None:
    class Size(enum.Enum):
        S = "s"
        L = "l"

    def pick(size: Any = None) -> str:
        return "ok"

    pick.__annotations__ = {"size": Size | None, "return": str}  # real objects, not strings
    pick.__qualname__ = "pick"  # pretend it is a top-level function: the Enum is what fails
    pick.__module__ = pt.__name__
    with pytest.raises(ToolDefinitionError, match=r"parameter 'size' takes members of .*Size"):
        tool(isolation="process")(pick)


def test_the_missing_extra_is_named_at_decoration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trio_parallel", None)  # import trio_parallel -> ImportError
    with pytest.raises(ImportError, match=r'pip install "trio-invoke\[process\] @ git\+https://'):
        tool(isolation="process")(pt.scale)
    assert tool(pt.scale).isolation == "thread"  # threads need nothing


# -- calls -------------------------------------------------------------------------------------


SCRIPT = """\
import json, os, trio
from trio_invoke import tool

@tool(isolation="process")
def where(x: int) -> list[int]:
    return [x, os.getpid()]

async def main() -> None:
    print(json.dumps([await where.execute({"x": 5}), os.getpid()]))

if __name__ == "__main__":
    trio.run(main)
"""


async def test_a_tool_defined_in_a_script_runs(tmp_path: Path) -> None:
    """A script's functions are in ``__main__``, which the worker imports as ``__mp_main__``."""
    script = tmp_path / "agent_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    (x, worker), parent = json.loads(done.stdout)
    assert x == 5
    assert worker != parent


async def test_runs_in_a_worker_process() -> None:
    with trio.fail_after(60):
        worker = await pt.pid.execute({})
        assert worker != os.getpid()
        assert await pt.pid.execute({}) == worker  # a worker is reused


async def test_arguments_and_results_cross() -> None:
    value = {"s": "é\u2028", "n": [1, 2.5, None, True], "d": {"k": {}}}
    with trio.fail_after(60):
        assert await pt.add.execute({"a": 2}) == 3
        assert await pt.echo.execute({"value": value}) == value
        # Enum members are converted here and sent as members.
        assert await pt.colour_name.execute({"colour": "red", "more": ["blue"]}) == "RED+BLUE"
        assert await pt.wrapped_square.execute({"x": 3}) == ("wrapped", 9)


async def test_a_tool_that_returns_an_image_from_its_worker() -> None:
    model = ScriptedChatClient(calls(("chart", {"label": "sales"})))
    client = FunctionInvokingChatClient(model, [pt.chart])
    with trio.fail_after(60):
        updates, messages = await run_all(client)
    (called,) = [u for u in updates if isinstance(u, ToolCalled)]
    assert not called.is_error, called.result
    assert called.result == "sales[image]"
    assert messages[1].content == (
        TextPart("sales"),
        ImagePart.from_bytes(b"\x89PNG\r\n\x1a\n", "image/png"),
    )


async def test_callables_sent_by_value_or_through_a_class() -> None:
    shapes = [
        (tool(isolation="process", name="triple")(functools.partial(pt.scale, factor=3)), 12),
        (tool(isolation="process")(pt.Multiplier.static_double), 8),
        (tool(isolation="process", name="times")(pt.Multiplier(5).times), 20),
        (tool(isolation="process", name="scale")(pt.scale), None),  # undecorated at module level
    ]
    with trio.fail_after(60):
        for made, expected in shapes:
            arguments = {"x": 4} if made.name != "scale" else {"x": 4, "factor": 2}
            result = await made.execute(arguments)
            if isinstance(result, dict):
                assert result["pid"] != os.getpid()
                result = result["product"]
            assert result == (expected if expected is not None else 8), made


async def test_a_tool_whose_name_is_rebound_to_a_wrapper_tool_runs() -> None:
    """``f = ApprovalRequiredTool(f)``: the worker finds the function through the wrapper."""
    with trio.fail_after(60):
        assert await pt.guarded_double.execute({"x": 21}) == 42
    assert _in_worker(Reference(pt.__name__, "guarded_double"), {"x": 2}) == 4


async def test_a_function_under_a_decorator_object_runs() -> None:
    """``@tool(isolation="process") @Counted``: the object holds the function, whose name is
    bound to the tool, so it cannot go by value; it goes by its own name, as a wrapper does."""
    with trio.fail_after(60):
        assert await pt.counted_square.execute({"x": 3}) == ("counted", 9)
    found = Reference(pt.__name__, "counted_square").resolve()
    assert found is pt.counted_square.func


async def test_a_function_under_functools_cache_runs() -> None:
    """``@tool(isolation="process") @functools.cache``: the cache's wrapper pickles by a name
    that is bound to the tool, so it goes by reference as a plain function does."""
    import process_tools_cached as cached

    with trio.fail_after(60):
        result = await cached.cached_cube.execute({"x": 3})
        assert result["cube"] == 27
        assert result["pid"] != os.getpid()
        assert await cached.lru_negate.execute({"x": 4}) == -4
    found = Reference(cached.__name__, "cached_cube").resolve()
    assert found is cached.cached_cube.func  # the cache itself, not the function under it

    def local(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="defined inside another function"):
        tool(isolation="process")(functools.cache(local))


async def test_exceptions_come_back_as_they_were_raised() -> None:
    with trio.fail_after(60):
        with pytest.raises(ValueError, match="bad value 42") as info:
            await pt.fail.execute({"kind": "value"})
        assert any("process_tools.py" in str(frame) for frame in info.traceback)  # remote frames
        with pytest.raises(pt.TwoArgumentError, match="404: not found"):
            await pt.fail.execute({"kind": "two_arguments"})


@pytest.mark.parametrize(
    ("kind", "result", "stops"),
    [
        ("tool_error_locked_cause", "Error: lookup failed: try another key", False),
        ("stop_locked_context", "gave up", True),
    ],
)
async def test_tool_error_and_stop_loop_keep_their_meaning_when_their_chain_does_not_pickle(
    kind: str, result: str, stops: bool
) -> None:
    """A ``ToolError`` (its message is the result) or a ``StopLoop`` (it stops the loop) raised
    from an exception that does not pickle comes back without that cause or context."""
    script = calls(("fail", {"kind": kind}))
    client = FunctionInvokingChatClient(ScriptedChatClient(script), [pt.fail])
    with trio.fail_after(60):
        updates, messages = await run_all(client)
    called = [u for u in updates if isinstance(u, ToolCalled)]
    assert [c.result for c in called] == [result]
    exception = called[0].exception
    assert exception is not None
    assert exception.__cause__ is None
    assert "its cause and context" in "".join(exception.__notes__)
    assert (messages[-1].content == "done") is not stops  # a stop ends it before the model
    assert updates[-1] == Finish(FinishReason.STOP)


async def test_a_stop_loop_whose_result_does_not_pickle_is_an_error() -> None:
    with trio.fail_after(60), pytest.raises(ToolProcessError, match="raised StopLoop, which"):
        await pt.fail.execute({"kind": "stop_locked_result"})


@pytest.mark.parametrize(
    ("depth", "raised"), [(600, ValueError), (-1, RecursionError)], ids=["deep", "recursion"]
)
async def test_exceptions_with_tracebacks_too_deep_to_pickle_still_come_back(
    depth: int, raised: type[Exception]
) -> None:
    """The exception pickles, its traceback of hundreds of frames does not: it comes back
    without the worker's frames, and a note says so."""
    with trio.fail_after(60), pytest.raises(raised) as info:
        await pt.raise_deep.execute({"depth": depth})
    assert "worker process was too deep to send back" in "".join(info.value.__notes__)
    if raised is ValueError:
        assert str(info.value) == "raised deep down"


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("locked", r"raised LockedError, which cannot be sent back .* '_thread.lock'"),
        ("local", r"raised fail.<locals>.LocalError, which cannot be sent back .*pickle"),
        ("locked_cause", r"raised ValueError, which cannot be sent back .*cause or context"),
        ("exit", r"raised SystemExit \(code 4\) in its worker process"),
        ("interrupt", r"raised KeyboardInterrupt in its worker process"),
    ],
)
async def test_exceptions_that_cannot_come_back(kind: str, message: str) -> None:
    with trio.fail_after(60), pytest.raises(ToolProcessError, match=message):
        await pt.fail.execute({"kind": kind})
    with trio.fail_after(60):
        assert await pt.add.execute({"a": 1}) == 2  # no harm done


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("lambda", r"returned a function, which cannot be sent back .*local object"),
        ("lock", r"returned a lock, which cannot be sent back .*'_thread.lock'"),
        ("generator", r"returned a generator, which cannot be sent back .*'generator'"),
        ("local", r"returned a give.<locals>.Local, which cannot be sent back"),
        ("with_lock", r"returned a WithLock, which cannot be sent back"),
        ("unloadable", r"came back from its worker process but does not unpickle .*refuses"),
    ],
)
async def test_results_that_do_not_pickle(kind: str, message: str) -> None:
    with trio.fail_after(60), pytest.raises(ToolProcessError, match=message):
        await pt.give.execute({"kind": kind})


_PLUGIN = """
class PluginError(Exception):
    pass

def fail():
    raise PluginError("the plugin failed")

def fail_from():
    try:
        fail()
    except PluginError as exc:
        raise ValueError("wrapped") from exc

def thing():
    return PluginError("a value")
"""


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("fail", r"raised PluginError, which came back from its worker process but does not"),
        ("fail_from", r"raised ValueError, which came back from its worker process but does not"),
        ("thing", r"the result of tool 'run_plugin' came back .* but does not unpickle"),
    ],
)
async def test_what_pickles_in_the_worker_but_does_not_unpickle_here(
    tmp_path: Path, function: str, message: str
) -> None:
    """A class only the worker can import (a plugin it loaded from its own path): an exception
    of it, or chained to it, is the call's ``ToolProcessError`` naming it, as a result is."""
    module = f"worker_only_plugin_{function}"
    (tmp_path / f"{module}.py").write_text(_PLUGIN, encoding="utf-8")
    arguments = {"directory": str(tmp_path), "module": module, "function": function}
    with trio.fail_after(60), pytest.raises(ToolProcessError, match=message) as info:
        await pt.run_plugin.execute(arguments)
    assert f"No module named {module!r}" in str(info.value)
    client = FunctionInvokingChatClient(
        ScriptedChatClient(calls(("run_plugin", arguments))), [pt.run_plugin]
    )
    with trio.fail_after(60):
        updates, _ = await run_all(client)
    [called] = [u for u in updates if isinstance(u, ToolCalled)]
    assert called.is_error
    assert isinstance(called.exception, ToolProcessError)
    assert called.result == f"Error: {info.value}"


async def test_arguments_that_do_not_pickle() -> None:
    for value in (threading.Lock(), lambda: 1, (i for i in range(2))):
        with pytest.raises(ToolProcessError, match=r"arguments of tool 'echo' cannot be sent"):
            await pt.echo.execute({"value": value})


async def test_a_function_the_worker_cannot_find() -> None:
    def nowhere(x: int) -> int:
        return x

    nowhere.__module__, nowhere.__qualname__ = pt.__name__, "nowhere"
    missing = tool(isolation="process")(nowhere)
    shadowed_func = types.FunctionType(nowhere.__code__, {}, "PAIR")
    shadowed_func.__module__, shadowed_func.__qualname__ = pt.__name__, "PAIR"
    shadowed_func.__annotations__ = {"x": int}
    shadowed = tool(isolation="process")(shadowed_func)
    with trio.fail_after(60):
        with pytest.raises(ToolProcessError, match=r"cannot load the function .*AttributeError"):
            await missing.execute({"x": 1})
        with pytest.raises(ToolProcessError, match=r"PAIR is .*CapacityLimiter.* not the tool's"):
            await shadowed.execute({"x": 1})


@posix_only
@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("exit", "exit code 3"),
        ("exit0", "exit code 0"),
        ("segfault", "killed by SIGSEGV"),
        ("sigkill", "killed by SIGKILL"),
        ("sigterm", "killed by SIGTERM"),
        ("abort", "killed by SIGABRT"),
    ],
)
async def test_a_worker_that_dies(tmp_path: Path, how: str, why: str) -> None:
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        with pytest.raises(ToolProcessError, match=f"running tool 'die' died \\({why}\\)") as info:
            await pt.die.execute({"how": how, "pid_file": str(pid_file)})
        assert type(info.value.__cause__).__name__ == "BrokenWorkerProcessError"
        dead = int(pid_file.read_text(encoding="utf-8"))
        assert not alive(dead)
        fresh = await pt.pid.execute({})  # the next call gets a fresh worker
        assert fresh not in (dead, os.getpid())


async def test_in_the_loop_every_failure_is_that_calls_error_result(tmp_path: Path) -> None:
    script = calls(
        ("die", {"how": "exit", "pid_file": str(tmp_path / "pid")}),
        ("give", {"kind": "lock"}),
        ("fail", {"kind": "locked"}),
        ("fail", {"kind": "value"}),
        ("echo", {"value": [1, "two"]}),
        ("add", {"a": 40, "b": 2}),
    )
    tools = [pt.die, pt.give, pt.fail, pt.echo, pt.add]
    client = FunctionInvokingChatClient(ScriptedChatClient(script), tools)
    with trio.fail_after(60):
        updates, messages = await run_all(client)
    assert_transcript_valid([*USER, *messages])
    called = {u.call.id: u for u in updates if isinstance(u, ToolCalled)}
    results = {cid: (c.result, c.is_error) for cid, c in called.items()}
    assert results["call_0"] == (
        "Error: the worker process running tool 'die' died (exit code 3); "
        "the next call starts a fresh one",
        True,
    )
    assert results["call_1"][1]
    assert "returned a lock, which cannot be sent back" in results["call_1"][0]
    assert "raised LockedError, which cannot be sent back" in results["call_2"][0]
    assert results["call_3"] == ("Error: tool 'fail' raised ValueError", True)  # its message stays
    assert results["call_4"] == ('[1,"two"]', False)
    assert results["call_5"] == ("42", False)
    assert isinstance(called["call_0"].exception, ToolProcessError)
    assert isinstance(updates[-1], Finish)


# -- a timeout or a cancellation kills the worker ----------------------------------------------


async def _warm() -> None:
    """A worker with ``process_tools`` imported, so that a call starts at once."""
    with trio.fail_after(60):
        await pt.pid.execute({})


@posix_only
@pytest.mark.parametrize("where", ["client", "run options", "tool"])
async def test_a_timeout_kills_the_worker(tmp_path: Path, where: str) -> None:
    pid_file = tmp_path / "pid"
    name = "spin_forever_timed" if where == "tool" else "spin_forever"
    client = FunctionInvokingChatClient(
        ScriptedChatClient(calls((name, {"pid_file": str(pid_file)}), ("add", {"a": 1}))),
        [pt.spin_forever, pt.spin_forever_timed, pt.add],
        tool_timeout=2.0 if where == "client" else None,
    )
    options = RunOptions(tool_timeout=2.0) if where == "run options" else None
    await _warm()
    with trio.fail_after(60):
        updates, messages = await run_all(client, options)
    called = [u for u in updates if isinstance(u, ToolCalled)]
    spun = next(c for c in called if c.call.name == name)
    assert spun.result == f"Error: tool {name!r} timed out after 2 s"
    assert isinstance(spun.exception, ToolTimeoutError)
    assert next(c for c in called if c.call.name == "add").result == "2"  # its sibling
    worker = int(pid_file.read_text(encoding="utf-8"))
    assert worker != os.getpid()
    assert not alive(worker)  # killed and reaped before the call got its result
    assert_transcript_valid([*USER, *messages])
    assert updates[-1] == Finish(FinishReason.STOP)


@posix_only
async def test_cancelling_the_run_kills_the_worker(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    client = FunctionInvokingChatClient(
        ScriptedChatClient(calls(("spin_forever", {"pid_file": str(pid_file)}))),
        [pt.spin_forever],
    )
    scope = trio.CancelScope()
    with trio.fail_after(60):
        async with client.run(USER, RunOptions(cancel_scope=scope)) as stream:
            updates = []
            async for update in stream:
                updates.append(update)
                if isinstance(update, ToolCallEnd):
                    await wait_for_file(pid_file)
                    scope.cancel()
    worker = int(pid_file.read_text(encoding="utf-8"))
    assert not alive(worker)
    assert updates[-1] == Error("cancelled")
    assert [u.result for u in updates if isinstance(u, ToolCalled)] == ["Error: cancelled"]
    assert_transcript_valid([*USER, *stream.messages])


@posix_only
async def test_leaving_the_block_early_kills_the_worker(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    client = FunctionInvokingChatClient(
        ScriptedChatClient(calls(("spin_forever", {"pid_file": str(pid_file)}))),
        [pt.spin_forever],
    )
    with trio.fail_after(60):
        async with client.run(USER) as stream:
            async for update in stream:
                if isinstance(update, ToolCallEnd):
                    await wait_for_file(pid_file)
                    break
    assert not alive(int(pid_file.read_text(encoding="utf-8")))


@posix_only
async def test_cancelling_execute_kills_the_worker(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def cancel_once_running() -> None:
                await wait_for_file(pid_file)
                nursery.cancel_scope.cancel()

            nursery.start_soon(cancel_once_running)
            await pt.spin_forever.execute({"pid_file": str(pid_file)})
    assert not alive(int(pid_file.read_text(encoding="utf-8")))


@posix_only
def test_ctrl_c_reaches_the_caller_and_kills_the_worker(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    async def main() -> None:
        client = FunctionInvokingChatClient(
            ScriptedChatClient(calls(("spin_forever", {"pid_file": str(pid_file)}))),
            [pt.spin_forever],
        )
        with trio.fail_after(60):
            async with client.run(USER) as stream:
                async for update in stream:
                    if isinstance(update, ToolCallEnd):
                        await wait_for_file(pid_file)
                        signal.raise_signal(signal.SIGINT)
                        await trio.sleep(30)  # the interrupt arrives here

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    assert not alive(int(pid_file.read_text(encoding="utf-8")))


# -- parallel ----------------------------------------------------------------------------------


async def test_two_cpu_bound_calls_run_at_the_same_time(tmp_path: Path) -> None:
    """Each call burns CPU until it sees the other one running: they can only both finish
    having met if they ran at the same time, in two worker processes."""
    directory = str(tmp_path)
    client = FunctionInvokingChatClient(
        ScriptedChatClient(
            calls(
                ("rendezvous", {"me": "a", "other": "b", "directory": directory}),
                ("rendezvous", {"me": "b", "other": "a", "directory": directory}),
            )
        ),
        [pt.rendezvous],
    )
    with trio.fail_after(120):
        updates, _ = await run_all(client)
    reports = [json.loads(u.result) for u in updates if isinstance(u, ToolCalled)]
    assert len(reports) == 2
    first, second = reports
    assert first["met"]
    assert second["met"]
    assert len({first["pid"], second["pid"], os.getpid()}) == 3
    # Their running times overlap (monotonic clocks are system-wide on the supported platforms).
    assert first["start"] < second["end"]
    assert second["start"] < first["end"]


# -- the worker side, run here (plain sync code) -------------------------------------------------


def _in_worker(target: Any, arguments: dict[str, Any], name: str = "t") -> Any:
    function = pickle.dumps(target)
    return unpickle_outcome(name, *run_in_worker(name, function, pickle.dumps(arguments)))


def test_the_worker_side_finds_functions_through_their_tools() -> None:
    assert _in_worker(Reference(pt.__name__, "add"), {"a": 1, "b": 2}) == 3
    assert _in_worker(Reference(pt.__name__, "scale"), {"x": 2, "factor": 5}) == 10
    assert _in_worker(Reference(pt.__name__, "wrapped_square"), {"x": 2}) == ("wrapped", 4)
    assert _in_worker(Reference(pt.__name__, "Multiplier.static_double"), {"x": 2}) == 4
    assert _in_worker(functools.partial(pt.scale, factor=3), {"x": 2}) == 6
    with pytest.raises(ToolProcessError, match="cannot load the function of tool 't'"):
        _in_worker(Reference("no_such_module_anywhere", "f"), {})
    with pytest.raises(ToolProcessError, match=r"PAIR is .*, not the tool's function"):
        _in_worker(Reference(pt.__name__, "PAIR"), {})


def test_the_worker_side_turns_what_cannot_cross_into_tool_process_errors() -> None:
    give, fail = Reference(pt.__name__, "give"), Reference(pt.__name__, "fail")
    with pytest.raises(ToolProcessError, match="returned a lock"):
        _in_worker(give, {"kind": "lock"})
    with pytest.raises(ToolProcessError, match="raised LockedError, which cannot be sent back"):
        _in_worker(fail, {"kind": "locked"})
    with pytest.raises(ToolProcessError, match=r"raised SystemExit \(code 4\)") as info:
        _in_worker(fail, {"kind": "exit"})
    assert info.value.__context__ is None  # nothing unpicklable rides along
    with pytest.raises(ValueError, match="bad value 42"):
        _in_worker(fail, {"kind": "value"})
    with pytest.raises(ToolError, match="lookup failed") as tool_error:
        _in_worker(fail, {"kind": "tool_error_locked_cause"})
    assert tool_error.value.__cause__ is None
    with pytest.raises(ToolProcessError, match="raised StopLoop, which cannot be sent back"):
        _in_worker(fail, {"kind": "stop_locked_result"})
    with pytest.raises(ToolProcessError, match="cannot unpickle the arguments of tool 't'"):
        run_in_worker("t", pickle.dumps(Reference(pt.__name__, "add")), b"not a pickle")


def test_the_worker_side_drops_tracebacks_too_deep_to_pickle() -> None:
    raise_deep = Reference(pt.__name__, "raise_deep")
    with pytest.raises(ValueError, match="raised deep down") as info:
        _in_worker(raise_deep, {"depth": 600})
    assert "too deep to send back" in info.value.__notes__[0]
    pickle.dumps(info.value)
    with pytest.raises(ExceptionGroup) as group:
        _in_worker(raise_deep, {"depth": 600, "group": True})
    assert [e.__traceback__ for e in group.value.exceptions] == [None, None]
    pickle.dumps(group.value)
    # What does not pickle without its traceback either: the message names what does not.
    with pytest.raises(ToolProcessError, match=r"raised ValueError, which .*'_thread.lock'"):
        _in_worker(raise_deep, {"depth": 600, "locked": True})


def test_a_function_with_no_module_fails_at_decoration() -> None:
    def orphan(x: int) -> int:
        return x

    orphan.__qualname__ = "orphan"
    orphan.__module__ = None  # type: ignore[assignment]
    with pytest.raises(ToolDefinitionError, match="no module and qualified name"):
        tool(isolation="process")(orphan)


async def test_a_callable_that_stops_pickling_fails_its_call() -> None:
    multiplier = pt.Multiplier(2)
    times = tool(isolation="process", name="times")(multiplier.times)
    multiplier.lock = threading.Lock()  # type: ignore[attr-defined]
    with pytest.raises(ToolProcessError, match="function of tool 'times' no longer pickles"):
        await times.execute({"x": 1})


class _DiedError(Exception):
    pass


@pytest.mark.parametrize(
    ("exitcode", "how"),
    [(-9, "killed by SIGKILL"), (-99, "killed by signal 99"), (2, "exit code 2"), (None, "gone")],
)
def test_how_a_worker_died_is_told(exitcode: int | None, how: str) -> None:
    process = types.SimpleNamespace(exitcode=exitcode)
    args = ("Worker died unexpectedly:", process) if exitcode is not None else ("gone",)
    error = _DiedError(*args)
    assert f"died ({how})" in _death("t", error)


async def test_a_cache_scope_around_the_run_chooses_the_workers() -> None:
    import trio_parallel

    client_script = calls(("pid", {}))
    with trio.fail_after(60):
        outside = await pt.pid.execute({})
        async with trio_parallel.cache_scope():
            client = FunctionInvokingChatClient(ScriptedChatClient(client_script * 2), [pt.pid])
            first = await client.get_response(USER)
            second = await client.get_response(USER)
    inside = {first.messages[1].content, second.messages[1].content}
    assert len(inside) == 1  # one worker of the scope's own, reused
    assert str(outside) not in inside  # not the default context's worker


async def test_a_return_annotation_that_does_not_resolve_is_no_reason_to_refuse() -> None:
    triple = tool(isolation="process")(pt.triple)
    assert triple.parameters["required"] == ["x"]
    with trio.fail_after(60):
        assert await triple.execute({"x": 2.0}) == 6
