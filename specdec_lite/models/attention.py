"""Attention over per-sequence KV caches, for one sequence or a batch of them.

The numpy forward of :class:`specdec_lite.models.transformer.TransformerModel` takes the new
tokens of B sequences flattened into R rows, sequence b in rows ``offsets[b] ..
offsets[b+1]-1``, each sequence with its cache in a slot of ``kv`` [2, S, H, capacity,
d_head] (one layer) and its block starting at cache position ``starts[b]``.
:func:`attend_one` serves one sequence (the single-sequence forward); for several,
:func:`batch_layout` works out once per forward where every row sits and
:func:`attend_many` runs each layer's attention as one batched product over the blocks
padded to the longest. Queries arrive already scaled by 1/sqrt(d_head).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..functional import softmax32


def attend_one(qkv: np.ndarray, kv: np.ndarray, start: int,
               bias: np.ndarray) -> np.ndarray:
    """Attention of one sequence's n new tokens: ``qkv`` [3, H, n, d_head] (queries
    already scaled), its cache ``kv`` [2, H, capacity, d_head] (the new keys and values are
    written at ``start`` first), ``bias`` [n, >= n] over the new tokens. Returns [n, d]."""
    _, heads, n, d_head = qkv.shape
    end = start + n
    kv[:, :, start:end] = qkv[1:]  # keys and values of the new tokens
    keys, values = kv[0, :, :end], kv[1, :, :end]  # [H, end, d_head] each
    scores = qkv[0] @ keys.transpose(0, 2, 1)  # [H, n, end]
    if n > 1 or bias[0, 0] != 0:  # one causal token may attend everything
        scores[:, :, start:] += bias[:, :n]
    attention = softmax32(scores)  # [H, n, end]
    return (attention @ values).transpose(1, 0, 2).reshape(n, heads * d_head)  # [n, d]


def batch_bias(starts: np.ndarray, lengths: np.ndarray, real: np.ndarray, rows: np.ndarray,
               bias: np.ndarray) -> np.ndarray:
    """The attention bias [B, n, end] of B blocks of ``lengths`` padded to n = max n_b rows
    (``real`` [B, n] marks real rows, ``rows`` [B, n] maps them to flattened rows), over
    cache positions 0 .. end-1 (end = max(starts + n_b)): 0 on a sequence's cached
    entries, its own ``bias`` rows ([R, >= n_b], over its block) on its new ones, -inf
    past them. A pad row sees position 0 only, so its softmax stays finite (its output is
    dropped)."""
    n, end = real.shape[1], int((starts + lengths).max())
    own = np.arange(end) - starts[:, None, None]  # [B, 1, end]: index in the block
    in_block = (own >= 0) & (own < lengths[:, None, None])  # [B, 1, end]
    picked = np.take_along_axis(bias[rows], np.clip(own, 0, bias.shape[1] - 1)
                                .repeat(n, axis=1), axis=2)  # [B, n, end]
    out = np.where(in_block, picked, np.where(own < 0, np.float32(0), np.float32(-np.inf)))
    out = np.where(real[:, :, None], out, np.float32(-np.inf)).astype(np.float32)
    out[:, :, 0] = np.where(real, out[:, :, 0], 0)  # a pad row sees position 0 only
    return out


class BatchLayout(NamedTuple):
    """Where B flattened blocks sit, worked out once per forward for every layer."""

    slots: slice | np.ndarray  # the caches' slots (a slice where they are consecutive)
    row_slot: np.ndarray  # [R] each row's slot
    row_position: np.ndarray  # [R] each row's cache position
    rows: np.ndarray | None  # [B, n] padded block -> row (pads read row 0); None: no pads
    real: np.ndarray | None  # [B, n] True for real rows; None: no pads
    bias: np.ndarray  # [B, n, end] from batch_bias


def batch_layout(slots: np.ndarray, starts: np.ndarray, offsets: np.ndarray,
                 bias: np.ndarray) -> BatchLayout:
    """The :class:`BatchLayout` of B blocks (``bias`` [R, >= max n_b] as in
    ``TransformerModel.forward_rows``)."""
    lengths = np.diff(offsets).astype(np.intp)  # [B]; np.repeat takes intp counts
    n, r = int(lengths.max()), int(offsets[-1])
    row_slot = np.repeat(slots, lengths)  # [R]
    row_position = np.repeat(starts, lengths) + np.arange(r) - np.repeat(offsets[:-1], lengths)
    real = np.arange(n) < lengths[:, None]  # [B, n]
    rows = np.where(real, offsets[:-1, None] + np.arange(n), 0)  # [B, n], pads read row 0
    bias = batch_bias(starts, lengths, real, rows, bias)  # [B, n, end]
    if real.all():  # every block n long: attention reshapes, it gathers nothing
        rows = real = None
    if (np.diff(slots) == 1).all():  # consecutive slots, as the batch cache keeps them
        slots = slice(int(slots[0]), int(slots[-1]) + 1)  # a view of the caches, not a copy
    return BatchLayout(slots, row_slot, row_position, rows, real, bias)


def attend_many(qkv: np.ndarray, kv: np.ndarray, layout: BatchLayout) -> np.ndarray:
    """Attention of B sequences' blocks in one batched product: ``qkv`` [3, H, R, d_head]
    (rows flattened), ``kv`` [2, S, H, capacity, d_head] (the new keys and values are
    written at each row's slot and position first), ``layout`` from :func:`batch_layout`.
    Blocks of unequal length are padded to n rows for the products; pad rows are
    dropped. Returns [R, d]."""
    _, heads, r, d_head = qkv.shape
    b, n, end = layout.bias.shape
    kv[:, layout.row_slot, :, layout.row_position] = qkv[1:].transpose(2, 0, 1, 3)
    if layout.rows is None:  # every block n long: a reshape, no gather
        queries = qkv[0].reshape(heads, b, n, d_head).transpose(1, 0, 2, 3)  # [B, H, n, dh]
    else:
        queries = qkv[0][:, layout.rows].transpose(1, 0, 2, 3)  # [B, H, n, d_head]
    keys = kv[0, layout.slots, :, :end]  # [B, H, end, d_head]
    values = kv[1, layout.slots, :, :end]
    scores = queries @ keys.transpose(0, 1, 3, 2)  # [B, H, n, end]
    scores += layout.bias[:, None]
    attended = (softmax32(scores) @ values).transpose(0, 2, 1, 3)  # [B, n, H, d_head]
    if layout.real is not None:
        attended = attended[layout.real]  # [R, H, d_head]
    return attended.reshape(r, heads * d_head)  # [R, d]
