"""The benchmark suite: trio_invoke's tool-calling loop beside the bare-Trio floor.

Run it with ``python -m benchmarks`` (or ``nox -s bench``); ``python -m benchmarks --help`` lists
the options. Every workload runs twice in the same process and the same run: through the library
(``FunctionInvokingChatClient`` over a ``ScriptedChatClient``: no model latency, no-op async
tools, public API only) and through the *floor*, a minimal hand-written Trio loop that does the
same work without the library (see :mod:`benchmarks._floor`). The table gives both and their
ratio; the JSON file keeps every sample for comparison over time.

Workloads (``--only NAME``):

* ``fan-out``: one round of N parallel calls, then a final answer; per-call cost
  ``(t(N) - t(1)) / (N - 1)``.
* ``rounds``: 50 consecutive rounds of one call each, then a final answer; per-round cost, and
  beside it the round's structure alone (:mod:`benchmarks._skeleton`) against the same floor.
* ``streaming``: one response of 10,000 text deltas of 5 characters, consumed with ``async for``.
* ``concurrency``: 100 calls that each sleep 50 ms on the real clock; total wall time.
* ``validation``: per-call argument parsing and validation, cached validator vs compiling per call.
* ``memory``: peak traced memory (``tracemalloc``) of the 10,000-call fan-out.
* ``eager``: latency saved by starting tools while the model still streams (only when the loop
  takes ``eager_tools=True``; skipped otherwise).
* ``process``: CPU-bound sync tools in worker processes (``@tool(isolation="process")``) beside
  the same tools in worker threads: wall time of 4 calls of ~200 ms of CPU each and of 1, the
  per-call cost of a trivial tool, the first call in a new worker (needs the extra
  ``trio_invoke[process]``; skipped otherwise).
* ``telemetry``: fan-out per call with ``Telemetry()`` beside the same run without it (needs
  the extra ``trio_invoke[otel]``; the SDK rows need ``opentelemetry-sdk``).
* ``mcp``: one round of 100 parallel calls to a stdio MCP server through the loop, beside the MCP
  SDK's own client (needs the extra ``trio_invoke[mcp]``).
* ``http``, ``conversations``, ``agents``: ``OpenAIChatClient`` against a loopback server in its
  own process (see :mod:`benchmarks._http`; needs the extra ``trio_invoke[openai]``).

The JSON file (``--json PATH``, by default ``benchmarks/results/latest.json``) holds ``date``,
``command``, ``machine`` (what the table's header says), ``settings``, ``seconds_per_workload``,
``skipped`` (a line per workload or row left out, and why) and ``rows``: one per table line, with
``workload``, ``measure``, ``unit`` (``"s"``, ``"B"``, ``"x"`` or ``"/s"``), ``library``,
``floor``, ``ratio``, ``target``, ``ok``, ``note`` and ``samples`` (the samples behind the row,
seconds per run; for the HTTP workloads, wall, CPU and collector seconds of each side), and the
workload's own fields (``n``, ``connections``, ...).

This is a package, not part of the test suite: it measures, it does not assert (a missed target
is reported in the table, and the exit status stays 0). Ctrl-C stops it with one line naming
the workloads that finished, no results file, and exit status 130.
"""
