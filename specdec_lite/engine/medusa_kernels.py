"""A Medusa run in one compiled call: the exact rule on a chain, or greedy on a tree.

:func:`specdec_lite.engine.medusa_decode.medusa_step` takes one step in Python: the heads
read the target's hidden state, the chain's tokens are drawn from the heads' rows, the
target scores the root and the chain, the exact rule judges them, the cache keeps the
accepted path. With the compiled forward that Python is a quarter of the wall clock.
:func:`chain_run_kernel` takes every step of a run after the first token, each that
step's work operation for operation: the heads (:func:`heads_logits`, their float32
arithmetic), the rows as ``warp(softmax(...))`` makes them, the draws in the same order,
the target's forward over the root and the chain (a causal block: on a chain the tree's
mask is the causal one) and the rule of :func:`~specdec_lite.engine.step_kernels`
(``verify_checked``, draw for draw). Only summation orders differ, by an ulp or so.

:func:`tree_run_kernel` does the same for greedy verification of a tree (the greedy rule,
or typical acceptance at T = 0): the heads, their tokens ranked, then
:func:`~specdec_lite.engine.step_kernels.tree_kernel`'s forward, test and commit.

numba compiles these in :func:`specdec_lite.engine.step_kernels.compiled_kernels`.
"""

from __future__ import annotations

import numpy as np

from . import run_kernels as runs
from . import step_kernels as steps


def heads_logits(w1, b1, w2, h, depth, out):
    """``MedusaHeads.logits`` of one hidden state ``h`` [d] for the first ``depth`` heads,
    into ``out`` [depth, V] float32: (h + SiLU(h W1_i + b1_i)) W2_i."""
    d = h.shape[0]
    one = np.float32(1.0)
    for i in range(depth):
        z = np.zeros(d, dtype=np.float32)  # [d]
        for a in range(d):
            z += h[a] * w1[i, a]
        z += b1[i]
        u = h + z / (one + np.exp(-z))  # [d]
        out[i, :] = 0
        for a in range(d):
            out[i] += u[a] * w2[i, a]


def chain_run_kernel(target, t_cache, t_state, w1, b1, w2, buf, n0, produced, max_new,
                     depth, temperature, draw, state, eos, record, drafted_rows, times,
                     clock):
    """Medusa's steps with the exact rule on a chain of ``depth`` heads, after the
    ``produced`` tokens of ``buf`` from ``n0`` on (the last one, the root, not yet in the
    cache), until ``max_new`` tokens or ``eos`` (-1: none). Each step's (proposed,
    accepted, emitted, extra code: 0 bonus, 1 correction) goes into ``record`` and its
    chain into ``drafted_rows``; the cache keeps the root and the accepted tokens. Returns
    (steps, tokens emitted in all, timings)."""
    v = t_cache[2].shape[1]
    logits = np.empty((depth, v), dtype=np.float32)  # [depth, V] the heads' logits
    q = np.empty((depth, v))  # [depth, V] the rows the chain is drawn from
    chain = np.empty(depth, dtype=np.int64)  # [depth]
    emitted = np.empty(depth + 1, dtype=np.int64)  # [depth + 1]
    n_steps, n_times = 0, np.int64(0)
    while produced < max_new:
        n = n0 + produced  # the sequence, the root last
        t0 = steps.clock_start(clock)
        heads_logits(w1, b1, w2, t_cache[3][n - 2], depth, logits)
        n_times = steps.clock_note(times, n_times, steps.DRAFT, 1, t0, clock)
        steps.rows_of(logits, temperature, q)
        for i in range(depth):
            chain[i] = np.argmax(q[i]) if temperature == 0.0 else steps.sample_row(
                q[i], draw, state)
        ctx = np.empty(n + depth, dtype=np.int64)
        ctx[:n] = buf[:n]
        ctx[n:] = chain
        accepted, extra, n_times = steps.check_block(target, t_cache, t_state, ctx, n, q,
                                                     temperature, 0, draw, state, emitted,
                                                     times, n_times, clock)
        t_state[0] = t_state[1] = n + accepted  # the root and the accepted chain
        n_steps, produced, hit = runs.record_step(
            buf, n, emitted, min(accepted + 1, max_new - produced), eos, record, drafted_rows,
            n_steps, produced, min(accepted + 1, depth), accepted, extra, chain)
        if hit:
            break
    return n_steps, produced, n_times


def tree_run_kernel(target, t_cache, t_state, w1, b1, w2, buf, n0, produced, max_new, depth,
                    rank, parent, bias, ancestors, first_child, eos, record, drafted_rows,
                    times, clock):
    """Medusa's greedy steps on a tree (``depth``, ``rank``, ``parent`` [N+1] of its
    nodes, ``bias`` and ``ancestors`` [N+1, N+1] its mask, ``first_child`` [N+1] each
    node's best-ranked child or -1), after the ``produced`` tokens of ``buf`` from ``n0``
    on, until ``max_new`` tokens or ``eos``: each the heads' ranked tokens (a stable sort,
    as ``np.argsort(kind="stable")``), then
    :func:`~specdec_lite.engine.step_kernels.tree_kernel`'s verification and commit. Each
    step's (proposed, accepted, emitted, extra code) goes into ``record`` and its proposed
    tokens into ``drafted_rows``. Returns (steps, tokens emitted in all, timings)."""
    n1 = depth.shape[0]
    n_heads = np.max(depth)
    top = np.max(rank) + 1
    logits = np.empty((n_heads, t_cache[2].shape[1]), dtype=np.float32)  # [D, V]
    ranked = np.empty((n_heads, top), dtype=np.int64)  # [D, top] each head's best tokens
    tokens = np.empty(n1, dtype=np.int64)  # [N+1] the root, then the nodes
    path = np.empty(n1, dtype=np.int64)  # [N+1]
    emitted = np.empty(n1, dtype=np.int64)  # [N+1]
    proposed = np.empty(n1, dtype=np.int64)  # [N+1] the kept path, then the rejected child
    n_steps, n_times = 0, np.int64(0)
    while produced < max_new:
        n = n0 + produced  # the sequence, the root last
        t0 = steps.clock_start(clock)
        heads_logits(w1, b1, w2, t_cache[3][n - 2], n_heads, logits)
        n_times = steps.clock_note(times, n_times, steps.DRAFT, 1, t0, clock)
        for i in range(n_heads):
            ranked[i] = np.argsort(-logits[i], kind="mergesort")[:top]
        tokens[0] = buf[n - 1]
        for j in range(1, n1):
            tokens[j] = ranked[depth[j] - 1, rank[j]]
        m, extra_token, n_times = steps.tree_body(target, t_cache, t_state, tokens, depth,
                                                  bias, parent, ancestors, path, times,
                                                  n_times, clock)
        child = first_child[path[m - 1]]
        for i in range(1, m):  # the kept path, then the extra token or its rejected child
            emitted[i - 1] = proposed[i - 1] = tokens[path[i]]
        emitted[m - 1] = extra_token
        proposed[m - 1] = tokens[child] if child >= 0 else -1
        n_steps, produced, hit = runs.record_step(
            buf, n, emitted, min(m, max_new - produced), eos, record, drafted_rows, n_steps,
            produced, m if child >= 0 else m - 1, m - 1, 1 if child >= 0 else 0, proposed)
        if hit:
            break
    return n_steps, produced, n_times


__all__ = ["chain_run_kernel", "heads_logits", "tree_run_kernel"]
