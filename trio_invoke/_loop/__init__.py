"""The tool-calling loop, on Trio.

* ``_client``: :class:`FunctionInvokingChatClient`, the public surface (``run``, ``get_response``).
* ``_state``: what one run and one round share between their tasks.
* ``_invoke``: one tool call, from its arguments to its one result.
* ``_stream``: what the caller holds: the stream of updates, the collected response.
* ``_channels``: hand-off between tasks without a schedule point per update.
"""
