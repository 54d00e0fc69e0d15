"""The new-wording test against the baseline's held-out unseen rate (drift.features.templates
.held_out_unseen, drift.features.prompt_features.new_template_result).

Oracles: a baseline with a planted share of one-off wordings has that held-out unseen rate
(each one-off prompt is unseen to a model fitted without it, each templated one is seen); the
p-value is the binomial upper tail summed term by term with math.comb; two reworded templates
of two prompts each in a 50-prompt window are found (the older share rule, a wording holding
5 % of the window in 10 prompts, misses them) while windows of stable wordings are not."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drift.alerting.proposals import describe_hit
from drift.features.prompt_features import NEW_ALPHA, new_template_result, unseen_p_value
from drift.features.templates import UNSEEN, TemplateModel, fit_templates, held_out_unseen
from tests.drift.test_templates import REWORDED, WORDINGS, content, prompts

STABLE = list(WORDINGS.values())
OTHER = "Rewrite the passage below in plain words for a child.\n{c}\nPlain version:"


def one_off(rng: np.random.Generator, n: int) -> list[str]:
    """Prompts each in a wording of its own (random instruction words around content)."""
    return [
        " ".join(rng.choice(list("qwertyuiopasdfghjkl"), 6)) + " " + content(rng) for _ in range(n)
    ]


def test_held_out_rate_is_the_planted_one_off_share():
    rng = np.random.default_rng(5)
    base = prompts(rng, 400, STABLE) + one_off(rng, 100)
    unseen, rows = held_out_unseen(base, seed=3)
    assert rows == 500
    assert 95 <= unseen <= 105  # the 100 one-offs, give or take a coincidental match
    clean, _ = held_out_unseen(prompts(rng, 400, STABLE), seed=3)
    assert clean <= 2


def test_p_value_is_the_binomial_upper_tail():
    for unseen, n, held in [
        (0, 50, (0, 200)),
        (3, 50, (0, 200)),
        (7, 300, (4, 3000)),
        (50, 50, (9, 10)),
    ]:
        p, rate = unseen_p_value(unseen, n, held)
        assert rate == (held[0] + 1) / (held[1] + 2)
        tail = sum(math.comb(n, k) * rate**k * (1 - rate) ** (n - k) for k in range(unseen, n + 1))
        assert math.isclose(p, min(1.0, tail), rel_tol=1e-9, abs_tol=1e-15)


def _window(rng: np.random.Generator, reworded: int) -> list[str]:
    """50 prompts of the stable wordings, `reworded` each in two new wordings."""
    return (
        prompts(rng, 50 - 2 * reworded, STABLE)
        + prompts(rng, reworded, [REWORDED])
        + prompts(rng, reworded, [OTHER])
    )


def test_two_small_rewordings_are_found_and_named():
    rng = np.random.default_rng(8)
    base = prompts(rng, 200, STABLE)
    model = fit_templates(base)
    model.held_out = held_out_unseen(base)
    window = _window(rng, 2)
    labels = model.label(window)
    r = new_template_result(labels, window, held_out=model.held_out)
    assert r.drifted and r.p_value is not None and r.p_value < NEW_ALPHA
    assert r.detail["n_unseen"] == 4
    named = " | ".join(v["template"] for v in r.detail["new"])
    assert "overview" in named and "child" in named, named
    assert "wording" in describe_hit(r)
    old = new_template_result(labels, window)  # the share rule of stored baselines without a rate
    assert not old.drifted


def test_stable_windows_do_not_drift():
    rng = np.random.default_rng(9)
    base = prompts(rng, 200, STABLE)
    model = fit_templates(base)
    model.held_out = held_out_unseen(base)
    fired = 0
    for _ in range(30):
        window = prompts(rng, 50, STABLE)
        fired += new_template_result(model.label(window), window, held_out=model.held_out).drifted
    assert fired == 0


def test_held_out_rate_survives_the_stored_model():
    rng = np.random.default_rng(10)
    base = prompts(rng, 100, STABLE)
    model = fit_templates(base)
    model.held_out = held_out_unseen(base)
    again = TemplateModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again.held_out == model.held_out
    older = model.to_dict()
    del older["held_out"]
    assert TemplateModel.from_dict(older).held_out is None


TEXT = st.one_of(st.text(max_size=200), st.sampled_from([w.format(c="x y z") for w in STABLE]))


@settings(max_examples=60, deadline=None)
@given(
    window=st.lists(TEXT, max_size=30),
    unseen_mask=st.lists(st.booleans(), min_size=30, max_size=30),
    held=st.one_of(st.none(), st.tuples(st.integers(0, 50), st.integers(0, 50))),
)
def test_any_window_gives_a_result_that_serialises(window, unseen_mask, held):
    if held is not None:
        held = (min(held), max(held))
    labels = np.asarray(
        [UNSEEN if u else "tpl-x" for u in unseen_mask[: len(window)]], dtype=object
    )
    r = new_template_result(labels, window, held_out=held)
    assert r.drifted in (True, False)
    json.dumps(r.to_dict())
    assert isinstance(describe_hit(r), str)
    if r.drifted and held is not None:
        assert r.detail["n_unseen"] >= 3
