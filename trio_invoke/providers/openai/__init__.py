"""OpenAI-compatible ``/chat/completions`` streaming; import ``OpenAIChatClient`` from the top.

``_decode`` (the chunk decoder) and ``_wire`` (messages as each provider takes them) are sans-IO
and need no extra; ``_client`` needs httpx2 (``trio_invoke[openai]``).
"""
