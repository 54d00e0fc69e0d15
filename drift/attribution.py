"""Which side changed: the kind of a proposed drift alert follows the run's results.

Prompts drive responses, so a response shift seen while the prompts moved is explained by the
prompts and is not a model change. Per segment:

- prompt side drifted (a drifted result on a prompt feature; for p-value tests at
  p ≤ EVIDENCE_ALPHA / m, Bonferroni over the segment's m prompt-side p-value tests, so that one
  of several prompt tests crossing 0.01 by chance does not relabel a model change): every
  proposal of kind `prompt` or `model` in that segment is of kind `prompt`;
- prompts steady: a proposal whose evidence is all on response features (response embedding,
  token statistics, completion length, finish reason) is of kind `model`, whatever the rule
  table says (e.g. a completion-length PSI with nothing else moving is the model).

Only proposals whose evidence is prompt/response statistics are attributed: one that names its
own cause (a new model_version or prompt_version value) keeps its rule's kind.

A silent template change (same prompt_version, new wording) moves the prompt features, so it
is `prompt` even though the responses move too. Other kinds (eval, persona, operational) are
left as the rules set them. Pure: results and proposals in, proposals out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from drift.outcome import ProposedAlert
from drift.result import TestResult

PROMPT_FEATURES = frozenset(
    {"prompt_embedding", "prompt_chars", "prompt_tokens", "tools_count", "tool"}
)
RESPONSE_FEATURES = frozenset(
    {
        "response_embedding",
        "response_stats",
        "response_chars",
        "completion_tokens",
        "mean_logprob",
        "mean_entropy",
        "finish_reason",
    }
)
ATTRIBUTED_KINDS = frozenset({"prompt", "model"})
EVIDENCE_ALPHA = 0.01  # a prompt-side p-value test counts as evidence only at this level or below


def _is_prompt_test(r: TestResult) -> bool:
    return r.feature in PROMPT_FEATURES and not r.insufficient


def prompt_side_evidence(results: Sequence[TestResult]) -> dict[str, list[TestResult]]:
    """Per segment, the drifted prompt-side results that count as a prompt change."""
    p_tests: dict[str, int] = {}
    for r in results:
        if _is_prompt_test(r) and r.p_value is not None:
            p_tests[r.segment] = p_tests.get(r.segment, 0) + 1
    out: dict[str, list[TestResult]] = {}
    for r in results:
        if not (r.drifted and _is_prompt_test(r)):
            continue
        level = EVIDENCE_ALPHA / max(1, p_tests.get(r.segment, 1))
        if r.p_value is None or r.p_value <= level:
            out.setdefault(r.segment, []).append(r)
    return out


def _features(alert: ProposedAlert) -> set[str]:
    return {str(r.get("feature", "")) for r in alert.evidence.get("results", [])}


def attribute_kind(alert: ProposedAlert, prompt_evidence: Sequence[TestResult]) -> tuple[str, str]:
    """(kind, why) for one proposal given its segment's prompt-side evidence."""
    if alert.kind not in ATTRIBUTED_KINDS:
        return alert.kind, "not a prompt/model kind"
    features = _features(alert)
    if not features or not features <= PROMPT_FEATURES | RESPONSE_FEATURES:
        # e.g. a new model_version value: the alert names its own cause
        return alert.kind, "kept from the rule: evidence beyond prompt/response statistics"
    if prompt_evidence:
        names = ", ".join(sorted({f"{r.test}:{r.feature}" for r in prompt_evidence}))
        return "prompt", f"prompt side drifted ({names})"
    if features <= RESPONSE_FEATURES:
        return "model", "responses drifted with prompts steady"
    return alert.kind, "kept from the rule"


def attribute_alerts(
    alerts: Sequence[ProposedAlert], results: Sequence[TestResult]
) -> list[ProposedAlert]:
    """The proposals with their kinds set by attribution, the reason kept in the evidence."""
    evidence = prompt_side_evidence(results)
    out = []
    for alert in alerts:
        kind, why = attribute_kind(alert, evidence.get(alert.segment, []))
        if alert.kind not in ATTRIBUTED_KINDS:
            out.append(alert)
            continue
        note = {"kind": kind, "rule_kind": alert.kind, "reason": why}
        summary = (
            alert.summary
            if kind == alert.kind
            else f"{alert.summary} — attributed to {kind}: {why}"
        )
        out.append(
            replace(
                alert, kind=kind, summary=summary, evidence={**alert.evidence, "attribution": note}
            )
        )
    return out
