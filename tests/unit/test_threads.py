"""Per-sequence state: one model, many sequences, several threads, exactly the serial results.

The KV cache used to live inside the model object, so two threads sharing a model
silently corrupted each other's text (12 of 12 sampled runs differed from the serial
result). Each thread now has its own default cache, and any caller can hold explicit
per-sequence caches (``model.new_state()``).
"""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from specdec_lite import (
    NGramModel,
    generate,
    load_pretrained,
    medusa_generate,
    speculative_generate,
)
from specdec_lite.drafting.medusa import chain_tree, dense_tree
from specdec_lite.models.corpus import load_text
from specdec_lite.models.transformer import KVCache

N_THREADS = 4


@pytest.fixture(scope="module")
def shipped():
    models = load_pretrained()
    text = load_text("heldout")
    tok = models.tokenizer
    prompts = [tok.encode(text[i * 1013 : i * 1013 + 24 + 5 * (i % 4)]) for i in range(16)]
    ngram = NGramModel(5, tok.vocab_size).fit(tok.encode(text[:40_000]))
    return models, ngram, prompts


def jobs(models, ngram, prompts):
    """24 decoding jobs of every kind over the shared models, each a zero-argument call."""
    target, draft, heads = models.target, models.draft, models.heads
    out = []
    for i, prompt in enumerate(prompts[:8]):
        out.append(lambda p=prompt, i=i: speculative_generate(
            target, draft, p, k=3, max_new_tokens=24, temperature=1.0, seed=i))
        out.append(lambda p=prompt, i=i: speculative_generate(
            target, ngram, p, k=4, max_new_tokens=24, temperature=0.0 if i % 2 else 0.8,
            rule="greedy" if i % 2 else "exact", seed=i))
    for i, prompt in enumerate(prompts[8:]):
        if i % 2:
            out.append(lambda p=prompt, i=i: medusa_generate(
                target, heads, p, max_new_tokens=24, tree=dense_tree([2, 2, 1]), seed=i))
        else:
            out.append(lambda p=prompt, i=i: medusa_generate(
                target, heads, p, max_new_tokens=24, temperature=1.0, rule="exact",
                tree=chain_tree(3), seed=i))
        out.append(lambda p=prompt, i=i: generate(target, p, max_new_tokens=16,
                                                  temperature=1.0, seed=100 + i))
    return out


def test_threads_sharing_models_give_the_serial_results(shipped) -> None:
    models, ngram, prompts = shipped
    calls = jobs(models, ngram, prompts)
    serial = [tuple(call().tokens.tolist()) for call in calls]
    start = threading.Barrier(N_THREADS)

    def run(chunk: list[int]) -> dict[int, tuple]:
        start.wait()  # all threads decode at the same time, interleaving their forwards
        return {i: tuple(calls[i]().tokens.tolist()) for i in chunk}

    order = np.random.default_rng(0).permutation(len(calls))
    chunks = [order[t::N_THREADS].tolist() for t in range(N_THREADS)]
    for _ in range(2):
        threaded: dict[int, tuple] = {}
        with ThreadPoolExecutor(N_THREADS) as pool:
            for part in pool.map(run, chunks):
                threaded |= part
        differing = [i for i in range(len(calls)) if threaded[i] != serial[i]]
        assert differing == [], f"jobs {differing} differ from their serial results"


def test_direct_calls_from_threads_share_no_state(shipped) -> None:
    """A call without cache= runs on a cache of its own: a thread's direct calls answer
    as they would alone, whatever another thread asked the model in between."""
    target = shipped[0].target
    a, b = shipped[2][0], shipped[2][1]
    alone = {0: target.probs(a), 1: target.probs(b)}
    seen: dict[int, list] = {0: [], 1: []}

    def ask(which: int) -> None:
        for _ in range(5):
            seen[which].append(target.probs(a if which == 0 else b))

    threads = [threading.Thread(target=ask, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for which in (0, 1):
        for got in seen[which]:
            np.testing.assert_array_equal(got, alone[which])


def test_explicit_caches_interleave_on_one_thread(shipped) -> None:
    """Two sequences advanced in turns, each in its own cache, equal fresh forwards."""
    target = shipped[0].target
    a, b = shipped[2][1], shipped[2][2]
    cache_a, cache_b = target.new_state(), target.new_state()
    for n in range(len(a) - 6, len(a) + 1):
        got_a = target.last_probs(a[:n], 2, cache=cache_a)
        got_b = target.last_probs(b[:n], 2, cache=cache_b)
        np.testing.assert_allclose(got_a, target.probs(a[:n], cache=target.new_state())[-2:],
                                   atol=1e-6)
        np.testing.assert_allclose(got_b, target.probs(b[:n], cache=target.new_state())[-2:],
                                   atol=1e-6)
    assert cache_a.n_causal == cache_b.n_causal == len(a)
    assert target.hidden_at(3, cache=cache_a).shape == (target.config.d_model,)
    target.rollback(4, cache=cache_a)
    assert cache_a.length == 4 and cache_b.length == len(a)


def test_weights_are_read_only_and_caches_are_checked(shipped) -> None:
    models = shipped[0]
    target, heads = models.target, models.heads
    for array in (target.wte, target.unembed, target.layers[0].c_fc_w, heads.w1):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0
    assert shipped[1]._pair_keys[0].flags.writeable is False
    with pytest.raises(TypeError, match="cache"):
        target.probs([1, 2], cache="not a cache")
    with pytest.raises(ValueError, match="cache"):
        target.probs([1, 2], cache=models.draft.new_state())  # the draft's shape
    assert isinstance(target.new_state(), KVCache)


def test_a_pickled_model_gives_the_same_rows(shipped) -> None:
    """A model travels to another process (pickle): weights, no sequence state."""
    target = shipped[0].target
    prompt = shipped[2][3]
    clone = pickle.loads(pickle.dumps(target))
    np.testing.assert_array_equal(clone.last_probs(prompt, 3), target.last_probs(prompt, 3))
