"""Medusa's runs in one compiled call (specdec_lite.engine.medusa_kernels, through
medusa_decode.run_compiled) against the Python steps they mirror: the heads' logits, then
whole runs of the exact chain (the same tokens, steps, counts, draws, cache and metered
calls, at T = 0, 0.6, 1 and 1.4, every chain depth, with EOS and a cut at
max_new_tokens) and of greedy trees (dense, wide, a chain; greedy, typical at T = 0); and
where each applies. Its exactness against the enumerated law is in
tests/statistical/test_compiled_step_exact.py. Every test needs numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import CONFIG, random_heads, random_params

from specdec_lite.bench.timing import ForwardMeter
from specdec_lite.drafting.medusa import chain_tree, dense_tree
from specdec_lite.engine import medusa_decode
from specdec_lite.engine.step_kernels import compiled_kernels
from specdec_lite.models import fast
from specdec_lite.models.transformer import TransformerModel

pytestmark = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")

PROMPT = np.array([1, 5, 2, 7, 3], dtype=np.int64)


@pytest.fixture(scope="module")
def target() -> TransformerModel:
    params = random_params(CONFIG, 0)
    params["wte"] *= 0.3  # flattened logits, so tokens vary
    return TransformerModel(CONFIG, params, backend="numba")


@pytest.fixture(scope="module")
def heads():
    return random_heads(CONFIG, n_heads=3, seed=5)


def python_medusa(monkeypatch, decode):
    with monkeypatch.context() as patch:
        patch.setattr(medusa_decode, "run_compiled", lambda run: False)
        return decode()


def same_run(a, b) -> bool:
    return (a.tokens.tolist() == b.tokens.tolist() and a.steps == b.steps
            and (a.n_target_calls, a.n_head_calls, a.n_draft_calls)
            == (b.n_target_calls, b.n_head_calls, b.n_draft_calls))


def test_the_kernels_heads_are_the_heads(heads):
    from specdec_lite.engine import medusa_kernels

    compiled_kernels()  # compiles heads_logits in place
    rng = np.random.default_rng(1)
    for depth in (1, 2, 3):
        h = rng.standard_normal(CONFIG.d_model).astype(np.float32)
        out = np.empty((depth, CONFIG.vocab_size), dtype=np.float32)
        medusa_kernels.heads_logits(heads.w1, heads.b1, heads.w2, h, depth, out)
        np.testing.assert_allclose(out, heads.logits(h[None])[:depth, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("temperature", [0.0, 0.6, 1.0, 1.4])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_an_exact_chain_run_is_one_call_and_the_python_steps_run(monkeypatch, kernel_calls,
                                                                target, heads, temperature,
                                                                depth):
    accepted = 0
    for seed in range(4):
        def decode(seed=seed):
            return medusa_decode.medusa_generate(target, heads, PROMPT, max_new_tokens=25,
                                                 temperature=temperature, rule="exact",
                                                 tree=chain_tree(depth), seed=seed)
        kernel_calls.clear()
        compiled = decode()
        assert kernel_calls == [compiled_kernels().medusa_chain]
        python = python_medusa(monkeypatch, decode)
        assert same_run(compiled, python), (seed, compiled.tokens, python.tokens)
        assert len(compiled.tokens) == 25
        accepted += sum(step.n_accepted for step in compiled.steps)
    assert accepted > 0  # some steps went below the root


@pytest.mark.parametrize("max_new_tokens", [1, 2, 7, 30])
def test_eos_and_the_token_limit_cut_the_run_as_the_python_steps_do(monkeypatch, target,
                                                                   heads, max_new_tokens):
    runs = {}
    for eos in (None, 3, 5, 7):
        def decode(eos=eos):
            return medusa_decode.medusa_generate(target, heads, PROMPT,
                                                 max_new_tokens=max_new_tokens,
                                                 temperature=1.0, rule="exact",
                                                 tree=chain_tree(3), seed=4, eos_id=eos)
        runs[eos] = decode()
        assert same_run(runs[eos], python_medusa(monkeypatch, decode))
        assert len(runs[eos].tokens) <= max_new_tokens
    assert max_new_tokens < 30 or any(  # in 30 tokens one of the three ends a run early
        eos is not None and gen.tokens[-1] == eos and len(gen.tokens) < max_new_tokens
        for eos, gen in runs.items())


def test_the_generator_cache_and_meter_end_as_after_the_python_steps(monkeypatch, target,
                                                                     heads):
    seen = []
    for compiled in (True, False):
        cache, rng = target.new_state(), np.random.default_rng(21)
        with ForwardMeter({"target": target, "heads": heads}) as meter:
            def decode(cache=cache, rng=rng):
                return medusa_decode.medusa_generate(target.bound(cache), heads, PROMPT,
                                                     max_new_tokens=20, temperature=1.0,
                                                     rule="exact", tree=chain_tree(3),
                                                     seed=rng)
            gen = decode() if compiled else python_medusa(monkeypatch, decode)
        seen.append((rng.random(), dict(meter.calls), cache.length, cache.n_causal,
                     cache.tokens[: cache.length].tolist()))
        assert meter.calls[("heads", 1)] == gen.n_head_calls > 0
        np.testing.assert_allclose(cache.hidden[: cache.length],
                                   target.hidden(cache.tokens[: cache.length]), atol=1e-5)
    assert seen[0] == seen[1]


@pytest.mark.parametrize(("tree_kind", "rule", "temperature"),
                         [("dense", "greedy", 0.0), ("chain", "greedy", 0.0),
                          ("dense", "typical", 0.0), ("dense", "greedy", 1.0),
                          ("wide", "greedy", 0.0)])
def test_a_greedy_tree_run_is_one_call_and_the_python_steps_run(monkeypatch, kernel_calls,
                                                               target, heads, tree_kind,
                                                               rule, temperature):
    """The heads' ranked tokens, the tree's verification and commit, step after step; the
    same steps as the Python loop with its compiled verification, which ranks with numpy."""
    tree = {"dense": dense_tree([3, 2, 1]), "chain": chain_tree(3),
            "wide": dense_tree([5, 3])}[tree_kind]
    accepted = 0
    for eos in (None, 4):
        def decode(eos=eos):
            return medusa_decode.medusa_generate(target, heads, PROMPT, max_new_tokens=27,
                                                 temperature=temperature, rule=rule,
                                                 tree=tree, seed=2, eos_id=eos)
        kernel_calls.clear()
        compiled = decode()
        assert kernel_calls == [compiled_kernels().medusa_tree]
        python = python_medusa(monkeypatch, decode)
        assert same_run(compiled, python), (compiled.tokens, python.tokens)
        accepted += sum(step.n_accepted for step in compiled.steps)
    assert accepted > 0 or tree_kind == "chain"  # the heads' second-best guesses pass


def test_it_applies_to_the_exact_chain_and_to_greedy_trees_on_the_compiled_backend(target,
                                                                                  heads):
    numpy_target = TransformerModel(CONFIG, random_params(CONFIG, 0))
    declined = [dict(target=target, rule="typical", temperature=1.0, tree=chain_tree(3)),
                dict(target=target, rule="exact", tree=chain_tree(3), top_k=5,
                     temperature=1.0),
                dict(target=numpy_target, rule="exact", tree=chain_tree(3)),
                dict(target=numpy_target, rule="greedy", tree=dense_tree([2, 1]))]
    for case in declined:
        run = medusa_decode.medusa_start(case.pop("target"), heads, PROMPT, max_new_tokens=6,
                                         **case)
        assert medusa_decode.run_compiled(run) is False and not run.gen.steps[1:]
    for case in (dict(rule="exact", tree=chain_tree(3), temperature=1.0),
                 dict(rule="greedy", tree=dense_tree([2, 1])),
                 dict(rule="typical", temperature=0.0, tree=dense_tree([2, 1]))):
        run = medusa_decode.medusa_start(target, heads, PROMPT, max_new_tokens=6, **case)
        assert medusa_decode.run_compiled(run) is True and run.done and len(run.out) == 6
    with pytest.raises(ValueError, match="chain"):
        medusa_decode.medusa_start(target, heads, PROMPT, max_new_tokens=6, rule="exact",
                                   tree=dense_tree([2, 1]))
