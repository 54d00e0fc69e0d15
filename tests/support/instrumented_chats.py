"""Three chats (two plain, one streamed) through the official `openai` client instrumented by
one real OpenTelemetry instrumentation package, exported over OTLP/HTTP (protobuf) to a
sidecar: spans to `/v1/traces`, log records to `/v1/logs`. Run as a script, one package per
process (each instrumentation patches the client and reads its settings once):

    python instrumented_chats.py PACKAGE SIDECAR_URL KEY STUB_URL [PROMPT ...]

PACKAGE is a key of `PACKAGES`; its content-capture settings are those each package documents.
With `VIGIL_TEST_CHATS` naming a JSON file of `{"prompt", "at"}` (epoch seconds), those chats
run instead, each on a clock of its own that starts at its `at` (epoch seconds) and moves one
millisecond per reading (the process's `time.time_ns` is replaced before OpenTelemetry imports
it), so the SDK stamps spans and log records in past windows, with durations that do not depend
on how busy the machine is: traffic of past windows through the real packages.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_real_time_ns = time.time_ns
_virtual_ns: list[int] = []  # set: the virtual clock's next reading


def _time_ns() -> int:
    if not _virtual_ns:
        return _real_time_ns()
    _virtual_ns[0] += 1_000_000
    return _virtual_ns[0]


time.time_ns = _time_ns  # before OpenTelemetry imports it

# package -> (environment for content capture, instrumentor factory, the pip name)
PACKAGES: dict[str, dict[str, Any]] = {
    "openai-v2 event_only": {
        "pip": "opentelemetry-instrumentation-openai-v2",
        "env": {
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only",
        },
    },
    "openai-v2 span_only": {
        "pip": "opentelemetry-instrumentation-openai-v2",
        "env": {
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
        },
    },
    "openllmetry attributes": {
        "pip": "opentelemetry-instrumentation-openai",
        "env": {"TRACELOOP_TRACE_CONTENT": "true"},
    },
    "openllmetry events": {
        "pip": "opentelemetry-instrumentation-openai",
        "env": {"TRACELOOP_TRACE_CONTENT": "true"},
        "kwargs": {"use_legacy_attributes": False},
        "logs_first": True,  # the log records reach the sidecar before their spans
    },
    "openinference": {
        "pip": "openinference-instrumentation-openai",
        "env": {"OPENINFERENCE_HIDE_INPUTS": "false", "OPENINFERENCE_HIDE_OUTPUTS": "false"},
    },
}
DEFAULT_PROMPTS = ("What is the capital of France?", "Name three primes.", "Count to five.")


def _instrumentor(package: str) -> Any:
    if package.startswith("openai-v2"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        return OpenAIInstrumentor()
    if package.startswith("openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        return OpenAIInstrumentor(**PACKAGES[package].get("kwargs", {}))
    from openinference.instrumentation.openai import OpenAIInstrumentor

    return OpenAIInstrumentor()


def run(
    package: str, sidecar: str, key: str, stub: str, prompts: list[str], at: list[float]
) -> None:
    os.environ.update(PACKAGES[package]["env"])
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    headers = {"Authorization": f"Bearer {key}"}
    resource = Resource.create({"service.name": "shop", "vigil.segment": "matrix"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{sidecar}/v1/traces", headers=headers, timeout=60)
        )
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{sidecar}/v1/logs", headers=headers, timeout=60)
        )
    )
    from opentelemetry import _logs

    _logs.set_logger_provider(logger_provider)
    _instrumentor(package).instrument(
        tracer_provider=tracer_provider, logger_provider=logger_provider
    )
    import openai

    client = openai.OpenAI(base_url=stub, api_key="stub-key")
    for i, prompt in enumerate(prompts):
        if at:
            _virtual_ns[:] = [int(at[i] * 1e9)]
        messages = [{"role": "user", "content": prompt}]
        if i % 3 == 2:  # every third chat streamed, with the usage chunk
            stream = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            for _chunk in stream:
                pass
        else:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    _virtual_ns.clear()
    providers = [tracer_provider, logger_provider]
    if PACKAGES[package].get("logs_first"):
        providers.reverse()
    for provider in providers:  # shutdown flushes: the join works in either order
        provider.shutdown()


if __name__ == "__main__":
    package, sidecar, key, stub, *prompts = sys.argv[1:]
    times: list[float] = []
    if os.environ.get("VIGIL_TEST_CHATS"):
        with open(os.environ["VIGIL_TEST_CHATS"]) as f:
            chats = json.load(f)
        prompts, times = [c["prompt"] for c in chats], [c["at"] for c in chats]
    run(package, sidecar, key, stub, prompts or list(DEFAULT_PROMPTS), times)
