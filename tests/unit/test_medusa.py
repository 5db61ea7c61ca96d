"""Medusa: tree construction, tree attention, lossless greedy decoding, the exact chain rule."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    MEDUSA_CONFIG,
    TINY,
    chi2_critical,
    chi2_statistic,
    enumerate_sequences,
    random_heads,
    target_model,
)

from specdec_lite import generate
from specdec_lite.drafting.medusa import (
    MedusaHeads,
    chain_tree,
    dense_tree,
    fit_heads,
    head_loss_grads,
    make_tree,
    sparse_tree,
    top_k_accuracy,
    typical_first_token_tv,
    windowed_forward,
)
from specdec_lite.engine.medusa_decode import medusa_generate
from specdec_lite.models.transformer import TransformerConfig, TransformerModel

CONFIG = MEDUSA_CONFIG


class OracleHeads(MedusaHeads):
    """Heads that know the target's greedy continuation ``reference`` and put the right
    token first with probability ``hit`` (else second), so acceptance varies on purpose.
    ``target`` is the GPT on the run's cache (``model.bound(cache)``), which tells them the
    position they are read at."""

    def __init__(
        self,
        target: TransformerModel,
        reference: np.ndarray,
        n_heads: int,
        hit: float,
        seed: int = 0,
    ) -> None:
        v, d = target.vocab_size, target.config.d_model
        super().__init__(
            np.zeros((n_heads, d, d)), np.zeros((n_heads, d)), np.zeros((n_heads, d, v))
        )
        self.target, self.reference, self.hit = target, reference, hit
        self.rng = np.random.default_rng(seed)

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        t = self.target.n_committed - 1  # position of the hidden state being read
        out = self.rng.standard_normal((self.n_heads, len(hidden), self.vocab_size))
        for i in range(self.n_heads):
            if t + i + 2 < len(self.reference):
                rank = 0 if self.rng.random() < self.hit else 1
                out[i, :, self.reference[t + i + 2]] = 10.0 - 5.0 * rank
                if rank:
                    out[i, :, (self.reference[t + i + 2] + 1) % self.vocab_size] = 10.0
        return out


# ---------------------------------------------------------------- trees


def test_make_tree_structure() -> None:
    tree = make_tree([(0, 0), (1,), (0,), (0, 1), (0, 0, 0)])
    assert tree.paths == ((0,), (1,), (0, 0), (0, 1), (0, 0, 0))
    assert tree.parent.tolist() == [-1, 0, 0, 1, 1, 3]
    assert tree.depth.tolist() == [0, 1, 1, 2, 2, 3]
    assert tree.rank.tolist() == [-1, 0, 1, 0, 1, 0]
    expected = np.array(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 0, 1, 0, 0, 0],
            [1, 1, 0, 1, 0, 0],
            [1, 1, 0, 0, 1, 0],
            [1, 1, 0, 1, 0, 1],
        ],
        dtype=bool,
    )
    np.testing.assert_array_equal(tree.mask, expected)
    assert tree.n_nodes == 6 and tree.max_depth == 3 and not tree.is_chain


def test_dense_and_chain_trees() -> None:
    assert dense_tree([3, 2]).n_nodes == 1 + 3 + 6
    chain = chain_tree(4)
    assert chain.is_chain and chain.paths == ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0))
    np.testing.assert_array_equal(chain.mask, np.tri(5, dtype=bool))


def test_sparse_tree_keeps_likely_paths() -> None:
    acc = np.array([[0.6, 0.2, 0.1], [0.5, 0.2, 0.1]])
    tree = sparse_tree(acc, 4)
    # scores: (0,) .6, (0,0) .3, (1,) .2, (0,1) .12, (2,) .1, (1,0) .1
    assert set(tree.paths) == {(0,), (0, 0), (1,), (0, 1)}


@pytest.mark.parametrize(
    "choices, message",
    [
        ([], "at least one"),
        ([(0,), (0,)], "duplicate"),
        ([(0, 1)], "prefix-closed"),
        ([(-1,)], ">= 0"),
        ([()], ">= 0"),
    ],
)
def test_make_tree_rejects_bad_choices(choices, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_tree(choices)


def test_tree_forward_equals_each_path_alone() -> None:
    tree = dense_tree([3, 2, 2])
    model, fresh = target_model().bound(), target_model()
    prompt = np.random.default_rng(3).integers(0, 13, 9)
    model.logits(prompt)
    tokens = np.random.default_rng(4).integers(0, 13, tree.n_nodes)  # [N+1], root first
    out = model.score_tree(tokens, tree.depth, tree.mask)
    for node in range(tree.n_nodes):
        path = np.flatnonzero(tree.mask[node])
        alone = fresh.logits(np.concatenate([prompt, tokens[path]]))[-1]
        np.testing.assert_allclose(out.logits[node], alone, atol=1e-5)


def test_commit_path_equals_causal_forward() -> None:
    tree = dense_tree([2, 2, 2])
    model, fresh = target_model().bound(), target_model()
    prompt = np.arange(7) % 13
    model.logits(prompt)
    tokens = np.random.default_rng(1).integers(0, 13, tree.n_nodes)
    model.score_tree(tokens, tree.depth, tree.mask)
    path = np.flatnonzero(tree.mask[tree.n_nodes - 1])
    model.commit_path(path)
    extended = np.concatenate([prompt, tokens[path], [5, 6]])
    np.testing.assert_allclose(model.logits(extended), fresh.logits(extended), atol=1e-5)


# ---------------------------------------------------------------- greedy is lossless


@pytest.mark.parametrize("hit", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("widths", [[1, 1, 1], [2, 2, 1], [3, 2, 2]])
def test_greedy_medusa_equals_greedy_decoding_with_oracle_heads(hit, widths) -> None:
    target, reference_model = target_model(scale=3.0), target_model(scale=3.0)
    for seed in range(4):
        prompt = np.random.default_rng(seed).integers(0, 13, 6)
        expected = generate(reference_model, prompt, max_new_tokens=30, temperature=0).tokens
        on_cache = target.bound()
        heads = OracleHeads(on_cache, np.concatenate([prompt, expected]), 3, hit, seed)
        gen = medusa_generate(on_cache, heads, prompt, max_new_tokens=30,
                              tree=dense_tree(widths))
        np.testing.assert_array_equal(gen.tokens, expected)
        if hit == 1.0:  # every step accepts the full depth
            assert gen.tau > 3.0
        if hit == 0.0 and widths[0] == 1:
            assert sum(gen.accepted) == 0


def test_greedy_medusa_equals_greedy_decoding_on_many_prompts() -> None:
    target, reference_model = target_model(scale=3.0), target_model(scale=3.0)
    heads = random_heads(CONFIG)
    for seed in range(20):
        prompt = np.random.default_rng(100 + seed).integers(0, 13, 1 + seed % 7)
        expected = generate(reference_model, prompt, max_new_tokens=25, temperature=0).tokens
        for rule in ("greedy", "typical"):  # typical at T = 0 is greedy
            gen = medusa_generate(target, heads, prompt, max_new_tokens=25, rule=rule)
            np.testing.assert_array_equal(gen.tokens, expected)


def test_trace_and_counts() -> None:
    target = target_model(scale=3.0)
    prompt = np.array([1, 2, 3])
    expected = generate(target_model(scale=3.0), prompt, max_new_tokens=20, temperature=0)
    on_cache = target.bound()
    heads = OracleHeads(on_cache, np.concatenate([prompt, expected.tokens]), 3, 0.7)
    gen = medusa_generate(on_cache, heads, prompt, max_new_tokens=20, tree=dense_tree([2, 2, 2]))
    assert len(gen.tokens) == 20
    assert gen.n_target_calls == len(gen.steps) and gen.n_head_calls == len(gen.steps) - 1
    assert gen.n_draft_calls == 0  # Medusa has no draft model: its proposals are head calls
    assert sum(len(s.emitted) for s in gen.steps) == 20
    for step in gen.steps[1:-1]:
        assert len(step.emitted) == step.n_accepted + 1
        assert step.emitted[: step.n_accepted] == step.proposed[: step.n_accepted]
    assert gen.n_target_calls < 20


def test_max_new_tokens_and_eos() -> None:
    target = target_model(scale=3.0)
    heads = random_heads(CONFIG)
    prompt = np.array([4, 5])
    full = medusa_generate(target, heads, prompt, max_new_tokens=40)
    for n in (0, 1, 2, 7):
        assert len(medusa_generate(target, heads, prompt, max_new_tokens=n).tokens) == n
    eos = int(full.tokens[10])
    cut = medusa_generate(target, heads, prompt, max_new_tokens=40, eos_id=eos)
    first = int(np.flatnonzero(full.tokens == eos)[0])
    np.testing.assert_array_equal(cut.tokens, full.tokens[: first + 1])


def test_int32_prompt_gives_the_same_tokens() -> None:
    heads = random_heads(CONFIG)
    for rule, tree in (("greedy", dense_tree([2, 2, 1])), ("exact", chain_tree(3))):
        runs = [medusa_generate(target_model(), heads, np.array([1, 2, 7], dtype=dtype),
                                max_new_tokens=20, temperature=0.8, rule=rule, tree=tree,
                                seed=3)
                for dtype in (np.int64, np.int32)]
        assert runs[0].tokens.tolist() == runs[1].tokens.tolist()
        assert runs[0].steps == runs[1].steps


def test_same_seed_same_tokens() -> None:
    target = target_model()
    heads = random_heads(CONFIG)
    prompt = np.array([1, 2])
    for rule, tree in (("typical", dense_tree([2, 2, 1])), ("exact", chain_tree(3))):
        runs = [
            medusa_generate(
                target,
                heads,
                prompt,
                max_new_tokens=30,
                temperature=1.0,
                rule=rule,
                tree=tree,
                seed=s,
            ).tokens
            for s in (7, 7, 8)
        ]
        np.testing.assert_array_equal(runs[0], runs[1])
        assert not np.array_equal(runs[0], runs[2])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"rule": "threshold"}, ValueError, "rule"),
        ({"rule": "exact", "tree": dense_tree([2, 1, 1])}, ValueError, "chain"),
        ({"tree": chain_tree(5)}, ValueError, "depth"),
        ({"tree": [(0,)]}, TypeError, "tree"),
        ({"max_new_tokens": 80}, ValueError, "max_new_tokens"),
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens"),
        ({"temperature": -1.0}, ValueError, "temperature"),
        ({"eps": 0.1}, TypeError, "eps"),
    ],
)
def test_bad_arguments(kwargs, error, message) -> None:
    args = {"max_new_tokens": 5} | kwargs
    with pytest.raises(error, match=message):
        medusa_generate(target_model(), random_heads(CONFIG), np.array([1]), **args)


def test_bad_models() -> None:
    with pytest.raises(TypeError, match="target"):
        medusa_generate(object(), random_heads(CONFIG), [1], max_new_tokens=3)
    with pytest.raises(TypeError, match="heads"):
        medusa_generate(target_model(), object(), [1], max_new_tokens=3)
    other = TransformerConfig(vocab_size=13, n_layer=1, n_head=2, d_model=16, max_len=64)
    with pytest.raises(ValueError, match="heads"):
        medusa_generate(target_model(), random_heads(other), [1], max_new_tokens=3)


def test_heads_shapes_and_accuracy() -> None:
    heads = random_heads(CONFIG, n_heads=2)
    assert heads.logits(np.zeros((5, 32))).shape == (2, 5, 13)
    with pytest.raises(ValueError, match="hidden"):
        heads.logits(np.zeros((5, 31)))
    with pytest.raises(ValueError, match="shapes"):
        MedusaHeads(np.zeros((2, 4, 4)), np.zeros((2, 5)), np.zeros((2, 4, 7)))
    # Oracle check of top_k_accuracy: heads that copy the token at t+i+2 exactly.
    tokens = np.random.default_rng(0).integers(0, 13, 50)
    w2 = np.zeros((2, 32, 13), dtype=np.float32)
    w2[:, :13, :] = np.eye(13)
    exact = MedusaHeads(np.zeros((2, 32, 32)), np.zeros((2, 32)), w2)
    hidden = np.zeros((50, 32), dtype=np.float32)
    hidden[np.arange(48), tokens[2:]] = 5.0  # head 0 sees token t+2
    acc = top_k_accuracy(exact, hidden, tokens, top=3)
    assert acc[0, 0] == 1.0 and acc[0, 1:].sum() == 0.0
    assert acc[1].sum() < 0.5  # head 1 should guess t+3 and reads the wrong token


# ---------------------------------------------------------------- exact chain is lossless

LENGTH, N = 4, 2000  # TINY: V = 3


def chain_samples(rule: str, temperature: float, **params) -> list[tuple]:
    target = target_model(TINY, seed=2)
    heads = random_heads(TINY, n_heads=3, seed=9)
    rng = np.random.default_rng(2024)
    return [
        tuple(
            medusa_generate(
                target,
                heads,
                [0],
                max_new_tokens=LENGTH,
                rule=rule,
                temperature=temperature,
                tree=chain_tree(3),
                seed=rng,
                **params,
            ).tokens.tolist()
        )
        for _ in range(N)
    ]


@pytest.mark.slow
def test_exact_chain_preserves_target_distribution() -> None:
    # 81 sequences; at N = 2000 the exact rule scored 63 (df 72, critical 115)
    expected = enumerate_sequences(target_model(TINY, seed=2), [0], LENGTH, 1.0)
    stat, df = chi2_statistic(chain_samples("exact", 1.0), expected)
    assert stat < chi2_critical(df), (stat, df)


@pytest.mark.slow
def test_typical_acceptance_is_detectably_lossy() -> None:
    expected = enumerate_sequences(target_model(TINY, seed=2), [0], LENGTH, 1.0)
    # same heads, same tree, same seeds: typical acceptance at T = 1 is far off
    stat, df = chi2_statistic(chain_samples("typical", 1.0), expected)
    assert stat > 3 * chi2_critical(df), (stat, df)


# ---------------------------------------------------------------- training heads in numpy


def test_head_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(0)
    params = {
        "w1": 0.3 * rng.standard_normal((2, 4, 4)),
        "b1": 0.3 * rng.standard_normal((2, 4)),
        "w2": rng.standard_normal((2, 4, 5)),
    }
    h, want = rng.standard_normal((6, 4)), rng.integers(0, 5, (2, 6))
    _, grads = head_loss_grads(params, h, want)
    for name, value in params.items():
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            old = value[index]
            value[index] = old + 1e-6
            up = head_loss_grads(params, h, want)[0].sum()
            value[index] = old - 1e-6
            down = head_loss_grads(params, h, want)[0].sum()
            value[index] = old
            numeric[index] = (up - down) / 2e-6
        np.testing.assert_allclose(grads[name], numeric, atol=1e-6, err_msg=name)


def test_fit_heads_learns_a_copy_task() -> None:
    # the hidden state encodes the token two ahead (head 0) and three ahead (head 1)
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 6, 400)
    hidden = np.zeros((400, 16), dtype=np.float32)
    hidden[np.arange(397), tokens[2:399]] = 1.0
    hidden[np.arange(397), 6 + tokens[3:]] = 1.0
    unembed = 0.01 * rng.standard_normal((16, 6))
    heads, losses = fit_heads(hidden, tokens, unembed, 2, steps=300, batch=64, lr=0.05, seed=0)
    assert losses.shape == (300, 2)
    assert np.all(losses[-20:].mean(axis=0) < 0.1 * losses[0])
    acc = top_k_accuracy(heads, hidden, tokens, top=1)
    assert acc.min() > 0.95
    again, _ = fit_heads(hidden, tokens, unembed, 2, steps=300, batch=64, lr=0.05, seed=0)
    np.testing.assert_array_equal(again.w2, heads.w2)  # same seed, same heads


def test_windowed_forward_restarts_each_window() -> None:
    model, fresh = target_model(), target_model()
    ids = np.random.default_rng(2).integers(0, 13, 150)  # windows of 64, 64, 22
    out = windowed_forward(model, ids)
    assert out.logits.shape == (150, 13) and out.hidden.shape == (150, 32)
    for start in (0, 64, 128):
        window = ids[start : start + 64]
        np.testing.assert_allclose(
            out.logits[start : start + len(window)], fresh.logits(window), atol=1e-5
        )


def test_typical_first_token_tv_by_hand() -> None:
    # exact TV vs an empirical estimate from medusa_generate's first emitted token
    logits = np.log(np.array([[0.5, 0.3, 0.2], [0.05, 0.05, 0.9]]))
    tv = typical_first_token_tv(logits, np.array([1, 0]), 1.0)
    np.testing.assert_allclose(tv, [0.7, 0.0])  # 0.3 > cutoff: accepted; 0.05 is not
    assert typical_first_token_tv(logits, np.array([2, 2]), 0.0).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="eps"):
        typical_first_token_tv(logits, np.array([1, 0]), 1.0, eps=-1)
