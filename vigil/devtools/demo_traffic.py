"""Synthetic traffic for `vigil demo`: a steady day of customer-support questions, then a drift
event — a new kind of user (tenant `newco` on `mobile`, asking about deployment errors) and a
prompt change (`v2`, a longer system preamble). Seeded: the same run gives the same samples."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

STEADY_TOPICS = {
    "billing": [
        "Why was I charged twice for order {n}?",
        "How do I update the card on my account?",
        "Can I get an invoice for my last {n} orders?",
        "What does the fee of {n} dollars cover?",
    ],
    "shipping": [
        "Where is my parcel {n}? It was due yesterday.",
        "Can you ship order {n} to a different address?",
        "How long does express delivery take to zone {n}?",
    ],
    "returns": [
        "How do I return item {n}?",
        "My refund for return {n} has not arrived yet.",
        "Can I exchange the shoes from order {n} for a bigger size?",
    ],
    "account": [
        "I cannot log in after changing my e-mail.",
        "How do I delete my account?",
        "Please reset the password for user {n}.",
    ],
}
EVENT_PROMPTS = [
    "Our deployment fails with CrashLoopBackOff on pod {n}, what does exit code 137 mean?",
    "kubectl says ImagePullBackOff for image tag v{n}; how do I debug registry auth?",
    "The helm upgrade to chart {n} times out waiting for readiness probes.",
    "Terraform plan wants to destroy {n} resources after a provider upgrade, is that safe?",
    "Why does my CI runner run out of memory building a {n} MB Docker image?",
]
V2_PREAMBLE = (
    "You are a meticulous assistant. Think about the user's situation, restate the question, "
    "list the likely causes and answer step by step. "
)


def _sample(
    rng: random.Random,
    i: int,
    ts: datetime,
    prompt: str,
    *,
    tenant: str,
    segment: str,
    prompt_version: str,
    tag: str,
) -> dict[str, Any]:
    words = len(prompt.split())
    completion = rng.randint(20, 60)
    ttft = rng.gauss(60, 10)
    tpot = rng.gauss(12, 2)
    return {
        "id": f"demo-{tag}-{i}",
        "timestamp": ts.isoformat(),
        "prompt": prompt,
        "response": f"Thanks for reaching out. Here is what to do about: {prompt[:60]}",
        "tenant": tenant,
        "segment": segment,
        "prompt_version": prompt_version,
        "model_version": "smollm2-135m-instruct-q4_1",
        "prompt_tokens": int(words * 1.3) + 8,
        "completion_tokens": completion,
        "finish_reason": "stop",
        "ttft_ms": max(ttft, 5.0),
        "tpot_ms": max(tpot, 1.0),
        "latency_ms": max(ttft, 5.0) + completion * max(tpot, 1.0),
    }


def steady(
    start: datetime, end: datetime, n: int, seed: int = 1, tag: str = "day"
) -> list[dict[str, Any]]:
    """n samples spread evenly over [start, end) with small jitter."""
    rng = random.Random(seed)
    span = (end - start).total_seconds()
    out = []
    for i in range(n):
        topic = rng.choice(sorted(STEADY_TOPICS))
        prompt = rng.choice(STEADY_TOPICS[topic]).format(n=rng.randint(100, 999))
        ts = start + timedelta(seconds=min(span - 1, (i + rng.random()) * span / n))
        out.append(
            _sample(
                rng,
                i,
                ts,
                prompt,
                tenant="acme",
                segment=rng.choice(["web", "api"]),
                prompt_version="v1",
                tag=tag,
            )
        )
    return out


def drift_event(start: datetime, end: datetime, n: int, seed: int = 2) -> list[dict[str, Any]]:
    """The event: a new tenant on a new segment with a new topic, under the new prompt version."""
    rng = random.Random(seed)
    span = (end - start).total_seconds()
    out = []
    for i in range(n):
        prompt = V2_PREAMBLE + rng.choice(EVENT_PROMPTS).format(n=rng.randint(2, 99))
        ts = start + timedelta(seconds=rng.random() * span)
        sample = _sample(
            rng, i, ts, prompt, tenant="newco", segment="mobile", prompt_version="v2", tag="event"
        )
        sample["completion_tokens"] = rng.randint(150, 250)  # the new users get long answers
        out.append(sample)
    return out
