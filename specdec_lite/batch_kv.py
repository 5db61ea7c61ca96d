"""Many sequences in one forward pass: a slotted KV cache and a ragged batched forward.

:class:`BatchKVCache` keeps the caches of B sequences of one
:class:`~specdec_lite.transformer.TransformerModel` in one array, sequence b in slot b,
each with its own length (its next position). The active sequences always fill slots
0 .. B-1 (:meth:`BatchKVCache.remove` moves the last one into a freed slot), so the keys
every forward attends over are one strided view, with no copy.

:func:`forward_batch` runs a block of up to n new tokens for each sequence of a range of
slots in one pass: the blocks are padded to n and stacked into [B, n] (pad + mask). Every
matrix product over the weights sees all B·n rows at once, which is what batching buys;
attention is one batched product over the padded keys [B, H, L, d_head], where a bias
of −inf hides from each query the slots past its own position (the causal mask and the
ragged lengths at once). Pad rows are computed and thrown away; their keys and values
land past the sequence's length, where the next forward overwrites them before any
query can see them. That is the numpy backend. On the compiled backend (``"numba"``,
the ``fast`` extra) the model's own compiled forward runs the batch: the same kernel a
single sequence's forward calls, batch-first, with the blocks flattened into rows and an
offset table (no padding), every weight product over all rows at once and attention
per sequence over its slot.

:class:`GPTRows` and :class:`ModelRows` answer the one question a decoder asks, "the
last n rows of the model after this context", for every sequence of a batch:
``GPTRows`` with one batched forward over the new tokens of all of them, ``ModelRows``
for any other model (an n-gram, a table) with one :func:`~specdec_lite.models.model_rows`
call per sequence. Rows come out as the single-sequence path computes them
(``TransformerModel.rows_from_logits``), from logits that differ from a lone forward's
only by float32 rounding in the batched products.
"""

from __future__ import annotations

import time

import numpy as np

from .functional import softmax32
from .kernels import causal_bias, gelu, linear, normalize
from .models import model_rows
from .transformer import TransformerModel


class BatchKVCache:
    """The KV caches of up to ``slots`` sequences of ``model``, sequence b in slot b.

    ``kv[layer, 0 or 1, slot, head, position, :]`` holds keys or values, ``tokens[slot]``
    the token ids and ``logits[slot]`` the output logits of each cached position, and
    ``length[slot]`` how many positions are in use.
    """

    def __init__(self, model: TransformerModel, slots: int) -> None:
        c = model.config
        capacity = c.max_len + 1  # positions 0 .. max_len-1, and one where pad rows land
        self.kv = np.zeros((c.n_layer, 2, slots, c.n_head, capacity, c.d_head), np.float32)
        self.tokens = np.zeros((slots, capacity), np.int64)  # [S, capacity]
        self.logits = np.zeros((slots, capacity, c.vocab_size), np.float32)  # [S, cap, V]
        self.length = np.zeros(slots, np.int64)  # [S]
        self.n_active = 0

    @property
    def slots(self) -> int:
        return self.tokens.shape[0]

    def add(self) -> int:
        """Take the next free slot (an empty cache) and return it."""
        if self.n_active == self.slots:
            raise ValueError(f"the batch cache is full ({self.slots} slots)")
        slot = self.n_active
        self.length[slot] = 0
        self.n_active += 1
        return slot

    def remove(self, slot: int) -> None:
        """Free ``slot``; the sequence in the last active slot moves into it."""
        last = self.n_active - 1
        if not 0 <= slot <= last:
            raise ValueError(f"slot must be an active slot in [0, {last}], got {slot}")
        if slot != last:
            n = int(self.length[last])
            self.kv[:, :, slot, :, :n] = self.kv[:, :, last, :, :n]
            self.tokens[slot, :n] = self.tokens[last, :n]
            self.logits[slot, :n] = self.logits[last, :n]
            self.length[slot] = n
        self.n_active = last


def forward_batch(model: TransformerModel, cache: BatchKVCache, first: int,
                  blocks: list[np.ndarray]) -> None:
    """Append ``blocks[i]`` (int64 token ids [n_i], n_i >= 0) to the cache of slot
    ``first + i``, all in one forward pass; their logits land in ``cache.logits``.

    Token j of block i sits at position ``length + j`` and attends to every cached
    position of its slot and to tokens 0..j of its block. The model's own backend runs
    it: numpy pads the blocks to n = max n_i (pad rows past ``config.max_len`` are clipped
    to the spare last cache position); the compiled backend (``model.compiled``, the
    same kernel as a single sequence's forward) takes them flattened, unpadded. The
    caller keeps every real position below ``config.max_len``.
    """
    start_s = time.perf_counter()
    run = _forward_flat if model.compiled is not None else _forward_padded
    n_rows = run(model, cache, first, blocks)
    if model.observer is not None:
        model.observer(n_rows, time.perf_counter() - start_s)


def _forward_padded(model: TransformerModel, cache: BatchKVCache, first: int,
                    blocks: list[np.ndarray]) -> int:
    """The numpy forward of a batch: blocks padded to one length n, every product over
    [b, n] tokens (see the module docstring). Returns the rows computed, b n."""
    c = model.config
    b = len(blocks)
    n = max(len(block) for block in blocks)
    slots = slice(first, first + b)
    start = cache.length[slots].copy()  # [b]
    real = np.array([len(block) for block in blocks])  # [b]
    if (start + real).max() > c.max_len:
        raise ValueError(f"blocks: a sequence would pass the model's max_len {c.max_len}")
    tokens = np.zeros((b, n), np.int64)  # [b, n], pads are token 0
    for i, block in enumerate(blocks):
        tokens[i, : len(block)] = block
    where = np.minimum(start[:, None] + np.arange(n), c.max_len)  # [b, n] cache positions
    positions = np.minimum(where, c.max_len - 1)  # pad rows may run past the window
    end = int(where[:, -1].max()) + 1  # keys 0 .. end-1 cover every slot's block
    # bias[i, j, t] = 0 if token j of slot i may attend position t, else -inf
    bias = np.where(np.arange(end) <= where[:, :, None], np.float32(0), np.float32(-np.inf))
    rows = np.arange(first, first + b)[:, None]  # [b, 1] with ``where``: each token's slot
    x = (model.wte[tokens] + model.wpe[positions]).reshape(b * n, c.d_model)  # [b n, d]
    for layer, w in enumerate(model.layers):
        kv = cache.kv[layer]  # [2, S, H, capacity, d_head]
        qkv = linear(normalize(x), w.c_attn_w, w.c_attn_b)  # [b n, 3d]
        qkv = qkv.reshape(b, n, 3, c.n_head, c.d_head)  # [b, n, 3, H, d_head]
        kv[0][rows, :, where] = qkv[:, :, 1]  # keys of the new tokens, [b, n, H, d_head]
        kv[1][rows, :, where] = qkv[:, :, 2]
        keys, values = kv[0, slots, :, :end], kv[1, slots, :, :end]  # [b, H, end, d_head]
        queries = qkv[:, :, 0].transpose(0, 2, 1, 3)  # [b, H, n, d_head], already scaled
        scores = queries @ keys.transpose(0, 1, 3, 2)  # [b, H, n, end]
        scores += bias[:, None]
        attended = softmax32(scores) @ values  # [b, H, n, d_head]
        attended = attended.transpose(0, 2, 1, 3).reshape(b * n, c.d_model)  # [b n, d]
        x = x + linear(attended, w.attn_c_proj_w, w.attn_c_proj_b)
        hidden = gelu(linear(normalize(x), w.c_fc_w, w.c_fc_b))  # [b n, 4d]
        x = x + linear(hidden, w.mlp_c_proj_w, w.mlp_c_proj_b)
    hidden = normalize(x) * model.ln_f[0] + model.ln_f[1]  # [b n, d]
    logits = (hidden @ model.unembed).reshape(b, n, c.vocab_size)  # [b, n, V]
    cache.tokens[rows, where] = tokens
    cache.logits[rows, where] = logits
    cache.length[slots] = start + real
    return b * n


def _forward_flat(model: TransformerModel, cache: BatchKVCache, first: int,
                  blocks: list[np.ndarray]) -> int:
    """The compiled forward of a batch (:meth:`specdec_lite.fast.CompiledForward.batch`):
    the blocks flattened into R rows with an offset table, no padding; each row's bias
    covers its own block (causal). Returns the rows computed, R."""
    c = model.config
    real = np.array([len(block) for block in blocks], np.int64)  # [b]
    slots = np.arange(first, first + len(blocks))  # [b]
    start = cache.length[slots].copy()  # [b]
    if (start + real).max() > c.max_len:
        raise ValueError(f"blocks: a sequence would pass the model's max_len {c.max_len}")
    offsets = np.concatenate([[0], np.cumsum(real)])  # [b + 1]
    tokens = np.concatenate(blocks).astype(np.int64)  # [R]
    positions = np.concatenate([s + np.arange(n) for s, n in zip(start, real, strict=True)])
    bias = np.zeros((len(tokens), max(int(real.max()), 1)), np.float32)  # [R, max n_b]
    for i, n in enumerate(real):
        if n > 1:
            bias[offsets[i] : offsets[i + 1], :n] = causal_bias(int(n))
    x = model.wte[tokens] + model.wpe[positions]  # [R, d]
    logits, _ = model.compiled.batch(x, cache.kv, slots, start, offsets, bias)  # [R, V]
    for i, (slot, s, n) in enumerate(zip(slots, start, real, strict=True)):
        cache.tokens[slot, s : s + n] = blocks[i]
        cache.logits[slot, s : s + n] = logits[offsets[i] : offsets[i + 1]]
    cache.length[slots] = start + real
    return len(tokens)


class GPTRows:
    """Rows of a :class:`~specdec_lite.transformer.TransformerModel` for a batch of
    sequences, from a :class:`BatchKVCache` and one batched forward per call."""

    def __init__(self, model: TransformerModel, slots: int) -> None:
        self.model = model
        self.cache = BatchKVCache(model, slots)

    def add(self, contexts: list[np.ndarray]) -> None:
        """Take a slot for each new sequence and prefill it with its context."""
        if not contexts:
            return
        first = self.cache.n_active
        for _ in contexts:
            self.cache.add()
        forward_batch(self.model, self.cache, first, contexts)

    def remove(self, slot: int) -> None:
        self.cache.remove(slot)

    def rows(self, contexts: list[np.ndarray | None], n_rows: list[int],
             temperatures: float | list[float]) -> list[np.ndarray | None]:
        """For each active slot b, the last ``n_rows[b]`` rows [n_rows[b], V] after
        ``contexts[b]`` at ``temperatures[b]`` (one number: the same for all); None for a
        slot whose context is None.

        Each slot keeps the prefix it shares with its context and forwards the rest, as
        ``TransformerModel.last_probs`` does for one sequence.
        """
        cache = self.cache
        blocks = []
        for slot, ctx in enumerate(contexts):
            if ctx is None:
                blocks.append(np.zeros(0, np.int64))
                continue
            cached = cache.tokens[slot, : cache.length[slot]]
            m = min(len(ctx), len(cached))
            if ctx[:m].tobytes() == cached[:m].tobytes():
                common = m
            else:
                common = int((ctx[:m] == cached[:m]).argmin())  # first difference
            cache.length[slot] = common
            blocks.append(ctx[common:])
        if max(len(block) for block in blocks) > 0:
            forward_batch(self.model, cache, 0, blocks)
        out = []
        temperatures = per_slot(temperatures, len(contexts))
        for slot, (ctx, n, t) in enumerate(zip(contexts, n_rows, temperatures, strict=True)):
            if ctx is None:
                out.append(None)
                continue
            end = len(ctx)
            out.append(self.model.rows_from_logits(cache.logits[slot, end - n : end], t))
        return out


class ModelRows:
    """Rows of any model for a batch of sequences: one ``model_rows`` call each."""

    def __init__(self, model: object, name: str) -> None:
        self.model, self.name = model, name

    def add(self, contexts: list[np.ndarray]) -> None:
        pass  # no state per sequence

    def remove(self, slot: int) -> None:
        pass

    def rows(self, contexts: list[np.ndarray | None], n_rows: list[int],
             temperatures: float | list[float]) -> list[np.ndarray | None]:
        temperatures = per_slot(temperatures, len(contexts))
        return [None if ctx is None else model_rows(self.model, ctx, n, self.name, t)
                for ctx, n, t in zip(contexts, n_rows, temperatures, strict=True)]


def per_slot(temperatures: float | list[float], n: int) -> list[float]:
    """One temperature per slot: a list as it is, one number repeated ``n`` times."""
    if isinstance(temperatures, list | tuple):
        return list(temperatures)
    return [temperatures] * n


def batch_rows(model: object, name: str, slots: int) -> GPTRows | ModelRows:
    """The batched row source for ``model``: :class:`GPTRows` for a numpy GPT, else
    :class:`ModelRows`."""
    if isinstance(model, TransformerModel):
        return GPTRows(model, slots)
    return ModelRows(model, name)
