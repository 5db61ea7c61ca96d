"""Drafting without a network, as the run kernels of :mod:`specdec_lite.engine.run_kernels`
draft: prompt lookup's copy from the sequence and an n-gram model's rows.

Each is the Python drafter's work, operation for operation, on arrays numba can read:

- :func:`lookup_draft` is :func:`specdec_lite.drafting.proposers.lookup`;
- :func:`ngram_row` is :meth:`specdec_lite.models.ngram.NGramModel.last_probs` for one
  row, reading the model's :meth:`~specdec_lite.models.ngram.NGramModel.flat_tables`, and
  :func:`ngram_draft` drafts k tokens with it as
  :func:`specdec_lite.drafting.proposers.draft_block` does, the same draws in the same
  order.

numba compiles these in :func:`specdec_lite.engine.step_kernels.compiled_kernels`; the
run kernels call them as this module's attributes.
"""

from __future__ import annotations

import numpy as np

from . import step_kernels as steps


def lookup_draft(buf, n, k, max_ngram, min_ngram, out):
    """:func:`specdec_lite.drafting.proposers.lookup` of ``buf[:n]``: up to ``k`` tokens
    into ``out`` from after the latest earlier occurrence of the last g tokens (g =
    ``max_ngram`` down to ``min_ngram``), the occurrence ending before the last token.
    Returns how many (0: no match)."""
    for g in range(min(max_ngram, n - 1), min_ngram - 1, -1):
        for s in range(n - 1 - g, -1, -1):  # the latest occurrence first
            j = 0
            while j < g and buf[s + j] == buf[n - g + j]:
                j += 1
            if j == g:
                m = min(k, n - s - g)
                out[:m] = buf[s + g : s + g + m]
                return m
    return 0


def ngram_row(ctx_keys, ctx_totals, ctx_types, ctx_first, pair_counts, pair_next, ctx_at,
              add_k, buf, n, out):
    """The n-gram model's distribution after ``buf[:n]`` into ``out`` [V]: Witten–Bell
    (``add_k`` 0) or add-k, as ``NGramModel._row`` sums it, term for term."""
    v = out.shape[0]
    order = ctx_at.shape[0] - 1
    longest = min(order - 1, n)  # the longest usable context
    seen = np.empty(order, dtype=np.int64)  # where each seen context is in ctx_keys
    n_seen, key, scale = 0, np.int64(0), np.int64(1)  # scale: V ** (m - 1)
    for m in range(longest + 1):
        if m > 0:
            key += buf[n - m] * scale
            scale *= v
        if add_k > 0 and m < longest:
            continue  # add-k reads only the longest context
        lo, hi = ctx_at[m], ctx_at[m + 1]
        j = lo + np.searchsorted(ctx_keys[lo:hi], key)
        if j == hi or ctx_keys[j] != key:
            break  # unseen, and so is every longer context
        seen[n_seen] = j
        n_seen += 1
    if add_k > 0:  # (c(h, x) + k) / (c(h) + k V); an unseen h gives 1 / V
        out[:] = add_k
        total = 0.0
        for i in range(n_seen):
            j = seen[i]
            first = ctx_first[j]
            for t in range(first, first + np.int64(ctx_types[j])):
                out[pair_next[t]] += pair_counts[t]
            total = ctx_totals[j]
        out /= total + add_k * v
        return
    out[:] = 0.0
    carry = 1.0  # the product of (1 - λ) over the longer contexts already summed
    for i in range(n_seen - 1, -1, -1):
        j = seen[i]
        total, types = ctx_totals[j], ctx_types[j]
        first = ctx_first[j]
        share = carry / (total + types)
        for t in range(first, first + np.int64(types)):
            out[pair_next[t]] += pair_counts[t] * share
        carry *= types / (total + types)
    out += carry / v


def tempered(p, temperature, out):
    """``apply_temperature`` of the row ``p`` [V] into ``out``: the one-hot argmax at
    T = 0, a copy at T = 1, else p ** (1 / T) as a softmax of log p / T."""
    if temperature == 0.0:
        out[:] = 0.0
        out[np.argmax(p)] = 1.0
    elif temperature == 1.0:
        out[:] = p
    else:
        z = np.log(p)
        z = (z - z.max()) / temperature
        z -= z.max()
        z = np.exp(z)
        out[:] = z / z.sum()


def ngram_draft(tables, buf, n, k, temperature, draw, state, drafted, q, row, times,
                n_times, clock):
    """Draft ``k`` tokens after ``buf[:n]`` with the n-gram model whose flat tables are
    ``tables``: each from its row at ``temperature`` (into ``q`` [k, V]), the argmax at
    T = 0, else one draw; each written to ``drafted`` and after the sequence in ``buf``,
    where the next row reads it. Each row's seconds go into ``times`` as a draft forward
    of one row. Returns the timings."""
    ctx_keys, ctx_totals, ctx_types, ctx_first, pair_counts, pair_next, ctx_at, add_k = tables
    for i in range(k):
        t0 = steps.clock_start(clock)
        ngram_row(ctx_keys, ctx_totals, ctx_types, ctx_first, pair_counts, pair_next, ctx_at,
                  add_k, buf, n + i, row)
        tempered(row, temperature, q[i])
        n_times = steps.clock_note(times, n_times, steps.DRAFT, 1, t0, clock)
        token = np.argmax(q[i]) if temperature == 0.0 else steps.sample_row(q[i], draw, state)
        drafted[i] = token
        buf[n + i] = token
    return n_times


__all__ = ["lookup_draft", "ngram_draft", "ngram_row", "tempered"]
