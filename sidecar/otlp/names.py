"""Which span attributes say what: the GenAI semantic conventions (1.37 and later), the
deprecated names instrumentations still emit, and vLLM's tracing attributes. Earlier names
in a tuple win. Durations are in seconds."""

from __future__ import annotations

GENAI_PREFIX = "gen_ai."

OPERATION = ("gen_ai.operation.name",)
# operations that are one model generation; spans of other GenAI operations (embeddings,
# tools, agents) are skipped
GENERATION_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
PROVIDER = ("gen_ai.provider.name", "gen_ai.system")  # gen_ai.system: deprecated in 1.37
MODEL = ("gen_ai.response.model", "gen_ai.request.model")
FINISH_REASONS = ("gen_ai.response.finish_reasons",)  # an array (vLLM's too)
INPUT_TOKENS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
)  # prompt_: deprecated, vLLM
OUTPUT_TOKENS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
)  # completion_: as above
REQUEST_ID = ("gen_ai.response.id", "gen_ai.request.id")  # request.id: vLLM
CONVERSATION = ("gen_ai.conversation.id", "session.id")
USER = ("user.id", "enduser.id", "gen_ai.user.id")  # enduser.id: deprecated

# content, current conventions: JSON (or structured) message lists
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
# content, deprecated: whole texts, or indexed prompt/completion attributes
PROMPT_TEXT = ("gen_ai.prompt",)
COMPLETION_TEXT = ("gen_ai.completion",)
INDEXED_PROMPT = "gen_ai.prompt."  # gen_ai.prompt.<i>.content / .role
INDEXED_COMPLETION = "gen_ai.completion."  # gen_ai.completion.<i>.content / .finish_reason
# content as span events (semconv before 1.37)
PROMPT_EVENTS = frozenset(
    {
        "gen_ai.content.prompt",
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
    }
)
COMPLETION_EVENTS = frozenset({"gen_ai.content.completion", "gen_ai.choice"})
EVENT_TEXT = ("gen_ai.prompt", "gen_ai.completion", "content", "gen_ai.event.content", "message")

# timings (seconds)
TTFT_S = (
    "gen_ai.latency.time_to_first_token",
    "gen_ai.server.time_to_first_token",
    "gen_ai.response.time_to_first_chunk",
)
E2E_S = ("gen_ai.latency.e2e",)
QUEUE_S = ("gen_ai.latency.time_in_queue",)
TPOT_S = ("gen_ai.server.time_per_output_token",)

# Vigil's own labels, read from span or resource attributes
TENANT = ("vigil.tenant",)  # only from keys that may label others (operator, admin)
SEGMENT = ("vigil.segment",)
PROMPT_VERSION = ("vigil.prompt_version",)
SAMPLE_WEIGHT = ("vigil.sample_weight",)

# vLLM's request span (vllm/tracing: SpanAttributes) as it names its attributes
VLLM_ATTRIBUTES = (
    "gen_ai.usage.completion_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.request.max_tokens",
    "gen_ai.request.top_p",
    "gen_ai.request.temperature",
    "gen_ai.response.model",
    "gen_ai.request.id",
    "gen_ai.request.n",
    "gen_ai.usage.num_sequences",
    "gen_ai.latency.time_in_queue",
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
    "gen_ai.latency.time_in_scheduler",
    "gen_ai.latency.time_in_model_forward",
    "gen_ai.latency.time_in_model_execute",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
    "gen_ai.response.finish_reasons",
)
