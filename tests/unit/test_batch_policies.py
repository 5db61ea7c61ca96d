"""Draft-length policies per sequence in the batched engine: each sequence's k schedule,
tokens and trace are those of ``speculative_generate`` with the same policy and seed,
whatever policies share its steps; a snapshot keeps the schedule; bad requests fail."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite import NGramModel, load_pretrained, speculative_generate
from specdec_lite.drafting.draft_length import (
    AdaptiveK,
    AutoK,
    FixedK,
    StepCosts,
    TheoryK,
    policy_from_record,
    policy_record,
)
from specdec_lite.drafting.proposers import PromptLookup
from specdec_lite.engine.batch import BatchEngine
from specdec_lite.models.corpus import load_text

COSTS = StepCosts((1.0, 1.25, 1.4, 1.55, 1.8))
# (k, policy) of each request: named policies, policy objects, and the engine's default
REQUESTS = [(2, "heuristic"), (6, "confidence"), (8, "specdec++"), (AutoK(COSTS), None),
            (TheoryK(c=0.3, k_max=6), None), (None, None)]


@pytest.fixture(scope="module")
def models():
    shipped = load_pretrained()
    tok = shipped.tokenizer
    text = load_text("heldout")
    prompts = [tok.encode(text[i * 2203 : i * 2203 + 20 + 7 * i]) for i in range(len(REQUESTS))]
    ids = tok.encode(load_text("train")[:80_000])
    ngram_target = NGramModel(6, tok.vocab_size).fit(ids)
    ngram_draft = NGramModel(3, tok.vocab_size).fit(ids)
    return shipped, (ngram_target, ngram_draft), prompts


def run_batched(target, draft, prompts, temperature, rule, n_new=40):
    engine = BatchEngine(target, draft, k=3, temperature=temperature, rule=rule, max_batch=8)
    for i, ((k, policy), prompt) in enumerate(zip(REQUESTS, prompts, strict=True)):
        engine.add(prompt, max_new_tokens=n_new, seed=100 + i, request_id=i, k=k, policy=policy)
    return engine.run()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_each_sequence_follows_its_own_policy_as_alone(models, temperature) -> None:
    shipped, ngrams, prompts = models
    # greedy on the GPT pair; sampled on n-grams, which keep no cache (no float32
    # difference between a batched and a single forward can move a draw)
    target, draft = (shipped.target, shipped.draft) if temperature == 0 else ngrams
    rule = "greedy" if temperature == 0 else "exact"
    done = run_batched(target, draft, prompts, temperature, rule)
    lengths = set()
    for i, ((k, policy), prompt) in enumerate(zip(REQUESTS, prompts, strict=True)):
        single = speculative_generate(target, draft, prompt, k=3 if k is None else k,
                                      policy=policy, max_new_tokens=40,
                                      temperature=temperature, rule=rule, seed=100 + i)
        assert done[i].tokens.tolist() == single.tokens.tolist(), (k, policy)
        assert done[i].steps == single.steps, (k, policy)
        assert done[i].n_draft_calls == single.n_draft_calls, (k, policy)
        lengths.add(tuple(len(s.proposed) for s in single.steps[:-1]))
    # the schedules differ from one another and within a sequence (the test exercises them)
    assert len(lengths) == len(REQUESTS)
    assert sum(len(set(ks)) > 1 for ks in lengths) >= 3


def test_a_snapshot_keeps_each_sequences_draft_length(models) -> None:
    shipped, (target, draft), prompts = models
    whole = run_batched(target, draft, prompts, 1.0, "exact")
    for drop_k_now in (False, True):  # without k_now the schedule is replayed from the steps
        engine = BatchEngine(target, draft, k=3, max_batch=8)
        for i, ((k, policy), prompt) in enumerate(zip(REQUESTS, prompts, strict=True)):
            engine.add(prompt, max_new_tokens=40, seed=100 + i, request_id=i, k=k,
                       policy=policy)
        for _ in range(5):
            engine.step()
        saved = engine.snapshot()
        assert {s["policy"]["policy"] for s in saved} >= {"AdaptiveK", "AutoK", "TheoryK"}
        assert [s["risk_stop"]["max_risk"] for s in saved if s["risk_stop"]] == [0.5]
        later = BatchEngine(target, draft, k=3, max_batch=8)
        for record in saved:
            if drop_k_now:
                record.pop("k_now")
            later.resume(record)
        done = later.run()
        for i, gen in done.items():
            assert gen.tokens.tolist() == whole[i].tokens.tolist()
            assert gen.steps == whole[i].steps


@pytest.mark.parametrize("policy", [FixedK(4), AdaptiveK(start=3, k_max=7), TheoryK(c=0.2),
                                    AutoK(COSTS, decay=0.7)])
def test_policy_records_round_trip(policy) -> None:
    import json

    assert policy_from_record(json.loads(json.dumps(policy_record(policy)))) == policy


def test_bad_policies_and_records_fail_clearly(models) -> None:
    shipped, (target, draft), prompts = models

    class Mine:
        start = 2

        def after(self, k, gen):
            return k

    with pytest.raises(TypeError, match="policy Mine cannot be saved"):
        policy_record(Mine())
    with pytest.raises(ValueError, match="policy record must name"):
        policy_from_record({"policy": "Oracle"})
    with pytest.raises(ValueError, match="costs.step_cost"):
        policy_from_record({"policy": "AutoK"})
    with pytest.raises(ValueError, match="policy must be one of"):
        BatchEngine(target, draft, k=3).add(prompts[0], max_new_tokens=4, policy="fastest")
    with pytest.raises(ValueError, match="need a draft"):
        BatchEngine(target).add(prompts[0], max_new_tokens=4, policy="heuristic")
    with pytest.raises(ValueError, match="policy 'confidence' needs a draft model"):
        BatchEngine(target, PromptLookup(), k=3).add(prompts[0], max_new_tokens=4,
                                                      policy="confidence")
    with pytest.raises(ValueError, match="k must be"):
        BatchEngine(target, draft, k=3).add(prompts[0], max_new_tokens=4, k=0)
    # a policy the engine cannot save still decodes; only its snapshot refuses
    engine = BatchEngine(target, draft, k=3)
    engine.add(prompts[0], max_new_tokens=4, k=Mine())
    with pytest.raises(TypeError, match="cannot be saved"):
        engine.snapshot()
    assert len(engine.run()[0].tokens) == 4


def test_auto_prices_its_steps_once_and_may_decode_plainly(models) -> None:
    """``policy="auto"`` times this target and draft (once per pair) and may choose k = 0:
    those steps verify nothing and draw as plain decoding does."""
    shipped, (target, draft), prompts = models
    engine = BatchEngine(target, draft, k=4, temperature=1.0)
    engine.add(prompts[0], max_new_tokens=30, seed=1, policy="auto", request_id="a")
    state = engine.waiting[0]
    assert isinstance(state.policy, AutoK) and state.policy.costs.k_max == 4
    gen = engine.run()["a"]
    assert len(gen.tokens) == 30 and np.all(gen.tokens < target.vocab_size)


def test_generate_batch_takes_a_policy_name(models) -> None:
    from specdec_lite.engine.batch_generate import speculative_generate_batch

    shipped, (target, draft), prompts = models
    out = speculative_generate_batch(target, draft, prompts[:3], k=2, max_new_tokens=30,
                                     seeds=[7, 8, 9], policy="heuristic")
    for prompt, seed, gen in zip(prompts, [7, 8, 9], out, strict=False):
        alone = speculative_generate(target, draft, prompt, k=2, max_new_tokens=30, seed=seed,
                                     policy="heuristic")
        assert gen.steps == alone.steps and gen.tokens.tolist() == alone.tokens.tolist()
