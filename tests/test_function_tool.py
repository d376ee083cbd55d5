from __future__ import annotations

import enum
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
import trio

from trio_invoke import ChatMessage, FunctionInvokingChatClient, ScriptedChatClient
from trio_invoke._exceptions import ArgumentsError, ConfigurationError, ToolDefinitionError
from trio_invoke._function_tool import FunctionTool, tool
from trio_invoke._tools import ApprovalRequiredTool, Tool, ToolDefinition
from trio_invoke.testing import tool_call_updates


class Unit(enum.Enum):
    C = "c"
    F = "f"


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(name="weather", description="Weather, by city.", requires_approval=True)
async def get_weather(city: str, unit: Unit | None = None) -> dict[str, Any]:
    """Ignored: description= wins."""
    return {"city": city, "unit": unit}


def test_decorator_without_parentheses() -> None:
    assert isinstance(add, FunctionTool)
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.requires_approval is False
    assert add.is_async is False
    assert add.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first."},
            "b": {"type": "integer", "description": "The second.", "default": 1},
        },
        "required": ["a"],
        "additionalProperties": False,
    }


def test_decorator_with_options() -> None:
    assert get_weather.name == "weather"
    assert get_weather.description == "Weather, by city."
    assert get_weather.requires_approval is True
    assert get_weather.is_async is True
    assert get_weather.parameters["properties"]["unit"] == {
        "anyOf": [{"enum": ["c", "f"], "type": "string"}, {"type": "null"}],
        "default": None,
    }


def test_empty_parentheses() -> None:
    @tool()
    def ping() -> str:
        return "pong"

    assert ping.name == "ping"
    assert ping.description == ""


def test_satisfies_the_tool_protocol() -> None:
    assert isinstance(add, Tool)
    assert isinstance(get_weather, Tool)
    assert ToolDefinition.of(add).to_dict()["function"]["name"] == "add"
    assert ApprovalRequiredTool(add).requires_approval is True


def test_stays_callable_like_the_function() -> None:
    assert add(2, 3) == 5
    assert add(a=2) == 3
    assert add.func(1) == 2
    assert add.__wrapped__ is add.func
    assert str(inspect.signature(add)) == "(a: 'int', b: 'int' = 1) -> 'int'"


async def test_calling_an_async_tool_directly_gives_the_coroutine() -> None:
    assert await get_weather("Oslo") == {"city": "Oslo", "unit": None}


def test_repr() -> None:
    assert repr(add) == f"<FunctionTool 'add' for {__name__}.add>"
    assert repr(get_weather) == (
        f"<FunctionTool 'weather' for {__name__}.get_weather, requires_approval=True>"
    )


def test_identity_equality() -> None:
    def f() -> None:
        pass

    assert tool(f) != tool(f)
    assert len({add, add}) == 1


def test_validator_is_compiled_at_decoration() -> None:
    add.validate({"a": 1})
    with pytest.raises(ArgumentsError, match="field 'a': expected integer, got string"):
        add.validate({"a": "1"})
    with pytest.raises(ArgumentsError, match=r"must not contain \{'c'\} properties"):
        add.validate({"a": 1, "c": 2})


async def test_sync_function_runs_in_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        seen.append(threading.get_ident())
        return "here"

    assert await where.execute({}) == "here"
    assert seen
    assert seen[0] != threading.get_ident()


async def test_async_function_runs_in_the_calling_thread() -> None:
    seen: list[int] = []

    @tool
    async def where() -> str:
        await trio.lowlevel.checkpoint()
        seen.append(threading.get_ident())
        return "here"

    assert await where.execute({}) == "here"
    assert seen == [threading.get_ident()]


async def test_async_callable_object() -> None:
    class Greeter:
        __name__ = "greet"

        async def __call__(self, name: str) -> str:
            return f"hi {name}"

    greet = tool(Greeter())
    assert greet.is_async
    assert greet.parameters["required"] == ["name"]
    assert await greet.execute({"name": "Ada"}) == "hi Ada"


class _Counted:
    """A decorator written as a class (``functools.update_wrapper``), as some libraries'
    caches and retries are; its ``__call__`` takes anything."""

    def __init__(self, func: Callable[..., Any]) -> None:
        functools.update_wrapper(self, func)
        self.func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return ("counted", self.func(*args, **kwargs))


async def test_a_function_under_a_decorator_object_is_described_by_its_own_hints() -> None:
    @tool
    @_Counted
    def square(x: int, unit: Literal["m", "cm"] = "m") -> int:
        """Square a length."""
        return x * x

    assert square.parameters["properties"] == {
        "x": {"type": "integer"},
        "unit": {"enum": ["m", "cm"], "type": "string", "default": "m"},
    }
    assert square.description == "Square a length."
    assert await square.execute({"x": 3}) == ("counted", 9)


async def test_a_plain_decorators_wrapper_of_an_async_function_is_awaited_in_trio() -> None:
    # A decorator written the usual way (functools.wraps, a sync wrapper that returns what the
    # function returns) around an ``async def``: the wrapper gives a coroutine, to be awaited
    # here -- in a worker thread it would be a coroutine nobody awaits.
    calls: list[str] = []

    def logged(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(func.__name__)
            return func(*args, **kwargs)

        return wrapper

    @tool
    @logged
    async def greet(name: str) -> str:
        """Greet someone."""
        await trio.lowlevel.checkpoint()
        return f"hi {name} from {threading.get_ident()}"

    assert greet.is_async
    assert greet.description == "Greet someone."
    assert greet.parameters["required"] == ["name"]
    assert await greet.execute({"name": "Ada"}) == f"hi Ada from {threading.get_ident()}"
    assert calls == ["greet"]
    agent = FunctionInvokingChatClient(
        ScriptedChatClient([tool_call_updates("c1", "greet", '{"name": "Bo"}'), "done"]),
        [greet],
    )
    response = await agent.get_response([ChatMessage.user("hi")])
    assert response.messages[1].text == f"hi Bo from {threading.get_ident()}"


async def test_partial_and_class() -> None:
    def scale(x: int, factor: int) -> int:
        return x * factor

    double = tool(name="double")(functools.partial(scale, factor=2))
    assert double.parameters["required"] == ["x"]
    assert double.parameters["properties"]["factor"] == {"type": "integer", "default": 2}
    assert await double.execute({"x": 4}) == 8

    class Box:
        """A box."""

        def __init__(self, size: int) -> None:
            self.size = size

    box = tool(Box)
    assert box.parameters["required"] == ["size"]
    assert box.description == "A box."
    assert (await box.execute({"size": 3})).size == 3


async def test_execute_passes_arguments_by_name_and_defaults_apply() -> None:
    assert await add.execute({"a": 2}) == 3
    assert await add.execute({"b": 5, "a": 2}) == 7


async def test_exceptions_propagate_unchanged() -> None:
    @tool
    def broken(x: int) -> int:
        raise LookupError(f"no {x}")

    @tool
    async def broken_async(x: int) -> int:
        raise LookupError(f"no {x}")

    for t in (broken, broken_async):
        with pytest.raises(LookupError, match="no 3"):
            await t.execute({"x": 3})


async def test_enum_arguments_become_members() -> None:
    got: list[Any] = []

    @tool
    def convert(
        *,
        unit: Unit,
        maybe: Unit | None = None,
        many: list[Unit] | None = None,
        by_name: dict[str, Annotated[Unit, "A unit."]] | None = None,
        count: int = 0,
        mode: Literal["a", "b"] = "a",
    ) -> None:
        got.append((unit, maybe, many, by_name, count, mode))

    arguments = {
        "unit": "c",
        "maybe": "f",
        "many": ["f", "c"],
        "by_name": {"x": "c"},
        "count": 2.0,
        "mode": "b",
    }
    convert.validate(arguments)
    await convert.execute(arguments)
    assert got == [(Unit.C, Unit.F, [Unit.F, Unit.C], {"x": Unit.C}, 2, "b")]
    assert type(got[0][4]) is int
    assert arguments["unit"] == "c"  # the caller's dict is left alone

    await convert.execute({"unit": "f", "maybe": None})
    assert got[-1][:2] == (Unit.F, None)


async def test_async_enum_arguments_become_members() -> None:
    assert await get_weather.execute({"city": "Oslo", "unit": "f"}) == {
        "city": "Oslo",
        "unit": Unit.F,
    }


async def test_cancelling_a_sync_tool_abandons_its_thread() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        started.set()
        release.wait()
        finished.set()
        return "late"

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            outcome: list[str] = []

            async def run() -> None:
                with trio.CancelScope() as scope:
                    cancel_scopes.append(scope)
                    outcome.append(await slow.execute({}))

            cancel_scopes: list[trio.CancelScope] = []
            nursery.start_soon(run)
            await trio.to_thread.run_sync(started.wait)
            cancel_scopes[0].cancel()
        # execute returned (cancelled) while the thread is still blocked.
        assert outcome == []
        assert not finished.is_set()
        release.set()
        await trio.to_thread.run_sync(finished.wait)  # the abandoned thread runs on to its end


async def test_cancelling_an_async_tool(autojump_clock: trio.abc.Clock) -> None:
    @tool
    async def forever() -> None:
        await trio.sleep_forever()

    with trio.move_on_after(10) as scope:
        await forever.execute({})
    assert scope.cancelled_caught


def test_invalid_tool_names() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool name '<lambda>' must match"):
        tool(lambda: None)
    with pytest.raises(ToolDefinitionError, match=r"tool name 'has space' must match"):
        tool(name="has space")(add.func)
    with pytest.raises(ToolDefinitionError, match="has no __name__; pass @tool"):

        class Nameless:
            def __call__(self) -> None:
                pass

        tool(Nameless())
    assert tool(name="ok-name_2")(lambda: None).name == "ok-name_2"


@pytest.mark.parametrize("name", ["add\n", "a" * 64 + "\n", ""])
def test_a_name_with_a_trailing_newline_is_refused_at_decoration(name: str) -> None:
    # As the client refuses it: the whole name must match, "$" alone would let "\n" through.
    with pytest.raises(ToolDefinitionError, match="must match"):
        tool(name=name)(add.func)


def test_unsupported_parameter_fails_at_decoration() -> None:
    with pytest.raises(
        ToolDefinitionError,
        match=r"^@tool cannot describe parameter 'data' of function 'upload': "
        r"unsupported annotation <class 'bytes'>$",
    ):

        @tool
        def upload(data: bytes) -> None:
            pass


@pytest.mark.parametrize(
    ("wrapped", "match"),
    [
        (lambda x: x, r"^ApprovalRequiredTool: <lambda> is a function, not a tool: decorate it"),
        (3, r"^ApprovalRequiredTool: 3 is not a tool: it has no name"),
        (None, r"^ApprovalRequiredTool: None is not a tool"),
    ],
)
def test_approval_required_tool_refuses_what_is_not_a_tool_at_once(
    wrapped: object, match: str
) -> None:
    # Said where the mistake is made, not when a client is built from the wrapper.
    with pytest.raises(TypeError, match=match):
        ApprovalRequiredTool(wrapped)  # type: ignore[arg-type]


def _described(x: str) -> str:
    """Describe x."""
    return x


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"name": 5}, ToolDefinitionError, r"^tool name must be a str or None, got 5$"),
        ({"name": b"echo"}, ToolDefinitionError, r"^tool name must be a str or None, got b'echo'"),
        (
            {"description": 5},
            ToolDefinitionError,
            r"^tool description must be a str or None, got 5",
        ),
        ({"description": ["a"]}, ToolDefinitionError, r"tool description must be a str or None"),
        (
            {"requires_approval": "no"},
            ConfigurationError,
            r"^tool requires_approval must be True or False, got 'no'$",
        ),
        ({"requires_approval": None}, ConfigurationError, r"requires_approval .* got None"),
        ({"requires_approval": 1}, ConfigurationError, r"requires_approval .* got 1"),
    ],
)
def test_an_option_of_the_wrong_type_is_named(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        tool(**options)(_described)
    with pytest.raises(error, match=match):
        FunctionTool(_described, **options)
