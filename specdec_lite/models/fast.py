"""The compiled backend: one fused forward of the GPT per call, compiled by numba.

numba is optional (the ``fast`` extra). Without it :func:`available` is False and
:func:`compile_forward` raises ``ImportError`` with the install line; the numpy forward
of :mod:`specdec_lite.models.transformer` stays the reference and the default. numba is imported
only when the backend is asked for, so ``import specdec_lite`` does not pay for it: the
kernels below are plain Python functions until :func:`compile_kernels` replaces each with
its compiled version.

What the fused forward saves. The numpy forward of the target makes about 250 numpy
calls, each with microseconds of dispatch, a cost per forward whatever its n.
:func:`gpt_forward` runs the whole network in one compiled call (exp and GELU in loops
LLVM vectorises), and :func:`linear_rows` multiplies a block of rows with the skinny
kernel (:mod:`specdec_lite.models.skinny`, each weight read once for all the rows) at
the block sizes, up to 16 rows, at which it beat the BLAS on this machine when the model
was compiled (:mod:`specdec_lite.models.paths`), and every other block with the BLAS.

The arithmetic is the numpy forward's, in float32, in another summation order: logits
agree with numpy's to about 1e-5 (``tests/unit/test_fast.py`` holds them within a stated
tolerance, and greedy decoding token-identical on the held-out prompts).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import kernels, skinny
from . import paths as product_paths

# Reassociation lets LLVM vectorise the sums (dot products, means); no "nnan"/"ninf",
# since the attention bias is -inf for the entries a token may not see.
FASTMATH = {"reassoc", "contract", "arcp", "nsz"}
# The rules that pick a product's path live in :mod:`specdec_lite.models.paths`; the
# forward's callers (tests, scripts) reach them here too.
MEASURE, SMALL_MNK = product_paths.MEASURE, product_paths.SMALL_MNK
matmul_paths = product_paths.matmul_paths
PREFIX_FOR_TIMING = 32  # cached tokens before the block when a forward is timed
# Past about this many rows (a prompt, not a verification block) packing pays for itself
# again: measured, T(96) is 25% slower in chunks, T(32) 10% faster.
CHUNK_ROWS_MAX = 32
# The parts of a layer :func:`gpt_forward` can leave out for a profile, bit i for PARTS[i].
PARTS = ("qkv projection", "attention", "attention output", "MLP expansion", "GELU",
         "MLP output")
INSTALL_HINT = "pip install 'specdec_lite[fast]' (numba)"


@functools.cache
def numba_module():
    """numba, imported on first use; None where it is not installed."""
    try:
        import numba
    except ImportError:
        return None
    return numba


def available() -> bool:
    """True when numba is installed, so the ``"numba"`` backend can be used."""
    return numba_module() is not None


def numba_version() -> str | None:
    """The installed numba's version, or None."""
    return numba_module().__version__ if available() else None


KERNELS: list[str] = []  # this module's kernels, in the order they are defined


def _kernel(function):
    """Register ``function`` as a kernel for :func:`compile_kernels` (it stays plain
    Python until then)."""
    KERNELS.append(function.__name__)
    return function


@functools.cache
def compile_kernels() -> None:
    """Replace every kernel of this module by numba's ``njit`` of it (fastmath as in
    ``FASTMATH``, GIL released, compiled code cached on disk). numba compiles a kernel at
    its first call and then resolves the kernels it calls through this module's globals,
    so after this they call each other compiled. ``ImportError`` without numba."""
    numba = numba_module()
    if numba is None:
        raise ImportError(f"the numba backend needs numba: {INSTALL_HINT}")
    globals()["skinny_tile_rows"] = skinny.compiled(*skinny.tile_shape())
    for name in KERNELS:
        globals()[name] = numba.njit(cache=True, nogil=True, fastmath=FASTMATH)(globals()[name])


skinny_tile_rows = None  # the skinny kernel, set by compile_kernels


@_kernel
def own_rows(x, tiles, bias, out):  # x [n, i], tiles [nt, i, T], bias [nt T] -> out [n, o]
    """out = x @ w + b by the skinny kernel, from w and b laid out by
    :func:`specdec_lite.models.skinny.pack`: each weight read once for all n rows. Where
    d_out is not a whole number of tiles, the kernel writes a padded block first."""
    n, d_out = out.shape
    width = tiles.shape[0] * tiles.shape[2]
    if d_out == width:
        skinny_tile_rows(x, tiles, bias, out)
    else:
        padded = np.empty((n, width), dtype=np.float32)  # [n, nt T]
        skinny_tile_rows(x, tiles, bias, padded)
        out[:, :] = padded[:, :d_out]


@_kernel
def linear_rows(x, w, tiles, tile_bias, b, out, paths):  # [n, i] @ [i, o] + [o] -> out [n, o]
    """out = x @ w + b, by the path ``paths`` = (rowwise_max, own_mask, small_mnk) picks
    for n rows (:mod:`specdec_lite.models.paths` chooses the three):

    * n with bit n of own_mask set: the skinny kernel (:func:`own_rows` on ``tiles`` and
      ``tile_bias``, w and b as :func:`specdec_lite.models.skinny.pack` lays them out);
    * else 2 .. rowwise_max rows: one BLAS matrix-vector product per row;
    * more than small_mnk / (i o) rows, up to ``CHUNK_ROWS_MAX`` (small_mnk > 0): BLAS
      sgemm on chunks of at most that many rows, each small enough for the kernel's
      no-packing small-matrix path;
    * otherwise one BLAS call (SciPy's, as numba calls it).
    """
    rowwise_max, own_mask, small_mnk = paths
    n, d_out = out.shape
    d_in = x.shape[1]
    if own_mask > 0 and n < 63 and (own_mask >> n) & 1:
        own_rows(x, tiles, tile_bias, out)
        return
    if 1 < n <= rowwise_max:
        for r in range(n):
            np.dot(x[r], w, out[r])
    elif small_mnk > 0 and n <= CHUNK_ROWS_MAX and n * d_in * d_out > small_mnk:
        rows = max(1, small_mnk // (d_in * d_out))  # the most rows the small path takes
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            np.dot(x[r0:r1], w, out[r0:r1])
    else:
        np.dot(x, w, out)
    for r in range(n):
        for o in range(d_out):
            out[r, o] += b[o]


@_kernel
def normalize_rows(x, eps, out):  # [n, d] -> [n, d]
    """(x - mean) / sqrt(var + eps) per row, LayerNorm without gain and bias."""
    n, d = x.shape
    for r in range(n):
        mean = np.float32(0.0)
        for i in range(d):
            mean += x[r, i]
        mean /= d
        var = np.float32(0.0)
        for i in range(d):
            centred = x[r, i] - mean
            var += centred * centred
        scale = np.float32(1.0) / np.sqrt(var / d + eps)
        for i in range(d):
            out[r, i] = (x[r, i] - mean) * scale


@_kernel
def exp_inplace(x, bits):  # x [m] float32 in place, bits [m] int32 scratch
    """x <- exp(x) to about 1 ulp, in a loop LLVM vectorises (a scalar ``np.exp`` in
    numba calls libm once per element, several times slower than numpy's SIMD exp).

    exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts, so r is
    exact), exp(r) by its degree-7 Taylor polynomial (|r| <= ln 2 / 2), 2^k by writing k
    into a float32's exponent bits. At or below -87 (and for -inf, and NaN) the result is
    0; above 88 it is exp(88). The callers pass finite or -inf values: attention scores
    minus their maximum (<= 0) and GELU arguments, for which exp(88) acts as infinity.
    """
    m = x.shape[0]
    for i in range(m):
        v = min(max(x[i], np.float32(-87.0)), np.float32(88.0))
        k = np.floor(v * np.float32(1.4426950408889634) + np.float32(0.5))
        r = v - k * np.float32(0.693145751953125) - k * np.float32(1.428606765330187e-06)
        p = np.float32(1.0 / 5040)
        p = p * r + np.float32(1.0 / 720)
        p = p * r + np.float32(1.0 / 120)
        p = p * r + np.float32(1.0 / 24)
        p = p * r + np.float32(1.0 / 6)
        p = p * r + np.float32(0.5)
        p = p * r + np.float32(1.0)
        p = p * r + np.float32(1.0)
        bits[i] = (np.int32(k) + np.int32(127)) << 23
        x[i] = p if x[i] > np.float32(-87.0) else np.float32(0.0)
    scale = bits.view(np.float32)  # [m], 2^k
    for i in range(m):
        x[i] *= scale[i]


@_kernel
def attend(qkv, kv, slot, start, bias, n_head, out):
    """Multi-head attention of one sequence's n new tokens over its cache, for one layer.

    ``qkv`` [n, 3d] (queries already scaled), ``kv`` [2, S, H, capacity, d_head] the caches
    of S sequences, this one in ``slot`` (its new keys and values are written at
    positions ``start .. start+n-1`` first), ``bias`` [n, >= n] (columns 0..n-1: 0 or
    -inf among the new tokens), ``out`` [n, d] the attended values.
    """
    n = qkv.shape[0]
    d = qkv.shape[1] // 3
    d_head = d // n_head
    end = start + n
    for r in range(n):
        for h in range(n_head):
            for e in range(d_head):
                kv[0, slot, h, start + r, e] = qkv[r, d + h * d_head + e]
                kv[1, slot, h, start + r, e] = qkv[r, 2 * d + h * d_head + e]
    row = np.empty(end, dtype=np.float32)  # [end], one row of scores at a time
    bits = np.empty(end, dtype=np.int32)
    for h in range(n_head):
        cols = slice(h * d_head, (h + 1) * d_head)
        q = np.ascontiguousarray(qkv[:, cols])  # [n, d_head]
        scores = np.dot(q, kv[0, slot, h, :end].T)  # [n, end]
        for r in range(n):
            top = -np.inf
            for j in range(n):
                scores[r, start + j] += bias[r, j]
            for j in range(end):
                top = max(top, scores[r, j])
            for j in range(end):
                row[j] = scores[r, j] - top
            exp_inplace(row, bits)
            total = np.float32(0.0)
            for j in range(end):
                total += row[j]
            for j in range(end):
                scores[r, j] = row[j] / total
        out[:, cols] = np.dot(scores, kv[1, slot, h, :end])  # [n, d_head]


@_kernel
def add_rows(x, y):  # x <- x + y, both [n, d]
    n, d = x.shape
    for r in range(n):
        for i in range(d):
            x[r, i] += y[r, i]


@_kernel
def gelu_rows(x):  # in place, [n, 4d]
    """x <- 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
    x / (1 + exp(-2u)), the same function, with :func:`exp_inplace`."""
    n, m = x.shape
    e = np.empty(m, dtype=np.float32)
    bits = np.empty(m, dtype=np.int32)
    for r in range(n):
        for i in range(m):
            v = x[r, i]
            e[i] = np.float32(-1.5957691216) * (v + np.float32(0.044715) * v * v * v)
        exp_inplace(e, bits)
        for i in range(m):
            x[r, i] = x[r, i] / (np.float32(1.0) + e[i])


@_kernel
def layer_rows(x, kv, slots, starts, offsets, bias, n_head, eps, paths, weights, tiled,
               normed, qkv, attended, branch, wide, leave_out):
    """One pre-LN block over the rows of B sequences, in place on ``x`` [R, d]: ``kv``
    [2, S, H, capacity, d_head] is this layer's caches, ``slots``, ``starts``,
    ``offsets`` and ``bias`` as in :func:`gpt_forward`; ``weights`` one
    :class:`~specdec_lite.models.transformer.Block` (LayerNorm gains folded in), ``tiled``
    its four matrices and biases laid out for the skinny kernel (tiles, bias, tiles, ...);
    ``normed`` .. ``wide`` scratch rows the caller owns.
    ``leave_out`` skips parts for a profile (see :func:`gpt_forward`)."""
    qkv_w, qkv_b, proj_w, proj_b, fc_w, fc_b, mlp_w, mlp_b = weights
    qkv_p, qkv_pb, proj_p, proj_pb, fc_p, fc_pb, mlp_p, mlp_pb = tiled
    normalize_rows(x, eps, normed)
    if not leave_out & 1:
        linear_rows(normed, qkv_w, qkv_p, qkv_pb, qkv_b, qkv, paths)
    if not leave_out & 2:
        for b in range(slots.shape[0]):
            r0, r1 = offsets[b], offsets[b + 1]
            if r1 > r0:
                attend(qkv[r0:r1], kv, slots[b], starts[b], bias[r0:r1], n_head,
                       attended[r0:r1])
    if not leave_out & 4:
        linear_rows(attended, proj_w, proj_p, proj_pb, proj_b, branch, paths)
    add_rows(x, branch)
    normalize_rows(x, eps, normed)
    if not leave_out & 8:
        linear_rows(normed, fc_w, fc_p, fc_pb, fc_b, wide, paths)
    if not leave_out & 16:
        gelu_rows(wide)
    if not leave_out & 32:
        linear_rows(wide, mlp_w, mlp_p, mlp_pb, mlp_b, branch, paths)
    add_rows(x, branch)


@_kernel
def gpt_forward(x, kv, slots, starts, offsets, bias, n_head, eps, paths, weights, tiled,
                logits, hidden, leave_out):
    """The whole GPT over the new tokens of B sequences, batch-first: ``x`` [R, d] holds
    the embeddings of every sequence's block, sequence b in rows ``offsets[b] ..
    offsets[b+1]-1`` (R = offsets[B]; blocks are not padded); ``logits`` [R, V] and
    ``hidden`` [R, d] come out in the same rows. Sequence b's keys and values are appended
    to the caches ``kv`` [L, 2, S, H, capacity, d_head] in slot ``slots[b]`` at position
    ``starts[b]``; ``bias`` [R, >= max n_b] holds, for each row, its bias over the tokens of
    its own block (0 or -inf). One sequence is B = 1 (the single-sequence forward).

    Every matrix product over the weights takes all R rows at once, which is what a batch
    buys; attention runs per sequence, over its own cache. ``weights`` are the stacked
    matrices and biases of :class:`CompiledForward`, ``tiled`` the same laid out for the
    skinny kernel, ``paths`` the three limits of :func:`linear_rows`.

    ``leave_out`` is 0 for the forward itself. For a profile only (the output is then
    wrong), bit i skips part ``PARTS[i]`` in every layer, so the time it saves is the
    part's cost inside a real forward, with the caches as the other parts leave them."""
    qkv_w, qkv_b, proj_w, proj_b, fc_w, fc_b, mlp_w, mlp_b, lnf_g, lnf_b, unembed = weights
    (qkv_p, qkv_pb, proj_p, proj_pb, fc_p, fc_pb, mlp_p, mlp_pb, unembed_p,
     unembed_pb) = tiled
    n, d = x.shape
    normed = np.empty((n, d), dtype=np.float32)
    qkv = np.empty((n, 3 * d), dtype=np.float32)
    attended = np.empty((n, d), dtype=np.float32)
    branch = np.empty((n, d), dtype=np.float32)
    wide = np.empty((n, fc_w.shape[2]), dtype=np.float32)
    if leave_out:  # a profile: defined values where a part is skipped (a forward writes all)
        qkv[:] = 0.0
        attended[:] = 0.0
        branch[:] = 0.0
        wide[:] = 0.0
    for layer in range(qkv_w.shape[0]):
        layer_rows(x, kv[layer], slots, starts, offsets, bias, n_head, eps, paths,
                   (qkv_w[layer], qkv_b[layer], proj_w[layer], proj_b[layer], fc_w[layer],
                    fc_b[layer], mlp_w[layer], mlp_b[layer]),
                   (qkv_p[layer], qkv_pb[layer], proj_p[layer], proj_pb[layer], fc_p[layer],
                    fc_pb[layer], mlp_p[layer], mlp_pb[layer]),
                   normed, qkv, attended, branch, wide, leave_out)
    normalize_rows(x, eps, normed)
    for r in range(n):
        for i in range(d):
            hidden[r, i] = normed[r, i] * lnf_g[i] + lnf_b[i]
    no_bias = np.zeros(unembed.shape[1], dtype=np.float32)
    linear_rows(hidden, unembed, unembed_p, unembed_pb, no_bias, logits, paths)


@_kernel
def block_forward(inp, in_w, in_p, in_pb, in_b, kv, start, bias, n_head, eps, paths, weights,
                  tiled, out):
    """One pre-LN block over one sequence's n new entries, after an input map: ``out``
    [n, d] = block(``inp`` [n, i] @ ``in_w`` [i, d] + ``in_b``), the keys and values going
    to ``kv`` [2, 1, H, capacity, d_head] at ``start``, ``bias`` [n, >= n] as in
    :func:`attend`; ``weights`` and ``tiled`` as :func:`layer_rows` takes them. The
    EAGLE drafter's layer (:mod:`specdec_lite.drafting.eagle`), in the arithmetic of
    :func:`gpt_forward`."""
    n, d = out.shape
    linear_rows(inp, in_w, in_p, in_pb, in_b, out, paths)
    layer_rows(out, kv, np.zeros(1, dtype=np.int64), np.full(1, start, dtype=np.int64),
               np.array([0, n], dtype=np.int64), bias, n_head, eps, paths, weights,
               tiled, np.empty((n, d), dtype=np.float32),
               np.empty((n, 3 * d), dtype=np.float32), np.empty((n, d), dtype=np.float32),
               np.empty((n, d), dtype=np.float32),
               np.empty((n, weights[4].shape[1]), dtype=np.float32), 0)


def _tiled_block(weights) -> tuple[np.ndarray, ...]:
    """A block's (or a stack of blocks') four matrices and biases, (w, b, w, b, ...), laid
    out for the skinny kernel: (tiles, bias, tiles, bias, ...)."""
    return sum((skinny.pack_stacked(weights[i], weights[i + 1]) for i in (0, 2, 4, 6)), ())


class CompiledBlock:
    """:func:`block_forward` with its weights (an input map ``in_w`` [i, d], ``in_b`` [d]
    and a :class:`~specdec_lite.models.transformer.Block`) held as the kernel takes them."""

    def __init__(self, in_w, in_b, block, n_head: int, eps: float) -> None:
        if not available():
            raise ImportError(f"the numba backend needs numba: {INSTALL_HINT}")
        def own(w: np.ndarray) -> np.ndarray:  # a fresh, writable, contiguous float32 copy
            return np.array(w, dtype=np.float32, order="C")

        self.in_w, self.in_b = own(in_w), own(in_b)
        self.in_tiled = skinny.pack_stacked(self.in_w, self.in_b)
        self.weights = tuple(own(w) for w in block)
        self.tiled = _tiled_block(self.weights)
        self.n_head, self.eps = n_head, np.float32(eps)
        compile_kernels()
        self.paths = product_paths.own_mask_for(
            ("block", self.in_w.shape, self.weights[4].shape, n_head),
            self._timed_forward, matmul_paths(kernels.blas_kernel(), kernels.cpu_vendor()))

    def _timed_forward(self, n: int, paths) -> None:
        """One forward of n random rows after :data:`PREFIX_FOR_TIMING` cached ones, on
        ``paths``: what :func:`specdec_lite.models.paths.measure_own_mask` times."""
        d = self.in_b.shape[0]
        kv = np.zeros((2, 1, self.n_head, PREFIX_FOR_TIMING + n, d // self.n_head),
                      dtype=np.float32)
        inp = np.random.default_rng(n).standard_normal((n, self.in_w.shape[0]))
        block_forward(inp.astype(np.float32), self.in_w, *self.in_tiled, self.in_b, kv,
                      np.int64(PREFIX_FOR_TIMING), np.array(kernels.causal_bias(n)),
                      self.n_head, self.eps, paths, self.weights, self.tiled,
                      np.empty((n, d), dtype=np.float32))

    def __call__(self, inp: np.ndarray, kv: np.ndarray, start: int,
                 bias: np.ndarray) -> np.ndarray:
        """The block's output [n, d] for ``inp`` [n, i]; ``kv`` [2, H, capacity, d_head]."""
        out = np.empty((inp.shape[0], self.in_b.shape[0]), dtype=np.float32)
        block_forward(np.ascontiguousarray(inp, dtype=np.float32), self.in_w, *self.in_tiled,
                      self.in_b, kv[:, None], np.int64(start),
                      np.ascontiguousarray(bias, dtype=np.float32), self.n_head, self.eps,
                      self.paths, self.weights, self.tiled, out)
        return out


class CompiledForward:
    """The fused forward of one :class:`~specdec_lite.models.transformer.TransformerModel`'s
    weights, stacked per kind ([L, ...]) so one compiled call takes them all."""

    def __init__(self, layers, ln_f, unembed, n_head: int, eps: float) -> None:
        def stack(i: int) -> np.ndarray:
            return np.ascontiguousarray(np.stack([block[i] for block in layers]))

        # fresh, writable copies: one array type whether the model's own arrays are
        # read-only or (after unpickling) not, so numba compiles one signature
        self.weights = tuple(stack(i) for i in range(8)) + tuple(
            np.array(w, dtype=np.float32) for w in (ln_f[0], ln_f[1], unembed))
        no_bias = np.zeros(self.weights[10].shape[1], dtype=np.float32)  # [V]
        self.tiled = _tiled_block(self.weights) + skinny.pack_stacked(self.weights[10], no_bias)
        self.n_head, self.eps = n_head, np.float32(eps)
        self.no_bias = np.zeros((1, 1), dtype=np.float32)
        self.slot_0 = np.zeros(1, dtype=np.int64)  # a single sequence's slot
        compile_kernels()
        self.paths = (1, 0, 0)  # for the warm-up, then measured
        self.warm_up()
        self.paths = product_paths.own_mask_for(
            ("gpt", *(w.shape for w in self.weights), n_head), self._timed_forward,
            matmul_paths(kernels.blas_kernel(), kernels.cpu_vendor()))

    def __setstate__(self, state: dict) -> None:  # unpickled in another process
        compile_kernels()
        self.__dict__.update(state)

    def warm_up(self) -> None:
        """Compile now (about 10 s the first time on a machine, then read from numba's
        on-disk cache in well under a second), not inside the first timed decode."""
        qkv_w = self.weights[0]  # [L, d, 3d]
        n_layer, d = qkv_w.shape[0], qkv_w.shape[1]
        kv = np.zeros((n_layer, 2, self.n_head, 2, d // self.n_head), dtype=np.float32)
        self(np.zeros((1, d), dtype=np.float32), kv, 0, None)
        self(np.zeros((1, d), dtype=np.float32), kv, 1, np.zeros((1, 1), dtype=np.float32))

    def readout(self, hidden: np.ndarray) -> np.ndarray:  # [n, d] -> [n, V]
        """The LM head alone: logits of final hidden states, as the forward computes them."""
        unembed = self.weights[10]  # [d, V]
        logits = np.empty((len(hidden), unembed.shape[1]), dtype=np.float32)
        linear_rows(np.ascontiguousarray(hidden, dtype=np.float32), unembed, self.tiled[8],
                    self.tiled[9], np.zeros(unembed.shape[1], dtype=np.float32), logits,
                    self.paths)
        return logits

    @property
    def skinny_rows(self) -> list[int]:
        """The block sizes this forward sends to the skinny kernel, as measured when it
        was compiled."""
        return product_paths.own_rows(self.paths[1])

    def _timed_forward(self, n: int, paths) -> None:
        """One forward of n random rows after :data:`PREFIX_FOR_TIMING` cached ones, on
        ``paths``: what :func:`specdec_lite.models.paths.measure_own_mask` times."""
        n_layer, d = self.weights[0].shape[0], self.weights[0].shape[1]
        kv = np.zeros((n_layer, 2, 1, self.n_head, PREFIX_FOR_TIMING + n, d // self.n_head),
                      dtype=np.float32)
        x = np.random.default_rng(n).standard_normal((n, d)).astype(np.float32)
        one = np.zeros(1, dtype=np.int64)
        gpt_forward(x, kv, one, one + PREFIX_FOR_TIMING, np.array([0, n], dtype=np.int64),
                    np.array(kernels.causal_bias(n)), self.n_head, self.eps, paths,
                    self.weights, self.tiled,
                    np.empty((n, self.weights[-1].shape[1]), dtype=np.float32),
                    np.empty((n, d), dtype=np.float32), 0)

    def __call__(self, x: np.ndarray, kv: np.ndarray, start: int,
                 bias: np.ndarray | None, leave_out: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Logits [n, V] and hidden states [n, d] of one sequence's embeddings ``x`` [n, d]
        (consumed), appending their keys and values to its cache ``kv`` [L, 2, H, capacity,
        d_head] at ``start``; ``bias`` [n, n] or None (causal is the caller's to give).
        ``leave_out``: for a profile, the parts to skip (see :func:`gpt_forward`); the
        output is then wrong. The batch of one of :meth:`batch`."""
        # one array type for every bias (a read-only one would compile a second signature)
        bias = self.no_bias if bias is None else np.array(bias, dtype=np.float32)  # [n, n]
        return self._run(x, kv[:, :, None], self.slot_0, np.array([start], dtype=np.int64),
                         np.array([0, x.shape[0]], dtype=np.int64), bias, leave_out)

    def batch(self, x: np.ndarray, kv: np.ndarray, slots: np.ndarray, starts: np.ndarray,
              offsets: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits [R, V] and hidden states [R, d] of the blocks of B sequences, flattened:
        sequence b's embeddings are rows ``offsets[b] .. offsets[b+1]-1`` of ``x`` [R, d]
        (consumed), its cache is slot ``slots[b]`` of ``kv`` [L, 2, S, H, capacity, d_head],
        its block starts at position ``starts[b]``, and ``bias`` [R, max n_b] gives each
        row's bias over its own block (see :func:`gpt_forward`)."""
        return self._run(x, kv, np.asarray(slots, dtype=np.int64),
                         np.asarray(starts, dtype=np.int64),
                         np.asarray(offsets, dtype=np.int64),
                         np.asarray(bias, dtype=np.float32), 0)

    def _run(self, x, kv, slots, starts, offsets, bias, leave_out):
        n = x.shape[0]
        logits = np.empty((n, self.weights[-1].shape[1]), dtype=np.float32)
        hidden = np.empty_like(x)
        gpt_forward(x, kv, slots, starts, offsets, bias, self.n_head, self.eps, self.paths,
                    self.weights, self.tiled, logits, hidden, leave_out)
        return logits, hidden


def compile_forward(layers, ln_f, unembed, n_head: int, eps: float) -> CompiledForward:
    """A :class:`CompiledForward`; ``ImportError`` with the install line without numba."""
    if not available():
        raise ImportError(f"the numba backend needs numba: {INSTALL_HINT}")
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a positive float, got {eps}")
    return CompiledForward(layers, ln_f, unembed, n_head, eps)
