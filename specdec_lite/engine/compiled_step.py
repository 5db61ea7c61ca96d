"""One decoding step in one compiled call, for GPTs on the numba backend.

The step of :func:`specdec_lite.engine.decode.speculative_step` makes a few dozen Python
and numpy calls around its forwards: syncing each cache, a probability row per drafted
token, the draws, the acceptance test, the residual, the bookkeeping. With the compiled
forward of :mod:`specdec_lite.models.fast` (a third of a millisecond for the shipped
target) those calls cost a fifth to a third of the wall clock. Here the same step runs
as one numba call: the draft's forwards and draws, the target's forward, the exact (or
greedy) rule and the bonus or correction token, writing both caches in place.
:func:`tree_kernel` does the same for a greedy Medusa step's verification: the tree's
forward, the test of each node, the kept path committed to the cache.

It is the Python step, operation for operation: the same rows (softmax in float64, the
temperature as :func:`~specdec_lite.rules.distributions.apply_temperature` applies it), the
same uniforms from the sequence's Generator in the same order (drawn through its
BitGenerator, as ``Generator.random`` draws them), the same tests. Only summation orders
differ, by an ulp or so, so a token can differ only when a uniform falls within about
1e-16 of a boundary; the tests check token-for-token equality with the Python step at
T = 0 and T > 0.

:func:`step_for` says when it applies (both models are :class:`TransformerModel` GPTs on
the numba backend, a plain :class:`~specdec_lite.drafting.proposers.ModelDraft`, no
top-k or top-p, the exact or greedy rule) and returns the step function
:func:`specdec_lite.engine.decode.decode_loop` then calls instead of the Python one. A
model with an ``observer`` (the benchmark's forward meter) gets each forward's rows and
seconds, timed inside the compiled call, as the Python forward reports them.

numba caches these kernels on disk keyed by this file; they link in the forward of
``fast.py``, so whoever changes that forward must touch this file too. They run without
the GIL, as the forward does, so threads decoding on one model can overlap their steps.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from ..drafting.proposers import ModelDraft
from ..models import fast
from ..models.bound import BoundModel
from ..models.transformer import TransformerModel
from .decode import Step, cut_at_eos, speculative_step

EXTRA = ("bonus", "correction")  # the speculative kernel's extra-token codes
RULE_CODES = {"exact": 0, "greedy": 1}
# who ran a timed forward; typed int64, not as literals, so the kernels that take them are
# compiled once (numba compiles a new version of a function for each literal argument)
TARGET, DRAFT = np.int64(0), np.int64(1)
UNTIMED = np.zeros(2, dtype=np.int64)  # no clock: the kernels time nothing


# ------------------------------------------------------------------- the kernels (numba)

def _rows(logits, temperature, out):  # [m, V] float32 -> out [m, V] float64
    """``TransformerModel.rows_from_logits``: one-hot of the first argmax at T = 0, else
    the float64 softmax, re-tempered as ``apply_temperature`` does when T != 1."""
    m, v = logits.shape
    for r in range(m):
        if temperature == 0.0:
            out[r, :] = 0.0
            out[r, np.argmax(logits[r])] = 1.0
            continue
        z = logits[r].astype(np.float64)
        z -= z.max()
        z = np.exp(z)
        z /= z.sum()
        if temperature != 1.0:
            z = np.log(z)
            z = (z - z.max()) / temperature
            z -= z.max()
            z = np.exp(z)
            z /= z.sum()
        out[r, :] = z


def _sample(p, draw, state):  # [V] -> one id, by inverse CDF with one uniform
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


def _append(model, cache, state, toks, times, n_times, who, clock):
    """Forward ``toks`` [n] after the cache's entries as a causal block
    (``TransformerModel.forward`` without positions or mask). Returns the number of
    timings in ``times``."""
    n = toks.shape[0]
    depth = np.arange(n)  # [n]
    bias = np.zeros((n, n if n > 1 else 1), dtype=np.float32)  # [n, n] causal
    for r in range(n):
        for c in range(r + 1, n):
            bias[r, c] = -np.inf
    return _forward_block(model, cache, state, toks, depth, bias, True, times, n_times, who,
                          clock)


def _forward_block(model, cache, state, toks, depth, bias, causal, times, n_times, who,
                   clock):
    """Forward ``toks`` [n] after the cache's entries at positions entries + ``depth`` [n]
    with ``bias`` [n, n] over the block (0 or -inf), writing the cache's keys and values,
    tokens, logits and hidden states, as ``TransformerModel.forward`` does; a ``causal``
    block extends the committed prefix. Each forward's [who, n, seconds] goes into
    ``times`` when ``clock`` (the address of ``clock_gettime`` and a clock id, see
    :func:`clock_source`) is set, not zeros; returns the number of timings there."""
    wte, wpe, weights, tiled, paths, n_head, eps = model
    kv, cache_tokens, cache_logits, cache_hidden = cache
    n, start = toks.shape[0], state[0]
    if n == 0:
        return n_times
    timed = clock[0] != 0
    t0 = now(clock[0], clock[1]) if timed else 0.0  # noqa: F821 (bound by _compile)
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
    if timed:
        seconds = now(clock[0], clock[1]) - t0  # noqa: F821
        times[n_times, 0], times[n_times, 1], times[n_times, 2] = who, n, seconds
        n_times += 1
    return n_times


def plain_kernel(target, t_cache, t_state, seq, temperature, rule, draw, state, times, clock):
    """A plain step (no draft): one target row after ``seq``, its token by ``rule``
    (0 exact: one draw; 1 greedy: the argmax). Returns (token, timings)."""
    n = seq.shape[0]
    common = _sync(seq, t_cache[1], t_state)
    n_times = _append(target, t_cache, t_state, seq[common:], times, np.int64(0), TARGET,
                      clock)
    p = np.empty((1, t_cache[2].shape[1]))
    _rows(t_cache[2][n - 1 : n], temperature, p)
    token = np.argmax(p[0]) if rule == 1 else _sample(p[0], draw, state)
    return token, n_times


def speculative_kernel(target, t_cache, t_state, draft, d_cache, d_state, seq, k,
                       temperature, rule, draw, state, drafted, emitted, times, clock):
    """A speculative step: k draft tokens after ``seq`` (into ``drafted`` [k]), one target
    forward over the last token and the drafts, the rule, then the bonus or correction
    token; the emitted tokens go into ``emitted`` [k + 1]. Returns (accepted, emitted,
    extra code: 0 bonus, 1 correction, timings)."""
    n = seq.shape[0]
    v = t_cache[2].shape[1]
    ctx = np.empty(n + k, dtype=np.int64)  # [n + k] the sequence, then the drafts
    ctx[:n] = seq
    q = np.empty((k, v))  # [k, V] the rows the drafts were drawn from
    common = _sync(seq, d_cache[1], d_state)
    n_times = _append(draft, d_cache, d_state, seq[common:], times, np.int64(0), DRAFT, clock)
    for i in range(k):
        if i > 0:
            n_times = _append(draft, d_cache, d_state, ctx[n + i - 1 : n + i], times,
                              n_times, DRAFT, clock)
        _rows(d_cache[2][n + i - 1 : n + i], temperature, q[i : i + 1])
        ctx[n + i] = np.argmax(q[i]) if temperature == 0.0 else _sample(q[i], draw, state)
    drafted[:] = ctx[n:]
    common = _sync(ctx, t_cache[1], t_state)
    n_times = _append(target, t_cache, t_state, ctx[common:], times, n_times, TARGET, clock)
    p = np.empty((k + 1, v))  # [k + 1, V] the target's rows
    _rows(t_cache[2][n - 1 : n + k], temperature, p)
    accepted = k
    if rule == 1:
        for i in range(k):
            if drafted[i] != np.argmax(p[i]):
                accepted = i
                break
    else:
        r = np.empty(k)  # [k] one uniform per drafted token, all drawn
        for i in range(k):
            r[i] = next_double(draw, state)  # noqa: F821
        for i in range(k):
            if not r[i] * q[i, drafted[i]] < p[i, drafted[i]]:
                accepted = i
                break
    emitted[:accepted] = drafted[:accepted]
    if accepted == k:
        dist, extra = p[k], 0
    else:
        extra = 1
        dist = p[accepted]
        if rule == 0:  # the residual norm(max(0, p - q)), or p where it has no mass
            diff = np.maximum(p[accepted] - q[accepted], 0.0)
            mass = diff.sum()
            if mass > 0:
                dist = diff / mass
    emitted[accepted] = np.argmax(dist) if rule == 1 else _sample(dist, draw, state)
    return accepted, accepted + 1, extra, n_times


def tree_kernel(target, t_cache, t_state, tokens, depth, bias, parent, ancestors, path,
                times, clock):
    """A Medusa step's greedy verification: forward the tree ``tokens`` [N+1] (node 0 the
    root) on top of the committed prefix at positions prefix + ``depth``, seeing only
    ancestors (``bias``); accept a node whose token is the target's argmax at its
    ``parent``; keep the deepest path whose nodes are all accepted (into ``path``, the
    first such when several are as deep) and commit it to the cache, as
    ``TransformerModel.commit_path`` does. Returns (path length, the target's argmax
    after the path's last node, timings)."""
    base, n1 = t_state[1], tokens.shape[0]
    t_state[0] = base  # an earlier block is dropped, as score_tree does
    n_times = _forward_block(target, t_cache, t_state, tokens, depth, bias, False, times,
                             np.int64(0), TARGET, clock)
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


def _uniform_intrinsic() -> object:
    """``next_double(draw, state)``: one uniform in [0, 1) from a numpy BitGenerator, given
    the addresses of its ``next_double`` function and its state (its ``ctypes`` interface),
    exactly as ``Generator.random()`` draws it. Passing two integers instead of the
    Generator spares the call numba's typing of a Generator argument, which costs more
    than the rest of a step's Python."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def next_double(typingctx, draw, state):
        def codegen(context, builder, signature, args):
            state_ptr = ir.IntType(8).as_pointer()
            fn_type = ir.FunctionType(ir.DoubleType(), [state_ptr])
            fn = builder.inttoptr(args[0], fn_type.as_pointer())
            return builder.call(fn, [builder.inttoptr(args[1], state_ptr)])
        return types.float64(types.uintp, types.uintp), codegen

    return next_double


def _clock_intrinsic() -> object:
    """``now(clock_gettime, clock_id)``: seconds on a monotonic clock, read by calling the
    C library's ``clock_gettime`` at the address given (:func:`clock_source`). A function
    that calls it can run without the GIL and be cached by numba, which neither numba's
    object mode nor a ctypes function in its globals allows."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def now(typingctx, fn, clock_id):
        def codegen(context, builder, signature, args):
            i32, i64, f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
            spec = cgutils.alloca_once(builder, i64, size=2)  # struct timespec {sec, nsec}
            fn_type = ir.FunctionType(i32, [i32, spec.type])
            call = builder.inttoptr(args[0], fn_type.as_pointer())
            builder.call(call, [builder.trunc(args[1], i32), spec])
            sec = builder.sitofp(builder.load(spec), f64)
            nsec = builder.sitofp(builder.load(builder.gep(spec, [ir.Constant(i32, 1)])), f64)
            return builder.fadd(sec, builder.fmul(nsec, ir.Constant(f64, 1e-9)))
        return types.float64(types.int64, types.int64), codegen

    return now


def clock_source() -> np.ndarray | None:
    """[address of the C library's ``clock_gettime``, ``CLOCK_MONOTONIC``], int64, which
    the kernels time forwards with; None where there is none (Windows), and a run with a
    meter then takes the Python step."""
    import ctypes  # here, not at import: the browser edition's Python has no use for it

    try:
        address = ctypes.cast(ctypes.CDLL(None).clock_gettime, ctypes.c_void_p).value
        return np.array([address, time.CLOCK_MONOTONIC], dtype=np.int64)
    except (AttributeError, OSError, TypeError):
        return None


@functools.cache
def _compile() -> tuple:
    """The kernels above, compiled (cached on disk by numba); ``ImportError`` without it."""
    fast.compile_kernels()
    numba = fast.numba_module()
    scope = globals()
    scope["next_double"], scope["now"] = _uniform_intrinsic(), _clock_intrinsic()
    # no fastmath: the draws compare as the Python step's; the GIL released, as the
    # forward releases it
    jit = numba.njit(cache=True, nogil=True)
    for name in ("_rows", "_sample", "_sync", "_forward_block", "_append"):
        scope[name] = jit(scope[name])
    return jit(plain_kernel), jit(speculative_kernel), jit(tree_kernel)


def uniform_source(rng: np.random.Generator) -> tuple[int, int]:
    """The addresses (``next_double``, state) the kernels draw ``rng``'s uniforms from."""
    import ctypes  # here, not at import: the browser edition's Python has no use for it

    bits = rng.bit_generator.ctypes
    return ctypes.cast(bits.next_double, ctypes.c_void_p).value, bits.state_address


# ------------------------------------------------------------------- the step (Python)

def _parts(model: object) -> tuple | None:
    """(model tuple, cache arrays, cache) of a GPT on one cache on the numba backend."""
    if not isinstance(model, BoundModel) or not isinstance(model.model, TransformerModel):
        return None
    packed = _packed(model.model)
    if packed is None:
        return None
    return packed, _arrays(model.cache), model.cache


def _arrays(cache: object) -> tuple:
    """What the kernels take of a cache: its keys and values, tokens, logits, hidden."""
    return cache.kv, cache.tokens, cache.logits, cache.hidden


def _packed(gpt: TransformerModel) -> tuple | None:
    """What the kernels take of a GPT on the numba backend (None on numpy)."""
    compiled = gpt.compiled
    if compiled is None:
        return None
    return (gpt.wte, gpt.wpe, compiled.weights, compiled.tiled, compiled.paths,
            compiled.n_head, compiled.eps)


def step_for(target: object, proposer: object | None, sampling: object,
             rule: str) -> object | None:
    """The compiled step for this run, or None where only the Python step applies (see
    the module). ``target`` and ``proposer`` are the run's own (on their caches)."""
    if rule not in RULE_CODES or sampling.top_k is not None or sampling.top_p is not None:
        return None
    if _parts(target) is None:
        return None
    if proposer is not None:
        if (type(proposer) is not ModelDraft or proposer.min_confidence is not None
                or _parts(proposer.model) is None):
            return None
    return CompiledStep()


def in_kernel(kernel: object, *args: object) -> tuple:
    """``kernel(*args)``, in a Python frame of its own: the benchmark's profile
    (:func:`specdec_lite.bench.timing.profile_call`) counts its time as forward time, since
    all but a few microseconds of it are the forwards inside."""
    return kernel(*args)


class CompiledStep:
    """A step function of :func:`~specdec_lite.engine.decode.decode_loop` (the arguments
    and answer of :func:`~specdec_lite.engine.decode.speculative_step`) that runs the step
    in one compiled call. What it hands the kernels for a model on its cache (the weights,
    the cache's arrays) is gathered once per run, not per step."""

    def __init__(self) -> None:
        self.plain, self.speculative, _ = _compile()
        self.times = np.zeros((0, 3))  # [forwards, (who, rows, seconds)]
        self.clock = clock_source()
        self.rng, self.source = None, (0, 0)
        self.parts: dict[int, tuple] = {}  # id(bound model) -> (bound model, its parts)

    def _parts_of(self, model: BoundModel) -> tuple:
        """:func:`_parts` of ``model`` plus its cache's [length, n_causal] array, kept."""
        known = self.parts.get(id(model))
        if known is None or known[0] is not model:
            known = self.parts[id(model)] = (model, *_parts(model),
                                             np.zeros(2, dtype=np.int64))
        cache, state = known[3], known[4]
        state[0], state[1] = cache.length, cache.n_causal  # as the cache is now
        return known

    def __call__(self, target: object, proposer: object | None, seq: np.ndarray, k: int,
                 sampling: object, rule: str, params: dict, rng: np.random.Generator,
                 eos_id: int | None, gen: object, name: str = "target"
                 ) -> tuple[np.ndarray, bool]:
        _, t_model, t_arrays, t_cache, t_state = self._parts_of(target)
        gpt = target.model
        draft = proposer.model if proposer is not None and k > 0 else None
        if draft is not None:
            _, d_model, d_arrays, d_cache, d_state = self._parts_of(draft)
        if len(seq) + k > min(gpt.config.max_len, t_cache.capacity) or (
                draft is not None
                and len(seq) + k - 1 > min(draft.model.config.max_len, d_cache.capacity)):
            # past a window or a cache: the Python step, which raises the error
            return speculative_step(target, proposer, seq, k, sampling, rule, params, rng,
                                    eos_id, gen, name)
        timed = gpt.observer is not None or (draft is not None
                                             and draft.model.observer is not None)
        clock = self.clock if timed else UNTIMED
        if clock is None:  # a meter to serve and no clock to time with
            return speculative_step(target, proposer, seq, k, sampling, rule, params, rng,
                                    eos_id, gen, name)
        if len(self.times) < k + 1:
            self.times = np.zeros((k + 1, 3))
        draw, state = self._uniforms(rng)
        if draft is None:
            token, n_times = in_kernel(self.plain, t_model, t_arrays, t_state, seq,
                                       sampling.temperature, RULE_CODES[rule], draw, state,
                                       self.times, clock)
            emitted = np.array([token], dtype=np.int64)  # [1]
            drafted, accepted = emitted[:0], 0
            extra = "bonus" if proposer is not None else "sample"
        else:
            drafted = np.empty(k, dtype=np.int64)  # [k]
            out = np.empty(k + 1, dtype=np.int64)  # [k + 1]
            accepted, n_out, code, n_times = in_kernel(
                self.speculative, t_model, t_arrays, t_state, d_model, d_arrays, d_state, seq,
                k, sampling.temperature, RULE_CODES[rule], draw, state, drafted, out,
                self.times, clock)
            d_cache.length, d_cache.n_causal = int(d_state[0]), int(d_state[1])
            emitted, extra = out[:n_out], EXTRA[code]
            gen.n_draft_calls += k
        t_cache.length, t_cache.n_causal = int(t_state[0]), int(t_state[1])
        gen.n_target_calls += 1
        if timed:
            self._report(gpt, draft, n_times)
        emitted, hit_eos = cut_at_eos(emitted, eos_id)
        gen.steps.append(Step(tuple(drafted.tolist()), int(accepted), tuple(emitted.tolist()),
                              extra))
        return emitted, hit_eos

    def _uniforms(self, rng: np.random.Generator) -> tuple[int, int]:
        """``rng``'s uniform source (:func:`uniform_source`), looked up once per run."""
        if self.rng is not rng:
            self.rng, self.source = rng, uniform_source(rng)  # holding rng keeps it alive
        return self.source

    def _report(self, gpt: TransformerModel, draft: BoundModel | None, n_times: int) -> None:
        """Each timed forward to its model's observer: (rows, seconds)."""
        for who, n, seconds in self.times[:n_times]:
            model = gpt if who == 0 else draft.model
            if model.observer is not None:
                model.observer(int(n), float(seconds))


def tree_step_for(target: TransformerModel, tree: object, rule: str,
                  temperature: float) -> TreeStep | None:
    """The compiled verification of a greedy Medusa step (the greedy rule, or typical
    acceptance at ``temperature`` 0, which is greedy) for a GPT on the numba backend, or
    None (the Python step applies; the exact rule's chain draws even at T = 0)."""
    greedy = rule == "greedy" or (rule == "typical" and temperature == 0)
    if not greedy or _packed(target) is None:
        return None
    return TreeStep(target, tree)


class TreeStep:
    """For one Medusa run (:mod:`specdec_lite.engine.medusa_decode`): verify a tree's tokens
    greedily and commit the kept path in one compiled call (:func:`tree_kernel`); the
    tree's arrays are laid out for it once."""

    def __init__(self, target: TransformerModel, tree: object) -> None:
        self.target, self.packed = target, _packed(target)
        self.kernel = _compile()[2]
        self.depth = np.ascontiguousarray(tree.depth, dtype=np.int64)  # [N+1]
        self.parent = np.ascontiguousarray(tree.parent, dtype=np.int64)  # [N+1]
        self.ancestors = np.ascontiguousarray(tree.mask, dtype=np.bool_)  # [N+1, N+1]
        self.bias = np.where(self.ancestors, np.float32(0), np.float32(-np.inf))  # [N+1, N+1]
        self.path = np.zeros(len(self.depth), dtype=np.int64)  # [N+1]
        self.times = np.zeros((1, 3))
        self.state = np.zeros(2, dtype=np.int64)
        self.clock = clock_source()

    def __call__(self, cache: object, tokens: np.ndarray) -> tuple[np.ndarray, int] | None:
        """The kept path (node indices, ascending) and the target's next token, with the
        cache committed to the path; None where the block would not fit the cache (the
        Python step then raises its error) or a meter waits and there is no clock."""
        timed = self.target.observer is not None
        clock = self.clock if timed else UNTIMED
        if cache.n_causal + len(tokens) > cache.capacity or clock is None:
            return None
        self.state[0], self.state[1] = cache.length, cache.n_causal
        m, extra, n_times = in_kernel(
            self.kernel, self.packed, _arrays(cache),
            self.state, tokens, self.depth, self.bias, self.parent, self.ancestors, self.path,
            self.times, clock)
        cache.length, cache.n_causal = int(self.state[0]), int(self.state[1])
        if timed and n_times:
            self.target.observer(int(self.times[0, 1]), float(self.times[0, 2]))
        return self.path[:m].copy(), int(extra)
