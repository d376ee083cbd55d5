"""The attribute, span and metric names trio_invoke emits, in one place.

They follow OpenTelemetry's GenAI semantic conventions, which are still marked "Development"
and have moved between repositories; we keep our own constants rather than import the
incubating ``opentelemetry-semantic-conventions`` package, so a rename there is one edit here.
"""

from __future__ import annotations

from typing import Final

OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"

TOKEN_USAGE_METRIC: Final = "gen_ai.client.token.usage"
OPERATION_DURATION_METRIC: Final = "gen_ai.client.operation.duration"
