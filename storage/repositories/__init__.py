"""Query functions other packages call. Each takes a `Session` and never commits: wrap calls
in `storage.db.session_scope(url)` (or commit yourself). The record <-> row mapping lives in
`storage.records`."""

from storage.repositories.baselines import (
    BaselineError,
    add_baseline_samples,
    count_baseline_samples,
    create_baseline,
    freeze_baseline_samples,
    get_active_baseline,
    get_baseline,
    list_baselines,
    load_baseline_embeddings,
    load_baseline_samples,
    set_baseline_status,
    update_baseline,
)
from storage.repositories.drift_runs import (
    DriftResultRow,
    add_drift_results,
    finish_drift_run,
    get_drift_results,
    get_drift_run,
    latest_drift_run,
    list_drift_runs,
    start_drift_run,
)
from storage.repositories.embeddings import (
    EmbeddingRow,
    count_embeddings,
    fetch_window_embeddings,
    load_embeddings,
    samples_missing_embeddings,
    store_embeddings,
)
from storage.repositories.eval_scores import (
    EvalScoreRow,
    WindowEvalScore,
    count_eval_scores,
    load_eval_scores,
    samples_missing_eval_scores,
    store_eval_scores,
)
from storage.repositories.samples import (
    count_by_segment,
    count_samples,
    delete_samples_older_than,
    fetch_window,
    get_samples,
    insert_samples,
    window_filter,
)

__all__ = [
    "BaselineError", "DriftResultRow", "EmbeddingRow", "EvalScoreRow", "WindowEvalScore",
    "add_baseline_samples", "add_drift_results", "count_baseline_samples", "count_by_segment",
    "count_embeddings", "count_eval_scores", "count_samples", "create_baseline",
    "delete_samples_older_than", "fetch_window", "fetch_window_embeddings", "finish_drift_run",
    "freeze_baseline_samples", "get_active_baseline", "get_baseline", "get_drift_results",
    "get_drift_run", "get_samples", "insert_samples", "latest_drift_run", "list_baselines",
    "list_drift_runs", "load_baseline_embeddings", "load_baseline_samples", "load_embeddings",
    "load_eval_scores", "samples_missing_embeddings", "samples_missing_eval_scores",
    "set_baseline_status", "start_drift_run", "store_embeddings", "store_eval_scores",
    "update_baseline", "window_filter",
]  # fmt: skip
