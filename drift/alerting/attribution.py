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

- both sides moved without a prompt-side explanation (prompt-side results drifted but none
  reaches the evidence level, or a proposal's own evidence mixes prompt and response features):
  the rule's kind stays and the attribution says `unclear` instead of guessing.

Prompt-side features include the template mix (`prompt_template`: a silent rewording moves it
while the content keeps the prompt embedding still), the system-prompt hash, the length of
the instruction and the shares of its words (drift.features.prompt_features). Each attribution lists
the evidence it stands on.

Only proposals whose evidence is prompt/response statistics are attributed: one that names its
own cause (a new model_version or prompt_version value) keeps its rule's kind.

A silent template change (same prompt_version, new wording) moves the prompt features, so it
is `prompt` even though the responses move too. Other kinds (eval, persona, operational) are
left as the rules set them. Pure: results and proposals in, proposals out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from drift.alerting.proposals import feature_words
from drift.outcome import ProposedAlert
from drift.result import TestResult

PROMPT_FEATURES = frozenset(
    {
        "prompt_embedding",
        "prompt_chars",
        "prompt_tokens",
        "tools_count",
        "tool",
        "prompt_template",
        "system_prompt",
        "instruction_chars",
        "instruction_words",
    }
)
RESPONSE_FEATURES = frozenset(
    {
        "response_embedding",
        "response_stats",
        "responses",
        "response_embedding_by_template",
        "response_stats_by_template",
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


def _names(results: Sequence[TestResult]) -> list[str]:
    return sorted({f"{r.test}:{r.feature}" for r in results})


def attribute_kind(
    alert: ProposedAlert,
    prompt_evidence: Sequence[TestResult],
    weak_prompt: Sequence[TestResult] = (),
) -> tuple[str, str, str]:
    """(kind, why, confidence) for one proposal given its segment's prompt-side evidence and
    the prompt-side results that drifted below the evidence level (`weak_prompt`)."""
    if alert.kind not in ATTRIBUTED_KINDS:
        return alert.kind, "not a prompt/model kind", "clear"
    features = _features(alert)
    if not features or not features <= PROMPT_FEATURES | RESPONSE_FEATURES:
        # e.g. a new model_version value: the alert names its own cause
        return alert.kind, "kept from the rule: evidence beyond prompt/response statistics", "clear"
    if prompt_evidence:
        return "prompt", f"prompt side drifted ({', '.join(_names(prompt_evidence))})", "clear"
    if features <= RESPONSE_FEATURES and not weak_prompt:
        return "model", "responses drifted with prompts steady", "clear"
    if features <= PROMPT_FEATURES:
        return alert.kind, "kept from the rule", "clear"
    return (
        alert.kind,
        "answers and prompts both moved, but no prompt-side test is strong enough to explain it",
        "unclear",
    )


def supporting_words(results: Sequence[TestResult]) -> str:
    """The prompt-side evidence in people's words: "prompt templates and instruction length"."""
    words = sorted(
        {
            "the prompts' wording" if r.test == "new_prompt_template" else feature_words(r.feature)
            for r in results
        }
    )
    if len(words) < 2:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def attribute_alerts(
    alerts: Sequence[ProposedAlert], results: Sequence[TestResult]
) -> list[ProposedAlert]:
    """The proposals with their kinds set by attribution, the reason kept in the evidence."""
    evidence = prompt_side_evidence(results)
    weak: dict[str, list[TestResult]] = {}
    for r in results:
        if r.drifted and _is_prompt_test(r) and r not in evidence.get(r.segment, []):
            weak.setdefault(r.segment, []).append(r)
    out = []
    for alert in alerts:
        support = evidence.get(alert.segment, [])
        kind, why, confidence = attribute_kind(alert, support, weak.get(alert.segment, []))
        if alert.kind not in ATTRIBUTED_KINDS:
            out.append(alert)
            continue
        note = {
            "kind": kind,
            "rule_kind": alert.kind,
            "reason": why,
            "confidence": confidence,
            "evidence": _names(support)
            if kind == "prompt"
            else _names(weak.get(alert.segment, [])),
        }
        summary = alert.summary
        if confidence == "unclear":
            summary += " — cause unclear: prompts and answers both moved"
        elif kind != alert.kind:
            summary += f" — caused by the prompts: {supporting_words(support)} moved"
        note["supports"] = supporting_words(support if kind == "prompt" else [])
        out.append(
            replace(
                alert, kind=kind, summary=summary, evidence={**alert.evidence, "attribution": note}
            )
        )
    return out
