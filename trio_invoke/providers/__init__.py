"""Chat clients for model providers; import them from ``trio_invoke``.

``_sse`` is the sans-IO Server-Sent Events parser the HTTP clients share; each provider is a
subpackage whose decoder is plain synchronous code, importable without the provider's extra.
"""
