"""The default alert rules, as data: which drifted result proposes which alert.

A rule matches results by test name and feature patterns (fnmatch); all drifted results of one
rule in one segment become one proposed alert. `alerts/` can load overrides from a config file
and pass them to `rules_from_dicts` / `merge_rules`: same name replaces a default, and
`"enabled": false` switches one off.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

from drift.result import TestResult

SEVERITIES = ("review", "moderate", "high", "critical")
KINDS = ("prompt", "model", "eval", "persona", "operational")
TOKEN_FEATURES = ("prompt_chars", "prompt_tokens", "completion_tokens", "response_chars",
                  "tools_count")
LATENCY_FEATURES = ("latency_ms", "ttft_ms", "tpot_ms", "queue_ms")


@dataclass(frozen=True)
class Rule:
    name: str
    test: str
    features: tuple[str, ...]
    severity: str
    kind: str
    description: str = ""
    enabled: bool = True

    def matches(self, result: TestResult) -> bool:
        return (self.enabled and result.test == self.test
                and any(fnmatch(result.feature, pattern) for pattern in self.features))


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("token_psi", "psi", TOKEN_FEATURES, "moderate", "prompt",
         "PSI above threshold on prompt/completion size features"),
    Rule("prompt_embedding_mmd", "mmd", ("prompt_embedding",), "high", "prompt",
         "MMD significant on prompt embeddings: what users ask has changed"),
    Rule("response_embedding_mmd", "mmd", ("response_embedding",), "high", "model",
         "MMD significant on response embeddings: what the model answers has changed"),
    Rule("output_stats_psi", "psi", ("mean_logprob", "mean_entropy"), "moderate", "model",
         "PSI above threshold on the model's token confidence"),
    Rule("finish_reason_js", "js", ("finish_reason",), "moderate", "model",
         "finish reasons shifted (e.g. more length cut-offs)"),
    Rule("tools_js", "js", ("tool",), "moderate", "prompt", "the tools requests name shifted"),
    Rule("eval_drop", "eval_trend", ("eval_*",), "critical", "eval",
         "7-day eval score mean dropped > 5 % (significant)"),
    Rule("new_cluster", "new_cluster", ("*",), "review", "persona",
         "a new group of embeddings (≥ 10 % of the window) outside every baseline cluster"),
    Rule("cluster_growth", "cluster_growth", ("*",), "review", "persona",
         "a small baseline cluster grew significantly"),
    Rule("latency_psi", "psi", LATENCY_FEATURES, "moderate", "operational",
         "PSI above threshold on latency, TTFT, TPOT or queue time"),
)


def rules_from_dicts(items: Iterable[dict[str, Any]]) -> list[Rule]:
    """Rules from config data; ValueError names the rule and the field at fault."""
    out = []
    for i, item in enumerate(items):
        where = f"rule #{i} ({item.get('name', '?')})" if isinstance(item, dict) else f"rule #{i}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object, got {type(item).__name__}")
        for key in ("name", "test", "severity", "kind"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise ValueError(f"{where}: '{key}' must be a non-empty string")
        if item["severity"] not in SEVERITIES:
            raise ValueError(f"{where}: severity {item['severity']!r} is not one of {SEVERITIES}")
        if item["kind"] not in KINDS:
            raise ValueError(f"{where}: kind {item['kind']!r} is not one of {KINDS}")
        features = item.get("features", ["*"])
        if isinstance(features, str) or not all(isinstance(f, str) for f in features):
            raise ValueError(f"{where}: 'features' must be a list of strings")
        out.append(Rule(item["name"], item["test"], tuple(features), item["severity"], item["kind"],
                        str(item.get("description", "")), bool(item.get("enabled", True))))
    return out


def merge_rules(defaults: Iterable[Rule], overrides: Iterable[Rule]) -> list[Rule]:
    """Overrides replace defaults of the same name; new names are appended."""
    merged = {r.name: r for r in defaults}
    for r in overrides:
        merged[r.name] = r
    return [r for r in merged.values() if r.enabled]
