"""The compiled backend (specdec_lite.models.fast) against the numpy reference: each kernel against
float64 or numpy, the fused forward against the numpy forward on every matrix-product path,
the shipped models decoding greedily token for token alike, pickling and threads.

Every test needs numba (the ``fast`` extra) and is skipped without it, except the first
two, which check what happens without it.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import threading

import numpy as np
import pytest
from support import CONFIG, PARENTS, path_to, random_params, tokens, tree_mask

from specdec_lite.bench.config import choose_prompts
from specdec_lite.drafting.medusa import dense_tree
from specdec_lite.engine.decode import generate, speculative_generate
from specdec_lite.engine.medusa_decode import medusa_generate
from specdec_lite.models import fast, kernels, skinny
from specdec_lite.models import paths as product_paths
from specdec_lite.models.bound import BoundModel
from specdec_lite.models.corpus import load_text
from specdec_lite.models.transformer import LN_EPS, Output, TransformerModel
from specdec_lite.pretrained import load_pretrained

needs_numba = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")


@pytest.fixture(autouse=True, scope="module")
def compiled_kernels() -> None:
    """The kernels below are called directly: compile them first (they are plain Python
    until fast.compile_kernels runs, which building a numba model also does)."""
    if fast.available():
        fast.compile_kernels()

# numba vs numpy, logits and hidden states: the two sum in different orders in float32.
# Measured max |difference| on a 2-core Xeon (SkylakeX kernel): the small random model
# 2.3e-6 (logits), 4.3e-6 (cache) on every path; the shipped target 1.2e-5 and draft
# 2.7e-5 (logits up to ~14 in magnitude) on held-out text. 1e-4 leaves a margin of ~4.
ATOL = 1e-4
# (rowwise_max, own_mask, small_mnk) of linear_rows: a block of n rows with bit n of
# own_mask set goes through the skinny kernel; else blocks of 2 .. rowwise_max rows multiply
# row by row; past small_mnk / (in out) rows (up to fast.CHUNK_ROWS_MAX) BLAS runs on chunks
# of rows; every other block (and every single row) is one BLAS call.
ALL_OWN = (1 << 63) - 2  # bits 1 .. 62: the skinny kernel at every n
PATHS = {
    "blas": (1, 0, 0),  # one BLAS call at every n
    "skylakex": (1, 0, fast.SMALL_MNK),  # BLAS, in chunks past the small path
    "haswell": (3, 0, 0),  # row by row for 2-3 rows, then one BLAS call
    "rowwise": (40, 0, 0),  # row by row at every n > 1 (CONFIG.max_len is 40)
    "own": (1, ALL_OWN, 0),  # the skinny kernel at every n
    "mixed": (3, (1 << 2) | (1 << 5) | (1 << 9), 0),  # skinny at 2, 5, 9; else Haswell's
    "chunks": (1, 0, 2 * 32 * 128),  # chunks of 2 rows for the [32, 128] MLP matrix
}
LINEAR_PATHS = [(1, 0, 0), (3, 0, 0), (1, ALL_OWN, 0), (3, 0b11110, 0), (17, 0, 0),
                (5, (1 << 9) - 2, 0), (1, 0, 4 * 37 * 45), (1, 0, 5 * 37 * 45 + 7), (3, 0, 1),
                (3, 1 << 17, 1), (1, -1, 0)]


# ---------------------------------------------------------------- without numba


def test_importing_the_library_does_not_import_numba() -> None:
    """numba takes about 0.3 s to import: only asking for the backend may load it."""
    code = ("import sys, specdec_lite, specdec_lite.models.fast, specdec_lite.models.transformer; "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_without_numba_the_backend_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setattr(fast, "numba_module", lambda: None)
    assert not fast.available()
    model = TransformerModel(CONFIG, random_params(CONFIG))
    hint = re.escape(fast.INSTALL_HINT)
    with pytest.raises(ImportError, match=hint):
        fast.compile_forward(model.layers, model.ln_f, model.unembed, CONFIG.n_head, LN_EPS)
    with pytest.raises(ImportError, match=hint):
        model.use_backend("numba")
    with pytest.raises(ImportError, match=hint):
        TransformerModel(CONFIG, random_params(CONFIG), backend="numba")
    with pytest.raises(ImportError, match=hint):
        load_pretrained(backend="numba")
    fresh = TransformerModel(CONFIG, random_params(CONFIG))  # numpy still works
    assert fresh.backend == "numpy" and fresh.use_backend("numpy") is fresh
    assert fresh.logits(tokens(5)).shape == (5, CONFIG.vocab_size)


def test_a_failed_switch_keeps_the_numpy_backend(monkeypatch) -> None:
    """After use_backend("numba") raised, the model still says (and runs) numpy."""
    monkeypatch.setattr(fast, "numba_module", lambda: None)
    model = TransformerModel(CONFIG, random_params(CONFIG))
    with pytest.raises(ImportError):
        model.use_backend("numba")
    assert model.backend == "numpy"


@pytest.mark.parametrize("bad", ["x", "NUMBA", "", None, "auto"])
def test_unknown_backend_raises_naming_backend(bad) -> None:
    with pytest.raises(ValueError, match="backend"):
        TransformerModel(CONFIG, random_params(CONFIG), backend=bad)
    model = TransformerModel(CONFIG, random_params(CONFIG))
    with pytest.raises(ValueError, match="backend"):
        model.use_backend(bad)
    assert model.backend == "numpy"
    with pytest.raises(ValueError, match="backend"):
        load_pretrained(backend=bad)


# ---------------------------------------------------------------- the kernels


@needs_numba
def test_exp_matches_float64_exp() -> None:
    grid = np.linspace(-87, 88, 400_001, dtype=np.float32)[1:]  # (-87, 88]
    rng = np.random.default_rng(0)
    spread = rng.uniform(-87, 88, 100_000).astype(np.float32)
    edges = np.array([np.nextafter(np.float32(-87), np.float32(0)), -1e-30, 1e-30, 88],
                     dtype=np.float32)
    x = np.concatenate([grid, spread, edges])  # [m]
    got = x.copy()
    fast.exp_inplace(got, np.empty(len(x), dtype=np.int32))
    want = np.exp(x.astype(np.float64))  # [m]
    assert got.dtype == np.float32
    assert np.max(np.abs(got - want) / want) < 1e-6  # measured 3.0e-7


@needs_numba
def test_exp_of_zero_and_of_very_negative_inputs() -> None:
    x = np.array([0, -np.inf, -1e30, -1000, -88, -87.5, -87.001, -0.0], dtype=np.float32)
    fast.exp_inplace(x, np.empty(len(x), dtype=np.int32))
    assert x[0] == 1 and x[-1] == 1
    assert (x[1:-1] == 0).all()  # exactly 0: the attention bias is -inf


def linear_data(n: int, d_in: int, d_out: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in)).astype(np.float32)  # [n, i]
    w = rng.standard_normal((d_in, d_out)).astype(np.float32)  # [i, o]
    b = rng.standard_normal(d_out).astype(np.float32)  # [o]
    want = x.astype(np.float64) @ w.astype(np.float64) + b  # [n, o]
    return x, w, b, want


@needs_numba
@pytest.mark.parametrize("d_out", [45, 64])  # a padded last tile, and whole tiles
@pytest.mark.parametrize("n", range(1, 18))
def test_own_rows_equals_float64_reference(n: int, d_out: int) -> None:
    x, w, b, want = linear_data(n, 37, d_out, seed=n)
    packed = skinny.pack(w, b)
    out = np.full((n, d_out), np.nan, dtype=np.float32)
    fast.own_rows(x, packed.tiles, packed.bias, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=2e-5)


@needs_numba
@pytest.mark.parametrize("limits", LINEAR_PATHS, ids=str)
@pytest.mark.parametrize("n", range(1, 18))
def test_linear_rows_equals_float64_reference_on_each_path(n: int, limits) -> None:
    x, w, b, want = linear_data(n, 37, 45, seed=100 + n)
    packed = skinny.pack(w, b)
    out = np.full((n, 45), np.nan, dtype=np.float32)
    fast.linear_rows(x, w, packed.tiles, packed.bias, b, out, limits)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=2e-5)


@needs_numba
def test_linear_rows_reads_the_tiles_only_where_own_mask_says() -> None:
    """The skinny kernel reads the tiles, the BLAS paths read w: tiles and tile biases of
    zeros show which path each n took."""
    own_mask = (1 << 1) | (1 << 4) | (1 << 16)
    for n in range(1, 20):
        x, w, b, want = linear_data(n, 16, 8, seed=n)
        zeros = skinny.pack(np.zeros_like(w))
        out = np.empty((n, 8), dtype=np.float32)
        fast.linear_rows(x, w, zeros.tiles, zeros.bias, b, out, (3, own_mask, 0))
        expected = np.zeros((n, 8)) if n in (1, 4, 16) else want
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-5, err_msg=f"n={n}")
    assert product_paths.own_rows(own_mask) == [1, 4, 16]
    assert product_paths.own_rows(0) == product_paths.own_rows(fast.MEASURE) == []


def test_matmul_paths_follow_the_kernel_and_leave_the_skinny_rows_to_measure() -> None:
    assert fast.matmul_paths("SkylakeX") == (1, fast.MEASURE, fast.SMALL_MNK)
    assert fast.matmul_paths("SapphireRapids") == (1, fast.MEASURE, fast.SMALL_MNK)
    assert fast.matmul_paths("Haswell") == (3, fast.MEASURE, 0)
    assert fast.matmul_paths("Zen") == fast.matmul_paths(None) == (3, fast.MEASURE, 0)
    assert fast.matmul_paths("SkylakeX", "AuthenticAMD") == fast.matmul_paths("SkylakeX")


def test_measure_own_mask_keeps_the_faster_path_at_each_n(monkeypatch) -> None:
    """A scripted clock: the skinny kernel is faster at n = 2 and 5 only. The mask has
    exactly those bits, every n up to the limit was run both ways, and own_mask_for asks
    once per key."""
    calls = []

    def forward(n: int, paths) -> None:
        calls.append((n, paths))

    def seconds(call) -> float:
        call()
        n, paths = calls[-1]
        return 1.0 if paths[1] == 0 else (0.5 if n in (2, 5) else 2.0)

    monkeypatch.setattr(product_paths, "_seconds", seconds)
    mask = product_paths.measure_own_mask(forward, (3, fast.MEASURE, 7), limit=6, repeats=2)
    assert product_paths.own_rows(mask) == [2, 5]
    assert {n for n, _ in calls} == set(range(1, 7))
    assert {p for _, p in calls} == {(3, 0, 7)} | {(3, 1 << n, 7) for n in range(1, 7)}
    monkeypatch.setattr(product_paths, "_MEASURED", {})
    monkeypatch.setattr(product_paths, "measure_own_mask", lambda f, p: 0b100100)
    first = product_paths.own_mask_for(("shapes",), forward, (3, fast.MEASURE, 0))
    monkeypatch.setattr(product_paths, "measure_own_mask", lambda f, p: 0)  # not asked again
    assert product_paths.own_mask_for(("shapes",), forward, (3, fast.MEASURE, 0)) == first
    assert first == (3, 0b100100, 0)
    assert product_paths.own_mask_for(("other",), forward, (3, fast.MEASURE, 0)) == (3, 0, 0)
    assert product_paths.own_mask_for(("x",), forward, (1, 6, 0)) == (1, 6, 0)  # fixed paths


def test_cpu_vendor_is_read_from_the_cpu() -> None:
    vendor = kernels.cpu_vendor()
    assert vendor is None or (isinstance(vendor, str) and vendor == vendor.strip() and vendor)


@needs_numba
def test_linear_rows_chunks_only_verification_sized_blocks() -> None:
    """Past small_mnk the rows go in chunks, up to CHUNK_ROWS_MAX rows; a larger block
    (a prompt) is one BLAS call again. Chunked or not, the result is x @ w + b."""
    for n in (7, fast.CHUNK_ROWS_MAX, fast.CHUNK_ROWS_MAX + 1, 3 * fast.CHUNK_ROWS_MAX):
        x, w, b, want = linear_data(n, 37, 45, seed=n)
        out = np.full((n, 45), np.nan, dtype=np.float32)
        zeros = skinny.pack(np.zeros_like(w))
        fast.linear_rows(x, w, zeros.tiles, zeros.bias, b, out, (1, 0, 3 * 37 * 45))
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=2e-5, err_msg=f"n={n}")


@needs_numba
def test_gelu_rows_equals_numpy_gelu() -> None:
    x = (4 * np.random.default_rng(0).standard_normal((5, 300))).astype(np.float32)  # [5, 300]
    x[0, :8] = [-100, -20, -5, 0, -0.0, 5, 20, 100]
    got = x.copy()
    fast.gelu_rows(got)
    np.testing.assert_allclose(got, kernels.gelu(x), rtol=1e-6, atol=1e-6)  # measured 4.8e-7
    assert np.isfinite(got).all()


@needs_numba
def test_normalize_rows_equals_numpy_normalize() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 192)).astype(np.float32)  # [6, 192]
    x[1] = 50 + 0.01 * x[1]  # a large mean and a small spread
    x[2] = 3.0  # no spread at all: eps alone keeps the division finite
    out = np.full_like(x, np.nan)
    fast.normalize_rows(x, np.float32(LN_EPS), out)
    np.testing.assert_allclose(out, kernels.normalize(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[2], 0)


@needs_numba
def test_compile_forward_checks_eps() -> None:
    model = TransformerModel(CONFIG, random_params(CONFIG))
    for bad in (0.0, -1e-5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps"):
            fast.compile_forward(model.layers, model.ln_f, model.unembed, CONFIG.n_head, bad)


# ---------------------------------------------------------------- the fused forward


@pytest.fixture(params=[None, *PATHS], ids=lambda p: p or "loaded")
def paths(request, monkeypatch) -> tuple[int, int, int]:
    """The (rowwise_max, own_mask, small_mnk) a numba model built now gets: as loaded
    (and measured) here, or forced through fast.matmul_paths, which CompiledForward asks
    when built."""
    if request.param is not None:
        monkeypatch.setattr(fast, "matmul_paths", lambda kernel, vendor=None: PATHS[request.param])
    model = TransformerModel(CONFIG, random_params(CONFIG))
    compiled = fast.compile_forward(model.layers, model.ln_f, model.unembed, CONFIG.n_head,
                                    LN_EPS)
    if request.param is not None:
        assert compiled.paths == PATHS[request.param]
    assert set(compiled.skinny_rows) <= set(range(1, 63))
    if request.param == "mixed":
        assert compiled.skinny_rows == [2, 5, 9]
    return compiled.paths


def pair() -> tuple[BoundModel, BoundModel]:
    """A numpy and a numba model of the same random weights, each on a cache of its own."""
    return (TransformerModel(CONFIG, random_params(CONFIG)).bound(),
            TransformerModel(CONFIG, random_params(CONFIG), backend="numba").bound())


def assert_same(got: Output, want: Output) -> None:
    assert got.logits.shape == want.logits.shape and got.logits.dtype == np.float32
    assert got.hidden.shape == want.hidden.shape and got.hidden.dtype == np.float32
    np.testing.assert_allclose(got.logits, want.logits, rtol=0, atol=ATOL)
    np.testing.assert_allclose(got.hidden, want.hidden, rtol=0, atol=ATOL)


def assert_same_cache(got: BoundModel, want: BoundModel) -> None:
    a, b = got.cache, want.cache
    assert (a.length, a.n_causal) == (b.length, b.n_causal)
    np.testing.assert_array_equal(a.tokens[: a.length], b.tokens[: b.length])
    np.testing.assert_allclose(a.kv[:, :, :, : a.length], b.kv[:, :, :, : b.length],
                               rtol=0, atol=ATOL)
    np.testing.assert_allclose(a.logits[: a.length], b.logits[: b.length], rtol=0, atol=ATOL)


@needs_numba
def test_use_backend_switches_and_returns_the_model() -> None:
    model = TransformerModel(CONFIG, random_params(CONFIG))
    assert model.backend == "numpy"
    want = model.logits(tokens(12))
    assert model.use_backend("numba") is model and model.backend == "numba"
    np.testing.assert_allclose(model.logits(tokens(12)), want, rtol=0, atol=ATOL)
    assert model.use_backend("numpy") is model and model.backend == "numpy"
    np.testing.assert_array_equal(model.logits(tokens(12)), want)


@needs_numba
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 16, 17, 40])
def test_prefill_matches_numpy(paths, n: int) -> None:
    reference, compiled = pair()
    ids = tokens(n, seed=n)
    assert_same(compiled.forward(ids), reference.forward(ids))
    assert_same_cache(compiled, reference)


@needs_numba
def test_blocks_after_a_cached_prefix_match_numpy(paths) -> None:
    reference, compiled = pair()
    ids = tokens(38, seed=7)
    done = 0
    for size in (9, 1, 2, 3, 4, 1, 5, 13):  # 38 in all
        block = ids[done : done + size]
        assert_same(compiled.forward(block), reference.forward(block))
        done += size
    assert_same_cache(compiled, reference)
    compiled.rollback(20), reference.rollback(20)  # and again over a shortened prefix
    assert_same(compiled.forward(ids[20:24]), reference.forward(ids[20:24]))
    assert_same_cache(compiled, reference)


@needs_numba
def test_tree_block_and_commit_path_match_numpy(paths) -> None:
    reference, compiled = pair()
    prefix, nodes, more = tokens(5), tokens(len(PARENTS), seed=4), tokens(3, seed=5)
    mask, depth = tree_mask(PARENTS)
    np.testing.assert_allclose(compiled.logits(prefix), reference.logits(prefix),
                               rtol=0, atol=ATOL)
    assert_same(compiled.score_tree(nodes, depth, mask), reference.score_tree(nodes, depth, mask))
    assert_same_cache(compiled, reference)
    compiled.commit_path(path_to(5)), reference.commit_path(path_to(5))
    assert compiled.n_committed == reference.n_committed == 9
    assert_same_cache(compiled, reference)
    longer = np.r_[prefix, nodes[path_to(5)], more]  # [12], reuses the 9 kept entries
    np.testing.assert_allclose(compiled.logits(longer), reference.logits(longer),
                               rtol=0, atol=ATOL)
    assert_same_cache(compiled, reference)


@needs_numba
def test_a_one_node_tree_matches_numpy(paths) -> None:
    """A masked block of one row (a bias [1, 1], not the unmasked single token)."""
    reference, compiled = pair()
    compiled.logits(tokens(6)), reference.logits(tokens(6))
    one = np.ones((1, 1), dtype=bool)
    assert_same(compiled.score_tree(tokens(1, seed=3), np.array([0]), one),
                reference.score_tree(tokens(1, seed=3), np.array([0]), one))


# ---------------------------------------------------------------- the shipped models


@pytest.fixture(scope="module")
def shipped() -> dict:
    """The shipped models on both backends, and three held-out prompts of 64 characters."""
    numpy_models = load_pretrained()
    prompts = choose_prompts(load_text("heldout"), 3, 64, seed=0)
    return {"numpy": numpy_models, "numba": load_pretrained(backend="numba"),
            "prompts": [numpy_models.tokenizer.encode(p) for p in prompts]}


@needs_numba
def test_shipped_models_load_on_the_numba_backend(shipped) -> None:
    models = shipped["numba"]
    assert models.target.backend == models.draft.backend == "numba"
    assert shipped["numpy"].target.backend == "numpy"


@needs_numba
def test_shipped_logits_match_numpy(shipped) -> None:
    text = load_text("heldout")
    window = shipped["numpy"].tokenizer.encode(text[10_000 : 10_000 + 256])  # [256]
    for name in ("target", "draft"):
        reference, compiled = getattr(shipped["numpy"], name), getattr(shipped["numba"], name)
        for ids in [*shipped["prompts"], window]:
            cache_a, cache_b = reference.new_state(), compiled.new_state()
            want = reference.logits(ids, cache=cache_a)  # [n, V]
            got = compiled.logits(ids, cache=cache_b)
            np.testing.assert_allclose(got, want, rtol=0, atol=ATOL, err_msg=name)
            np.testing.assert_array_equal(got.argmax(axis=1), want.argmax(axis=1))
            np.testing.assert_allclose(compiled.hidden(ids, cache=cache_b),
                                       reference.hidden(ids, cache=cache_a), rtol=0, atol=ATOL)


def decode_greedily(models, prompt: np.ndarray) -> dict[str, tuple]:
    """Tokens and per-step acceptances of the three greedy decoders, 48 new tokens."""
    runs = {
        "generate": generate(models.target, prompt, max_new_tokens=48, temperature=0),
        "speculative": speculative_generate(models.target, models.draft, prompt, k=4,
                                            max_new_tokens=48, temperature=0),
        "medusa": medusa_generate(models.target, models.heads, prompt, max_new_tokens=48,
                                  temperature=0, tree=dense_tree([3, 2, 1]), rule="greedy"),
    }
    return {name: (gen.tokens.tolist(), [s.n_accepted for s in gen.steps])
            for name, gen in runs.items()}


@needs_numba
@pytest.mark.parametrize("prompt", range(3))
def test_greedy_decoding_is_token_identical(shipped, prompt: int) -> None:
    ids = shipped["prompts"][prompt]
    assert len(ids) == 64
    want = decode_greedily(shipped["numpy"], ids)
    got = decode_greedily(shipped["numba"], ids)
    for name in want:
        assert len(got[name][0]) == 48
        assert got[name] == want[name], name


@needs_numba
@pytest.mark.parametrize("rule", ["haswell", "own", "blas"])
def test_greedy_decoding_is_token_identical_on_other_paths(shipped, monkeypatch, rule) -> None:
    """The same whatever the measurement chose: Haswell's BLAS paths (row by row for 2-3
    rows), the skinny kernel at every block size, one BLAS call at every block size."""
    monkeypatch.setattr(fast, "matmul_paths", lambda kernel, vendor=None: PATHS[rule])
    models = load_pretrained(backend="numba")
    ids = shipped["prompts"][0]
    assert decode_greedily(models, ids) == decode_greedily(shipped["numpy"], ids)


# ---------------------------------------------------------------- pickling and threads


@needs_numba
def test_pickled_numba_model_gives_the_same_logits() -> None:
    model = TransformerModel(CONFIG, random_params(CONFIG), backend="numba")
    want = model.logits(tokens(20))
    copy = pickle.loads(pickle.dumps(model))
    assert copy.backend == "numba"
    np.testing.assert_array_equal(copy.logits(tokens(20)), want)
    reference = TransformerModel(CONFIG, random_params(CONFIG))
    np.testing.assert_allclose(copy.logits(tokens(20)), reference.logits(tokens(20)),
                               rtol=0, atol=ATOL)


def workload(model: TransformerModel, cache, seed: int) -> list[np.ndarray]:
    """A causal prefill, blocks, a tree and a committed path on ``cache``: what it saw."""
    seen = []
    for round_ in range(8):
        ids = tokens(20, seed=seed + round_)
        seen.append(model.logits(ids[:12], cache=cache))
        seen.append(model.logits(ids, cache=cache))
        mask, depth = tree_mask(PARENTS)
        seen.append(model.score_tree(tokens(len(PARENTS), seed=seed), depth, mask,
                                     cache=cache).logits)
        model.commit_path(path_to(4), cache=cache)
        seen.append(cache.kv[:, :, :, : cache.length].copy())
        model.rollback(0, cache=cache)
    return seen


@needs_numba
def test_two_threads_with_their_own_caches_get_the_serial_results() -> None:
    model = TransformerModel(CONFIG, random_params(CONFIG), backend="numba")
    seeds = (11, 29)
    serial = [workload(model, model.new_state(), seed) for seed in seeds]
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(seeds))

    def run(seed: int) -> None:
        try:
            start.wait(timeout=30)
            results[seed] = workload(model, model.new_state(), seed)
        except BaseException as err:  # surfaced below, in the test's thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and not any(thread.is_alive() for thread in threads)
    for seed, want in zip(seeds, serial, strict=True):
        assert len(results[seed]) == len(want)
        for got_array, want_array in zip(results[seed], want, strict=True):
            np.testing.assert_array_equal(got_array, want_array)
