"""Example prompts are shown after the shared preamble: what is stripped is an opening that
enough distinct prompts start with, ending at a whitespace; what is left is the prompt's own
part, never nothing."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboards.report.build import cluster_views
from dashboards.report.preamble import (
    ELLIPSIS,
    MIN_PREAMBLE_CHARS,
    shared_preambles,
    strip_preamble,
)

WORDS = st.text(alphabet="abcdefgh XYZ\n", min_size=1, max_size=30)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    preamble=st.lists(
        st.sampled_from(["You", "are", "an", "SRE", "helper.", "Answer", "briefly."]),
        min_size=0,
        max_size=8,
    ).map(" ".join),
    tails=st.lists(WORDS, min_size=0, max_size=12),
    others=st.lists(WORDS, max_size=12),
)
def test_stripping_keeps_the_part_that_differs(preamble, tails, others):
    prompts = [f"{preamble} {t}" for t in tails] + others
    found = shared_preambles(prompts)
    distinct = set(prompts)
    need = max(2, -(-len(distinct) // 10))
    for p in found:
        assert len(p) >= MIN_PREAMBLE_CHARS and p[-1].isspace()
        assert sum(t.startswith(p) for t in distinct) >= need
    for text in prompts:
        out = strip_preamble(text, found)
        if out != text:
            kept = out.removeprefix(ELLIPSIS)
            assert kept.strip() and text.endswith(kept)
            assert text[: len(text) - len(kept)].rstrip() in {p.rstrip() for p in found}
    # a preamble every templated prompt shares is found once there are enough of them
    if len(preamble) >= MIN_PREAMBLE_CHARS and not others and len(set(tails)) >= 2:
        assert found and all(p.startswith(preamble + " ") for p in found)


def test_examples_of_a_cluster_read_differently():
    pre = (
        "You are the deployment assistant of an SRE team. Be brief and cite the runbook. Question: "
    )
    asks = [
        "terraform plan fails on a locked state",
        "helm upgrade stuck in pending-upgrade",
        "pod in CrashLoopBackOff after deploy",
        "kubectl rollout undo keeps old image",
    ]
    frame = pd.DataFrame(
        {"prompt": [pre + a for a in asks] + ["hello"] * 4, "prompt_embedding": [[0.0, 1.0]] * 8}
    )
    views = cluster_views(
        [
            {
                "test": "new_cluster",
                "feature": "prompt_embedding",
                "segment": "*",
                "drifted": True,
                "detail": {
                    "clusters": [{"size": 4, "share": 0.5, "representatives": [0, 1, 2, 3]}]
                },
            }
        ],
        frame,
    )
    assert views[0].examples == [ELLIPSIS + a for a in asks]
