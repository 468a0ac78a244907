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
    server     opentelemetry-instrumentation-fastapi: the request's span, a child of the
               caller's ``traceparent`` (OTEL_PROPAGATORS, default tracecontext,baggage);
               its per-message ``send``/``receive`` spans are left out (one per SSE frame)

A provider already installed (``opentelemetry-instrument uvicorn app.main:app``, or a test) is
used as it is and left to its owner.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from fastapi import FastAPI
from opentelemetry import context, propagate, trace

__all__ = ["carrier", "context_of", "open_tracing", "tracing_wanted"]

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


def _provider(environ: Mapping[str, str], exporters: list[str]) -> trace.TracerProvider:
    # Imported here: the SDK is loaded only when tracing is on.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
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


@contextmanager
def open_tracing(app: FastAPI, environ: Mapping[str, str] | None = None) -> Iterator[bool]:
    """Tracing for the app's lifetime (see the module docstring); yields whether it is on.
    On exit, a provider built here is flushed and shut down."""
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider

    environ = os.environ if environ is None else environ
    current = trace.get_tracer_provider()
    owned: SdkProvider | None = None
    if not isinstance(current, SdkProvider):
        exporters = tracing_wanted(environ)
        if not exporters:
            yield False
            return
        provider = _provider(environ, exporters)
        assert isinstance(provider, SdkProvider)
        trace.set_tracer_provider(provider)
        owned = current = provider
        log.info("tracing on: exporters %s", ", ".join(exporters))
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=current,
        excluded_urls="/health,/ready,/metrics",
        exclude_spans=["receive", "send"],
    )
    # Starlette built its middleware stack for the lifespan message already: build it again,
    # with the instrumentation's middleware outermost, for the requests to come.
    app.middleware_stack = app.build_middleware_stack()
    try:
        yield True
    finally:
        FastAPIInstrumentor.uninstrument_app(app)  # builds the stack again, without it
        if owned is not None:
            owned.shutdown()


def carrier() -> dict[str, str]:
    """The current trace context as headers (``traceparent``, ``tracestate``, ``baggage``):
    empty when nothing is traced."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def context_of(headers: Mapping[str, str] | None) -> context.Context | None:
    """The trace context :func:`carrier` wrote (a job's parent, read back by its worker)."""
    return propagate.extract(dict(headers)) if headers else None
