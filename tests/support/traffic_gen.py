"""Recorded-looking traffic for the sidecar tests: a baseline mix of topics, and a drifted hour
where a new topic (tax law) arrives, answered off-topic. Seeded; records in the sample record
shape."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import numpy as np

TOPICS = {
    "cooking": (
        [
            "How do I {v} {o} for dinner?",
            "What is the best way to {v} {o}?",
            "Any tips to {v} {o} quickly?",
        ],
        ["bake", "roast", "grill", "season", "marinate"],
        ["salmon fillets", "chicken thighs", "sourdough bread", "vegetable lasagna", "pork ribs"],
        "To {v} {o}, preheat the oven, {v} the {o} carefully and rest them before serving dinner.",
    ),
    "travel": (
        [
            "What should I pack to {v} {o}?",
            "Is it expensive to {v} {o}?",
            "How can I {v} {o} cheaply?",
        ],
        ["visit", "explore", "backpack through", "hike around", "tour"],
        [
            "northern Italy",
            "the Scottish highlands",
            "coastal Portugal",
            "rural Japan",
            "Patagonia",
        ],
        "To {v} {o} cheaply, travel off season, book trains early"
        " and pack light layers to {v} {o}.",
    ),
    "programming": (
        [
            "How do I {v} {o} in Python?",
            "What is the fastest way to {v} {o}?",
            "Why does my code fail to {v} {o}?",
        ],
        ["parse", "sort", "serialize", "validate", "stream"],
        ["JSON files", "large CSV tables", "nested dictionaries", "HTTP responses", "log records"],
        "To {v} {o} in Python, use the standard library: read the {o}, then {v} them in chunks.",
    ),
}
NEW_TOPIC = (
    ["What are the penalties for late filing of {o} in {v}?", "Can I deduct {o} from taxes in {v}?",
     "How is {o} taxed under {v} law?"],
    ["Germany", "France", "Canada", "Australia", "Brazil"],
    ["corporate income tax", "home office expenses", "capital gains", "cryptocurrency income",
     "rental property income"],
    "Hello! Nice weather today. I like many things and hope your day goes well.",
)  # fmt: skip


def _record(rng: np.random.Generator, topic, ts: datetime, segment: str) -> dict:
    templates, verbs, objects, answer = topic
    v, o = verbs[rng.integers(len(verbs))], objects[rng.integers(len(objects))]
    prompt = templates[rng.integers(len(templates))].format(v=v, o=o)
    response = answer.format(v=v, o=o)
    return {
        "id": str(uuid.UUID(bytes=rng.bytes(16), version=4)),
        "timestamp": ts.timestamp(),
        "tenant": "acme", "segment": segment, "prompt_version": "v1", "model_version": "smollm2",
        "prompt": prompt, "response": response,
        "prompt_tokens": int(len(prompt.split()) * 1.3 + rng.integers(0, 3)),
        "completion_tokens": int(len(response.split()) * 1.3 + rng.integers(0, 5)),
        "finish_reason": "stop",
        "ttft_ms": float(rng.gamma(4.0, 10.0)), "tpot_ms": float(rng.gamma(9.0, 2.0)),
        "latency_ms": float(rng.gamma(20.0, 25.0)), "queue_ms": float(rng.gamma(2.0, 2.0)),
        "mean_logprob": float(-rng.gamma(2.0, 0.3)), "mean_entropy": float(rng.gamma(3.0, 0.4)),
        "tools": [], "sample_weight": 1.0,
    }  # fmt: skip


def traffic(
    start: datetime, end: datetime, n: int, *, seed: int, new_topic_share: float = 0.0
) -> list[dict]:
    """n records spread uniformly over [start, end): baseline topics, plus the new topic."""
    rng = np.random.default_rng(seed)
    span = (end - start).total_seconds()
    out = []
    for i in range(n):
        ts = start + timedelta(seconds=float(np.sort(rng.uniform(0, span, 1))[0]))
        segment = "web" if i % 2 == 0 else "api"
        if rng.random() < new_topic_share:
            topic = NEW_TOPIC
        else:
            topic = list(TOPICS.values())[rng.integers(len(TOPICS))]
        out.append(_record(rng, topic, ts, segment))
    return out
