"""Run kernels: the steps of a whole run at a fixed k in one compiled call.

:mod:`specdec_lite.engine.step_kernels` takes one decoding step per call; between two
calls the loop of :func:`specdec_lite.engine.decode.decode_loop` records the step, asks
the policy for the next k and calls again, a few tens of microseconds of Python, a tenth
of a compiled step of the shipped target. Where the k of the coming steps is already
decided (a fixed k; a stretch of plain steps of the automatic policy) the kernels here
take those steps one after another without returning: each step is a one-step kernel's
work (its ``*_body``), with the same draws in the same order, and the run stops as the
loop does, after ``max_new`` tokens or the token ``eos`` (-1: none), its step cut after
it. The loop's k for a step is ``min(k, tokens left - 1)``, a plain step when no draft
fits, as here.

Each step's (drafted, accepted, emitted, extra code: 0 bonus, 1 correction, 2 plain)
goes into ``record`` [steps, 4] and its drafts into ``drafted_rows`` [steps, k]; the
tokens after the sequence into ``buf`` [n0 + max_new], whose first n0 are the sequence.

numba compiles these in :func:`specdec_lite.engine.step_kernels.compiled_kernels` and
caches them keyed by this file; they call that module's bodies, so whoever changes those
must touch this file too.
"""

from __future__ import annotations

import numpy as np

from . import step_kernels as steps


def plain_run_kernel(target, t_cache, t_state, buf, n0, max_new, temperature, rule, draw,
                     state, eos, times, clock):
    """The steps of :func:`~specdec_lite.engine.step_kernels.plain_kernel`. Returns
    (tokens, timings)."""
    n_times = np.int64(0)
    for i in range(max_new):
        token, n_times = steps.plain_body(target, t_cache, t_state, buf[: n0 + i],
                                          temperature, rule, draw, state, times, n_times,
                                          clock)
        buf[n0 + i] = token
        if token == eos:
            return i + 1, n_times
    return max_new, n_times


def speculative_run_kernel(target, t_cache, t_state, draft, d_cache, d_state, shared, buf,
                           n0, max_new, k, temperature, rule, draw, state, stop, eos, record,
                           drafted_rows, times, clock):
    """The steps of :func:`~specdec_lite.engine.step_kernels.speculative_kernel` (a GPT
    draft). Returns (steps, tokens, timings)."""
    emitted = np.empty(k + 1, dtype=np.int64)  # [k + 1] one step's tokens
    drafted = np.empty(k, dtype=np.int64)  # [k] one step's drafts
    produced, n_steps, n_times = 0, 0, np.int64(0)
    while produced < max_new:
        n = n0 + produced
        k_step = min(k, max_new - produced - 1)
        if k_step == 0:
            token, n_times = steps.plain_body(target, t_cache, t_state, buf[:n], temperature,
                                              rule, draw, state, times, n_times, clock)
            emitted[0] = token
            accepted, n_out, extra, m = 0, 1, 2, 0
        else:
            accepted, n_out, extra, n_times, m = steps.speculative_body(
                target, t_cache, t_state, draft, d_cache, d_state, shared, buf[:n], k_step,
                temperature, rule, draw, state, stop, drafted, emitted, times, n_times, clock)
        n_steps, produced, hit = _record(buf, n, emitted, n_out, eos, record, drafted_rows,
                                         n_steps, produced, m, accepted, extra, drafted)
        if hit:
            break
    return n_steps, produced, n_times


def eagle_run_kernel(target, t_cache, t_state, eagle, e_kv, e_tokens, e_state, buf, n0,
                     max_new, k, temperature, rule, draw, state, eos, record, drafted_rows,
                     times, clock):
    """The steps of :func:`~specdec_lite.engine.step_kernels.eagle_kernel` (the EAGLE
    drafter). Returns (steps, tokens, timings)."""
    emitted = np.empty(k + 1, dtype=np.int64)  # [k + 1] one step's tokens
    drafted = np.empty(k, dtype=np.int64)  # [k] one step's drafts
    produced, n_steps, n_times = 0, 0, np.int64(0)
    while produced < max_new:
        n = n0 + produced
        k_step = min(k, max_new - produced - 1)
        if k_step == 0:
            token, n_times = steps.plain_body(target, t_cache, t_state, buf[:n], temperature,
                                              rule, draw, state, times, n_times, clock)
            emitted[0] = token
            accepted, n_out, extra, m = 0, 1, 2, 0
        else:
            accepted, n_out, extra, n_times, m = steps.eagle_body(
                target, t_cache, t_state, eagle, e_kv, e_tokens, e_state, buf[:n], k_step,
                temperature, rule, draw, state, drafted, emitted, times, n_times, clock)
        n_steps, produced, hit = _record(buf, n, emitted, n_out, eos, record, drafted_rows,
                                         n_steps, produced, m, accepted, extra, drafted)
        if hit:
            break
    return n_steps, produced, n_times


def _record(buf, n, emitted, n_out, eos, record, drafted_rows, n_steps, produced, m,
            accepted, extra, drafted):
    """After one step: its tokens, cut after ``eos``, into ``buf`` from position ``n``, the
    step into ``record`` and ``drafted_rows``. Returns (steps, tokens, whether eos came)."""
    hit = False
    for j in range(n_out):
        if emitted[j] == eos:
            n_out, hit = j + 1, True
            break
    buf[n : n + n_out] = emitted[:n_out]
    record[n_steps, 0], record[n_steps, 1] = m, accepted
    record[n_steps, 2], record[n_steps, 3] = n_out, extra
    drafted_rows[n_steps, :m] = drafted[:m]
    return n_steps + 1, produced + n_out, hit


__all__ = ["eagle_run_kernel", "plain_run_kernel", "speculative_run_kernel"]
