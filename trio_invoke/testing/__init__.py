"""Test doubles, Hypothesis strategies and checks for your own tests of tools, chat clients and
agents.

What trio_invoke's own test suite uses, shipped for yours:

* chat clients with no network: :class:`ScriptedChatClient`, which replays a script, and
  :class:`FunctionChatClient`, whose responses come from a function of the conversation
  (annotate that function as :data:`ChatFunction`, its result as :data:`FunctionResponse`);
* building responses: :func:`tool_call_updates` (the streamed form of one tool call) and
  :func:`tool_calls_response` (a whole response that calls tools);
* running and checking: :func:`run_to_completion`, which runs a client and returns its updates
  and messages, and :func:`assert_transcript_valid`, the invariant every transcript must keep;
* Hypothesis strategies: :func:`json_values`, :func:`tool_arguments`,
  :func:`schemas_with_arguments`, :func:`tool_call_streams` and :func:`scripted_rounds`.

The strategies need Hypothesis, which comes with the extra ``trio_invoke[testing]``; everything
else works without it (the strategies are imported on first use).
"""

import importlib as _importlib
import importlib.util as _importlib_util
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .._scripted import ScriptedCall as ScriptedCall
from .._scripted import ScriptedChatClient as ScriptedChatClient
from ._function_client import ChatFunction as ChatFunction
from ._function_client import FunctionChatClient as FunctionChatClient
from ._function_client import FunctionResponse as FunctionResponse
from ._responses import tool_call_updates as tool_call_updates
from ._responses import tool_calls_response as tool_calls_response
from ._transcripts import RunResult as RunResult
from ._transcripts import assert_transcript_valid as assert_transcript_valid
from ._transcripts import run_to_completion as run_to_completion

if _TYPE_CHECKING:  # at run time, imported on first use by __getattr__ below
    from ._strategies import (
        json_values,
        schemas_with_arguments,
        scripted_rounds,
        tool_arguments,
        tool_call_streams,
    )

__all__ = [
    "ChatFunction",
    "FunctionChatClient",
    "FunctionResponse",
    "RunResult",
    "ScriptedCall",
    "ScriptedChatClient",
    "assert_transcript_valid",
    "json_values",
    "run_to_completion",
    "schemas_with_arguments",
    "scripted_rounds",
    "tool_arguments",
    "tool_call_streams",
    "tool_call_updates",
    "tool_calls_response",
]

_STRATEGIES = frozenset(
    {
        "json_values",
        "schemas_with_arguments",
        "scripted_rounds",
        "tool_arguments",
        "tool_call_streams",
    }
)
"""Public names that need Hypothesis: imported from ``._strategies`` on first access."""


def _hypothesis_installed() -> bool:
    """Whether ``import hypothesis`` can find it (without importing it)."""
    try:
        return _importlib_util.find_spec("hypothesis") is not None
    except (ImportError, ValueError):  # a finder refused it; or sys.modules["hypothesis"] = None
        return False


if not _hypothesis_installed():  # so that ``from trio_invoke.testing import *`` works without
    for _strategy in sorted(_STRATEGIES):
        __all__.remove(_strategy)
    del _strategy


def __getattr__(name: str) -> _Any:
    """Import a strategy on first use; without Hypothesis that raises an ``ImportError`` naming
    the extra to install, ``trio_invoke[testing]``."""
    if name not in _STRATEGIES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = _importlib.import_module("._strategies", __package__)
    except ImportError as exc:
        raise ImportError(
            f"trio_invoke.testing.{name} needs Hypothesis, which is not installed: "
            'pip install "trio-invoke[testing] @ git+https://github.com/trio-invoke/trio_invoke" '
            '(from a checkout: pip install ".[testing]")'
        ) from exc
    value = getattr(module, name)
    value.__module__ = __name__  # reprs and tracebacks show the public path
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _STRATEGIES)


for _name in __all__:
    _value = globals().get(_name)
    if isinstance(_value, type | type(tool_calls_response)) and _value.__module__.startswith(
        __name__ + "."
    ):
        _value.__module__ = __name__  # reprs and tracebacks show the public path
del _name, _value
