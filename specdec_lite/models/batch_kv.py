"""Many sequences in one forward pass: a slotted KV cache and a ragged batched forward.

:class:`BatchKVCache` keeps the caches of B sequences of one
:class:`~specdec_lite.models.transformer.TransformerModel` in one array, sequence b in slot b,
each with its own length (its next position). The active sequences always fill slots
0 .. B-1 (:meth:`BatchKVCache.remove` moves the last one into a freed slot), so the keys
every forward attends over are one strided view, with no copy.

:func:`forward_batch` runs a block of new tokens for each sequence of a range of slots
in one pass of the model's own forward,
:meth:`~specdec_lite.models.transformer.TransformerModel.forward_rows`: the one forward a single
sequence uses too, batch-first. The blocks are flattened into R rows with an offset
table, vLLM-style, so every matrix product over the weights sees all R rows at once,
which is what batching buys, and no pad row is computed there. Attention reads each
sequence's own slot: on the numpy backend in one batched product over the blocks padded
to the longest (a bias of −inf hides from each query the positions past its own, the
causal mask and the ragged lengths at once; pad rows are dropped), on the compiled
backend (``"numba"``, the ``fast`` extra) one sequence at a time inside the kernel.

:class:`GPTRows` and :class:`ModelRows` answer the one question a decoder asks, "the
last n rows of the model after this context", for every sequence of a batch:
``GPTRows`` with one batched forward over the new tokens of all of them, ``ModelRows``
for any other model (an n-gram, a table) with one :func:`~specdec_lite.models.ngram.model_rows`
call per sequence. Rows come out as the single-sequence path computes them
(``TransformerModel.rows_from_logits``), from logits that differ from a lone forward's
only by float32 rounding in the batched products.
"""

from __future__ import annotations

import time

import numpy as np

from .ngram import model_rows
from .transformer import TransformerModel


class BatchKVCache:
    """The KV caches of up to ``slots`` sequences of ``model``, sequence b in slot b.

    ``kv[layer, 0 or 1, slot, head, position, :]`` holds keys or values, ``tokens[slot]``
    the token ids, ``logits[slot]`` the output logits and ``hidden[slot]`` the final
    hidden states (the features an EAGLE drafter reads) of each cached position, and
    ``length[slot]`` how many positions are in use.
    """

    def __init__(self, model: TransformerModel, slots: int) -> None:
        c = model.config
        capacity = c.max_len  # positions 0 .. max_len-1
        self.kv = np.zeros((c.n_layer, 2, slots, c.n_head, capacity, c.d_head), np.float32)
        self.tokens = np.zeros((slots, capacity), np.int64)  # [S, capacity]
        self.logits = np.zeros((slots, capacity, c.vocab_size), np.float32)  # [S, cap, V]
        self.hidden = np.zeros((slots, capacity, c.d_model), np.float32)  # [S, cap, d]
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
            self.hidden[slot, :n] = self.hidden[last, :n]
            self.length[slot] = n
        self.n_active = last


def forward_batch(model: TransformerModel, cache: BatchKVCache, first: int,
                  blocks: list[np.ndarray]) -> None:
    """Append ``blocks[i]`` (int64 token ids [n_i], n_i >= 0) to the cache of slot
    ``first + i``, all in one forward pass; their logits land in ``cache.logits``.

    Token j of block i sits at position ``length + j`` and attends to every cached
    position of its slot and to tokens 0..j of its block. The blocks are flattened into
    rows with an offset table and run by the model's own batch-first forward
    (:meth:`~specdec_lite.models.transformer.TransformerModel.forward_rows`, the one a single
    sequence's forward calls), on its backend. A sequence must stay within
    ``config.max_len`` positions.
    """
    start_s = time.perf_counter()
    c = model.config
    real = np.array([len(block) for block in blocks], np.intp)  # [b] (intp: np.repeat counts)
    slots = np.arange(first, first + len(blocks))  # [b]
    start = cache.length[slots].copy()  # [b]
    if (start + real).max() > c.max_len:
        raise ValueError(f"blocks: a sequence would pass the model's max_len {c.max_len}")
    offsets = np.concatenate([[0], np.cumsum(real)])  # [b + 1]
    tokens = np.concatenate(blocks).astype(np.int64)  # [R]
    within = np.arange(len(tokens)) - np.repeat(offsets[:-1], real)  # [R] index in block
    positions = np.repeat(start, real) + within  # [R]
    # row r may see tokens 0 .. within[r] of its own block: a causal bias [R, max n_b]
    columns = np.arange(max(int(real.max()), 1))
    bias = np.where(columns > within[:, None], np.float32(-np.inf), np.float32(0))
    x = model.wte[tokens] + model.wpe[positions]  # [R, d]
    logits, hidden = model.forward_rows(x, cache.kv, slots, start, offsets, bias)  # [R, V]
    for i, (slot, s, n) in enumerate(zip(slots, start, real, strict=True)):
        cache.tokens[slot, s : s + n] = blocks[i]
        cache.logits[slot, s : s + n] = logits[offsets[i] : offsets[i + 1]]
        cache.hidden[slot, s : s + n] = hidden[offsets[i] : offsets[i + 1]]
    cache.length[slots] = start + real
    if model.observer is not None:
        model.observer(len(tokens), time.perf_counter() - start_s)


class GPTRows:
    """Rows of a :class:`~specdec_lite.models.transformer.TransformerModel` for a batch of
    sequences, from a :class:`BatchKVCache` and one batched forward per call."""

    def __init__(self, model: TransformerModel, slots: int) -> None:
        self.model = model
        self.cache = BatchKVCache(model, slots)

    def add(self, contexts: list[np.ndarray], prefill: bool = True) -> None:
        """Take a slot for each new sequence and prefill it with its context (with
        ``prefill=False`` the slot starts empty: the first :meth:`rows` reads it all)."""
        if not contexts:
            return
        first = self.cache.n_active
        for _ in contexts:
            self.cache.add()
        if prefill:
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
        blocks = [np.zeros(0, np.int64) if ctx is None else self._keep_common(slot, ctx)
                  for slot, ctx in enumerate(contexts)]
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


    def features(self, slot: int, tokens: np.ndarray, start: int) -> np.ndarray:
        """The final hidden states [n - start, d] of ``tokens[start:]`` in ``slot``, after
        ``tokens`` [n]: read from the cache where it holds them (a sequence's verified
        prefix does), else forwarded for this slot alone first."""
        block = self._keep_common(slot, tokens)
        if len(block):
            forward_batch(self.model, self.cache, slot, [block])
        return self.cache.hidden[slot, start : len(tokens)].copy()

    def _keep_common(self, slot: int, ctx: np.ndarray) -> np.ndarray:
        """Cut ``slot``'s cache back to the prefix it shares with ``ctx`` and return the
        tokens of ``ctx`` after it, the ones a forward must still read."""
        cache = self.cache
        cached = cache.tokens[slot, : cache.length[slot]]
        m = min(len(ctx), len(cached))
        if ctx[:m].tobytes() == cached[:m].tobytes():
            common = m
        else:
            common = int((ctx[:m] == cached[:m]).argmin())  # first difference
        cache.length[slot] = common
        return ctx[common:]


class ModelRows:
    """Rows of any model for a batch of sequences: one ``model_rows`` call each."""

    def __init__(self, model: object, name: str) -> None:
        self.model, self.name = model, name

    def add(self, contexts: list[np.ndarray], prefill: bool = True) -> None:
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
