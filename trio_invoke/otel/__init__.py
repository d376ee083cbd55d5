"""OpenTelemetry traces and metrics of the loop, after the GenAI semantic conventions.

``Telemetry(...)`` is passed as ``FunctionInvokingChatClient(..., telemetry=Telemetry())``. It
needs the extra ``trio_invoke[otel]`` (``opentelemetry-api`` only: without an SDK configured it
costs next to nothing). See :class:`Telemetry` for the spans and metrics.
"""

from ._telemetry import Telemetry as Telemetry

__all__ = ["Telemetry"]

Telemetry.__module__ = __name__
