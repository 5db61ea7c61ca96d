"""The probes of the engine issue (issue 13), turned into tests.

Each section was a probe that misbehaved: a run past the GPT's 256-position window that
raised halfway, ``sample`` and ``verify`` returning the id V for a NaN or empty row, a
manifest whose config disagrees with its weights, and three mutations that no test
caught (a ``last_probs`` that ignores the temperature, Medusa heads reading the hidden
state one position early, Medusa's trace labels). The bench CLI's ``--compare`` checks
live in ``test_cli.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import random_params

from specdec_lite import NGramModel, generate, load_pretrained, speculative_generate, verify
from specdec_lite.drafting.medusa import MedusaHeads, chain_tree, dense_tree
from specdec_lite.engine.medusa_decode import medusa_generate
from specdec_lite.functional import softmax
from specdec_lite.models.transformer import TransformerConfig, TransformerModel, file_sha256
from specdec_lite.pretrained import WEIGHTS_DIR
from specdec_lite.rules.distributions import sample


def small_gpt(max_len: int = 32, seed: int = 0) -> TransformerModel:
    config = TransformerConfig(13, 1, 2, 16, max_len)
    return TransformerModel(config, random_params(config, seed))


class Counting:
    """A model that forwards ``probs`` to ``inner`` and counts the calls; it shows its
    window the way the GPT does (``config.max_len``), or as ``max_len`` if given."""

    def __init__(self, inner: object, max_len: object = None) -> None:
        self.inner, self.vocab_size, self.calls = inner, inner.vocab_size, 0
        if max_len is None:
            self.config = inner.config
        else:
            self.max_len = max_len

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.inner.probs(tokens)


# ------------------------------------------------------------- the context window


def test_runs_past_the_shipped_window_are_refused_before_any_call() -> None:
    shipped = load_pretrained()
    target, draft = Counting(shipped.target), Counting(shipped.draft)
    prompt = np.zeros(200, dtype=np.int64)
    # the last call would read 200 + 57 = 257 tokens
    for run in (lambda: generate(target, prompt, max_new_tokens=58, temperature=0),
                lambda: speculative_generate(target, draft, prompt, k=4, max_new_tokens=58,
                                             temperature=0)):
        with pytest.raises(ValueError, match=r"max_new_tokens: prompt \(200\) \+ "
                           r"max_new_tokens \(58\).* 257 tokens.*max_len 256"):
            run()
    assert target.calls == draft.calls == 0


@pytest.mark.parametrize("k", [1, 3, 8])
def test_the_window_is_used_to_its_last_position(k: int) -> None:
    """The decoders never read more than prompt + max_new_tokens - 1 tokens, whatever k:
    so 20 + 13 fits a 32-token window and 20 + 14 is refused."""
    prompt = np.arange(20) % 13
    expected = generate(small_gpt(), prompt, max_new_tokens=13, temperature=0).tokens
    assert len(expected) == 13
    spec = speculative_generate(small_gpt(), small_gpt(seed=1), prompt, k=k,
                                max_new_tokens=13, temperature=0)
    np.testing.assert_array_equal(spec.tokens, expected)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(small_gpt(), prompt, max_new_tokens=14, temperature=0)
    with pytest.raises(ValueError, match="target reads 33 tokens"):
        speculative_generate(small_gpt(), small_gpt(seed=1), prompt, k=k, max_new_tokens=14)


def test_the_draft_window_counts_too() -> None:
    """The draft reads one token less than the target; a draft with a smaller window
    than that is named in the message."""
    prompt = np.arange(20) % 13
    ok = speculative_generate(small_gpt(), small_gpt(31, seed=1), prompt, k=3,
                              max_new_tokens=13, temperature=0)
    assert len(ok.tokens) == 13
    with pytest.raises(ValueError, match="max_new_tokens.*draft reads 31 tokens.*max_len 30"):
        speculative_generate(small_gpt(), small_gpt(30, seed=1), prompt, k=3,
                             max_new_tokens=13, temperature=0)


def test_a_max_len_attribute_is_a_window_and_models_without_one_are_unbounded() -> None:
    table = NGramModel(2, 13).fit(np.arange(100) % 13)
    with pytest.raises(ValueError, match="model reads 12 tokens.*max_len 11"):
        generate(Counting(table, max_len=11), [0, 1], max_new_tokens=11, seed=0)
    assert len(generate(Counting(table, max_len=12), [0, 1], max_new_tokens=11,
                        seed=0).tokens) == 11
    long = np.arange(1000) % 13  # an n-gram has no window
    assert len(speculative_generate(table, table, long, k=3, max_new_tokens=5,
                                    seed=0).tokens) == 5
    with pytest.raises(TypeError, match="model.max_len"):
        generate(Counting(table, max_len="long"), [0, 1], max_new_tokens=3)


def test_no_new_tokens_reads_nothing() -> None:
    prompt = np.zeros(40, dtype=np.int64)  # longer than the window, but never read
    assert len(generate(small_gpt(), prompt, max_new_tokens=0).tokens) == 0
    assert len(speculative_generate(small_gpt(), small_gpt(), prompt, k=2,
                                    max_new_tokens=0).tokens) == 0


# ------------------------------------------------------------- sample and verify

BAD_ROWS = {
    "nan": [0.5, np.nan, 0.5, 0.0],
    "inf": [0.5, np.inf, 0.0, 0.0],
    "negative": [0.75, -0.25, 0.5, 0.0],
    "zero mass": [0.0, 0.0, 0.0, 0.0],
}
P = np.array([0.5, 0.3, 0.15, 0.05])
Q = np.array([0.2, 0.5, 0.05, 0.25])


@pytest.mark.parametrize("kind", BAD_ROWS)
def test_sample_rejects_rows_it_cannot_draw_from(kind: str) -> None:
    with pytest.raises(ValueError, match="probs"):
        sample(np.array(BAD_ROWS[kind]), np.random.default_rng(0))


def test_sample_rejects_shapes_and_bad_rngs_and_takes_a_seed() -> None:
    for bad in (np.zeros(0), np.full((2, 2), 0.25)):
        with pytest.raises(ValueError, match="probs"):
            sample(bad, np.random.default_rng(0))
    with pytest.raises(TypeError, match="probs"):
        sample(np.array(["a", "b"]), np.random.default_rng(0))
    for bad, error in ((None, TypeError), (1.5, TypeError), (True, TypeError),
                       (-1, ValueError)):
        with pytest.raises(error, match="rng"):
            sample(P, bad)
    assert [sample(P, 7) for _ in range(3)] == [sample(P, np.random.default_rng(7))] * 3


@pytest.mark.parametrize("rule", ["exact", "greedy", "threshold", "typical"])
@pytest.mark.parametrize("kind", BAD_ROWS)
def test_verify_rejects_bad_rows_naming_the_argument(rule: str, kind: str) -> None:
    params = {"theta": 0.5} if rule == "threshold" else {}
    bad = np.array(BAD_ROWS[kind])
    with pytest.raises(ValueError, match="target_probs"):
        verify([0], Q[None], np.stack([P, bad]), 0, rule=rule, **params)
    with pytest.raises(ValueError, match="draft_probs"):
        verify([0], bad[None], np.stack([P, P]), 0, rule=rule, **params)


def test_verify_takes_a_seed_like_every_entry_point() -> None:
    p = np.random.default_rng(1).dirichlet(np.ones(4), size=4)  # [k + 1, V]
    q = np.random.default_rng(2).dirichlet(np.ones(4), size=3)  # [k, V]
    tokens = [0, 1, 2]
    for seed in range(20):
        with_seed = verify(tokens, q, p, seed)
        with_generator = verify(tokens, q, p, np.random.default_rng(seed))
        np.testing.assert_array_equal(with_seed.tokens, with_generator.tokens)
        assert with_seed.n_accepted == with_generator.n_accepted
    for bad, error in (("abc", TypeError), (1.5, TypeError), (True, TypeError),
                       (-3, ValueError)):
        with pytest.raises(error, match="rng"):
            verify(tokens, q, p, bad)
    with pytest.raises(TypeError, match="rng"):
        verify(tokens, q, p, None)  # the sampling rules need one: no silent fresh entropy
    assert verify(tokens, q, p, None, rule="greedy").extra in ("bonus", "correction")


@pytest.mark.parametrize("tokens", [[0.0], [1.0], np.array([0.7]), [True], np.array([False])])
def test_verify_draft_tokens_must_be_integers(tokens) -> None:
    with pytest.raises(TypeError, match="draft_tokens"):
        verify(tokens, Q[None], np.stack([P, P]), 0)


def test_verify_draft_tokens_range_and_length() -> None:
    for tokens in ([4], [-1], np.array([2**40])):
        with pytest.raises(ValueError, match="draft_tokens"):
            verify(tokens, Q[None], np.stack([P, P]), 0)
    with pytest.raises(ValueError, match="draft_tokens has k = 2.*target_probs"):
        verify([0, 1], Q[None], np.stack([P, P]), 0)  # one draft row, two tokens
    with pytest.raises(ValueError, match="draft_tokens has k = 0.*target_probs"):
        verify([], Q[None], np.stack([P, P]), 0)
    with pytest.raises(ValueError, match="draft_probs"):
        verify([0], np.stack([Q, Q]), np.stack([P, P]), 0)  # two draft rows, one token
    for dtype in (np.int8, np.uint16, np.int32):  # any integer dtype is fine
        assert verify(np.array([1], dtype=dtype), Q[None], np.stack([P, P]), 0).tokens[0] in \
            range(4)


# ------------------------------------------------------------- a custom fast path


class FastRows:
    """A custom model whose fast path returns one kind of bad row (``probs`` is fine)."""

    vocab_size = 4

    def __init__(self, row: list[float], trusted: bool = False) -> None:
        self.row, self.trusted_rows = np.array(row), trusted

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        return np.full((len(tokens), 4), 0.25)

    def last_probs(self, tokens, n_rows=1, temperature=1.0) -> np.ndarray:
        return np.tile(self.row, (n_rows, 1))


@pytest.mark.parametrize("kind", BAD_ROWS)
def test_a_custom_fast_path_is_checked_like_probs(kind: str) -> None:
    table = FastRows([0.25] * 4)
    runs = {"model": lambda m: generate(m, [0], max_new_tokens=3, seed=0),
            "draft": lambda m: speculative_generate(table, m, [0], k=2, max_new_tokens=4,
                                                    seed=0),
            "target": lambda m: speculative_generate(m, table, [0], k=2, max_new_tokens=4,
                                                     seed=0)}
    for name, run in runs.items():
        with pytest.raises(ValueError, match=rf"{name}\.last_probs output"):
            run(FastRows(BAD_ROWS[kind]))
    for name in ("model", "draft"):  # rows a model vouches for still never reach id V
        with pytest.raises(ValueError, match="probs must be one row"):
            runs[name](FastRows(BAD_ROWS[kind], trusted=True))


# ------------------------------------------------------------- manifest vs weights


def manipulated(folder: Path, change) -> Path:
    """A weights folder whose files are the shipped ones and whose manifest is changed."""
    folder.mkdir(exist_ok=True)
    for name in ("target.npz", "draft.npz", "heads.npz"):
        (folder / name).symlink_to(WEIGHTS_DIR / name)
    manifest = json.loads((WEIGHTS_DIR / "manifest.json").read_text())
    change(manifest["models"])
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _set(model: str, field: str, value):
    def change(models: dict) -> None:
        if value is None:
            del models[model]["config"][field]
        else:
            models[model]["config"][field] = value
    return change


@pytest.mark.parametrize(("change", "message"), [
    (_set("target", "n_layer", 4), "target.*n_layer=4.*n_layer=5"),
    (_set("target", "n_layer", 6), "target.*n_layer=6.*n_layer=5"),
    (_set("draft", "n_layer", 2), "draft.*n_layer=2.*n_layer=1"),
    (_set("target", "d_model", 96), "target.*d_model=96.*d_model=192"),
    (_set("target", "vocab_size", 95), "target.*vocab_size=95.*vocab_size=96"),
    (_set("draft", "max_len", 128), "draft.*max_len=128.*max_len=256"),
    (_set("target", "max_len", 512), "target.*max_len=512.*max_len=256"),
    (_set("target", "n_head", 5), "target.*d_model=192 is not a multiple of n_head=5"),
    (_set("target", "n_head", 0), "target.config.n_head must be >= 1"),
    (_set("target", "n_head", None), "target.config must hold exactly"),
    (lambda models: models["heads"].__setitem__("n_heads", 3), "heads.*n_heads=4.*3"),
])
def test_a_manifest_that_disagrees_with_its_weights_is_refused(tmp_path, change,
                                                               message) -> None:
    with pytest.raises(ValueError, match=message):
        load_pretrained(manipulated(tmp_path, change))


def test_a_file_that_carries_its_config_catches_a_halved_n_head(tmp_path) -> None:
    """n_head shapes no array, so only a config stored in the file itself can catch it:
    a target saved with ``config.<field>`` scalars loads as before when the manifest
    agrees, and is refused when the manifest halves n_head."""
    with np.load(WEIGHTS_DIR / "target.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    shipped = json.loads((WEIGHTS_DIR / "manifest.json").read_text())["models"]["target"]
    arrays |= {f"config.{name}": np.array(value) for name, value in shipped["config"].items()}
    carried = tmp_path / "target_with_config.npz"
    np.savez(carried, **arrays)
    digest = file_sha256(carried)

    def use(n_head: int):
        def change(models: dict) -> None:
            models["target"].update(file=str(carried), sha256=digest)
            models["target"]["config"]["n_head"] = n_head
        return change

    good = load_pretrained(manipulated(tmp_path / "agrees", use(6)))
    reference = load_pretrained()
    prompt = reference.tokenizer.encode("def __init__(self")
    np.testing.assert_array_equal(good.target.probs(prompt), reference.target.probs(prompt))
    with pytest.raises(ValueError, match="manifest says n_head=3.*file says n_head=6"):
        load_pretrained(manipulated(tmp_path / "halved", use(3)))


@pytest.mark.xfail(strict=True, reason="the shipped .npz files do not carry their config, and "
                   "n_head shapes no array: re-export them with config.* entries (report)")
def test_the_shipped_target_with_a_halved_n_head_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="n_head"):
        load_pretrained(manipulated(tmp_path, _set("target", "n_head", 3)))


# ------------------------------------------------------------- temperatures other than 0 and 1


def softmax_at(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(logits / T) in float64: the definition last_probs must meet."""
    return softmax(np.asarray(logits, dtype=np.float64) / temperature)


def check_last_probs_temperature(model: TransformerModel, tokens: np.ndarray) -> None:
    logits = model.logits(tokens)  # [n, V]
    for temperature in (0.7, 1.5):
        for n_rows in (1, 4):
            expected = softmax_at(logits[-n_rows:], temperature)
            np.testing.assert_allclose(model.last_probs(tokens, n_rows, temperature),
                                       expected, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(
                softmax_at(logits[-n_rows:], 1.0) ** (1 / temperature)
                / (softmax_at(logits[-n_rows:], 1.0) ** (1 / temperature)).sum(-1, keepdims=True),
                expected, rtol=1e-9, atol=1e-12)


def test_gpt_last_probs_at_temperatures_other_than_0_and_1() -> None:
    shipped = load_pretrained()
    tokens = shipped.tokenizer.encode("def __init__(self, x):\n    ")
    check_last_probs_temperature(shipped.target, tokens)
    check_last_probs_temperature(shipped.draft, tokens)


class ProbsOnly:
    """The same model without its fast path: the decoders then call ``probs`` and apply
    the temperature themselves."""

    def __init__(self, inner: TransformerModel) -> None:
        self.inner, self.vocab_size, self.config = inner, inner.vocab_size, inner.config

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        return self.inner.probs(tokens)


def check_fast_path_decodes_like_probs(pair_factory) -> None:
    for temperature in (0.7, 1.5):
        target, draft, prompt = pair_factory()
        slow_t, slow_d, _ = pair_factory()
        fast = generate(target, prompt, max_new_tokens=24, temperature=temperature, seed=3)
        slow = generate(ProbsOnly(slow_t), prompt, max_new_tokens=24,
                        temperature=temperature, seed=3)
        assert fast.tokens.tolist() == slow.tokens.tolist(), temperature
        fast = speculative_generate(target, draft, prompt, k=3, max_new_tokens=24,
                                    temperature=temperature, seed=4)
        slow = speculative_generate(ProbsOnly(slow_t), ProbsOnly(slow_d), prompt, k=3,
                                    max_new_tokens=24, temperature=temperature, seed=4)
        assert fast.tokens.tolist() == slow.tokens.tolist(), temperature
        assert fast.steps == slow.steps


def shipped_pair():
    shipped = load_pretrained()
    return shipped.target, shipped.draft, shipped.tokenizer.encode("def __init__(self")


def test_gpt_fast_path_decodes_like_probs_at_other_temperatures() -> None:
    check_fast_path_decodes_like_probs(shipped_pair)


def test_the_temperature_checks_catch_a_last_probs_that_ignores_t(monkeypatch) -> None:
    """The mutation that survived: ``last_probs`` returning the T = 1 rows for every T > 0."""
    right = TransformerModel.last_probs

    def ignores_t(self, tokens, n_rows=1, temperature=1.0, *, cache=None):
        return right(self, tokens, n_rows, 0.0 if temperature == 0 else 1.0, cache=cache)

    monkeypatch.setattr(TransformerModel, "last_probs", ignores_t)
    shipped = load_pretrained()
    with pytest.raises(AssertionError):
        check_last_probs_temperature(shipped.target, shipped.tokenizer.encode("def f(x):"))
    with pytest.raises(AssertionError):
        check_fast_path_decodes_like_probs(shipped_pair)


# ------------------------------------------------------------- Medusa: what the heads read


class RecordingHeads(MedusaHeads):
    """The shipped heads, recording every hidden state they are given."""

    def __init__(self, heads: MedusaHeads) -> None:
        super().__init__(heads.w1, heads.b1, heads.w2)
        self.inputs: list[np.ndarray] = []

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        self.inputs.append(np.array(hidden, dtype=np.float32))
        return super().logits(hidden)


MEDUSA_RUNS = [
    {"rule": "greedy", "temperature": 0.0, "tree": dense_tree([3, 2, 2, 1])},
    {"rule": "typical", "temperature": 0.7, "tree": dense_tree([2, 2, 1]), "seed": 1},
    {"rule": "exact", "temperature": 1.0, "tree": chain_tree(4), "seed": 2},
]


def check_heads_read_the_last_committed_hidden_state(target: TransformerModel,
                                                     heads: MedusaHeads, prompt: np.ndarray,
                                                     **kwargs) -> None:
    """Before each head call the sequence is prompt + every emitted token; the last of
    them (the root) is not forwarded yet, so the heads must read the target's hidden state
    at the token before it: the state the target predicted the root from."""
    recording = RecordingHeads(heads)
    gen = medusa_generate(target, recording, prompt, max_new_tokens=40, **kwargs)
    assert len(recording.inputs) == len(gen.steps) - 1 >= 3
    reference = load_pretrained().target  # a fresh model, run causally
    emitted = 0
    for step, seen in zip(gen.steps[:-1], recording.inputs, strict=True):
        emitted += len(step.emitted)
        read = np.concatenate([prompt, gen.tokens[: emitted - 1]])  # up to, not with, root
        expected = reference.hidden(read)[-1]  # [d]
        np.testing.assert_allclose(seen[0], expected, rtol=0, atol=2e-4)


@pytest.mark.parametrize("kwargs", MEDUSA_RUNS, ids=[r["rule"] for r in MEDUSA_RUNS])
def test_medusa_heads_read_the_hidden_state_of_the_last_committed_token(kwargs) -> None:
    shipped = load_pretrained()
    prompt = shipped.tokenizer.encode("    def __init__(self")
    check_heads_read_the_last_committed_hidden_state(shipped.target, shipped.heads, prompt,
                                                     **kwargs)


def test_the_head_check_catches_reading_one_position_early() -> None:
    """The mutation that survived (and cost 18 % of tau): ``hidden_at(n - 2)`` for
    ``hidden_at(n - 1)``."""
    shipped = load_pretrained()
    right = shipped.target.hidden_at
    shipped.target.hidden_at = lambda i, **kw: right(max(i - 1, 0), **kw)  # one early
    with pytest.raises(AssertionError):
        check_heads_read_the_last_committed_hidden_state(
            shipped.target, shipped.heads, shipped.tokenizer.encode("    def __init__(self"),
            **MEDUSA_RUNS[0])


def test_heads_reading_the_right_state_accept_more() -> None:
    """The same off-by-one seen through tau: on the shipped models the right state
    accepts clearly more per step (greedy, a few prompts)."""
    shipped = load_pretrained()
    prompts = ["    def __init__(self", "import os\nimport sys\n", "        return self._"]
    taus = []
    for shift in (0, 1):
        total_tokens = total_calls = 0
        for text in prompts:
            target = load_pretrained().target
            right = target.hidden_at
            target.hidden_at = (lambda i, right=right, shift=shift, **kw:
                                right(max(i - shift, 0), **kw))
            gen = medusa_generate(target, shipped.heads, shipped.tokenizer.encode(text),
                                  max_new_tokens=60)
            total_tokens += len(gen.tokens)
            total_calls += gen.n_target_calls
        taus.append(total_tokens / total_calls)
    assert taus[0] > 1.1 * taus[1], taus


# ------------------------------------------------------------- Medusa: the trace labels


def check_medusa_labels(gen, prompt: np.ndarray, tree_depth: int, greedy: bool) -> None:
    """Each step's token kinds against what happened.

    * The first step samples the root from the prompt alone (``"sample"``).
    * Every later step's ``"accepted"`` tokens are its emitted prefix (``"cut"`` after them
      only in the last step, where ``max_new_tokens`` ended the run); a ``"correction"``
      follows a ``"rejected"`` token, a ``"bonus"`` only a path with no child left to try
      (no rejected token).
    * Greedy: each accepted token is the target's argmax after the text before it, each
      rejected token is not, and the correction or bonus is that argmax.
    * Exact (a chain, sampled): the correction is drawn from norm(max(0, p - q)), which has
      no mass on the rejected token, so it is never the rejected token; a bonus means the
      whole chain was accepted.
    """
    reference = load_pretrained().target
    assert [kind for _, kind in gen.steps[0].token_kinds()] == ["sample"]
    done = 1  # tokens emitted so far
    for step in gen.steps[1:]:
        kinds = step.token_kinds()
        roles = [role for _, role in kinds]
        n = step.n_accepted
        kept = min(n, len(step.emitted))  # fewer only where max_new_tokens cut the step
        assert kept == n or step is gen.steps[-1]
        assert roles[:n] == ["accepted"] * kept + ["cut"] * (n - kept)
        assert "sample" not in roles and "cut" not in roles[n:]
        assert [t for t, _ in kinds[:kept]] == list(step.emitted[:kept])
        if step.extra == "correction":
            assert len(step.proposed) == n + 1 and roles[n] == "rejected"
        else:
            assert step.extra == "bonus" and len(step.proposed) == n
            assert roles.count("rejected") == 0
        if len(step.emitted) == n + 1:  # the extra token was emitted (not cut by the length)
            assert roles[-1] == step.extra and kinds[-1][0] == step.emitted[-1]
        if not greedy and step.extra == "bonus":
            assert n == tree_depth
        if not greedy and step.extra == "correction" and len(step.emitted) == n + 1:
            assert step.emitted[-1] != step.proposed[n]
        if greedy:
            text = [*prompt.tolist(), *gen.tokens[:done].tolist()]

            def argmax_after(tokens: list[int]) -> int:
                return int(reference.logits(np.array(tokens, dtype=np.int64))[-1].argmax())

            for i, (token, role) in enumerate(kinds[: len(step.proposed)]):
                best = argmax_after(text + list(step.proposed[:i]))
                assert (token == best) == (role in ("accepted", "cut")), (i, role)
            if len(step.emitted) == n + 1:
                assert step.emitted[-1] == argmax_after(text + list(step.proposed[:n]))
        done += len(step.emitted)
    assert done == len(gen.tokens)


@pytest.mark.parametrize("kwargs", [MEDUSA_RUNS[0], MEDUSA_RUNS[2]],
                         ids=["greedy tree", "exact chain"])
def test_medusa_trace_labels_match_what_happened(kwargs) -> None:
    shipped = load_pretrained()
    for text in ("    def __init__(self", "import os\n"):
        prompt = shipped.tokenizer.encode(text)
        gen = medusa_generate(shipped.target, shipped.heads, prompt, max_new_tokens=40,
                              **kwargs)
        extras = {step.extra for step in gen.steps[1:]}
        assert extras <= {"bonus", "correction"} and len(gen.steps) > 3
        check_medusa_labels(gen, prompt, kwargs["tree"].max_depth,
                            greedy=kwargs["rule"] == "greedy")
