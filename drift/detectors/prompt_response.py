"""The battery's prompt-mix and prompt-conditioned response tests for one pair of feature sets.

Prompt side: `cluster_mix` on the prompt embeddings (drift.stattests.cluster_mix). Response
side, with prompts held to the same clusters: `conditional_mmd`
(drift.stattests.conditional_mmd) on the response embeddings and on "response_stats", the
token statistics one row per sample (mean logprob, mean entropy, log completion tokens, log
response length; each standardised by the reference's mean and sd). Strata are the frozen
baseline prompt clusters; rows without a prompt embedding take no part in the conditional tests.

The same two tests also run with the prompt *template* as the stratum (`..._by_template`,
drift.features.templates), when the rows carry one: an instruction that changed wording barely moves
the content-dominated prompt embedding, so a cluster stratum still mixes prompts whose
instruction changed with those whose did not; a template stratum holds the instruction fixed.
Rows of no known wording (UNSEEN: free text, or a new wording) are left out, so responses that
changed with a rewording do not read as a model change here, while a quieter model that
answers the same instructions differently does. The token statistics also carry the share of
answers cut off by the length limit (finish reason "length"), so a model that runs to the
limit more often within a template moves them.

All of a response at once: `response_agg` (drift.stattests.response_agg) on each embedded
response's vector and its standardised token statistics (feature "responses"), several kernels
under one permutation test, labels shuffled within the frozen prompt clusters (rows whose prompt
has no embedding share one stratum of their own).

The template-conditioned pair runs only with `BatteryOptions(by_template=True)`: the baseline's
rows carry in-sample template labels (a prompt close to a template takes its label when the
model is fitted on it, while a like prompt in a window stays unseen and is left out), so a
stratum holds different prompts on the two sides and the test fires on stable traffic (a null
pair of `vigil check` files at p = 1/1000). Cross-fitted baseline labels (each row labelled by
a model fitted without it, as drift.features.templates.held_out_unseen does) would remove that.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from drift.battery_inputs import Frozen, TestInputs
from drift.features.feature_set import FeatureSet
from drift.features.templates import UNSEEN
from drift.result import TestResult
from drift.spec import TestSpec, run_test

PROMPT = "prompt_embedding"
RESPONSE = "response_embedding"
RESPONSE_STATS = "response_stats"
STAT_COLUMNS = ("mean_logprob", "mean_entropy", "completion_tokens", "response_chars")
LOG_COLUMNS = frozenset({"completion_tokens", "response_chars"})
TRUNCATED = "truncated"  # finish reason "length": the answer hit the token limit
RESPONSES = "responses"  # the embedding and the token statistics together (response_agg)
TEMPLATE = "prompt_template"
BY_TEMPLATE = "_by_template"


def response_stat_matrices(
    ref: FeatureSet, cur: FeatureSet
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(reference, window) matrices of the standardised token statistics both sides carry."""
    cols, ref_cols, cur_cols = [], [], []
    for name in (*STAT_COLUMNS, TRUNCATED):
        pair = _stat_pair(ref, cur, name)
        if pair is None:
            continue
        r, c = pair
        if name in LOG_COLUMNS:
            r, c = np.log1p(np.maximum(r, 0.0)), np.log1p(np.maximum(c, 0.0))
        finite = r[np.isfinite(r)]
        if finite.size < 2 or finite.std() == 0:
            continue
        mu, sd = finite.mean(), finite.std()
        cols.append(name)
        ref_cols.append((r - mu) / sd)
        cur_cols.append((c - mu) / sd)
    if not cols:
        return np.empty((ref.n, 0)), np.empty((cur.n, 0)), []
    return np.column_stack(ref_cols), np.column_stack(cur_cols), cols


def _stat_pair(ref: FeatureSet, cur: FeatureSet, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    if name == TRUNCATED:
        if "finish_reason" not in ref.categorical or "finish_reason" not in cur.categorical:
            return None
        cut = [
            (fs.categorical["finish_reason"] == "length").astype(np.float64) for fs in (ref, cur)
        ]
        return cut[0], cut[1]
    if name not in ref.numeric or name not in cur.numeric:
        return None
    return ref.numeric[name].astype(np.float64), cur.numeric[name].astype(np.float64)


def template_strata(fs: FeatureSet) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows, template label per row) when the rows carry their prompt's template."""
    labels = fs.categorical.get(TEMPLATE)
    if labels is None or not len(labels):
        return None
    labels = np.asarray(labels, dtype=str)
    rows = np.flatnonzero(labels != UNSEEN)  # no template: nothing to hold fixed
    return (rows, labels[rows]) if rows.size else None


def prompt_strata(fs: FeatureSet, frozen: Frozen) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows, stratum per row): the nearest frozen prompt cluster of each embedded prompt."""
    model = frozen.clusters.get(PROMPT)
    block = fs.embeddings.get(PROMPT)
    if model is None or block is None or not len(block.rows):
        return None
    labels, _ = model.assign(block.vectors)
    return block.rows, labels


def _on_rows(values: np.ndarray, rows: np.ndarray, strata: tuple[np.ndarray, np.ndarray]):
    """The rows of `values` (indexed by `rows`) that have a prompt stratum, with that stratum."""
    s_rows, s_labels = strata
    _, in_values, in_strata = np.intersect1d(rows, s_rows, return_indices=True)
    return values[in_values], s_labels[in_strata]


def prompt_mix_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """The prompt-mix test on the prompt embeddings."""
    if PROMPT not in ref.embeddings or PROMPT not in cur.embeddings:
        return []
    return [
        run_test(
            spec,
            PROMPT,
            ref.embeddings[PROMPT].vectors,
            cur.embeddings[PROMPT].vectors,
            inputs,
        )
    ]


def conditional_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """The prompt-conditioned test on the responses, within prompt clusters (and templates)."""
    pairs: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    if RESPONSE in ref.embeddings and RESPONSE in cur.embeddings:
        rb, cb = ref.embeddings[RESPONSE], cur.embeddings[RESPONSE]
        pairs.append((RESPONSE, rb.vectors, rb.rows, cb.vectors, cb.rows))
    ref_stats, cur_stats, cols = response_stat_matrices(ref, cur)
    if cols:
        pairs.append((RESPONSE_STATS, ref_stats, np.arange(ref.n), cur_stats, np.arange(cur.n)))
    out: list[TestResult] = []
    by = [
        ("", prompt_strata(ref, inputs.frozen), prompt_strata(cur, inputs.frozen)),
    ]
    if inputs.options.by_template:
        by.append((BY_TEMPLATE, template_strata(ref), template_strata(cur)))
    for suffix, ref_strata, cur_strata in by:
        if ref_strata is None or cur_strata is None:
            continue
        for name, rv, rrows, cv, crows in pairs:
            x, sx = _on_rows(rv, rrows, ref_strata)
            y, sy = _on_rows(cv, crows, cur_strata)
            res = run_test(spec, name + suffix, x, y, inputs, ref_strata=sx, cur_strata=sy)
            if name == RESPONSE_STATS and not res.insufficient:
                res = replace(res, detail={**res.detail, "columns": cols})
            out.append(res)
    return out


def aggregate_results(
    spec: TestSpec, ref: FeatureSet, cur: FeatureSet, inputs: TestInputs
) -> list[TestResult]:
    """The response test on the responses' embeddings and token statistics, within prompt
    clusters."""
    if RESPONSE not in ref.embeddings or RESPONSE not in cur.embeddings:
        return []
    ref_stats, cur_stats, cols = response_stat_matrices(ref, cur)
    sides = []
    for fs, stats in ((ref, ref_stats), (cur, cur_stats)):
        block = fs.embeddings[RESPONSE]
        strata = np.full(len(block.rows), -1)
        found = prompt_strata(fs, inputs.frozen)
        if found is not None:
            _, at_block, at_strata = np.intersect1d(block.rows, found[0], return_indices=True)
            strata[at_block] = found[1][at_strata]
        # a missing statistic is the reference mean (standardised 0): no evidence either way
        kept = stats[block.rows]
        sides.append((np.hstack([block.vectors, np.where(np.isfinite(kept), kept, 0.0)]), strata))
    dim = ref.embeddings[RESPONSE].vectors.shape[1]
    blocks = ((RESPONSE, 0, dim), (RESPONSE_STATS, dim, dim + len(cols)))
    (x, sx), (y, sy) = sides
    res = run_test(spec, RESPONSES, x, y, inputs, blocks=blocks, ref_strata=sx, cur_strata=sy)
    if not res.insufficient:
        res = replace(res, detail={**res.detail, "columns": cols})
    return [res]
