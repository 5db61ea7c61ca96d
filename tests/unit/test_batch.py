"""Batched speculative decoding: greedy identity with the single-sequence loop, the target
law per sequence (chi-square), per-sequence seeds, continuous batching, restart, bad input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support import random_params

from specdec_lite import MarkovModel, NGramModel, generate, load_pretrained, speculative_generate
from specdec_lite.drafting.draft_length import AdaptiveK, AutoK, StepCosts, replay_k
from specdec_lite.engine.batch import BatchEngine
from specdec_lite.engine.batch_generate import generate_batch, speculative_generate_batch
from specdec_lite.models import fast
from specdec_lite.models.batch_kv import GPTRows, forward_batch
from specdec_lite.models.corpus import load_text
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.teaching.exactness import chi_square, sequence_law

needs_numba = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")


@pytest.fixture(scope="module")
def shipped():
    models = load_pretrained()
    tok = models.tokenizer
    text = load_text("heldout")
    # mixed prompt lengths, 9 to 60 characters
    prompts = [tok.encode(text[i * 1511 : i * 1511 + 9 + 17 * (i % 4)]) for i in range(10)]
    ngram = NGramModel(5, tok.vocab_size).fit(tok.encode(text[:60_000]))
    return models, ngram, prompts, tok.encode("\n")[0]


def same_trace(batched, single) -> None:
    assert batched.tokens.tolist() == single.tokens.tolist()
    assert batched.steps == single.steps
    assert (batched.n_target_calls, batched.n_draft_calls) == (
        single.n_target_calls, single.n_draft_calls)


# ---------------------------------------------------------------- greedy identity


@pytest.mark.parametrize("pair", ["gpt", "gpt+ngram", "ngram+ngram"])
def test_greedy_batched_equals_greedy_per_sequence(shipped, pair) -> None:
    models, ngram, prompts, newline = shipped
    target = models.target if pair.startswith("gpt") else NGramModel(6, ngram.vocab_size).fit(
        ngram_text_ids(shipped))
    draft = models.draft if pair == "gpt" else ngram
    limits = [30 + 5 * (i % 3) for i in range(len(prompts))]
    eos = [newline if i % 2 else None for i in range(len(prompts))]
    engine = BatchEngine(target, draft, k=3, temperature=0.0, rule="greedy", max_batch=4)
    for i in range(6):  # six join now; the batch holds 4, the others wait for a free slot
        engine.add(prompts[i], max_new_tokens=limits[i], eos_id=eos[i], request_id=i)
    done = {}
    for _ in range(3):
        done.update(engine.step())
    for i in range(6, len(prompts)):  # four more join mid-run
        engine.add(prompts[i], max_new_tokens=limits[i], eos_id=eos[i], request_id=i)
    done.update(engine.run())
    assert sorted(done) == list(range(len(prompts))) and max(engine.batch_sizes) == 4
    stopped = 0
    for i, prompt in enumerate(prompts):
        single = speculative_generate(target, draft, prompt, k=3, max_new_tokens=limits[i],
                                      temperature=0.0, rule="greedy", eos_id=eos[i])
        same_trace(done[i], single)
        stopped += len(single.tokens) < limits[i]
    assert stopped > 0, "no sequence met its EOS: the test does not exercise it"


@needs_numba
def test_compiled_batch_runs_the_compiled_forward_and_stays_greedy_identical(shipped) -> None:
    """On the numba backend the batched engine runs the model's own compiled forward
    (batch-first, the kernel a single sequence's forward calls), and its greedy output is
    the single-sequence loop's on the same backend, token for token."""
    models, _, prompts, newline = shipped
    compiled = load_pretrained(backend="numba")
    target, draft = compiled.target, compiled.draft
    calls = []
    real_batch = target.compiled.batch
    target.compiled.batch = lambda *a: calls.append(len(a[3])) or real_batch(*a)
    try:
        engine = BatchEngine(target, draft, k=3, temperature=0.0, rule="greedy", max_batch=4)
        for i, prompt in enumerate(prompts[:6]):
            engine.add(prompt, max_new_tokens=24, eos_id=newline, request_id=i)
        done = engine.run()
    finally:
        del target.compiled.batch
    assert max(calls) == 4, "the batched engine did not run the compiled forward in batches"
    for i, prompt in enumerate(prompts[:6]):
        single = speculative_generate(target, draft, prompt, k=3, max_new_tokens=24,
                                      temperature=0.0, rule="greedy", eos_id=newline)
        same_trace(done[i], single)


def ngram_text_ids(shipped) -> np.ndarray:
    return shipped[0].tokenizer.encode(load_text("heldout")[60_000:160_000])


def test_plain_batched_decoding_equals_generate(shipped) -> None:
    models, _, prompts, newline = shipped
    for temperature in (0.0, 0.8):
        batched = generate_batch(models.target, prompts, max_new_tokens=25,
                                 temperature=temperature, seeds=list(range(len(prompts))),
                                 eos_id=newline, max_batch=3)
        for i, prompt in enumerate(prompts):
            single = generate(models.target, prompt, max_new_tokens=25, temperature=temperature,
                              seed=i, eos_id=newline)
            same_trace(batched[i], single)


def test_sampled_batch_equals_seeded_single_runs_and_metrics_agree(shipped) -> None:
    """Each sequence draws from its own Generator in the single loop's order, so a
    sampled batched run equals the seeded single-sequence runs (top-k and top-p too)."""
    models, _, prompts, _ = shipped
    kwargs = dict(k=4, max_new_tokens=30, temperature=0.9, top_k=20, top_p=0.95)
    batched = speculative_generate_batch(models.target, models.draft, prompts,
                                         seeds=[100 + i for i in range(len(prompts))], **kwargs)
    for i, prompt in enumerate(prompts):
        single = speculative_generate(models.target, models.draft, prompt, seed=100 + i,
                                      **kwargs)
        same_trace(batched[i], single)
        assert batched[i].alpha == single.alpha and batched[i].tau == single.tau


# ---------------------------------------------------------------- per-sequence seeds


@pytest.mark.parametrize("kind", ["gpt", "markov"])
def test_a_seeded_sequence_ignores_its_batch_company(shipped, kind) -> None:
    models, _, prompts, _ = shipped
    if kind == "gpt":
        target, draft, prompt, others = models.target, models.draft, prompts[3], prompts
    else:
        target, draft = markov(3, 1), markov(3, 2)
        prompt, others = [0], [[1], [2, 0], [0, 0, 1]] * 3
    kwargs = dict(k=3, max_new_tokens=20, temperature=1.0)
    alone = speculative_generate_batch(target, draft, [prompt], seeds=[7], **kwargs)[0]
    seeds = [1, 2, 3, 4, 5, 7, *range(8, 3 + len(others))]  # prompt sits at index 5
    crowd = speculative_generate_batch(target, draft, [*others[:5], prompt, *others[5:]],
                                       seeds=seeds, max_batch=4, **kwargs)[5]
    single = speculative_generate(target, draft, prompt, seed=7, **kwargs)
    same_trace(alone, single)
    same_trace(crowd, single)


def test_an_int_seed_spawns_one_generator_per_prompt(shipped) -> None:
    models, _, prompts, _ = shipped
    kwargs = dict(k=2, max_new_tokens=12, temperature=1.0)
    a = speculative_generate_batch(models.target, models.draft, prompts[:4], seeds=5, **kwargs)
    b = speculative_generate_batch(models.target, models.draft, prompts[:4], seeds=5, **kwargs)
    assert [g.tokens.tolist() for g in a] == [g.tokens.tolist() for g in b]
    same = speculative_generate_batch(models.target, models.draft, [prompts[0]] * 4, seeds=5,
                                      **kwargs)
    assert len({tuple(g.tokens.tolist()) for g in same}) > 1  # children differ


# ---------------------------------------------------------------- the target law


def tiny_gpt(seed: int, scale: float = 1.0) -> TransformerModel:
    config = TransformerConfig(vocab_size=3, n_layer=1, n_head=2, d_model=8, max_len=12)
    params = random_params(config, seed)
    params["wte"] = params["wte"] * scale
    return TransformerModel(config, params)


def markov(v: int, seed: int) -> MarkovModel:
    return MarkovModel(np.random.default_rng(seed).dirichlet(np.ones(v), size=v))


LENGTH, N = 4, 3000


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("draft", "k", "temperature", "cuts"),
    [("gpt", 2, 1.0, {}), ("gpt", 3, 0.7, {}), ("markov", 3, 1.0, {}),
     ("gpt", 2, 1.0, {"top_p": 0.8})],
    ids=["gpt-k2-T1", "gpt-k3-T0.7", "markov-k3-T1", "gpt-k2-top_p"],
)
def test_batched_output_follows_the_target_law(draft, k, temperature, cuts) -> None:
    """N sequences from one prompt, 64 at a time with continuous batching: the law of
    their first LENGTH tokens is the (warped) target's, enumerated exactly."""
    target = tiny_gpt(0, scale=3.0)
    draft_model = tiny_gpt(1, scale=3.0) if draft == "gpt" else markov(3, 4)
    prompt = [1, 0]
    law = sequence_law(target, prompt, LENGTH, temperature, **cuts)
    runs = speculative_generate_batch(target, draft_model, [prompt] * N, k=k,
                                      max_new_tokens=LENGTH, temperature=temperature,
                                      seeds=12345, max_batch=64, **cuts)
    test = chi_square([g.tokens.tolist() for g in runs], law)
    assert test.passed(), str(test)


def law_under_load(spec_max_batch: int):
    """N sequences from one prompt, three joining before each step, so the batch grows
    and shrinks across ``spec_max_batch`` and sequences mix plain and speculative steps;
    returns (their first LENGTH tokens, plain steps taken because of the load, all steps)."""
    target, draft = tiny_gpt(0, scale=3.0), tiny_gpt(1, scale=3.0)
    engine = BatchEngine(target, draft, k=2, temperature=1.0, max_batch=64,
                         spec_max_batch=spec_max_batch)
    seeds = np.random.SeedSequence(777).spawn(N)
    done: dict = {}
    for i in range(0, N, 3):
        for j in range(i, min(i + 3, N)):
            engine.add([1, 0], max_new_tokens=LENGTH, seed=np.random.default_rng(seeds[j]),
                       request_id=j)
        done.update(engine.step())
    done.update(engine.run())
    return [done[i].tokens.tolist() for i in range(N)], engine.n_plain_by_load, engine.n_steps


@pytest.mark.statistical
def test_speculation_switched_off_under_load_keeps_the_target_law() -> None:
    """The same law test as above (whose power the next test shows) on sequences that mix
    plain steps (batch above ``spec_max_batch``) and speculative ones."""
    runs, n_plain, n_steps = law_under_load(spec_max_batch=8)
    assert 0.2 * n_steps < n_plain < 0.8 * n_steps  # a real mix of the two kinds of step
    test = chi_square(runs, sequence_law(tiny_gpt(0, scale=3.0), [1, 0], LENGTH, 1.0))
    assert test.passed(), str(test)


def test_the_law_test_catches_a_lossy_rule_in_the_batch() -> None:
    target, draft = tiny_gpt(0, scale=3.0), tiny_gpt(1, scale=3.0)
    law = sequence_law(target, [1, 0], LENGTH, 1.0)
    runs = speculative_generate_batch(target, draft, [[1, 0]] * N, k=2, max_new_tokens=LENGTH,
                                      seeds=12345, max_batch=64, rule="threshold", theta=0.5)
    assert not chi_square([g.tokens.tolist() for g in runs], law).passed()


# ---------------------------------------------------------------- restart


def test_a_resumed_run_finishes_exactly_as_an_uninterrupted_one(shipped) -> None:
    models, _, prompts, _ = shipped

    def engine() -> BatchEngine:
        e = BatchEngine(models.target, models.draft, k=3, temperature=1.0, max_batch=3)
        for i, prompt in enumerate(prompts[:5]):
            e.add(prompt, max_new_tokens=24, seed=40 + i, request_id=f"r{i}")
        return e

    whole = engine().run()
    first = engine()
    done = {}
    for _ in range(4):
        done.update(first.step())
    saved = first.snapshot()  # plain data: prompt, tokens so far, Generator state, trace
    assert saved and all(isinstance(s["tokens"], list) for s in saved)
    second = BatchEngine(models.target, models.draft, k=3, temperature=1.0, max_batch=3)
    for state in saved:
        second.resume(state)
    done.update(second.run())
    assert sorted(done) == sorted(whole)
    for rid, gen in whole.items():
        same_trace(done[rid], gen)


# ---------------------------------------------------------------- the batched forward


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_forward_batch_over_ragged_blocks_equals_single_forwards(backend) -> None:
    config = TransformerConfig(vocab_size=13, n_layer=2, n_head=4, d_model=32, max_len=40)
    model = TransformerModel(config, random_params(config), backend=backend)
    rng = np.random.default_rng(0)
    contexts = [rng.integers(0, 13, n) for n in (5, 17, 1, 30)]
    rows = GPTRows(model, slots=5)
    rows.add(contexts)
    longer = [np.r_[c, rng.integers(0, 13, m)] for c, m in zip(contexts, (4, 0, 2, 1),
                                                               strict=True)]
    longer[1] = None  # a slot that sits this call out
    got = rows.rows(longer, [3, 1, 2, 2], 1.0)
    for ctx, out in zip(longer, got, strict=True):
        if ctx is None:
            assert out is None
            continue
        expected = model.last_probs(ctx, len(out), cache=model.new_state())
        np.testing.assert_allclose(out, expected, atol=1e-6)
    rows.remove(0)  # slot 3 moves into slot 0
    assert rows.cache.n_active == 3 and rows.cache.length[0] == len(longer[3])
    shorter = [longer[3][:-3], contexts[1], longer[2]]  # a rollback, an idle and a reuse
    for ctx, out in zip(shorter, rows.rows(shorter, [2, 1, 1], 0.5), strict=True):
        np.testing.assert_allclose(out, model.last_probs(ctx, len(out), 0.5,
                                                         cache=model.new_state()), atol=1e-6)
    with pytest.raises(ValueError, match="max_len"):
        forward_batch(model, rows.cache, 0, [np.zeros(41, np.int64)])


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"k": -1}, ValueError, "k"),
        ({"k": 1.5}, TypeError, "k"),
        ({"max_new_tokens": -1}, ValueError, "max_new_tokens"),
        ({"max_new_tokens": [3, 4]}, ValueError, "max_new_tokens"),
        ({"max_new_tokens": 300}, ValueError, "max_new_tokens"),
        ({"temperature": -1.0}, ValueError, "temperature"),
        ({"seeds": [1, 2]}, ValueError, "seeds"),
        ({"max_batch": 0}, ValueError, "max_batch"),
        ({"rule": "nope"}, ValueError, "rule"),
        ({"top_p": 1.5}, ValueError, "top_p"),
        ({"prompts": []}, ValueError, "prompts"),
        ({"prompts": [[1, 2], [1, 999]]}, ValueError, r"prompts\[1\]"),
        ({"prompts": [[1, 2], []]}, ValueError, r"prompts\[1\]"),
        ({"eos_id": 999}, ValueError, "eos_id"),
    ],
)
def test_bad_arguments_raise_naming_the_parameter(shipped, kwargs, error, name) -> None:
    models, _, prompts, _ = shipped
    call = {"prompts": prompts[:3], "k": 2, "max_new_tokens": 5} | kwargs
    with pytest.raises(error, match=name):
        speculative_generate_batch(models.target, models.draft, **call)


def test_bad_models_and_requests_raise(shipped) -> None:
    models, _, prompts, _ = shipped
    with pytest.raises(ValueError, match="draft"):
        BatchEngine(models.target, markov(3, 0), k=2)
    with pytest.raises(ValueError, match="draft"):
        BatchEngine(models.target, None, k=2)
    with pytest.raises(TypeError, match="target"):
        BatchEngine(object(), models.draft)
    engine = BatchEngine(models.target, models.draft, k=2)
    engine.add(prompts[0], max_new_tokens=3, request_id="a")
    with pytest.raises(ValueError, match="request_id"):
        engine.add(prompts[1], max_new_tokens=3, request_id="a")
    with pytest.raises(ValueError, match="snapshot"):
        engine.resume({"prompt": [1]})
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.resume({"request_id": "b", "prompt": [1], "tokens": [2, 3], "max_new_tokens": 1,
                       "eos_id": None, "rng_state": np.random.default_rng(0).bit_generator.state})


# ---------------------------------------------------------------- the benchmark section


def test_bench_batch_section_rows_and_table() -> None:
    from types import SimpleNamespace

    from specdec_lite.bench.batch import BatchSettings, format_batch, measure
    from specdec_lite.bench.schema import OPTIONAL_FIELDS

    config = TransformerConfig(vocab_size=13, n_layer=1, n_head=2, d_model=16, max_len=32)
    models = SimpleNamespace(target=TransformerModel(config, random_params(config, 1)),
                             draft=TransformerModel(config, random_params(config, 2)))
    settings = BatchSettings(sizes=(1, 3), k=2, temperatures=(0.0, 1.0), new_tokens=5,
                             repeats=2)
    section = measure(models, [np.arange(6) % 13, np.arange(9) % 13], settings)
    rows = section["rows"]
    assert len(rows) == 2 * 3 * 2 and section["settings"]["sizes"] == [1, 3]
    assert {r["method"] for r in rows} == {"plain", "speculative", "auto"}
    assert 0 <= section["settings"]["spec_max_batch"] <= 3
    assert set(section["settings"]["spec_gains"]) == {"1", "2", "3"}  # 1, powers of 2, max
    for row in rows:  # every B decodes the same three sequences (two prompts, reused)
        assert row["tokens"] == 3 * 5 * 2 and row["n_runs"] == 2
        assert row["tokens_per_s"] > 0
        lo, hi = row["tokens_per_s_ci"]
        assert lo <= row["tokens_per_s"] <= hi
        if row["method"] == "plain":
            assert row["speedup"] is None and row["tau"] == 1.0 and row["k"] == 0
        elif row["method"] == "speculative":
            assert row["speedup"] > 0 and row["k"] == 2 and 0 <= row["alpha"] <= 1
        else:  # auto: alpha is None where no step drafted
            assert row["speedup"] > 0 and row["k"] == 2
            assert row["alpha"] is None or 0 <= row["alpha"] <= 1
    table = format_batch(section)
    assert len(table.splitlines()) == 2 + 2 * 2 + 1 and "spec_max_batch" in table
    assert "batch" in {name for name, _, _ in OPTIONAL_FIELDS}
    with pytest.raises(ValueError, match="sizes"):
        measure(models, [np.arange(6)], BatchSettings(sizes=(0,)))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_bench_batch_sizes_decode_the_same_sequences(temperature) -> None:
    """The batch benchmark compares batch sizes on one workload: each sequence keeps its
    prompt and its seed whatever batch it is decoded in, so batches of 1 and of 3 emit the
    same tokens."""
    from types import SimpleNamespace

    from specdec_lite.bench.batch import BatchSettings, run_in_batches

    config = TransformerConfig(vocab_size=13, n_layer=1, n_head=2, d_model=16, max_len=32)
    models = SimpleNamespace(target=TransformerModel(config, random_params(config, 1)),
                             draft=TransformerModel(config, random_params(config, 2)))
    settings = BatchSettings(sizes=(1, 3), k=2, new_tokens=6)
    sequences = [np.arange(6) % 13, np.arange(9) % 13, np.arange(3, 10) % 13]
    decoded = {b: run_in_batches(models, "speculative", sequences, b, temperature, settings,
                                 repeat=0)[1] for b in (1, 2, 3)}
    for b in (2, 3):
        assert [g.tokens.tolist() for g in decoded[b]] == [g.tokens.tolist() for g in decoded[1]]
    assert len({tuple(g.tokens.tolist()) for g in decoded[1]}) > 1


def test_bench_batch_auto_method_is_greedy_identical_and_switches_off_under_load() -> None:
    """The automatic method at T = 0 emits plain greedy decoding's tokens at every B; with
    spec_max_batch = 1 a batch of three drafts only once two sequences have left."""
    from types import SimpleNamespace

    from specdec_lite.bench.batch import BatchSettings, run_in_batches

    config = TransformerConfig(vocab_size=13, n_layer=1, n_head=2, d_model=16, max_len=32)
    models = SimpleNamespace(target=TransformerModel(config, random_params(config, 1)),
                             draft=TransformerModel(config, random_params(config, 2)))
    settings = BatchSettings(sizes=(1, 3), k=2, new_tokens=6)
    sequences = [np.arange(6) % 13, np.arange(9) % 13, np.arange(3, 10) % 13]
    plain = run_in_batches(models, "plain", sequences, 3, 0.0, settings, repeat=0)[1]
    for b in (1, 3):
        auto = run_in_batches(models, "auto", sequences, b, 0.0, settings, repeat=0,
                              spec_max_batch=1)[1]
        assert [g.tokens.tolist() for g in auto] == [g.tokens.tolist() for g in plain]
        if b == 3:  # all three active for every step: no step drafts
            assert all(not step.proposed for g in auto for step in g.steps)
    with pytest.raises(ValueError, match="method"):
        run_in_batches(models, "medusa", sequences, 1, 0.0, settings, repeat=0)


# ---------------------------------------------------------------- speculation off under load


def test_spec_max_batch_decodes_plainly_above_it(shipped) -> None:
    """A step with more than ``spec_max_batch`` active sequences drafts nothing; once the
    batch is small enough the engine speculates again."""
    models, _, prompts, _ = shipped
    engine = BatchEngine(models.target, models.draft, k=3, temperature=0.0, rule="greedy",
                         max_batch=4, spec_max_batch=2)
    for i, (prompt, limit) in enumerate(zip(prompts[:4], (6, 10, 24, 24), strict=True)):
        engine.add(prompt, max_new_tokens=limit, seed=i, request_id=i)
    done = engine.run()
    full = [b for b in engine.batch_sizes if b > 2]
    assert engine.n_plain_by_load == len(full) > 0
    assert len(full) < len(engine.batch_sizes)  # the last two sequences speculated
    assert done[0].n_draft_calls == done[1].n_draft_calls == 0  # gone before the batch shrank
    assert done[2].n_draft_calls > 0 and done[2].n_target_calls < 24
    never = BatchEngine(models.target, models.draft, k=3, temperature=0.0, rule="greedy",
                        spec_max_batch=0)  # no batch is small enough: every step plain
    never.add(prompts[0], max_new_tokens=8, seed=0, request_id=0)
    alone = never.run()[0]
    assert alone.n_draft_calls == 0 and alone.n_target_calls == 8
    assert never.n_plain_by_load == 8
    with pytest.raises(ValueError, match="spec_max_batch"):
        BatchEngine(models.target, models.draft, k=3, spec_max_batch=-1)


class Counted:
    """A draft-length policy that counts how often the engine asks it."""

    def __init__(self, inner: object) -> None:
        self.inner, self.start, self.calls = inner, inner.start, 0

    def after(self, k: int, gen: object) -> int:
        self.calls += 1
        return self.inner.after(k, gen)


@pytest.mark.parametrize("inner", [AutoK(StepCosts((1.0, 1.25, 1.4, 1.55, 1.8))),
                                   AdaptiveK(start=2, k_max=6)])
def test_steps_forced_plain_do_not_ask_the_policy_yet_keep_its_schedule(shipped, inner):
    """Under load the policies are not asked after each forced plain step; when steps may
    draft again each sequence drafts the k its policy would have chosen had it been asked
    after every step (replay_k works that out from the trace)."""
    models, _, prompts, _ = shipped
    engine = BatchEngine(models.target, models.draft, k=3, temperature=0.0, rule="greedy",
                         max_batch=4, spec_max_batch=2)
    policies = [Counted(inner) for _ in range(4)]
    for i, (prompt, limit) in enumerate(zip(prompts[:4], (6, 10, 30, 30), strict=True)):
        engine.add(prompt, max_new_tokens=limit, seed=i, request_id=i, k=policies[i])
    done = engine.run()
    forced = [b > 2 for b in engine.batch_sizes]  # engine step j: sequence i's step j
    for i, policy in enumerate(policies):
        gen, limit = done[i], (6, 10, 30, 30)[i]
        emitted = 0
        for j, step in enumerate(gen.steps):
            if not forced[j]:
                want = replay_k(inner, replace(gen, steps=gen.steps[:j]))
                assert len(step.proposed) == min(want, limit - emitted - 1), (i, j)
            emitted += len(step.emitted)
        n_forced = sum(forced[: len(gen.steps)])  # the first steps, while all four ran
        # asked once when steps may draft again, then after each of them but the last
        assert policy.calls == (len(gen.steps) - n_forced if n_forced < len(gen.steps) else 0)
    assert sum(forced) > 0 and not all(forced)
    assert any(len(step.proposed) for step in done[2].steps)


def test_spec_max_batch_keeps_tokens_equal_to_the_plain_batch(shipped) -> None:
    models, _, prompts, _ = shipped
    plain = generate_batch(models.target, prompts[:4], max_new_tokens=20, temperature=0.0)
    mixed = speculative_generate_batch(models.target, models.draft, prompts[:4], k=3,
                                       max_new_tokens=[6, 10, 20, 20], temperature=0.0,
                                       rule="greedy", spec_max_batch=2)
    for p, m in zip(plain, mixed, strict=True):
        assert m.tokens.tolist() == p.tokens[:len(m.tokens)].tolist()
    assert sum(m.n_draft_calls for m in mixed) > 0
    assert mixed[0].n_draft_calls == 0  # it finished while the batch was full
