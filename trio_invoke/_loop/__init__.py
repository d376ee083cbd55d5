"""The tool-calling loop, on Trio; read it in this order.

* ``_client``: :class:`FunctionInvokingChatClient`, the public surface (``run``, ``get_response``):
  checks what the caller gives and builds the run.
* ``_run``: one run, the seed's Looping and Done states, in the task that owns it.
* ``_policy``: what to do next -- the round cap, the error streak, the budget, the approval pause,
  the final finish reason -- as plain code with no Trio.
* ``_round``: one round, the seed's Streaming state: the consumer task, the call tasks, the
  ``events`` and ``messages`` channels.
* ``_invoke``: one tool call, from its arguments to its one result.
* ``_stream``: what the caller holds: the stream of updates, the collected response.
* ``_channels``: hand-off without a schedule point, and the exceptions of our own nurseries.
"""
