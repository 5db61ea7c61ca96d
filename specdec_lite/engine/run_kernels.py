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
fits, as here. The drafters here: a GPT draft (the early-exit draft among them), the EAGLE
drafter, prompt lookup and an n-gram draft, the last two drafting as
:mod:`specdec_lite.engine.draft_kernels` does.

Each step's (drafted, accepted, emitted, extra code: 0 bonus, 1 correction, 2 plain)
goes into ``record`` [steps, 4] and its drafts into ``drafted_rows`` [steps, k]; the
tokens after the sequence into ``buf`` [n0 + max_new], whose first n0 are the sequence.
The drafting kernels also follow a draft-length policy inside the call (:func:`next_k`:
the automatic one, Hugging Face's heuristic, or Theorem 3.8's), where the decoder asks
for it: each step's k then comes from the steps before it, as the policy's ``after``
chooses it in Python.

numba compiles these in :func:`specdec_lite.engine.step_kernels.compiled_kernels` and
caches them keyed by this file; they call that module's bodies, so whoever changes those
must touch this file too.
"""

from __future__ import annotations

import numpy as np

from . import draft_kernels as drafts
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
                           n0, max_new, k, policy, n_prev, temperature, rule, draw, state,
                           stop, eos, record, drafted_rows, times, clock):
    """The steps of :func:`~specdec_lite.engine.step_kernels.speculative_kernel` (a GPT
    draft), each with the k ``policy`` chooses (:func:`next_k`), the first with ``k``.
    ``record`` holds the run's ``n_prev`` steps before these; the new ones follow them.
    Returns (steps in ``record``, the earlier ones included; tokens; timings)."""
    k_max = max(k, policy_k_max(policy))
    emitted = np.empty(k_max + 1, dtype=np.int64)  # [k_max + 1] one step's tokens
    drafted = np.empty(k_max, dtype=np.int64)  # [k_max] one step's drafts
    produced, n_steps, n_times = 0, n_prev, np.int64(0)
    while produced < max_new:
        if n_steps > n_prev:
            k = next_k(policy, k, record, n_steps)
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
        n_steps, produced, hit = record_step(buf, n, emitted, n_out, eos, record,
                                             drafted_rows, n_steps, produced, m, accepted,
                                             extra, drafted)
        if hit:
            break
    return n_steps, produced, n_times


def eagle_run_kernel(target, t_cache, t_state, eagle, e_kv, e_tokens, e_state, buf, n0,
                     max_new, k, policy, n_prev, temperature, rule, draw, state, eos,
                     record, drafted_rows, times, clock):
    """The steps of :func:`~specdec_lite.engine.step_kernels.eagle_kernel` (the EAGLE
    drafter), as :func:`speculative_run_kernel` takes them, with the same answer."""
    k_max = max(k, policy_k_max(policy))
    emitted = np.empty(k_max + 1, dtype=np.int64)  # [k_max + 1] one step's tokens
    drafted = np.empty(k_max, dtype=np.int64)  # [k_max] one step's drafts
    produced, n_steps, n_times = 0, n_prev, np.int64(0)
    while produced < max_new:
        if n_steps > n_prev:
            k = next_k(policy, k, record, n_steps)
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
        n_steps, produced, hit = record_step(buf, n, emitted, n_out, eos, record,
                                             drafted_rows, n_steps, produced, m, accepted,
                                             extra, drafted)
        if hit:
            break
    return n_steps, produced, n_times


def lookup_run_kernel(target, t_cache, t_state, buf, n0, max_new, k, policy, n_prev,
                      max_ngram, min_ngram, temperature, rule, draw, state, eos, record,
                      drafted_rows, times, clock):
    """The steps of prompt lookup (:class:`~specdec_lite.drafting.proposers.PromptLookup`
    with ``max_ngram`` and ``min_ngram``): each step's drafts copied from the sequence
    (:func:`~specdec_lite.engine.draft_kernels.lookup_draft`), then verified as
    :func:`~specdec_lite.engine.step_kernels.verify_kernel` verifies them, against one-hot
    rows q; a step with no match verifies no draft and draws its token from the target's
    row. Otherwise as :func:`speculative_run_kernel`, with the same answer."""
    k_max = max(k, policy_k_max(policy))
    emitted = np.empty(k_max + 1, dtype=np.int64)  # [k_max + 1] one step's tokens
    drafted = np.empty(k_max, dtype=np.int64)  # [k_max] one step's drafts
    q = np.zeros((k_max, t_cache[2].shape[1]))  # [k_max, V] their one-hot rows
    produced, n_steps, n_times = 0, n_prev, np.int64(0)
    while produced < max_new:
        if n_steps > n_prev:
            k = next_k(policy, k, record, n_steps)
        n = n0 + produced
        k_step = min(k, max_new - produced - 1)
        if k_step == 0:
            token, n_times = steps.plain_body(target, t_cache, t_state, buf[:n], temperature,
                                              rule, draw, state, times, n_times, clock)
            emitted[0] = token
            accepted, n_out, extra, m = 0, 1, 2, 0
        else:
            m = drafts.lookup_draft(buf, n, k_step, max_ngram, min_ngram, drafted)
            for i in range(m):
                q[i, :] = 0.0
                q[i, drafted[i]] = 1.0
            accepted, n_out, extra, n_times, m = steps.verify_body(
                target, t_cache, t_state, buf[:n], drafted[:m], q[:m], temperature, rule,
                draw, state, emitted, times, n_times, clock)
        n_steps, produced, hit = record_step(buf, n, emitted, n_out, eos, record,
                                             drafted_rows, n_steps, produced, m, accepted,
                                             extra, drafted)
        if hit:
            break
    return n_steps, produced, n_times


def ngram_run_kernel(target, t_cache, t_state, tables, buf, n0, max_new, k, policy, n_prev,
                     temperature, rule, draw, state, eos, record, drafted_rows, times, clock):
    """The steps of an n-gram draft (a :class:`~specdec_lite.drafting.proposers.ModelDraft`
    of an :class:`~specdec_lite.models.ngram.NGramModel`, ``tables`` its flat tables):
    each step's k tokens drafted from the model's rows
    (:func:`~specdec_lite.engine.draft_kernels.ngram_draft`), then verified against those
    rows as :func:`~specdec_lite.engine.step_kernels.verify_kernel` verifies them.
    Otherwise as :func:`speculative_run_kernel`, with the same answer."""
    k_max = max(k, policy_k_max(policy))
    emitted = np.empty(k_max + 1, dtype=np.int64)  # [k_max + 1] one step's tokens
    drafted = np.empty(k_max, dtype=np.int64)  # [k_max] one step's drafts
    v = t_cache[2].shape[1]
    q = np.zeros((k_max, v))  # [k_max, V] the rows they were drawn from
    row = np.empty(v)  # [V] one row before its temperature
    produced, n_steps, n_times = 0, n_prev, np.int64(0)
    while produced < max_new:
        if n_steps > n_prev:
            k = next_k(policy, k, record, n_steps)
        n = n0 + produced
        k_step = min(k, max_new - produced - 1)
        if k_step == 0:
            token, n_times = steps.plain_body(target, t_cache, t_state, buf[:n], temperature,
                                              rule, draw, state, times, n_times, clock)
            emitted[0] = token
            accepted, n_out, extra, m = 0, 1, 2, 0
        else:
            n_times = drafts.ngram_draft(tables, buf, n, k_step, temperature, draw, state,
                                         drafted, q, row, times, n_times, clock)
            accepted, n_out, extra, n_times, m = steps.verify_body(
                target, t_cache, t_state, buf[:n], drafted[:k_step], q[:k_step], temperature,
                rule, draw, state, emitted, times, n_times, clock)
        n_steps, produced, hit = record_step(buf, n, emitted, n_out, eos, record,
                                             drafted_rows, n_steps, produced, m, accepted,
                                             extra, drafted)
        if hit:
            break
    return n_steps, produced, n_times


# ---------------------------------------------------------------- the policy in the kernel
#
# ``policy`` float64: empty for a fixed k; else a draft-length policy of
# :mod:`specdec_lite.drafting.draft_length` as
# :func:`~specdec_lite.engine.compiled_step.policy_code` lays it out, its kind first:
#   AUTO      (1, alpha0, prior, decay, probe_every, window, margin, max_backoff,
#              step_cost[0..K]);
#   ADAPTIVE  (2, k_min, k_max, grow, shrink);
#   THEORY    (3, alpha0, prior, c, k_max).
# Its choices read the run's steps so far, ``record[:n_steps]`` (drafted, accepted, ...),
# the steps before the run included, and are the policy's ``after``, operation for
# operation.
AUTO, ADAPTIVE, THEORY = 1, 2, 3


def policy_k_max(policy):
    """The largest k ``policy`` may choose (0 for a fixed k: the run's own k)."""
    if policy.shape[0] == 0:
        return 0
    if policy[0] == AUTO:
        return policy.shape[0] - 9
    return np.int64(policy[2] if policy[0] == ADAPTIVE else policy[4])


def next_k(policy, k, record, n_steps):
    """The k after the step ``record[n_steps - 1]``, the last one taken with ``k``."""
    if policy.shape[0] == 0:
        return k
    if policy[0] == ADAPTIVE:  # AdaptiveK.after
        drafted, accepted = record[n_steps - 1, 0], record[n_steps - 1, 1]
        if drafted == 0:
            return k
        if accepted == drafted:
            return min(k + np.int64(policy[3]), np.int64(policy[2]))
        return max(k - np.int64(policy[4]), np.int64(policy[1]))
    if policy[0] == THEORY:  # TheoryK.after: k drafts cost k c + 1
        n_accepted = n_checked = 0
        for i in range(n_steps):
            n_accepted += record[i, 1]
            n_checked += min(record[i, 1] + 1, record[i, 0])
        alpha = (policy[2] * policy[1] + n_accepted) / (policy[2] + n_checked)
        cost = np.empty(np.int64(policy[4]) + 1)
        for j in range(cost.shape[0]):
            cost[j] = j * policy[3] + 1.0
        return _best_rate(min(alpha, 0.999), cost, 1)[0]
    alpha = min(_alpha(policy, record, n_steps), 0.999)  # AutoK.after
    best, top = _best_rate(alpha, policy[8:], 0)
    if best != 0 and not top > 1.0 + policy[6]:
        best = 0
    if best == 0 and _probe_due(policy, record, n_steps):
        return 1
    return best


def _best_rate(alpha, cost, k_min):
    """``draft_length.best_rate``: the k in k_min..len(cost) - 1 with the most expected
    tokens per unit of ``cost``, the first on a tie, and that rate."""
    best, top = k_min, -1.0
    power = alpha ** k_min
    for j in range(k_min, cost.shape[0]):
        power *= alpha
        tokens = (1.0 - power) / (1.0 - alpha) if alpha < 1.0 else j + 1.0
        rate = tokens / cost[j]
        if rate > top:
            best, top = j, rate
    return best, top


def _alpha(policy, record, n_steps):
    """``AutoK.alpha``: the decayed α of the last ``window`` drafting steps among the last
    8 × ``window`` steps, then the prior."""
    alpha0, prior, decay, window = policy[1], policy[2], policy[3], np.int64(policy[5])
    weight, seen = 1.0, 0
    accepted = checked = 0.0
    for i in range(n_steps - 1, max(n_steps - 8 * window, 0) - 1, -1):
        proposed, n = record[i, 0], record[i, 1]
        if proposed > 0:
            accepted += weight * n
            checked += weight * (n + 1 if n < proposed else n)
            weight *= decay
            seen += 1
            if seen == window:
                break
    return (accepted + weight * prior * alpha0) / (checked + weight * prior)


def _probe_due(policy, record, n_steps):
    """``AutoK.probe_due``: enough plain steps at the end for the next probe."""
    probe_every, max_backoff = np.int64(policy[4]), np.int64(policy[7])
    i, gap = n_steps - 1, 0
    while i >= 0 and record[i, 0] == 0:
        gap, i = gap + 1, i - 1
    if gap < probe_every:
        return False
    failed = 0
    while i >= 0 and failed < max_backoff:
        if record[i, 0] != 1:
            break
        i, before = i - 1, 0
        while i >= 0 and record[i, 0] == 0:
            before, i = before + 1, i - 1
        if before < probe_every:
            break
        failed += 1
    return gap >= probe_every << failed


def record_step(buf, n, emitted, n_out, eos, record, drafted_rows, n_steps, produced, m,
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


__all__ = ["ADAPTIVE", "AUTO", "THEORY", "eagle_run_kernel", "lookup_run_kernel", "next_k",
           "ngram_run_kernel", "plain_run_kernel", "policy_k_max", "record_step",
           "speculative_run_kernel"]
