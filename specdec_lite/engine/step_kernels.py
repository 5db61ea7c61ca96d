"""The numba kernels of :mod:`specdec_lite.engine.compiled_step`: a decoding step of GPTs
on the numba backend as one compiled call.

- :func:`plain_kernel`: one target row after the sequence, its token drawn or the argmax;
- (in :mod:`specdec_lite.engine.run_kernels`) a run's steps at a fixed k, one after
  another in one call, each the work of a one-step kernel (its ``*_body``);
- :func:`speculative_kernel`: the draft's forwards and draws (with its confidence or
  risk stop, if any), the target's forward, the exact (or greedy) rule and the bonus or
  correction token, writing both caches in place;
- :func:`verify_kernel`: the same verification for tokens proposed outside (prompt lookup,
  an n-gram draft);
- :func:`eagle_kernel`: the EAGLE drafter's step: its catch-up on the target's features,
  its drafts through the target's LM head, then the same verification;
- :func:`tree_kernel`: a greedy Medusa step's verification: the tree's forward, the test
  of each node, the kept path committed to the cache.

Each mirrors the Python step operation for operation: the same rows (softmax in float64,
the temperature as :func:`~specdec_lite.rules.distributions.apply_temperature` applies it),
the same uniforms from the sequence's Generator in the same order (drawn through its
BitGenerator, :mod:`specdec_lite.engine.native_calls`), the same tests.

numba caches these kernels on disk keyed by this file; they link in the forward of
``fast.py`` and the intrinsics of ``native_calls.py``, so whoever changes those must
touch this file too. They run without the GIL, as the forward does.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..models import fast
from .native_calls import clock_intrinsic, uniform_intrinsic

# who ran a timed forward; typed int64, not as literals, so the kernels that take them are
# compiled once (numba compiles a new version of a function for each literal argument)
TARGET, DRAFT = np.int64(0), np.int64(1)


def rows_of(logits, temperature, out):  # [m, V] float32 -> out [m, V] float64
    """``TransformerModel.rows_from_logits``: one-hot of the first argmax at T = 0, else
    the float64 softmax, re-tempered as ``apply_temperature`` does when T != 1."""
    m, v = logits.shape
    for r in range(m):
        if temperature == 0.0:
            out[r, :] = 0.0
            out[r, np.argmax(logits[r])] = 1.0
            continue
        top = np.float64(logits[r, 0])
        for i in range(1, v):
            top = max(top, np.float64(logits[r, i]))
        total = 0.0
        for i in range(v):  # in place, summed left to right: the array ops' very numbers
            e = np.exp(np.float64(logits[r, i]) - top)
            out[r, i] = e
            total += e
        for i in range(v):
            out[r, i] /= total
        if temperature != 1.0:
            z = np.log(out[r])
            z = (z - z.max()) / temperature
            z -= z.max()
            z = np.exp(z)
            z /= z.sum()
            out[r, :] = z


def sample_row(p, draw, state):  # [V] -> one id, by inverse CDF with one uniform
    cdf = np.cumsum(p)
    return np.searchsorted(cdf, next_double(draw, state) * cdf[-1],  # noqa: F821
                           side="right")


def _sync(seq, cache_tokens, state):
    """The length of ``seq``'s prefix the cache holds; the cache cut back to it.
    ``state`` = [length, n_causal] of the cache, updated in place."""
    m = min(seq.shape[0], state[1])
    common = m
    for i in range(m):
        if seq[i] != cache_tokens[i]:
            common = i
            break
    if common < state[0]:
        state[0] = common
        state[1] = min(state[1], common)
    return common


def clock_start(clock):
    """The clock's reading now, or 0.0 when ``clock`` is unset (zeros)."""
    return now(clock[0], clock[1]) if clock[0] != 0 else 0.0  # noqa: F821


def clock_note(times, n_times, who, n, t0, clock):
    """[``who``, ``n`` rows, seconds since ``t0``] into ``times`` after its first
    ``n_times``, when ``clock`` is set; returns the number of timings there."""
    if clock[0] == 0:
        return n_times
    times[n_times, 0], times[n_times, 1] = who, n
    times[n_times, 2] = now(clock[0], clock[1]) - t0  # noqa: F821
    return n_times + 1


def _append(model, cache, state, toks, times, n_times, who, clock):
    """Forward ``toks`` [n] after the cache's entries as a causal block
    (``TransformerModel.forward`` without positions or mask). Returns the number of
    timings in ``times``."""
    n = toks.shape[0]
    return _forward_block(model, cache, state, toks, np.arange(n), _causal_bias(n), True,
                          times, n_times, who, clock)


def _causal_bias(n):
    """[n, n] (at least [1, 1]): 0 where row r may attend column c <= r, -inf above."""
    bias = np.zeros((n, n if n > 1 else 1), dtype=np.float32)
    for r in range(n):
        for c in range(r + 1, n):
            bias[r, c] = -np.inf
    return bias


def _forward_block(model, cache, state, toks, depth, bias, causal, times, n_times, who,
                   clock):
    """Forward ``toks`` [n] after the cache's entries at positions entries + ``depth`` [n]
    with ``bias`` [n, n] over the block (0 or -inf), writing the cache's keys and values,
    tokens, logits and hidden states, as ``TransformerModel.forward`` does; a ``causal``
    block extends the committed prefix. Each forward's [who, n, seconds] goes into
    ``times`` when ``clock`` (the address of ``clock_gettime`` and a clock id, see
    :func:`~specdec_lite.engine.native_calls.clock_source`) is set, not zeros; returns
    the number of timings there."""
    wte, wpe, weights, tiled, paths, n_head, eps = model
    kv, cache_tokens, cache_logits, cache_hidden = cache
    n, start = toks.shape[0], state[0]
    if n == 0:
        return n_times
    t0 = clock_start(clock)
    d = wte.shape[1]
    x = np.empty((n, d), dtype=np.float32)
    for r in range(n):
        x[r] = wte[toks[r]] + wpe[start + depth[r]]
    logits = np.empty((n, cache_logits.shape[1]), dtype=np.float32)
    hidden = np.empty((n, d), dtype=np.float32)
    l_, two, h, cap, dh = kv.shape
    slots = np.zeros(1, dtype=np.int64)
    starts = np.full(1, start, dtype=np.int64)
    offsets = np.array([0, n], dtype=np.int64)
    whole = np.int64(0)  # leave nothing out, typed as the Python callers pass it, so the
    # forward compiled for them is the one linked in here
    fast.gpt_forward(x, kv.reshape((l_, two, 1, h, cap, dh)), slots, starts, offsets, bias,
                     n_head, eps, paths, weights, tiled, logits, hidden, whole)
    cache_tokens[start : start + n] = toks
    cache_logits[start : start + n] = logits
    cache_hidden[start : start + n] = hidden
    state[0] = start + n
    if causal and state[1] == start:
        state[1] = start + n
    return clock_note(times, n_times, who, n, t0, clock)


def plain_kernel(target, t_cache, t_state, seq, temperature, rule, draw, state, times, clock):
    """A plain step (no draft): one target row after ``seq``, its token by ``rule``
    (0 exact: one draw; 1 greedy: the argmax). Returns (token, timings)."""
    return plain_body(target, t_cache, t_state, seq, temperature, rule, draw, state, times,
                  np.int64(0), clock)


def plain_body(target, t_cache, t_state, seq, temperature, rule, draw, state, times, n_times,
           clock):
    """:func:`plain_kernel` with its timings after the first ``n_times`` of ``times``."""
    n = seq.shape[0]
    common = _sync(seq, t_cache[1], t_state)
    n_times = _append(target, t_cache, t_state, seq[common:], times, n_times, TARGET, clock)
    p = np.empty((1, t_cache[2].shape[1]))
    rows_of(t_cache[2][n - 1 : n], temperature, p)
    token = np.argmax(p[0]) if rule == 1 else sample_row(p[0], draw, state)
    return token, n_times


def speculative_kernel(target, t_cache, t_state, draft, d_cache, d_state, shared, seq, k,
                       temperature, rule, draw, state, stop, drafted, emitted, times, clock):
    """A speculative step: up to k draft tokens after ``seq`` (into ``drafted`` [k]), one
    target forward over the last token and the drafts, the rule, then the bonus or
    correction token; the emitted tokens go into ``emitted`` [k + 1]. ``stop`` [6] holds
    the draft's early stops as :func:`stop_code` lays them out (drafting ends after a
    token that trips one). Returns (accepted, emitted, extra code: 0 bonus, 1
    correction, timings, drafted). A ``shared`` draft (1) runs on the target's own keys,
    values and tokens for its blocks (an early-exit draft:
    :mod:`specdec_lite.drafting.early_exit`); both caches are first brought to ``seq``
    less its last token as ``ModelDraft.align`` brings them."""
    return speculative_body(target, t_cache, t_state, draft, d_cache, d_state, shared, seq, k,
                        temperature, rule, draw, state, stop, drafted, emitted, times,
                        np.int64(0), clock)


def speculative_body(target, t_cache, t_state, draft, d_cache, d_state, shared, seq, k,
                 temperature, rule, draw, state, stop, drafted, emitted, times, n_times,
                 clock):
    """:func:`speculative_kernel` with its timings after the first ``n_times``."""
    n = seq.shape[0]
    v = t_cache[2].shape[1]
    if shared:  # the target holds seq less its last token; the draft reads it there
        cut = min(_sync(seq, t_cache[1], t_state), n - 1)
        if cut < t_state[0]:
            t_state[0] = cut
            t_state[1] = min(t_state[1], cut)
        n_times = _append(target, t_cache, t_state, seq[cut : n - 1], times, n_times,
                          TARGET, clock)
        d_state[0] = n - 1
        d_state[1] = n - 1
    ctx = np.empty(n + k, dtype=np.int64)  # [n + k] the sequence, then the drafts
    ctx[:n] = seq
    q = np.empty((k, v))  # [k, V] the rows the drafts were drawn from
    sure = np.empty((1, v))  # [1, V] the T = 1 row a greedy draft's stops read
    stops = stop[0] > 0.0 or stop[5] > 0.0
    chance = 1.0  # that every token drafted so far is accepted, as the head predicts
    common = _sync(seq, d_cache[1], d_state)
    n_times = _append(draft, d_cache, d_state, seq[common:], times, n_times, DRAFT, clock)
    m = k
    for i in range(k):
        if i > 0:
            n_times = _append(draft, d_cache, d_state, ctx[n + i - 1 : n + i], times,
                              n_times, DRAFT, clock)
        rows_of(d_cache[2][n + i - 1 : n + i], temperature, q[i : i + 1])
        token = np.argmax(q[i]) if temperature == 0.0 else sample_row(q[i], draw, state)
        ctx[n + i] = token
        if stops:
            if temperature == 0.0:
                rows_of(d_cache[2][n + i - 1 : n + i], 1.0, sure)
                done, chance = _stop_after(sure[0], token, stop, chance)
            else:
                done, chance = _stop_after(q[i], token, stop, chance)
            if done:
                m = i + 1
                break
    drafted[:m] = ctx[n : n + m]
    accepted, extra, n_times = check_block(target, t_cache, t_state, ctx[: n + m], n, q[:m],
                                           temperature, rule, draw, state, emitted, times,
                                           n_times, clock)
    return accepted, accepted + 1, extra, n_times, m


def _stop_after(row, token, stop, chance):
    """``ModelDraft``'s early stops after ``token`` drawn from ``row`` [V]: the confidence
    stop (``stop[0]`` > 0: the token's probability below it) and the risk stop
    (``stop[5]`` > 0: the head ``stop[1:5]`` predicts the token accepted with chance a;
    stop once 1 - ``chance`` * a passes ``stop[5]``), as
    :mod:`specdec_lite.drafting.stop_head` computes them. Returns (stop, chance)."""
    if stop[0] > 0.0 and row[token] < stop[0]:
        return True, chance
    if stop[5] > 0.0:
        floor = 1e-12
        top = floor
        entropy = 0.0
        for j in range(row.shape[0]):
            top = max(top, row[j])
            entropy -= row[j] * np.log(max(row[j], floor))
        z = (stop[1] * np.log(max(row[token], floor)) + stop[2] * np.log(top)
             + stop[3] * (entropy / np.log(row.shape[0])) + stop[4])
        chance *= 0.5 * (1.0 + np.tanh(0.5 * z))
        if 1.0 - chance > stop[5]:
            return True, chance
    return False, chance


def eagle_kernel(target, t_cache, t_state, eagle, e_kv, e_tokens, e_state, seq, k,
                 temperature, rule, draw, state, drafted, emitted, times, clock):
    """A speculative step with the EAGLE drafter, as
    :meth:`~specdec_lite.drafting.eagle.EagleDraft.propose_with` drafts and
    :func:`verify_kernel` verifies: read the target's features of ``seq[:-1]`` (a forward
    of what its cache lacks), catch the drafter's cache (``e_kv`` [2, H, capacity,
    d_head], the tokens it was built from ``e_tokens``, its length ``e_state`` [1]) up
    from where it still agrees with ``seq``, then draft up to ``k`` tokens into
    ``drafted``, each read out by the target's LM head. ``eagle`` is (input map and its
    tiles, input bias, the block's weights and tiles, paths, heads, eps). Returns
    (accepted, emitted, extra code, timings, drafted)."""
    return eagle_body(target, t_cache, t_state, eagle, e_kv, e_tokens, e_state, seq, k,
                  temperature, rule, draw, state, drafted, emitted, times, np.int64(0), clock)


def eagle_body(target, t_cache, t_state, eagle, e_kv, e_tokens, e_state, seq, k, temperature,
           rule, draw, state, drafted, emitted, times, n_times, clock):
    """:func:`eagle_kernel` with its timings after the first ``n_times``."""
    in_w, in_p, in_pb, in_b, weights, tiled, paths, n_head, eps = eagle
    wte, wpe, t_weights, t_tiled, t_paths = target[0], target[1], target[2], target[3], target[4]
    unembed = t_weights[10]  # [d, V] the target's LM head, as its forward reads it
    no_bias = np.zeros(unembed.shape[1], dtype=np.float32)
    n = seq.shape[0]
    d, v = wte.shape[1], unembed.shape[1]
    k = min(k, e_tokens.shape[0] - n)  # the drafter's window (capacity = max_len)
    if k <= 0 or n < 2:
        return verify_body(target, t_cache, t_state, seq, drafted[:0], np.empty((0, v)),
                           temperature, rule, draw, state, emitted, times, n_times, clock)
    common = _sync(seq[: n - 1], t_cache[1], t_state)  # the features of seq[:-1]
    n_times = _append(target, t_cache, t_state, seq[common : n - 1], times, n_times,
                      TARGET, clock)
    m = min(e_state[0] + 1, n)  # EagleState.reusable: entry j needs seq[:j + 2] unchanged
    same = m
    for i in range(m):
        if seq[i] != e_tokens[i]:
            same = i
            break
    m = min(max(0, min(e_state[0], same - 1)), n - 2)
    rows = n - 1 - m
    inp = np.empty((rows, 2 * d), dtype=np.float32)  # [features f_m..f_{n-2}, embeddings]
    for r in range(rows):
        inp[r, :d] = t_cache[3][m + r]
        inp[r, d:] = wte[seq[m + 1 + r]] + wpe[m + 1 + r]
    bias = _causal_bias(rows)  # [rows, rows]
    h, cap, dh = e_kv.shape[1], e_kv.shape[2], e_kv.shape[3]
    kv = e_kv.reshape((2, 1, h, cap, dh))
    out = np.empty((rows, d), dtype=np.float32)
    fast.block_forward(inp, in_w, in_p, in_pb, in_b, kv, np.int64(m), bias, n_head, eps,
                       paths, weights, tiled, out)
    e_tokens[:n] = seq
    e_state[0] = n - 1
    predicted = out[rows - 1 : rows]  # [1, d] f^_{n-1}
    ctx = np.empty(n + k, dtype=np.int64)  # [n + k] the sequence, then the drafts
    ctx[:n] = seq
    q = np.empty((k, v))  # [k, V] the rows the drafts were drawn from
    logits = np.empty((1, v), dtype=np.float32)
    one = np.empty((1, 2 * d), dtype=np.float32)
    one_bias = np.zeros((1, 1), dtype=np.float32)
    for i in range(k):
        fast.linear_rows(predicted, unembed, t_tiled[8], t_tiled[9], no_bias, logits,
                         t_paths)  # CompiledForward.readout
        rows_of(logits, temperature, q[i : i + 1])
        token = np.argmax(q[i]) if temperature == 0.0 else sample_row(q[i], draw, state)
        ctx[n + i] = token
        if i + 1 < k:  # entry n-1+i reads its own prediction and token x_{i+1}
            one[0, :d] = predicted[0]
            one[0, d:] = wte[token] + wpe[n + i]
            step_out = np.empty((1, d), dtype=np.float32)
            fast.block_forward(one, in_w, in_p, in_pb, in_b, kv, np.int64(n - 1 + i),
                               one_bias, n_head, eps, paths, weights, tiled, step_out)
            predicted = step_out
    drafted[:k] = ctx[n:]
    accepted, extra, n_times = check_block(target, t_cache, t_state, ctx, n, q, temperature,
                                           rule, draw, state, emitted, times, n_times, clock)
    return accepted, accepted + 1, extra, n_times, k


def verify_body(target, t_cache, t_state, seq, drafted, q, temperature, rule, draw, state,
                emitted, times, n_times, clock):
    """:func:`verify_kernel`'s work after ``n_times`` timings; returns its answer and the
    number of tokens drafted."""
    n, k = seq.shape[0], drafted.shape[0]
    ctx = np.empty(n + k, dtype=np.int64)
    ctx[:n] = seq
    ctx[n:] = drafted
    accepted, extra, n_times = check_block(target, t_cache, t_state, ctx, n, q, temperature,
                                           rule, draw, state, emitted, times, n_times, clock)
    return accepted, accepted + 1, extra, n_times, k


def verify_kernel(target, t_cache, t_state, seq, drafted, q, temperature, rule, draw, state,
                  emitted, times, clock):
    """The verification half of a speculative step, for tokens proposed outside the kernel
    (prompt lookup, an n-gram draft): ``drafted`` [k] (k may be 0) after ``seq``, drawn
    from the rows ``q`` [k, V], checked by one target forward and the rule, then the bonus
    or correction token. Returns (accepted, emitted, extra code, timings)."""
    accepted, n_out, extra, n_times, _ = verify_body(target, t_cache, t_state, seq, drafted,
                                                     q, temperature, rule, draw, state,
                                                     emitted, times, np.int64(0), clock)
    return accepted, n_out, extra, n_times


def check_block(target, t_cache, t_state, ctx, n, q, temperature, rule, draw, state, emitted,
           times, n_times, clock):
    """One target forward over ``ctx`` [n + k] (the sequence, then k drafts drawn from the
    rows ``q`` [k, V]), the rule (0 exact, 1 greedy) and the extra token, into ``emitted``
    [k + 1]: :func:`specdec_lite.rules.verify.verify_checked`, draw for draw. Returns
    (accepted, extra code: 0 bonus, 1 correction, timings)."""
    k = ctx.shape[0] - n
    drafted = ctx[n:]
    common = _sync(ctx, t_cache[1], t_state)
    n_times = _append(target, t_cache, t_state, ctx[common:], times, n_times, TARGET, clock)
    logits = t_cache[2][n - 1 : n + k]  # [k + 1, V]
    p = np.empty((k + 1, logits.shape[1]))  # [k + 1, V] the target's rows, each made when
    # the test reaches it: none past the first rejection is read
    accepted = k
    if rule == 1:
        for i in range(k):
            rows_of(logits[i : i + 1], temperature, p[i : i + 1])
            if drafted[i] != np.argmax(p[i]):
                accepted = i
                break
    else:
        r = np.empty(k)  # [k] one uniform per drafted token, all drawn
        for i in range(k):
            r[i] = next_double(draw, state)  # noqa: F821
        for i in range(k):
            rows_of(logits[i : i + 1], temperature, p[i : i + 1])
            if not r[i] * q[i, drafted[i]] < p[i, drafted[i]]:
                accepted = i
                break
    emitted[:accepted] = drafted[:accepted]
    if accepted == k:
        rows_of(logits[k : k + 1], temperature, p[k : k + 1])
        dist, extra = p[k], 0
    else:
        extra = 1
        dist = p[accepted]
        if rule == 0:  # the residual norm(max(0, p - q)), or p where it has no mass
            diff = np.maximum(p[accepted] - q[accepted], 0.0)
            mass = diff.sum()
            if mass > 0:
                dist = diff / mass
    emitted[accepted] = np.argmax(dist) if rule == 1 else sample_row(dist, draw, state)
    return accepted, extra, n_times


def tree_kernel(target, t_cache, t_state, tokens, depth, bias, parent, ancestors, path,
                times, clock):
    """A Medusa step's greedy verification: forward the tree ``tokens`` [N+1] (node 0 the
    root) on top of the committed prefix at positions prefix + ``depth``, seeing only
    ancestors (``bias``); accept a node whose token is the target's argmax at its
    ``parent``; keep the deepest path whose nodes are all accepted (into ``path``, the
    first such when several are as deep) and commit it to the cache, as
    ``TransformerModel.commit_path`` does. Returns (path length, the target's argmax
    after the path's last node, timings)."""
    return tree_body(target, t_cache, t_state, tokens, depth, bias, parent, ancestors, path,
                     times, np.int64(0), clock)


def tree_body(target, t_cache, t_state, tokens, depth, bias, parent, ancestors, path, times,
              n_times, clock):
    """:func:`tree_kernel` with its timings after the first ``n_times`` of ``times``."""
    base, n1 = t_state[1], tokens.shape[0]
    t_state[0] = base  # an earlier block is dropped, as score_tree does
    n_times = _forward_block(target, t_cache, t_state, tokens, depth, bias, False, times,
                             n_times, TARGET, clock)
    kv, cache_tokens, cache_logits, cache_hidden = t_cache
    ok = np.empty(n1, dtype=np.bool_)  # [N+1] the target takes the node's token
    ok[0] = True
    for j in range(1, n1):
        ok[j] = tokens[j] == np.argmax(cache_logits[base + parent[j]])
    best, last = -1, 0
    for i in range(n1):
        whole = True
        for j in range(n1):
            if ancestors[i, j] and not ok[j]:
                whole = False
                break
        if whole and depth[i] > best:
            best, last = depth[i], i
    extra = np.argmax(cache_logits[base + last])
    m = 0
    for j in range(n1):
        if ancestors[last, j]:
            path[m] = j
            m += 1
    for i in range(m):  # slot base + path[i] moves to base + i (never onto a later source)
        src, dst = base + path[i], base + i
        if src != dst:
            kv[:, :, :, dst, :] = kv[:, :, :, src, :]
            cache_tokens[dst] = cache_tokens[src]
            cache_logits[dst] = cache_logits[src]
            cache_hidden[dst] = cache_hidden[src]
    t_state[0] = t_state[1] = base + m
    return m, extra, n_times


class Kernels(NamedTuple):
    """The kernels above, compiled."""

    plain: object
    speculative: object
    plain_run: object
    speculative_run: object
    eagle_run: object
    lookup_run: object
    ngram_run: object  # the run kernels: specdec_lite.engine.run_kernels
    medusa_chain: object
    medusa_tree: object  # specdec_lite.engine.medusa_kernels
    verify: object
    eagle: object
    tree: object


@functools.cache
def compiled_kernels() -> Kernels:
    """The kernels above, compiled (cached on disk by numba); ``ImportError`` without it."""
    fast.compile_kernels()
    numba = fast.numba_module()
    scope = globals()
    scope["next_double"], scope["now"] = uniform_intrinsic(), clock_intrinsic()
    # no fastmath: the draws compare as the Python step's; the GIL released, as the
    # forward releases it
    jit = numba.njit(cache=True, nogil=True)
    for name in ("clock_start", "clock_note", "rows_of", "sample_row", "_sync",
                 "_forward_block", "_causal_bias", "_append", "check_block", "_stop_after",
                 "verify_body", "plain_body", "speculative_body", "tree_body", "eagle_body"):
        scope[name] = jit(scope[name])
    # the run kernels call the bodies above and the drafters, as their modules' attributes
    from . import draft_kernels, medusa_kernels, run_kernels

    for name in ("lookup_draft", "ngram_row", "tempered", "ngram_draft"):
        setattr(draft_kernels, name, jit(getattr(draft_kernels, name)))
    medusa_kernels.heads_logits = jit(medusa_kernels.heads_logits)
    for name in ("record_step", "next_k", "policy_k_max", "_alpha", "_probe_due", "_best_rate"):
        setattr(run_kernels, name, jit(getattr(run_kernels, name)))
    return Kernels(jit(plain_kernel), jit(speculative_kernel),
                   jit(run_kernels.plain_run_kernel), jit(run_kernels.speculative_run_kernel),
                   jit(run_kernels.eagle_run_kernel), jit(run_kernels.lookup_run_kernel),
                   jit(run_kernels.ngram_run_kernel), jit(medusa_kernels.chain_run_kernel),
                   jit(medusa_kernels.tree_run_kernel),
                   jit(verify_kernel), jit(eagle_kernel),
                   jit(tree_kernel))


__all__ = ["DRAFT", "TARGET", "Kernels", "compiled_kernels", "eagle_body", "eagle_kernel",
           "check_block", "clock_note", "clock_start", "plain_body", "plain_kernel", "rows_of",
           "sample_row",
           "speculative_body", "speculative_kernel", "tree_body", "tree_kernel", "verify_body",
           "verify_kernel"]
