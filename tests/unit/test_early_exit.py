"""The early-exit draft: the target's first blocks read out by an exit head, its checks,
the shipped heads, and greedy identity on the shipped GPT."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from support import random_params

from specdec_lite.drafting.early_exit import early_exit_model, head_shapes, shared_blocks
from specdec_lite.engine.batch_generate import speculative_generate_batch
from specdec_lite.engine.decode import generate, speculative_generate
from specdec_lite.models import fast
from specdec_lite.models.transformer import TransformerConfig, TransformerModel, load_npz
from specdec_lite.pretrained import (
    WEIGHTS_DIR,
    load_early_exit,
    load_manifest,
    load_pretrained,
)

CONFIG = TransformerConfig(vocab_size=7, n_layer=3, n_head=2, d_model=16, max_len=32)
PARAMS = random_params(CONFIG, seed=1)
CONTEXT = np.array([1, 4, 2, 6, 0, 3, 5, 1], dtype=np.int64)


def shared_head(exit_layer: int) -> dict[str, np.ndarray]:
    """The target's own final LayerNorm and tied LM head, as an exit head."""
    return {f"layer{exit_layer}.ln_f.g": PARAMS["ln_f.g"],
            f"layer{exit_layer}.ln_f.b": PARAMS["ln_f.b"],
            f"layer{exit_layer}.unembed": PARAMS["wte"].T}


def random_head(exit_layer: int, seed: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape) for name, shape
            in head_shapes(CONFIG.d_model, CONFIG.vocab_size, exit_layer).items()}


@pytest.mark.parametrize("exit_layer", [1, 2])
def test_with_the_shared_head_it_is_the_truncated_target(exit_layer) -> None:
    truncated_config = TransformerConfig(vocab_size=7, n_layer=exit_layer, n_head=2,
                                         d_model=16, max_len=32)
    kept = {name: value for name, value in PARAMS.items()
            if not name.startswith("blocks.") or int(name.split(".")[1]) < exit_layer}
    truncated = TransformerModel(truncated_config, kept)  # tied head, first blocks only
    draft = early_exit_model(CONFIG, PARAMS, shared_head(exit_layer), exit_layer)
    assert draft.config.n_layer == exit_layer
    np.testing.assert_array_equal(draft.logits(CONTEXT), truncated.logits(CONTEXT))


def test_the_exit_head_reads_the_stream_after_its_block() -> None:
    head = random_head(1)
    draft = early_exit_model(CONFIG, PARAMS, head, 1)
    shared = early_exit_model(CONFIG, PARAMS, shared_head(1), 1)
    # the same block, so the same stream; only its read-out differs
    stream_normed = (shared.hidden(CONTEXT) - PARAMS["ln_f.b"]) / PARAMS["ln_f.g"]  # [n, d]
    hidden = stream_normed * head["layer1.ln_f.g"] + head["layer1.ln_f.b"]
    np.testing.assert_allclose(draft.logits(CONTEXT), hidden @ head["layer1.unembed"],
                               rtol=1e-4, atol=1e-4)
    assert not np.allclose(draft.logits(CONTEXT), shared.logits(CONTEXT))


@pytest.mark.parametrize(("exit_layer", "error", "match"), [
    (0, ValueError, r"exit_layer must be in \[1, 2\]"),
    (3, ValueError, r"exit_layer must be in \[1, 2\]"),
    (True, TypeError, "exit_layer must be an int"),
    (1.0, TypeError, "exit_layer must be an int"),
    (2, ValueError, "no exit head after block 2"),
])
def test_bad_exit_layers_are_refused(exit_layer, error, match) -> None:
    with pytest.raises(error, match=match):
        early_exit_model(CONFIG, PARAMS, random_head(1), exit_layer)


def test_a_head_of_the_wrong_shape_is_refused() -> None:
    head = random_head(1)
    head["layer1.unembed"] = head["layer1.unembed"][:, :5]
    with pytest.raises(ValueError, match=r"layer1.unembed has shape \(16, 5\)"):
        early_exit_model(CONFIG, PARAMS, head, 1)
    with pytest.raises(ValueError, match="unembed must have shape"):
        TransformerModel(CONFIG, {**PARAMS, "unembed": np.zeros((16, 5))})


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_speculative_decoding_with_it_is_exact_on_the_toy_target(temperature) -> None:
    target = TransformerModel(CONFIG, PARAMS)
    draft = early_exit_model(CONFIG, PARAMS, random_head(1), 1)
    spec = speculative_generate(target, draft, CONTEXT, k=3, max_new_tokens=16,
                                temperature=temperature, seed=4)
    assert spec.n_draft_calls > 0 and spec.n_checked > 0
    if temperature == 0:
        plain = generate(target, CONTEXT, max_new_tokens=16, temperature=0)
        np.testing.assert_array_equal(spec.tokens, plain.tokens)


@pytest.mark.skipif(not fast.available(), reason="needs the fast extra (numba)")
def test_the_compiled_draft_has_the_numpy_drafts_logits() -> None:
    head = random_head(2)
    numpy_draft = early_exit_model(CONFIG, PARAMS, head, 2)
    compiled = early_exit_model(CONFIG, PARAMS, head, 2, backend="numba")
    np.testing.assert_allclose(compiled.logits(CONTEXT), numpy_draft.logits(CONTEXT),
                               rtol=1e-4, atol=1e-4)


def test_it_is_known_as_its_targets_first_blocks_and_nothing_else() -> None:
    target = TransformerModel(CONFIG, PARAMS)
    for exit_layer in (1, 2):
        assert shared_blocks(early_exit_model(CONFIG, PARAMS, random_head(exit_layer),
                                              exit_layer), target) == exit_layer
    other = dict(PARAMS)
    other["blocks.0.fc.w"] = PARAMS["blocks.0.fc.w"] + 1e-3  # one weight differs
    for draft in (early_exit_model(CONFIG, other, random_head(1), 1),
                  TransformerModel(CONFIG, PARAMS),  # as deep as the target: not a draft
                  TransformerModel(CONFIG, random_params(CONFIG, seed=5))):
        assert shared_blocks(draft, target) == 0
    assert shared_blocks(target, None) == 0


BACKENDS = ["numpy"] + (["numba"] if fast.available() else [])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_beside_its_target_it_reads_the_targets_cache(backend, temperature) -> None:
    """Run beside its target, the draft's blocks read the target's keys and values: it
    forwards one token a step before drafting, never a catch-up, whatever k the policy
    takes (plain stretches included); the target's cache ends as its own forward would
    leave it; and the run's tokens are those of an unshared draft's at T = 0."""
    from specdec_lite.bench.timing import ForwardMeter
    from specdec_lite.drafting.draft_length import AutoK, StepCosts
    from specdec_lite.drafting.proposers import ModelDraft

    target = TransformerModel(CONFIG, PARAMS, backend=backend)
    draft = early_exit_model(CONFIG, PARAMS, random_head(1), 1, backend=backend)
    bound = target.bound()
    view = ModelDraft(draft).for_sequence(bound)
    assert view.shares is bound
    assert np.shares_memory(view.model.cache.kv, bound.cache.kv)
    policy = AutoK(StepCosts((1.0, 1.3, 1.6)), alpha0=0.5, probe_every=3)
    for k in (2, policy):
        cache = target.new_state()
        with ForwardMeter({"target": target, "draft": draft}) as meter:
            gen = speculative_generate(target.bound(cache), draft, CONTEXT, k=k,
                                       max_new_tokens=20, temperature=temperature, seed=3)
        assert gen.n_draft_calls > 0
        assert {n for who, n in meter.calls if who == "draft"} == {1}
        tokens = cache.tokens[: cache.n_causal]
        np.testing.assert_allclose(cache.logits[: cache.n_causal], target.logits(tokens),
                                   rtol=1e-4, atol=1e-4)
    if temperature == 0:  # an unshared draft: the same model on a cache of its own
        alone = speculative_generate(target, ModelDraft(draft.bound()), CONTEXT, k=2,
                                     max_new_tokens=20, temperature=0.0, seed=3)
        plain = generate(target, CONTEXT, max_new_tokens=20, temperature=0.0)
        assert gen.tokens.tolist() == plain.tokens.tolist() == alone.tokens.tolist()


@pytest.mark.skipif(not fast.available(), reason="needs the fast extra (numba)")
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_the_compiled_step_shares_the_cache_as_the_python_step_does(temperature) -> None:
    from specdec_lite.engine import compiled_step

    target = TransformerModel(CONFIG, PARAMS, backend="numba")
    draft = early_exit_model(CONFIG, PARAMS, random_head(1), 1, backend="numba")
    for k, policy in ((3, None), (4, "heuristic")):
        for seed in range(3):
            def decode(seed=seed, k=k, policy=policy):
                return speculative_generate(target, draft, CONTEXT, k=k, policy=policy,
                                            max_new_tokens=20, temperature=temperature,
                                            seed=seed)
            compiled = decode()
            real = compiled_step.step_for
            compiled_step.step_for = lambda *args: None
            try:
                python = decode()
            finally:
                compiled_step.step_for = real
            assert compiled.tokens.tolist() == python.tokens.tolist()
            assert compiled.steps == python.steps


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


def test_the_shipped_heads_are_small_half_precision_and_better_than_the_shared_head() -> None:
    entry = load_manifest()["models"]["early_exit"]
    path = WEIGHTS_DIR / entry["file"]
    assert path.stat().st_size < 2_000_000 and entry["dtype"] == "float16" and entry["finished"]
    target = load_manifest()["models"]["target"]
    assert entry["target_sha256"] == target["sha256"]
    n_layer = target["config"]["n_layer"]
    load_npz(path, entry["sha256"])  # the sha256 holds
    with np.load(path) as stored:
        assert all(stored[name].dtype == np.float16 for name in stored.files)
    assert entry["exit_layers"] == list(range(1, n_layer))
    for m in entry["exit_layers"]:
        record = entry["heldout"][str(m)]
        assert record["trained"]["alpha_T1"] > record["untrained"]["alpha_T1"]
    decode = entry["heldout_decode"]["layers"]
    best = max(decode, key=lambda m: decode[m]["predicted_speedup_T1"])
    assert entry["default_exit_layer"] == int(best)


def test_each_shipped_depth_is_greedy_identical_and_the_default_loads(shipped) -> None:
    prompt = shipped.tokenizer.encode("def __init__(self, name):\n    self.")
    plain = generate(shipped.target, prompt, max_new_tokens=40, temperature=0).tokens
    n_layer = shipped.target.config.n_layer
    for m in range(1, n_layer):
        draft = load_early_exit(m)
        assert draft.config.n_layer == m
        spec = speculative_generate(shipped.target, draft, prompt, k=4, max_new_tokens=40,
                                    temperature=0)
        np.testing.assert_array_equal(spec.tokens, plain)
    default = load_early_exit()
    assert default.config.n_layer == load_manifest()["models"]["early_exit"]["default_exit_layer"]
    batch = speculative_generate_batch(shipped.target, default, [prompt, prompt[:20]], k=3,
                                       max_new_tokens=24, temperature=0)
    np.testing.assert_array_equal(batch[0].tokens, plain[:24])
    with pytest.raises(ValueError, match="exit_layer must be in"):
        load_early_exit(n_layer)


def test_heads_trained_on_another_target_are_refused(tmp_path) -> None:
    for f in WEIGHTS_DIR.iterdir():
        shutil.copy(f, tmp_path / f.name)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["models"]["early_exit"]["target_sha256"] = "0" * 64
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="trained on another target"):
        load_early_exit(weights_dir=tmp_path)
