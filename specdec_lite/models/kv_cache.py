"""One sequence's KV cache: keys, values, tokens, logits and hidden states of its entries,
with the rollback (``truncate``) and tree-path commit (``keep_path``) the speculative
decoders need. :class:`specdec_lite.models.transformer.TransformerModel` makes them
(``new_state``) and writes them; the batched engine keeps many in one array instead
(:class:`specdec_lite.models.batch_kv.BatchKVCache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .transformer import TransformerConfig


class KVCache:
    """One sequence's state: keys, values, tokens, logits and hidden states of its entries.

    ``kv[layer, 0 or 1, head, slot, :]`` holds the key or value of entry ``slot``; entries
    ``0 .. length-1`` are in use. The first ``n_causal`` entries are an ordinary causal
    sequence (``tokens[:n_causal]`` at positions 0, 1, ...); entries after them came from a
    masked block (a tree) and are only kept by ``keep_path`` or dropped by ``truncate``.
    """

    def __init__(self, config: TransformerConfig, capacity: int) -> None:
        shape = (config.n_layer, 2, config.n_head, capacity, config.d_head)
        self.kv = np.zeros(shape, dtype=np.float32)  # [L, 2, H, capacity, d_head]
        self.tokens = np.zeros(capacity, dtype=np.int64)  # [capacity]
        self.logits = np.zeros((capacity, config.vocab_size), dtype=np.float32)  # [capacity, V]
        self.hidden = np.zeros((capacity, config.d_model), dtype=np.float32)  # [capacity, d]
        self.length = 0
        self.n_causal = 0

    @classmethod
    def sharing(cls, cache: KVCache, n_layer: int, vocab_size: int, d_model: int) -> KVCache:
        """A cache whose keys and values are those of ``cache``'s first ``n_layer`` layers
        and whose tokens are ``cache``'s, the same arrays (an early-exit draft beside its
        target: :mod:`specdec_lite.drafting.early_exit`), with logits and hidden states
        [capacity, vocab_size] and [capacity, d_model] of its own, and no entries yet."""
        shared = cls.__new__(cls)
        shared.kv = cache.kv[:n_layer]  # [n_layer, 2, H, capacity, d_head], a view
        shared.tokens = cache.tokens  # [capacity], the same array
        shared.logits = np.zeros((cache.capacity, vocab_size), dtype=np.float32)
        shared.hidden = np.zeros((cache.capacity, d_model), dtype=np.float32)
        shared.length = shared.n_causal = 0
        return shared

    @property
    def capacity(self) -> int:
        return self.tokens.shape[0]

    def truncate(self, length: int) -> None:
        """Drop every entry from ``length`` on."""
        if not 0 <= length <= self.length:
            raise ValueError(f"length must be in [0, {self.length}], got {length}")
        self.length = length
        self.n_causal = min(self.n_causal, length)

    def keep_path(self, rows: Sequence[int]) -> None:
        """Keep the tree entries ``rows`` as the continuation of the causal prefix.

        ``rows`` are slot indices (ascending, all >= ``n_causal``) of one root-to-node path of
        a block that was run with ``positions = n_causal + depth`` and a mask letting each
        node see only its ancestors; their entries are then exactly those of a causal forward
        of the path's tokens. They move to slots ``n_causal, n_causal + 1, ...``; every other
        entry after the prefix is dropped.
        """
        rows = np.asarray(rows, dtype=np.intp)  # [m]
        if rows.ndim != 1 or (rows.size and (rows[0] < self.n_causal or rows[-1] >= self.length
                                             or (rows[1:] <= rows[:-1]).any())):
            raise ValueError(f"rows must be ascending slots in [{self.n_causal}, {self.length}), "
                             f"got {rows.tolist()}")
        end = self.n_causal + rows.size
        for array, axis in ((self.kv, 3), (self.tokens, 0), (self.logits, 0), (self.hidden, 0)):
            moved = np.take(array, rows, axis=axis)  # a copy, so overlapping moves are safe
            index = (slice(None),) * axis + (slice(self.n_causal, end),)
            array[index] = moved
        self.length = self.n_causal = end
