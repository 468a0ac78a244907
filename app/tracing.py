"""OpenTelemetry tracing, configured only by the standard ``OTEL_*`` variables.

Off unless ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``) or an OTLP
endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: then
``otlp``); ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` keep it off. Off, nothing
is installed: the few spans a turn opens are the OTel API's non-recording ones (no export, no
middleware, nothing per chunk).

On, :func:`open_tracing` (the lifespan) builds an SDK ``TracerProvider`` from the variables and
installs it as OTel's global, as every OTel instrumentation expects (set once per process: OTel
refuses a second; our modules hold ``trace.get_tracer(__name__)``, a proxy that holds nothing
until then, the OTel idiom):

    resource   OTEL_SERVICE_NAME (default ``eco-gateway``), OTEL_RESOURCE_ATTRIBUTES
    sampler    OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on)
    export     a BatchSpanProcessor (OTEL_BSP_*) per exporter; ``otlp`` speaks
               OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL ``http/protobuf`` (the installed one;
               ``grpc`` needs opentelemetry-exporter-otlp-proto-grpc); endpoint, headers and
               timeout from the exporter's own OTEL_EXPORTER_OTLP_* variables
    server     FastAPI's own telemetry (``FastAPI(telemetry=...)``, :data:`SERVER_TELEMETRY`): the
               request's span, a child of the caller's ``traceparent`` (OTEL_PROPAGATORS,
               default tracecontext,baggage), ended with the response's last byte (an SSE
               stream's end); no per-operation spans, metrics or logs of its own
               (Prometheus and our logs have those); /health, /ready, /metrics untraced
    redacted   the values of a request's query (``url.query``) except the few that name no
               one's words: a free-text GET carries the user's message there
               (:class:`RedactQuery`)

Why FastAPI's own server span and not opentelemetry-instrumentation-fastapi: the same span
from the framework itself, without a second middleware around every ASGI message (one per SSE
frame) and FastAPI's walk of the middleware stack per request to find that middleware
(bench/README.md "Tracing off and on").

A provider already installed (``opentelemetry-instrument uvicorn app.main:app``, or a test) is
used as it is, with :class:`RedactQuery` added, and left to its owner.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode

from fastapi.telemetry import TelemetryConfig
from opentelemetry import context, propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind

__all__ = [
    "SERVER_TELEMETRY",
    "RedactQuery",
    "carrier",
    "context_of",
    "open_tracing",
    "redact_query",
    "tracing_wanted",
]

log = logging.getLogger(__name__)

_DEFAULT_SERVICE = "eco-gateway"


def tracing_wanted(environ: Mapping[str, str]) -> list[str]:
    """The exporters the variables ask for; empty: tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in names if n]
    if not names and (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    ):
        names = ["otlp"]
    return [n for n in names if n != "none"]


def _provider(environ: Mapping[str, str], exporters: list[str]) -> TracerProvider:
    # Imported here: the exporters are loaded only when tracing is on.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    attributes = {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: _DEFAULT_SERVICE}
    provider = TracerProvider(resource=Resource.create(attributes))  # reads OTEL_* itself
    for name in exporters:
        exporter: SpanExporter
        if name == "otlp":
            protocol = environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            )
            if protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                    OTLPSpanExporter as GrpcExporter,
                )

                exporter = GrpcExporter()
            elif protocol == "http/protobuf":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )

                exporter = OTLPSpanExporter()
            else:
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported")
        elif name == "console":
            exporter = ConsoleSpanExporter()
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: use otlp, console or none")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


_UNTRACED = frozenset({"/health", "/ready", "/metrics"})
#: Query parameters whose values a trace (and an access log line) may show: the base-info
#: selections and the session.
_SHOWN_PARAMETERS = frozenset({"sessionId", "location", "workType", "category"})
#: The API's other query parameters: named, their values never shown. Any other name is as
#: free as a value (a key sent as ``?sk-...``): replaced too.
_NAMED_PARAMETERS = _SHOWN_PARAMETERS | {"message", "lastEventId"}
_SHOWN_MAX_CHARS = 128  # a session id's bound; a selection is a few characters
REDACTED = "REDACTED"


def redact_query(query: str) -> str:
    """``query`` (as sent, URL-encoded) with every value but :data:`_SHOWN_PARAMETERS`'
    replaced by ``REDACTED``, and every name the API does not read too: the one rule for
    traces (:class:`RedactQuery`) and access log lines (``app.logs``). Never raises."""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode(
        [
            (
                name if name in _NAMED_PARAMETERS else REDACTED,
                value[:_SHOWN_MAX_CHARS] if name in _SHOWN_PARAMETERS else REDACTED,
            )
            for name, value in pairs
        ]
    )


#: FastAPI's own server span (``FastAPI(telemetry=SERVER_TELEMETRY)``): on whenever an SDK
#: provider is installed, off (one check per request) otherwise.
SERVER_TELEMETRY: TelemetryConfig = {
    "tracing": True,
    "operation_spans": False,  # dependency resolution, endpoint, serialization: 3 spans a turn
    "metrics": False,  # Prometheus has them (app/metrics.py)
    "logs": False,  # ours say what failed without the input (app/main.py)
    "exclude": lambda scope: scope.get("path") in _UNTRACED,
}


class RedactQuery(SpanProcessor):
    """Redacts a span's ``url.query`` (:func:`redact_query`) as the span starts, before any
    exporter sees it: a free-text GET carries the user's message there, and a trace backend is
    no place for what users write."""

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        if span.kind is not SpanKind.SERVER or not span.attributes:
            return
        query = span.attributes.get("url.query")
        if isinstance(query, str):
            span.set_attribute("url.query", redact_query(query))

    def on_end(self, span: ReadableSpan) -> None:
        pass


@contextmanager
def open_tracing(environ: Mapping[str, str] | None = None) -> Iterator[bool]:
    """Tracing for the app's lifetime (see the module docstring); yields whether it is on.
    On exit, a provider built here is flushed and shut down."""
    environ = os.environ if environ is None else environ
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # installed by its owner: used as it is
        _redacting(current)
        yield True
        return
    exporters = tracing_wanted(environ)
    if not exporters:
        yield False
        return
    provider = _redacting(_provider(environ, exporters))
    trace.set_tracer_provider(provider)
    log.info("tracing on: exporters %s", ", ".join(exporters))
    try:
        yield True
    finally:
        provider.shutdown()


def _redacting(provider: TracerProvider) -> TracerProvider:
    """``provider`` with a :class:`RedactQuery` (added once)."""
    if not getattr(provider, "_eco_redacting", False):
        provider.add_span_processor(RedactQuery())
        provider._eco_redacting = True  # type: ignore[attr-defined]
    return provider


def carrier() -> dict[str, str]:
    """The current trace context as headers (``traceparent``, ``tracestate``, ``baggage``):
    empty when nothing is traced."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def context_of(headers: Mapping[str, str] | None) -> context.Context | None:
    """The trace context :func:`carrier` wrote (a job's parent, read back by its worker)."""
    return propagate.extract(dict(headers)) if headers else None
