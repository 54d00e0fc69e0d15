"""The one table of alert rules: every alert Vigil raises, its tier, its kind and what resolves it.

Why it lives here: the drift job (`drift/`, pure) turns drifted test results into proposed alerts
through this table, and `alerts/` validates, tiers and resolves alerts with it. `drift` and
`alerts` are siblings (neither imports the other), so the table sits in the leaf `vigil` package,
which every package may import. It imports nothing but the standard library.

Two sorts of rule:
- drift rules (`test` set) fire when a drifted, sufficient result of `test` on a feature matching
  one of `features` (fnmatch) appears; all hits of one rule in one segment make one alert. The
  drift job resolves an open one as soon as a later window no longer fires it.
- condition rules (`test` None) are raised by the code that watches the condition, through
  `alerts.service.raise_condition`, and resolved by that same call once the condition is healthy.

An operator's rules file (`VIGIL_ALERT_RULES_PATH`, `alerts/rules_file.py`) can re-tier, re-route or
mute any of these by name; it cannot add rows to this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

SEVERITIES = ("review", "moderate", "high", "critical")
# escalation order: a re-fired alert whose severity rises is notified at once (no cooldown)
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}
KINDS = ("prompt", "model", "eval", "persona", "operational", "monitoring", "engine")

TOKEN_FEATURES = (
    "prompt_chars",
    "prompt_tokens",
    "completion_tokens",
    "response_chars",
    "tools_count",
    "instruction_chars",
)
LATENCY_FEATURES = ("latency_ms", "ttft_ms", "tpot_ms", "queue_ms")


@dataclass(frozen=True)
class Rule:
    name: str
    test: str | None  # None: a condition rule, never matched against drift results
    features: tuple[str, ...]
    severity: str
    kind: str
    description: str = ""
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(
                f"rule {self.name}: severity {self.severity!r} is not one of {SEVERITIES}"
            )
        if self.kind not in KINDS:
            raise ValueError(f"rule {self.name}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def is_drift(self) -> bool:
        return self.test is not None

    def matches(self, result: Any) -> bool:
        """Does a drift result (anything with `test` and `feature`) fall under this rule?"""
        return (
            self.enabled
            and self.test is not None
            and result.test == self.test
            and any(fnmatch(result.feature, pattern) for pattern in self.features)
        )


def _new_value(name: str, features: tuple[str, ...], severity: str, kind: str, what: str) -> Rule:
    return Rule(
        name,
        "new_category",
        features,
        severity,
        kind,
        f"{what} the baseline never saw takes a share of the window",
    )


# drift rules: raised and resolved by the drift job, one window at a time
DRIFT_RULES: tuple[Rule, ...] = (
    Rule(
        "token_psi",
        "psi",
        TOKEN_FEATURES,
        "moderate",
        "prompt",
        "PSI above threshold on prompt/completion size features",
    ),
    Rule(
        "prompt_embedding_mmd",
        "mmd",
        ("prompt_embedding",),
        "high",
        "prompt",
        "MMD significant on prompt embeddings: what users ask has changed",
    ),
    Rule(
        "response_embedding_mmd",
        "mmd",
        ("response_embedding",),
        "high",
        "model",
        "MMD significant on response embeddings: what the model answers has changed",
    ),
    Rule(
        "output_stats_psi",
        "psi",
        ("mean_logprob", "mean_entropy"),
        "moderate",
        "model",
        "PSI above threshold on the model's token confidence",
    ),
    Rule(
        "finish_reason_js",
        "js",
        ("finish_reason",),
        "moderate",
        "model",
        "finish reasons shifted (e.g. more length cut-offs)",
    ),
    Rule("tools_js", "js", ("tool",), "moderate", "prompt", "the tools requests name shifted"),
    Rule(
        "eval_drop",
        "eval_trend",
        ("eval_*",),
        "critical",
        "eval",
        "7-day eval score mean dropped > 5 % (significant)",
    ),
    Rule(
        "new_cluster",
        "new_cluster",
        ("*",),
        "review",
        "persona",
        "a new group of embeddings (≥ 10 % of the window) outside every baseline cluster",
    ),
    Rule(
        "cluster_growth",
        "cluster_growth",
        ("*",),
        "review",
        "persona",
        "a small baseline cluster grew significantly",
    ),
    Rule(
        "latency_psi",
        "psi",
        LATENCY_FEATURES,
        "moderate",
        "operational",
        "PSI above threshold on latency, TTFT, TPOT or queue time",
    ),
    Rule(
        "prompt_cluster_mix",
        "cluster_mix",
        ("prompt_embedding",),
        "high",
        "prompt",
        "prompts fill the baseline's fine clusters differently (e.g. a silent rewording)",
    ),
    Rule(
        "response_conditional_mmd",
        "conditional_mmd",
        (
            "response_embedding",
            "response_stats",
            "response_embedding_by_template",
            "response_stats_by_template",
        ),
        "high",
        "model",
        "responses changed within matched prompt clusters or prompt templates",
    ),
    Rule(
        "response_shift",
        "response_agg",
        ("responses",),
        "high",
        "model",
        "answers changed for like prompts: their content, token confidence or length",
    ),
    Rule(
        "response_shift_building",
        "response_evidence",
        ("responses",),
        "high",
        "model",
        "answers to like prompts have drifted a little in every recent window",
    ),
    Rule(
        "prompt_template_mix",
        "js",
        ("prompt_template", "system_prompt"),
        "high",
        "prompt",
        "the mix of prompt templates or system prompts shifted (e.g. a silent rewording)",
    ),
    Rule(
        "new_prompt_template",
        "new_prompt_template",
        ("prompt_template",),
        "high",
        "prompt",
        "prompts in a wording the baseline never had take a share of the window",
    ),
    Rule(
        "instruction_words_shift",
        "instruction_ngrams",
        ("instruction_words",),
        "high",
        "prompt",
        "the share of prompts using an instruction word or word pair shifted (a rewording)",
    ),
    # a value the baseline never had (drift.detectors.new_values.new_values_test), named in the
    # summary
    _new_value("new_model_version", ("model_version",), "high", "model", "a model version"),
    _new_value("new_prompt_version", ("prompt_version",), "moderate", "prompt", "a prompt version"),
    _new_value("new_segment", ("tenant", "segment"), "review", "persona", "a tenant or segment"),
    _new_value("new_finish_reason", ("finish_reason",), "moderate", "model", "a finish reason"),
    _new_value("new_tool", ("tool",), "moderate", "prompt", "a tool named in requests"),
    _new_value("new_system_prompt", ("system_prompt",), "high", "prompt", "a system prompt"),
)

# condition rules: raised and resolved by whoever watches the condition
CONDITIONS: dict[str, tuple[tuple[str, str, str], ...]] = {  # kind: (rule id, severity, what)
    "operational": (
        ("baseline_refresh", "review", "the active baseline is older than its maximum age"),
    ),
    "monitoring": (
        ("monitor_window_failed", "high", "a drift window failed or was skipped: not checked"),
        (
            "monitor_report_failed",
            "moderate",
            "a drift run's report could not be written: its results and alerts stand",
        ),
        ("monitor_no_baseline", "review", "no active baseline yet: drift is not measured"),
        (
            "monitor_baseline_invalid",
            "high",
            "the active baseline is not validated: drift results are untrustworthy",
        ),
        ("monitor_backlog", "moderate", "the embed or eval backlog is older than allowed"),
        ("monitor_dead_letters", "moderate", "alert deliveries were dead-lettered"),
        ("monitor_scheduler_stalled", "high", "the sidecar's jobs have not run on time"),
        ("monitor_leader_lost", "high", "no sidecar replica holds the leader lease"),
    ),
    "model": (
        (
            "token_stats_cusum",
            "moderate",
            "the online CUSUM on token statistics passed its threshold",
        ),
    ),
    "engine": (
        ("canary_mismatch", "high", "the engine's canary prompts changed their outputs"),
        ("canary_perplexity", "critical", "the engine's perplexity on its canaries degraded"),
    ),
}

DEFAULT_RULES: tuple[Rule, ...] = DRIFT_RULES + tuple(
    Rule(name, None, (), severity, kind, description)
    for kind, rows in CONDITIONS.items()
    for name, severity, description in rows
)

RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in DEFAULT_RULES}
# the rules the drift job resolves when a window does not fire them
DRIFT_RULE_NAMES: frozenset[str] = frozenset(r.name for r in DRIFT_RULES)
# the kinds of drift the drift rules detect, in table order
DRIFT_KINDS: tuple[str, ...] = tuple(dict.fromkeys(r.kind for r in DRIFT_RULES))


def condition_rule(name: str) -> Rule:
    """The condition rule called `name`; KeyError listing the known ones for any other name."""
    rule = RULES_BY_NAME.get(name)
    if rule is None or rule.is_drift:
        known = ", ".join(r.name for r in DEFAULT_RULES if not r.is_drift)
        raise KeyError(f"{name!r} is not a condition rule; known: {known}")
    return rule
