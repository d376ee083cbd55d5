"""OpenAI-compatible ``/chat/completions`` streaming; import ``OpenAIChatClient`` from the top.

``_decode`` (the chunk decoder) is sans-IO and needs no extra; ``_client`` needs httpx
(``trio_invoke[openai]``).
"""
