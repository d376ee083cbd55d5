"""Who serves a base URL, as OpenTelemetry's GenAI conventions name it (``gen_ai.provider.name``).

This is what telemetry reports, not how a conversation goes on the wire: the OpenAI client's
``ProviderFamily`` (``openai/_wire.py``) decides that, and the two differ (Azure OpenAI is the
family ``"openai"`` but the provider ``"azure.ai.openai"``; Groq is the family ``"other"``).
The names are the conventions' well-known values where one exists; OpenRouter, which has none,
is ``"openrouter"``; any other host is the client's own API (``"openai"`` for an
OpenAI-compatible server: the conventions ask for the instrumentation's best knowledge).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

__all__ = ["gen_ai_provider"]

_HOSTS: Final = {
    "openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.moonshot.ai": "moonshot_ai",
    "api.moonshot.cn": "moonshot_ai",
    "api.perplexity.ai": "perplexity",
    "api.cohere.ai": "cohere",
    "api.cohere.com": "cohere",
    "generativelanguage.googleapis.com": "gcp.gemini",
    "aiplatform.googleapis.com": "gcp.vertex_ai",
    "openrouter.ai": "openrouter",
}
"""Hosts (and their subdomains) and who they are."""

_SUFFIXES: Final = (
    (".openai.azure.com", "azure.ai.openai"),
    (".cognitiveservices.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    (".models.ai.azure.com", "azure.ai.inference"),
    ("-aiplatform.googleapis.com", "gcp.vertex_ai"),  # a region's endpoint
)


def gen_ai_provider(base_url: str, default: str) -> str:
    """Who serves ``base_url``, by its host name; ``default`` (the API the client speaks)
    for a host this does not know."""
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if host.startswith("bedrock") and host.endswith(".amazonaws.com"):
        return "aws.bedrock"
    for suffix, name in _SUFFIXES:
        if host.endswith(suffix):
            return name
    while host:
        known = _HOSTS.get(host)
        if known is not None:
            return known
        host = host.partition(".")[2]  # a subdomain is its parent's: eu.api.openai.com
    return default
