"""The SpecDec++-style stop (specdec_lite.drafting.stop_head): its features, its fit, the
shipped head and its checks, and a draft that stops by it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from support import load_models

from specdec_lite.drafting.proposers import ModelDraft
from specdec_lite.drafting.stop_head import (
    FEATURES,
    AcceptanceHead,
    RiskStop,
    features,
    fit_head,
    shipped_head,
    sigmoid,
)
from specdec_lite.engine.decode import speculative_generate
from specdec_lite.rules.distributions import Sampling


def test_features_of_a_sure_and_an_unsure_row():
    rows = np.array([[1.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.3, 0.2, 0.0]])
    x = features(rows, np.array([0, 3, 1]))
    assert x.shape == (3, len(FEATURES))
    assert np.allclose(x[0], [0.0, 0.0, 0.0])  # all mass on the token: no entropy
    assert np.allclose(x[1], [np.log(0.25), np.log(0.25), 1.0])  # uniform: all the entropy
    entropy = -(0.5 * np.log(0.5) + 0.3 * np.log(0.3) + 0.2 * np.log(0.2)) / np.log(4)
    assert np.allclose(x[2], [np.log(0.3), np.log(0.5), entropy])


def test_the_fit_recovers_known_coefficients():
    """Labels drawn as Bernoulli(sigmoid(w.x + b)) from known w, b: the fit finds them."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40_000, 3))
    w, b = np.array([1.5, -0.7, 0.3]), -0.4
    y = (rng.random(len(x)) < sigmoid(x @ w + b)).astype(float)
    head = fit_head(x, y, ridge=0.0)
    assert np.allclose(head.weights, w, atol=0.06) and abs(head.bias - b) < 0.05


def test_the_fit_takes_soft_labels():
    """Soft labels equal to the model's own chances give its coefficients exactly."""
    x = np.random.default_rng(1).normal(size=(500, 3))
    y = sigmoid(x @ np.array([0.5, 1.0, -2.0]) + 0.25)
    head = fit_head(x, y, ridge=0.0)
    assert np.allclose(head.weights, [0.5, 1.0, -2.0], atol=1e-6)
    assert abs(head.bias - 0.25) < 1e-6


@pytest.mark.parametrize(("x", "y", "match"), [
    (np.zeros((3, 2)), np.zeros(3), "x must be"), (np.zeros((3, 3)), np.zeros(2), "x must be"),
    (np.zeros((3, 3)), np.array([0.0, 1.5, 0.2]), "y must lie")])
def test_the_fit_refuses_bad_data(x, y, match):
    with pytest.raises(ValueError, match=match):
        fit_head(x, y)


def test_one_row_chance_equals_the_batched_one():
    head = shipped_head()
    rows = np.random.default_rng(2).dirichlet(np.full(96, 0.1), size=20)
    tokens = rows.argmax(axis=1)
    stop = RiskStop(head, 0.5)
    one = [stop.accept_chance(r, t) for r, t in zip(rows, tokens, strict=True)]
    assert np.allclose(one, head.accept_chance(rows, tokens), rtol=1e-12)


@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"head": "h", "max_risk": 0.5}, TypeError, "head"),
    ({"max_risk": 0.0}, ValueError, "max_risk"), ({"max_risk": 1.0}, ValueError, "max_risk"),
    ({"max_risk": float("nan")}, ValueError, "max_risk"),
    ({"max_risk": "0.5"}, TypeError, "max_risk")])
def test_a_risk_stop_checks_its_arguments(kwargs, error, name):
    with pytest.raises(error, match=name):
        RiskStop(**{"head": shipped_head(), **kwargs})


def test_a_head_checks_its_weights_and_records():
    with pytest.raises(ValueError, match="weights"):
        AcceptanceHead((1.0, 2.0), 0.0)
    with pytest.raises(ValueError, match="bias"):
        AcceptanceHead((1.0, 2.0, 3.0), float("inf"))
    stop = RiskStop(shipped_head(), 0.4)
    assert RiskStop.from_record(json.loads(json.dumps(stop.record()))) == stop
    for bad in [None, {"max_risk": 0.4}, {"max_risk": 0.4, "head": {"features": ["x"]}}]:
        with pytest.raises(ValueError):
            RiskStop.from_record(bad)


def test_a_changed_head_file_is_refused(tmp_path):
    from specdec_lite.drafting.stop_head import WEIGHTS

    for name in ("manifest.json", "stop_head.json"):
        shutil.copy(WEIGHTS / name, tmp_path / name)
    assert shipped_head(tmp_path) == shipped_head()
    record = json.loads((tmp_path / "stop_head.json").read_text())
    record["bias"] += 1.0
    (tmp_path / "stop_head.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="stop_head.json does not match its sha256"):
        shipped_head.__wrapped__(tmp_path)


def test_the_shipped_head_ranks_tokens_as_their_acceptance():
    """On held-out text, tokens the head gives a higher chance are accepted more often: its
    top third's mean acceptance beats its bottom third's by a wide margin."""
    models = load_models()
    from specdec_lite.models.corpus import load_text

    tokens = models.tokenizer.encode(load_text("heldout")[5_000:5_256])
    p, q = models.target.probs(tokens), models.draft.probs(tokens)
    x = q.argmax(axis=1)
    accepted = np.minimum(1.0, p[np.arange(len(x)), x] / q[np.arange(len(x)), x])
    chance = shipped_head().accept_chance(q, x)
    order = np.argsort(chance)
    third = len(order) // 3
    assert accepted[order[-third:]].mean() > accepted[order[:third]].mean() + 0.2


def test_a_tighter_limit_drafts_fewer_tokens():
    models = load_models()
    prompt = models.tokenizer.encode("    def __init__(self, name):\n        self.")
    drafted = []
    for max_risk in (0.2, 0.5, 0.8):
        draft = ModelDraft(models.draft, risk_stop=RiskStop(shipped_head(), max_risk))
        gen = speculative_generate(models.target, draft, prompt, k=8, max_new_tokens=60,
                                   temperature=1.0, seed=4)
        drafted.append(gen.n_proposed / len(gen.steps))
        assert gen.n_draft_calls == gen.n_proposed
    assert drafted[0] < drafted[1] < drafted[2] <= 8, drafted


def test_a_direct_proposal_stops_where_the_risk_passes_the_limit():
    models = load_models()
    prompt = models.tokenizer.encode("import os\nimport sys\n")
    stop = RiskStop(shipped_head(), 0.5)
    out = ModelDraft(models.draft, risk_stop=stop).propose(prompt, 8, Sampling(1.0),
                                                           np.random.default_rng(0))
    chances = [stop.accept_chance(row, t) for row, t in zip(out.q, out.tokens, strict=True)]
    product = np.cumprod(chances)
    assert all(stop.keeps_drafting(c) for c in product[:-1])  # every token but the last
    assert len(out.tokens) == 8 or not stop.keeps_drafting(product[-1])
