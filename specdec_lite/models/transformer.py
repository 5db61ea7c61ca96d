"""A character GPT in numpy, with a preallocated KV cache and tree attention.

The network (GPT-2 layout, pre-LayerNorm)::

    x_0  = wte[tokens] + wpe[positions]                          # [n, d]
    x'   = x + attn(LN_1(x))     x_out = x' + mlp(LN_2(x'))      # per block
    h    = LN_f(x_L)                                             # hidden states, [n, d]
    logits = h @ wte.T                                           # tied output, [n, V]

with ``attn`` multi-head causal self-attention, softmax(q k^T / sqrt(d_head)) v, and
``mlp(x) = GELU(x W_fc + b_fc) W_proj + b_proj`` (tanh GELU). Everything is float32.

Speed: q, k and v come from one fused matmul; all heads attend in one batched matmul over
the preallocated cache ``kv [n_layer, 2, n_head, capacity, d_head]``; the gains of LN_1 and
LN_2 and the 1/sqrt(d_head) scale are folded into the following weights at load time.

A forward call takes a block of n new tokens. By default the block is causal and sits at
the positions after the cached entries. For tree verification pass ``mask`` ([n, n] bool,
``mask[i, j]``: node i may attend node j, e.g. its ancestors and itself) and ``positions``
(e.g. prefix length + depth); every new token always attends to all cached entries.

One forward per backend. ``forward_rows`` is the network over the new tokens of B
sequences at once, flattened into rows with an offset table (each sequence in its own
cache slot); ``forward`` is its batch of one, and the batched engine
(:mod:`specdec_lite.models.batch_kv`) its batch of many. On ``"numpy"`` it is the functions of
this module; on ``"numba"`` one compiled call of :mod:`specdec_lite.models.fast`, with the same
layout.

Speculative decoders drive the cache through public methods and never touch it
directly: ``score_tree`` (forward a tree block on top of the committed prefix),
``commit_path`` (keep one root-to-node path of that block), ``rollback`` (drop entries)
and ``hidden_at`` (read a committed entry; ``cache.n_causal`` is the committed length).
Each entry keeps its hidden state, the *feature* the LM head reads; ``hidden(tokens,
start)`` reads a prefix's features and forwards only rows the cache lacks (the EAGLE
drafter's input, :mod:`specdec_lite.drafting.eagle`).

Per-sequence state. The weights are shared and read-only; the KV cache (and with it the
position of the next token) is per sequence, a :class:`KVCache` from
``model.new_state()``. Every method takes it as ``cache=``; ``model.bound(cache)`` is the
model with it filled in (:mod:`specdec_lite.models.bound`), which is what the decoders
run on, each run on a cache of its own. The model itself holds no cache: a sequence
call without one (a notebook's ``model.probs(tokens)``) runs on a new cache it then
drops, a pure function of its tokens (``forward`` then runs from position 0), and the
calls that read or change a cache's entries (``rollback``, ``score_tree``,
``commit_path``, ``hidden_at``) need one. A cache is rebuilt from its tokens alone
(``model.probs(tokens, cache=fresh)`` re-prefills it), so a sequence's state to save is
its tokens, not its cache.
"""

from __future__ import annotations

import hashlib
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..checks import check_int, check_tokens
from ..functional import softmax
from ..rules.distributions import apply_temperature
from . import fast
from .attention import BatchLayout, attend_many, attend_one, batch_layout
from .bound import BoundModel
from .kernels import LN_EPS, causal_bias, fold_gain, gelu, linear, normalize
from .kv_cache import KVCache

__all__ = ["BACKENDS", "Block", "KVCache", "LN_EPS", "Output", "TransformerConfig",
           "TransformerModel", "causal_bias", "file_sha256", "fold_gain", "gelu", "linear",
           "load_npz", "normalize"]
BACKENDS = ("numpy", "numba")  # see TransformerModel.use_backend


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of a GPT: vocabulary V, layers, heads, width d and number of positions."""

    vocab_size: int
    n_layer: int
    n_head: int
    d_model: int
    max_len: int

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of the bytes of ``path``."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_npz(path: str | Path, sha256: str) -> dict[str, np.ndarray]:
    """Load every array of an ``.npz`` as float32 after checking the file's sha256.

    Raises ``FileNotFoundError`` if ``path`` is missing and ``ValueError`` (naming the file)
    if its checksum differs from ``sha256`` or it is not a readable npz archive.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} does not exist")
    actual = file_sha256(path)
    if actual != sha256:
        raise ValueError(f"weights file {path} has sha256 {actual}, expected {sha256}: "
                         "the file is corrupted or does not match its manifest")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name].astype(np.float32) for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        raise ValueError(f"weights file {path} is not a readable npz archive: {err}") from err


class Block(NamedTuple):
    """One transformer block's weights, named as in GPT-2 / picoGPT (matrices are [in, out]).

    LayerNorm 1's gain and shift are folded into ``c_attn`` (and the attention scale
    1/sqrt(d_head) into its query columns); LayerNorm 2's into ``c_fc`` (see ``fold_gain``),
    so a block needs no LayerNorm parameters of its own. Positional access
    (``block[0]`` .. ``block[7]``) gives the same arrays in this order.
    """

    c_attn_w: np.ndarray  # [d, 3d] fused query/key/value projection
    c_attn_b: np.ndarray  # [3d]
    attn_c_proj_w: np.ndarray  # [d, d] attention output projection
    attn_c_proj_b: np.ndarray  # [d]
    c_fc_w: np.ndarray  # [d, 4d] MLP expansion
    c_fc_b: np.ndarray  # [4d]
    mlp_c_proj_w: np.ndarray  # [4d, d] MLP output projection
    mlp_c_proj_b: np.ndarray  # [d]


class Output(NamedTuple):
    """What a forward pass returns for its n new tokens."""

    logits: np.ndarray  # [n, V] float32
    hidden: np.ndarray  # [n, d] float32, after the final LayerNorm


class TransformerModel:
    """A numpy GPT that satisfies the model contract (``vocab_size``, ``probs``) and its
    fast path (``last_probs``): see :class:`specdec_lite.models.ngram.FastModel`.

    ``probs``, ``logits`` and ``hidden`` take a whole sequence and reuse the cache for
    its longest common prefix with the sequence of the previous call on that cache, so a
    decoder that extends or shortens its sequence pays only for the new tokens.
    ``forward`` is the low-level call that appends a block (optionally a tree) to the
    cache; tree decoders use ``score_tree``, ``commit_path``, ``rollback`` and
    ``hidden_at``. Each takes ``cache=`` (a :class:`KVCache` from :meth:`new_state`;
    ``model.bound(cache)`` fills it in); the sequence calls without one run on a
    throwaway cache, the others require it. The model holds no per-sequence state, so it
    can serve many sequences from many threads; one cache must not be used by two threads
    at once.

    ``trusted_rows``: ``last_probs`` returns a float64 softmax of logits this model
    computed from checksum-verified weights, so its rows are non-negative and sum to 1 by
    construction; the decoders then check only their shape.
    """

    trusted_rows = True
    observer = None  # a meter's hook: observer(n, seconds) after each forward over n tokens

    def __init__(self, config: TransformerConfig, params: dict[str, np.ndarray],
                 cache_capacity: int | None = None, backend: str = "numpy") -> None:
        """Build from float arrays named as in ``train.GPT.numpy_state`` (matrices [in, out]).

        The output projection is tied to ``wte`` unless ``params`` holds an ``unembed``
        [d, V] of its own (an early-exit draft's trained head:
        :mod:`specdec_lite.drafting.early_exit`).

        ``cache_capacity`` is the number of slots of each cache (default ``2 * max_len``:
        room for a full-length prefix plus tree nodes); positions stay below ``max_len``.
        The arrays are copied, and the copies made read-only: every sequence shares them.
        """
        self.config = config
        self.vocab_size = config.vocab_size
        self.cache_capacity = check_int(cache_capacity or 2 * config.max_len,
                                        "cache_capacity", 1)
        p = {name: np.array(value, dtype=np.float32) for name, value in params.items()}
        self.wte, self.wpe = p["wte"], p["wpe"]  # [V, d], [max_len, d]
        self.unembed = np.ascontiguousarray(p.get("unembed", self.wte.T))  # [d, V]
        if self.unembed.shape != (config.d_model, config.vocab_size):
            raise ValueError(f"unembed must have shape {(config.d_model, config.vocab_size)}, "
                             f"got {self.unembed.shape}")
        self.ln_f = (p["ln_f.g"], p["ln_f.b"])  # [d], [d]
        q_scale = np.ones(3 * config.d_model, dtype=np.float32)  # [3d]
        q_scale[: config.d_model] = 1.0 / np.sqrt(config.d_head)
        layers = []
        for i in range(config.n_layer):
            b = f"blocks.{i}."
            qkv_w, qkv_b = fold_gain(p[b + "ln1.g"], p[b + "ln1.b"], p[b + "qkv.w"], p[b + "qkv.b"])
            fc_w, fc_b = fold_gain(p[b + "ln2.g"], p[b + "ln2.b"], p[b + "fc.w"], p[b + "fc.b"])
            layers.append(Block(qkv_w * q_scale, qkv_b * q_scale, p[b + "attn_proj.w"],
                                p[b + "attn_proj.b"], fc_w, fc_b, p[b + "mlp_proj.w"],
                                p[b + "mlp_proj.b"]))
        self.layers: tuple[Block, ...] = tuple(layers)
        self._one_hot = np.eye(config.vocab_size)  # [V, V] rows of last_probs at T = 0
        for array in (self.wte, self.wpe, self.unembed, *self.ln_f, self._one_hot,
                      *(w for block in self.layers for w in block)):
            array.flags.writeable = False
        self.use_backend(backend)

    def use_backend(self, backend: str) -> TransformerModel:
        """Run forwards with ``"numpy"`` (the reference) or ``"numba"`` (one compiled, fused
        call: :mod:`specdec_lite.models.fast`, the ``fast`` extra). Returns the model."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        compiled = None
        if backend == "numba":  # compiled first: a failure leaves the model as it was
            compiled = fast.compile_forward(self.layers, self.ln_f, self.unembed,
                                            self.config.n_head, LN_EPS)
        self.backend, self._compiled = backend, compiled
        return self

    @property
    def compiled(self) -> fast.CompiledForward | None:
        """The compiled forward of the ``"numba"`` backend (batch-first, so the batched
        engine runs it too: :func:`specdec_lite.models.batch_kv.forward_batch`); None on numpy."""
        return self._compiled

    @classmethod
    def from_npz(cls, path: str | Path, config: TransformerConfig, sha256: str) -> TransformerModel:
        """Load checksum-verified weights (see ``load_npz``)."""
        return cls(config, load_npz(path, sha256))

    # ---------------------------------------------------------------- per-sequence state

    def new_state(self) -> KVCache:
        """An empty cache for one sequence (its keys, values and position)."""
        return KVCache(self.config, self.cache_capacity)

    def bound(self, cache: KVCache | None = None) -> BoundModel:
        """This model on ``cache`` (default: a new one), as a model whose every call uses
        it (:class:`~specdec_lite.models.bound.BoundModel`): what a decoder runs on."""
        return BoundModel(self, self.new_state() if cache is None else self._state(cache))

    def _state(self, cache: KVCache | None, call: str | None = None) -> KVCache:
        """``cache``, checked to fit this model. None: a new cache for a sequence call
        (``call`` None), which then forgets it; ``TypeError`` for the call named ``call``,
        which reads or changes a cache's entries and so needs the caller's."""
        if cache is None:
            if call is not None:
                raise TypeError(f"{call} needs cache= (a KVCache from new_state(), or call it "
                                "on model.bound(cache)): the model keeps no cache of its own")
            return self.new_state()
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache (see new_state), got {type(cache).__name__}")
        c = self.config
        if cache.kv.shape[:3] != (c.n_layer, 2, c.n_head) or cache.kv.shape[4] != c.d_head:
            raise ValueError(f"cache has shape {cache.kv.shape}, which does not fit this model")
        return cache

    # ---------------------------------------------------------------- the forward pass

    def forward(self, tokens: Sequence[int] | np.ndarray, positions: np.ndarray | None = None,
                mask: np.ndarray | None = None, *, cache: KVCache | None = None) -> Output:
        """Run n new tokens after the cached entries and append them to the cache.

        ``positions`` ([n] int, default ``cache.length + arange(n)``) index the position
        embedding. ``mask`` ([n, n] bool, default causal) says which new tokens each new token
        attends to; the diagonal must be True. Every new token also attends to all cached
        entries. Returns the logits and hidden states of the new tokens.
        """
        start_s = time.perf_counter()
        cache = self._state(cache)
        tokens = check_tokens(tokens, self.vocab_size)  # [n]
        n, start = len(tokens), cache.length
        if start + n > cache.capacity:
            raise ValueError(f"tokens: {n} new tokens after {start} cached entries exceed the "
                             f"cache capacity {cache.capacity}")
        causal = mask is None and positions is None
        if positions is None and start + n <= self.config.max_len:
            positions = np.arange(start, start + n)  # [n]
        else:
            positions = start + np.arange(n) if positions is None else np.asarray(positions)
            out_of_range = (positions < 0).any() or (positions >= self.config.max_len).any()
            if positions.shape != (n,) or out_of_range:
                raise ValueError(f"positions must be {n} ints in [0, {self.config.max_len}), "
                                 f"got {positions.tolist()}")
        if mask is None:
            bias = causal_bias(n) if n > 1 else None  # [n, n]; one token attends freely
        else:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (n, n) or not mask.diagonal().all():
                raise ValueError(f"mask must be [{n}, {n}] bool with a True diagonal")
            bias = np.where(mask, np.float32(0), np.float32(-np.inf))  # [n, n]
        x = self.wte[tokens] + self.wpe[positions]  # [n, d]
        if self._compiled is not None:  # the batch of one, without forward_rows' checks
            logits, hidden = self._compiled(x, cache.kv, start, bias)  # [n, V], [n, d]
        else:
            one = np.zeros(1, np.int64)
            logits, hidden = self.forward_rows(x, cache.kv[:, :, None], one, one + start,
                                               np.array([0, n]), bias)  # [n, V], [n, d]
        cache.tokens[start : start + n] = tokens
        cache.logits[start : start + n] = logits
        cache.hidden[start : start + n] = hidden
        cache.length = start + n
        if causal and cache.n_causal == start:
            cache.n_causal = start + n
        if self.observer is not None:
            self.observer(n, time.perf_counter() - start_s)
        return Output(logits, hidden)

    def forward_rows(self, x: np.ndarray, kv: np.ndarray, slots: np.ndarray,
                     starts: np.ndarray, offsets: np.ndarray,
                     bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The model's one forward, batch-first, on this model's backend: the new tokens of
        B sequences, flattened. Sequence b's embeddings are rows ``offsets[b] ..
        offsets[b+1]-1`` of ``x`` [R, d] (consumed); its cache is slot ``slots[b]`` of
        ``kv`` [L, 2, S, H, capacity, d_head], where its keys and values are written from
        position ``starts[b]`` on; ``bias`` [R, >= max n_b] gives each row's bias (0 or
        -inf) over the tokens of its own block, and may be None when every block is one
        token. Every row also attends to all of its sequence's cached entries.

        Returns the logits [R, V] and final hidden states [R, d]. :meth:`forward` is the
        batch of one (``kv`` a single cache with a slot axis of 1); the batched engine's
        :func:`specdec_lite.models.batch_kv.forward_batch` is the batch of many. Every product over
        the weights takes all R rows at once."""
        slots, starts = np.asarray(slots, np.int64), np.asarray(starts, np.int64)
        offsets = np.asarray(offsets, np.int64)
        if bias is None:
            if (np.diff(offsets) > 1).any():
                raise ValueError("bias: blocks of more than one token need a bias")
            bias = np.zeros((len(x), 1), np.float32)
        if self._compiled is not None:
            return self._compiled.batch(x, kv, slots, starts, offsets, bias)
        layout = batch_layout(slots, starts, offsets, bias) if len(slots) > 1 else None
        for layer, weights in enumerate(self.layers):
            x = self._block(x, weights, kv[layer], slots, starts, bias, layout)
        hidden = normalize(x) * self.ln_f[0] + self.ln_f[1]  # [R, d]
        return hidden @ self.unembed, hidden  # [R, V], [R, d]

    def _block(self, x: np.ndarray, w: Block, kv: np.ndarray, slots: np.ndarray,
               starts: np.ndarray, bias: np.ndarray,
               layout: BatchLayout | None) -> np.ndarray:  # [R, d] -> [R, d]
        r, d = x.shape
        heads, d_head = self.config.n_head, self.config.d_head
        qkv = linear(normalize(x), w.c_attn_w, w.c_attn_b)  # [R, 3d]
        qkv = qkv.reshape(r, 3, heads, d_head)  # [R, 3, H, d_head]
        qkv = qkv.transpose(1, 2, 0, 3)  # [3, H, R, d_head]
        if layout is None:  # one sequence
            attended = attend_one(qkv, kv[:, slots[0]], int(starts[0]), bias)  # [R, d]
        else:
            attended = attend_many(qkv, kv, layout)  # [R, d]
        x = x + linear(attended, w.attn_c_proj_w, w.attn_c_proj_b)
        hidden = gelu(linear(normalize(x), w.c_fc_w, w.c_fc_b))  # [R, 4d]
        return x + linear(hidden, w.mlp_c_proj_w, w.mlp_c_proj_b)

    # ---------------------------------------------------------------- whole sequences

    def _sync(self, tokens: Sequence[int] | np.ndarray, cache: KVCache) -> int:
        """Make the cache's causal prefix equal ``tokens``, reusing the common prefix.

        An int64 array skips ``check_tokens`` here: the prefix it shares with the cache was
        checked before, and ``forward`` checks the new tokens.
        """
        if not (isinstance(tokens, np.ndarray) and tokens.dtype == np.int64
                and tokens.ndim == 1):
            tokens = check_tokens(tokens, self.vocab_size)  # [n]
        if len(tokens) > self.config.max_len:
            raise ValueError(f"tokens has length {len(tokens)}, more than max_len "
                             f"{self.config.max_len}")
        m = min(len(tokens), cache.n_causal)
        if tokens[:m].tobytes() == cache.tokens[:m].tobytes():  # one C compare
            common = m
        else:
            common = int((tokens[:m] == cache.tokens[:m]).argmin())  # first difference
        if common < cache.length:
            cache.truncate(common)
        if common < len(tokens):
            self.forward(tokens[common:], cache=cache)
        return len(tokens)

    def logits(self, tokens: Sequence[int] | np.ndarray, *,
               cache: KVCache | None = None) -> np.ndarray:
        """float32 logits [n, V]; row i scores the token after ``tokens[:i+1]``."""
        cache = self._state(cache)
        n = self._sync(tokens, cache)
        return cache.logits[:n].copy()

    def hidden(self, tokens: Sequence[int] | np.ndarray, start: int = 0, *,
               cache: KVCache | None = None) -> np.ndarray:
        """float32 hidden states [n - start, d] of ``tokens[start:]`` after the final
        LayerNorm (the features Medusa heads and the EAGLE drafter read)."""
        cache = self._state(cache)
        n = self._sync(tokens, cache)
        return cache.hidden[check_int(start, "start", 0, n) : n].copy()

    def probs(self, tokens: Sequence[int] | np.ndarray, *,
              cache: KVCache | None = None) -> np.ndarray:
        """float64 [n, V]: row i is softmax(logits_i), the distribution after ``tokens[:i+1]``.

        The float32 logits are cast to float64 before the softmax, so rows sum to 1 to ~1e-15.
        """
        return softmax(self.logits(tokens, cache=cache))  # [n, V]

    def last_probs(self, tokens: Sequence[int] | np.ndarray, n_rows: int = 1,
                   temperature: float = 1.0, *, cache: KVCache | None = None) -> np.ndarray:
        """``apply_temperature(probs(tokens)[-n_rows:], temperature)``, [n_rows, V] float64,
        without computing the other rows (the decoders call this when a model has it).

        At temperature 0 that is the one-hot of each row's first argmax, taken straight from
        the logits (the softmax keeps their order); at 1 the plain softmax.
        """
        cache = self._state(cache)
        n = self._sync(tokens, cache)
        n_rows = check_int(n_rows, "n_rows", 1, n)
        return self.rows_from_logits(cache.logits[n - n_rows : n], temperature)

    def greedy_block(self, tokens: Sequence[int] | np.ndarray, k: int, *,
                     cache: KVCache | None = None) -> np.ndarray:  # [n] -> [k]
        """The ``k`` tokens greedy decoding appends to ``tokens``, as ``k`` calls of
        ``last_probs(..., temperature=0)`` would choose them (each the first argmax of the
        previous token's logits), without building a probability row per token: one
        sync of the cache, then ``k - 1`` one-token forwards. The last token is not
        forwarded (the next call's sync does it), as in the draft loop of the decoders.
        """
        k = check_int(k, "k", 0)
        if k == 0:  # nothing to choose, nothing read (as k calls of last_probs would)
            return np.empty(0, dtype=np.int64)
        cache = self._state(cache)
        n = self._sync(tokens, cache)
        if n + k - 1 > self.config.max_len:
            raise ValueError(f"k: {k} greedy tokens after {n} would pass max_len "
                             f"{self.config.max_len}")
        out = np.empty(k, dtype=np.int64)  # [k]
        logits = cache.logits[n - 1]  # [V]
        for i in range(k):
            out[i] = logits.argmax()
            if i + 1 < k:
                logits = self.forward(out[i : i + 1], cache=cache).logits[0]
        return out

    def rows_from_logits(self, logits: np.ndarray, temperature: float) -> np.ndarray:
        """``apply_temperature(softmax(logits), temperature)`` for float32 logits [m, V],
        as :meth:`last_probs` computes it (one-hot of the first argmax at T = 0)."""
        if temperature == 0:
            return self._one_hot[logits.argmax(axis=1)]  # [m, V], a fresh copy
        z = softmax(logits)  # [m, V] float64
        return z if temperature == 1 else apply_temperature(z, temperature)

    # The cache interface of tree decoders (Medusa). The *committed* prefix is the causal
    # sequence the decoder has accepted so far; a tree block sits on top of it until one
    # of its paths is committed or it is rolled back.

    def hidden_at(self, i: int, *, cache: KVCache | None = None) -> np.ndarray:  # -> [d]
        """The final hidden state of cached entry ``i`` (a copy), in [0, entries in cache)."""
        cache = self._state(cache, "hidden_at")
        i = check_int(i, "i", 0, cache.length - 1)
        return cache.hidden[i].copy()

    def rollback(self, length: int, *, cache: KVCache | None = None) -> None:
        """Drop every cached entry from ``length`` on (committed or not)."""
        cache = self._state(cache, "rollback")
        cache.truncate(check_int(length, "length", 0, cache.length))

    def score_tree(self, tokens: Sequence[int] | np.ndarray, depth: np.ndarray,
                   mask: np.ndarray, *, cache: KVCache | None = None) -> Output:
        """Forward a tree block of N nodes on top of the committed prefix, in one call.

        ``tokens`` [N], ``depth`` [N] (node j sits at position ``cache.n_causal + depth[j]``)
        and ``mask`` [N, N] bool (``mask[i, j]``: node i sees node j; the diagonal True).
        Every node also sees the whole committed prefix. Entries left by an earlier block
        are dropped first. Returns the nodes' logits [N, V] and hidden states [N, d]; the
        block stays in the cache until :meth:`commit_path` or :meth:`rollback`.
        """
        cache = self._state(cache, "score_tree")
        base = cache.n_causal
        cache.truncate(base)
        return self.forward(tokens, positions=base + np.asarray(depth), mask=mask, cache=cache)

    def commit_path(self, nodes: Sequence[int] | np.ndarray, *,
                    cache: KVCache | None = None) -> None:
        """Keep the nodes ``nodes`` (ascending indices into the last :meth:`score_tree`
        block, one root-to-node path) as the continuation of the committed prefix.

        With the block scored at ``depth`` = distance from its first node and a mask that
        lets each node see only its ancestors, the kept entries equal those of a causal
        forward of the path's tokens. Every other entry of the block is dropped.
        """
        cache = self._state(cache, "commit_path")
        cache.keep_path(cache.n_causal + np.asarray(nodes, dtype=np.intp))
