"""What to do: one runbook entry per rule of the table (`vigil.alert_table`) — what it means and
the first three things to check — with links to the slice's segment page, the run's cluster
explorer and its report. A rules file entry can point at the operator's own runbook
(`runbook_url`) or replace the checks (`next_steps`); both travel in every payload.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from alerts.routing import match_values
from alerts.rules_file import RuleSet

_WINDOW = "the report's result table (which segments moved, by how much against the threshold)"
_PROMPTS = "the cluster explorer: the new or grown clusters and their example prompts"
_RELEASES = "what was released in the window: prompt templates, model builds, client versions"

# rule -> (what it means, the first three checks)
RUNBOOKS: dict[str, tuple[str, tuple[str, str, str]]] = {
    "token_psi": (
        "Prompt or answer sizes moved away from the baseline.",
        (
            _WINDOW,
            "the segment page: which tenant or segment sends the longer or shorter requests",
            "a prompt template change (prompt_version) or a client that truncates",
        ),
    ),
    "prompt_embedding_mmd": (
        "What users ask has changed: the prompt embeddings moved.",
        (_PROMPTS, "the segment page of the slice that moved: new tenant, new product?", _RELEASES),
    ),
    "response_embedding_mmd": (
        "What the model answers has changed.",
        (
            "whether the prompts moved too (a prompt change explains answer changes)",
            "the canaries: did the engine or model build change?",
            _RELEASES,
        ),
    ),
    "output_stats_psi": (
        "The model's token confidence (log-probability, entropy) moved.",
        (
            "the canaries and the model_version in the window",
            "sampling settings sent by clients",
            "whether the prompts moved (new topics lower confidence)",
        ),
    ),
    "finish_reason_js": (
        "Requests end differently, e.g. more cut off at the length limit.",
        (
            "max_tokens sent by clients and the engine's limits",
            "answer lengths on the report",
            "stop strings in the prompt template",
        ),
    ),
    "tools_js": (
        "The tools requests name shifted.",
        (
            "client releases that add or drop tools",
            "the segment page of the slice that moved",
            _WINDOW,
        ),
    ),
    "eval_drop": (
        "Answer quality scores fell over seven days.",
        (
            "the report's eval picture: which evaluator and slice fell",
            "example answers with low scores on the alert page",
            "model or prompt releases in the week",
        ),
    ),
    "new_cluster": (
        "A new group of prompts, unlike anything in the baseline, holds a share of the window.",
        (_PROMPTS, "the segment page: who sends them", "whether the baseline should include them"),
    ),
    "cluster_growth": (
        "A topic that was rare in the baseline grew.",
        (
            _PROMPTS,
            "the segment page: who sends more of it",
            "a campaign, outage or release behind it",
        ),
    ),
    "latency_psi": (
        "Latency, time to first token, time per token or queue time moved.",
        (
            "the engine's Grafana dashboard: load, queue and KV cache use",
            "answer lengths (longer answers take longer)",
            "the engine's host: GPU, other tenants",
        ),
    ),
    "prompt_cluster_mix": (
        "Prompts fill the baseline's topics in different proportions.",
        (
            _PROMPTS,
            "a prompt template change (prompt_version) in the window",
            "the segment page of the slice that moved",
        ),
    ),
    "response_conditional_mmd": (
        "Answers to the same kind of prompt changed.",
        (
            "the canaries: did the engine or model build change?",
            "example answers on the alert page",
            _RELEASES,
        ),
    ),
    "response_shift": (
        "Answers to like prompts changed: what they say, how sure the model is, how long.",
        (
            "the canaries: did the engine or model build change?",
            "the serving config: quantization, sampling defaults, checkpoint",
            _RELEASES,
        ),
    ),
    "response_shift_building": (
        "Answers to like prompts have differed a little in every window since the first one "
        "named: too little for one window, too steady to be chance.",
        (
            "the canaries: did the engine or model build change?",
            "the serving config: quantization, sampling defaults, checkpoint",
            _RELEASES,
        ),
    ),
    "new_model_version": (
        "A model version the baseline never saw serves traffic.",
        (
            "whether the release was intended",
            "the canaries against the new build",
            "rebuild the baseline once the release is accepted",
        ),
    ),
    "new_prompt_version": (
        "A prompt version the baseline never saw is in use.",
        (
            "the prompt change's diff and rollout share",
            "answer quality of its slice",
            "rebuild the baseline once the change is accepted",
        ),
    ),
    "new_segment": (
        "A tenant or segment the baseline never saw sends traffic.",
        (
            "the segment page of the new slice: what it asks",
            "its share of the window (capacity)",
            "rebuild the baseline once the tenant is expected",
        ),
    ),
    "new_finish_reason": (
        "Requests end in a way the baseline never saw.",
        ("the engine's errors and limits", "client settings (max_tokens, stop)", _WINDOW),
    ),
    "new_tool": (
        "Requests name a tool the baseline never saw.",
        ("the client release that added it", "the segment page of its slice", _WINDOW),
    ),
    "prompt_template_mix": (
        "Prompts use the application's templates or system prompts in different proportions: "
        "a template reworded, added or retired without a new prompt_version.",
        (
            "the incident's new-wording table and the templates' shares in the report",
            "the prompt change's diff and rollout (which client or service sends it)",
            "answer quality of the affected templates",
        ),
    ),
    "new_prompt_template": (
        "Prompts in a wording the baseline never had take a share of traffic.",
        (
            "the new wording on the incident page: was the template change intended?",
            "whether answers moved with it (the response alerts in this incident)",
            "set prompt_version on the new template, rebuild the baseline once accepted",
        ),
    ),
    "instruction_words_shift": (
        "Prompts use an instruction word or word pair of the application's templates more or "
        "less often: part of a template reworded, or one template's traffic moved.",
        (
            "the words named in the alert, and which templates hold them (the report's templates)",
            "the prompt change's diff and rollout (which client or service sends it)",
            "whether answers moved with it (the response alerts in this incident)",
        ),
    ),
    "new_system_prompt": (
        "Requests carry a system prompt the baseline never saw.",
        (
            "the release that changed the system prompt",
            "answers of its slice (example answers on the alert page)",
            "rebuild the baseline once the change is accepted",
        ),
    ),
    "baseline_refresh": (
        "The active baseline is old: today's traffic is compared with a stale picture.",
        ("build a baseline over a recent steady day on /baselines", "validate it", "activate it"),
    ),
    "monitor_window_failed": (
        "A drift window failed or was skipped: that hour was not checked.",
        (
            "the sidecar's log for the error",
            "the database's health and disk",
            "re-run the hour with `vigil report --hours 1`",
        ),
    ),
    "monitor_report_failed": (
        "The hour was checked and its alerts sent, but its HTML report could not be written.",
        (
            "the sidecar's log for the error (the alert's evidence quotes it)",
            "the report directory's disk space and permissions",
            "the run's results and alerts on the alert pages, which do not need the report",
        ),
    ),
    "monitor_no_baseline": (
        "No active baseline yet: drift is not measured.",
        ("/baselines: build one over a steady period", "validate it", "activate it"),
    ),
    "monitor_baseline_invalid": (
        "The active baseline is not validated: drift results are untrustworthy.",
        (
            "/baselines: its validation verdict and reasons",
            "build one over a steadier period",
            "validate and activate it",
        ),
    ),
    "monitor_backlog": (
        "Embedding or evaluation fell behind the traffic.",
        (
            "the sidecar's CPU and the embed job's duration",
            "the traffic rate and VIGIL_SAMPLE_RATE",
            "the job failures on /metrics",
        ),
    ),
    "monitor_dead_letters": (
        "Alert deliveries failed for good: someone was not told.",
        (
            "the target's URL and credentials",
            "the dead letters' last_error",
            "retry them once the target answers",
        ),
    ),
    "monitor_scheduler_stalled": (
        "The sidecar's jobs have not run past their own timeout.",
        ("the sidecar process: alive, leader?", "the job's log for a hang", "the database's locks"),
    ),
    "monitor_leader_lost": (
        "No sidecar replica holds the leader lease: no job runs.",
        (
            "the sidecar replicas: running?",
            "the database's reachability",
            "clock skew between replicas",
        ),
    ),
    "token_stats_cusum": (
        "The online CUSUM on token statistics passed its threshold.",
        ("the canaries and the model_version", "answer lengths in the last hours", _RELEASES),
    ),
    "canary_mismatch": (
        "The engine's canary prompts no longer give their recorded outputs.",
        (
            "the engine build, torch and kernel versions",
            "the model file's checksum",
            "recalibrate with `vigil canary baseline` if the change was intended",
        ),
    ),
    "canary_perplexity": (
        "The engine's perplexity on its canary texts degraded: numerics changed.",
        (
            "the engine build and dtype (e.g. FP8 cache on)",
            "the model file's checksum",
            "roll back the last engine release",
        ),
    ),
}


def links(alert: Any, public_url: str) -> dict[str, str]:
    base = public_url.rstrip("/")
    out = {}
    key, _, value = (alert.segment or "*").partition("=")
    if key in ("tenant", "segment") and value:
        out["segment"] = f"{base}/segments?" + urlencode([(key, value)], quote_via=quote)
    if alert.run_id is not None:
        out["clusters"] = f"{base}/clusters/{alert.run_id}"
        out["report"] = f"{base}/reports/{alert.run_id}"
    return out


def runbook(alert: Any, public_url: str, rules: RuleSet | None = None) -> dict[str, Any]:
    """The alert's runbook: built-in meaning and checks, or the rules file's `next_steps` /
    `runbook_url` for the rule that matched it."""
    meaning, checks = RUNBOOKS.get(alert.rule, ("", ()))
    entry: dict[str, Any] = {
        "meaning": meaning,
        "next_steps": list(checks),
        "url": None,
        "links": links(alert, public_url),
    }
    if rules is not None:
        rule = rules.rule_for(
            match_values(
                rule=alert.rule, kind=alert.kind, segment=alert.segment, evidence=alert.evidence
            )
        )
        if rule is not None and rule.next_steps:
            entry["next_steps"] = list(rule.next_steps)
        if rule is not None and rule.runbook_url:
            entry["url"] = rule.runbook_url
    return entry
