"""The sans-IO request side of :class:`OpenAIChatClient`: messages as each provider takes them.

``ChatMessage.to_dict()`` is the provider-neutral OpenAI form of a message, reasoning, provider
data and images in tool results included. What goes on the wire differs per provider family,
which :func:`provider_family` tells from the base URL:

* Reasoning goes back, in the field it came in (DeepSeek, Moonshot and OpenRouter: in their own
  field), only where the provider needs or takes it
  (``send_reasoning=None``, the default, follows the family; ``True`` / ``False`` force it), and
  with it OpenRouter's ``reasoning_details`` (not to DeepSeek and Moonshot, which define only
  ``reasoning_content``). OpenAI's own API never gets it.
* DeepSeek's thinking mode refuses an assistant message with tool calls that lacks
  ``reasoning_content`` (HTTP 400), also for a message that came from another provider with no
  reasoning: there the field goes as ``""``.
* An Anthropic model's ``reasoning_details`` item that lacks its signature (the response was
  cut short before it came) is not sent: Anthropic refuses every request that holds one.
* Other provider data stays in the transcript and is not sent.
* A tool message holds text only in the chat-completions API: an image a tool returned goes in a
  user message right after the batch's tool messages, and the tool message says so.
* A tool message goes without the ``name`` the API does not define (some strict servers reject it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from ..._content import ContentPart, ImagePart, TextPart
from ..._messages import ChatMessage, MessageRole
from ..._text import wire_text

__all__ = ["FAMILIES", "ProviderFamily", "provider_family", "wire_messages"]


@attrs.frozen
class ProviderFamily:
    """How one kind of OpenAI-compatible server takes a conversation back."""

    name: str
    """``"openai"``, ``"deepseek"``, ``"openrouter"``, ``"moonshot"``, ``"local"`` or
    ``"other"``."""
    send_reasoning: bool
    """Whether reasoning goes back by default."""
    takes_reasoning: bool = True
    """``False``: reasoning never goes back, whatever the option says (OpenAI)."""
    reasoning_field: str | None = None
    """The field reasoning goes back in; ``None``: the one it came in."""
    reasoning_with_tool_calls: bool = False
    """Every assistant message with tool calls carries the reasoning field (``""`` if none)."""
    reasoning_details: bool = True
    """With the reasoning, OpenRouter's ``reasoning_details`` go back too (MiniMax uses the
    field as well); ``False`` for APIs that define only their own field."""


FAMILIES: Final = {
    family.name: family
    for family in (
        # Chat completions neither returns reasoning nor defines a field for it.
        ProviderFamily("openai", send_reasoning=False, takes_reasoning=False),
        # Thinking mode: a tool-call turn's reasoning_content must come back (HTTP 400 without).
        ProviderFamily(
            "deepseek",
            send_reasoning=True,
            reasoning_field="reasoning_content",
            reasoning_with_tool_calls=True,
            reasoning_details=False,
        ),
        # reasoning_details must be preserved during tool use (Gemini, Anthropic behind it);
        # its own field is reasoning, whichever field the reasoning came in (another server's).
        ProviderFamily("openrouter", send_reasoning=True, reasoning_field="reasoning"),
        # Kimi's thinking models: keep reasoning_content in context during multi-step tool use.
        ProviderFamily(
            "moonshot",
            send_reasoning=True,
            reasoning_field="reasoning_content",
            reasoning_details=False,
        ),
        # vLLM, Ollama, llama.cpp, LM Studio: they read the field back and the model's chat
        # template decides (templates of thinking models keep it during a tool loop).
        ProviderFamily("local", send_reasoning=True),
        # Unknown hosted APIs: strict ones (Groq, Mistral) answer 400 to a field they do not
        # define, even the one they stream; send_reasoning=True where a provider needs it.
        ProviderFamily("other", send_reasoning=False),
    )
}


def provider_family(base_url: str) -> ProviderFamily:
    """The family of the server at ``base_url``, by its host name."""
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if host == "api.openai.com" or host.endswith((".openai.azure.com", ".openai.com")):
        return FAMILIES["openai"]
    if host == "api.deepseek.com":
        return FAMILIES["deepseek"]
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return FAMILIES["openrouter"]
    if host in ("api.moonshot.ai", "api.moonshot.cn"):
        return FAMILIES["moonshot"]
    if _is_local(host):
        return FAMILIES["local"]
    return FAMILIES["other"]


def _is_local(host: str) -> bool:
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host  # a single-label name: a container or a machine on the LAN
    return address.is_loopback or address.is_private or address.is_link_local


def wire_messages(
    messages: Sequence[ChatMessage], family: ProviderFamily, send_reasoning: bool | None = None
) -> list[dict[str, Any]]:
    """``messages`` as the chat-completions API of ``family`` takes them (see the module
    docstring); ``send_reasoning`` overrides the family's default."""
    echo = family.takes_reasoning and (
        family.send_reasoning if send_reasoning is None else send_reasoning
    )
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []  # images of the tool results since the last other message
    for message in messages:
        if message.role is not MessageRole.TOOL and images:
            out.append({"role": "user", "content": images})
            images = []
        data = message.to_dict()
        for key in message.provider_data:
            data.pop(wire_text(key), None)  # the key as to_dict() wrote it (once)
        if message.reasoning is not None:
            del data[message.reasoning_field]
        if message.role is MessageRole.ASSISTANT and echo:
            _add_reasoning(data, message, family)
        elif message.role is MessageRole.TOOL:
            data.pop("name", None)
            if not isinstance(message.content, str):
                data["content"], found = _tool_content(message.content)
                if found:
                    images += _image_message(message, found)
        out.append(data)
    if images:
        out.append({"role": "user", "content": images})
    return out


def _add_reasoning(data: dict[str, Any], message: ChatMessage, family: ProviderFamily) -> None:
    field = family.reasoning_field or message.reasoning_field
    if message.reasoning is not None:
        data[field] = message.reasoning
    elif family.reasoning_with_tool_calls and message.tool_calls:
        data[field] = ""
    details = message.provider_data.get("reasoning_details")
    if details is not None and family.reasoning_details:
        sent = message.to_dict()["reasoning_details"]
        if isinstance(sent, list) and any(_unsigned_claude(detail) for detail in sent):
            sent = [detail for detail in sent if not _unsigned_claude(detail)]
            if not sent:
                return
        data["reasoning_details"] = sent


def _unsigned_claude(detail: object) -> bool:
    """An Anthropic model's ``reasoning.text`` item without its signature, which comes last: a
    response cut short (a cancelled run). Anthropic, behind OpenRouter, refuses every request
    that holds one (HTTP 400), so it is not sent; the transcript keeps it."""
    return (
        isinstance(detail, dict)
        and detail.get("type") == "reasoning.text"
        and str(detail.get("format", "")).startswith("anthropic-")
        and not detail.get("signature")
    )


def _tool_content(parts: tuple[ContentPart, ...]) -> tuple[Any, list[ImagePart]]:
    found = [part for part in parts if isinstance(part, ImagePart)]
    if not found:
        return [part.to_dict() for part in parts], []
    text = "".join(part.text for part in parts if isinstance(part, TextPart))
    many = len(found) > 1
    note = f"[{len(found)} image{'s' if many else ''} in the user message that follows]"
    return f"{text}\n{note}" if text else note, found


def _image_message(message: ChatMessage, found: list[ImagePart]) -> list[dict[str, Any]]:
    tool = f" ({message.name})" if message.name else ""
    label = "The images" if len(found) > 1 else "The image"
    intro = f"{label} returned by tool call {message.tool_call_id}{tool}:"
    return [TextPart(intro).to_dict(), *(image.to_dict() for image in found)]
