"""Anthropic's Messages API, streamed; import ``AnthropicChatClient`` from the top.

``_decode`` (the event decoder) and ``_wire`` (a conversation as the API takes it) are sans-IO
and need no extra; ``_client`` needs httpx2 (``trio_invoke[anthropic]``).
"""
