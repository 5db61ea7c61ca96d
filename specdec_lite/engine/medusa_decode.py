"""Medusa decoding, one step at a time (Cai et al. 2024; the heads and trees are in
:mod:`specdec_lite.drafting.medusa`).

:func:`medusa_start` checks the arguments, runs the prompt through the target and emits
the first token; each :func:`medusa_step` then lets the heads propose a tree, verifies
it with one target call and emits the accepted path plus one token. The state between
steps is a :class:`MedusaRun`: the sequence's own KV cache, its Generator and its
trace. So a server can advance many Medusa
sequences a step each in turn, and stop one between any two steps;
:func:`medusa_generate` runs one to the end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..checks import check_eos, check_int, check_prompt
from ..drafting.medusa import MEDUSA_RULES, MedusaHeads, Tree, chain_tree, dense_tree
from ..functional import softmax
from ..models.bound import BoundModel
from ..models.transformer import KVCache, TransformerModel
from ..rules.distributions import (
    apply_temperature,
    as_generator,
    check_temperature,
    check_top_k,
    check_top_p,
    sample,
    warp,
)
from ..rules.verify import acceptance_mask, check_rule, verify_checked
from . import compiled_step
from .compiled_step import UNTIMED, TreeStep, cache_arrays, packed_gpt, tree_step_for
from .kernel_time import in_kernel
from .native_calls import clock_source, uniform_source
from .step_kernels import compiled_kernels
from .trace import Generation, Step, cut_at_eos


@dataclass
class MedusaRun:
    """One Medusa sequence between steps. ``out`` holds the emitted tokens, ``root`` the
    last of them (not yet in the cache), ``hidden`` [d] the target's hidden state the
    heads read next; ``done`` once ``max_new_tokens`` or EOS is reached."""

    target: TransformerModel
    heads: MedusaHeads
    tree: Tree
    rule: str
    params: dict
    temperature: float
    top_k: int | None
    top_p: float | None
    eos_id: int | None
    max_new_tokens: int
    rng: np.random.Generator
    cache: KVCache
    gen: Generation
    out: list[int] = field(default_factory=list)
    root: int = -1
    hidden: np.ndarray | None = None
    done: bool = False
    started: float = 0.0
    first_child: dict[int, int] = field(default_factory=dict)  # node -> its best-ranked child
    verify: TreeStep | None = None  # the compiled greedy verification, where it applies

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.rule == "greedy"

    def emit_from(self, logits: np.ndarray) -> int:  # [V] -> one token: argmax, or sampled
        if self.greedy:
            return int(logits.argmax())
        return sample(warp(softmax(logits), self.temperature, self.top_k, self.top_p), self.rng)


def medusa_start(
    target: TransformerModel,
    heads: MedusaHeads,
    prompt: np.ndarray,
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    tree: Tree | None = None,
    rule: str = "greedy",
    seed: int | np.random.Generator | None = None,
    eos_id: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    cache: KVCache | None = None,
    **rule_params: float,
) -> MedusaRun:
    """Check the arguments (those of :func:`medusa_generate`), run the prompt and emit the
    first token. ``cache``: the sequence's KV cache (``target.new_state()``); None makes a
    new one (or takes the cache of a bound target, ``target.bound(cache)``)."""
    if isinstance(target, BoundModel):
        target, cache = target.model, target.cache if cache is None else cache
    if not isinstance(target, TransformerModel):
        raise TypeError("target must be a TransformerModel (Medusa needs its KV cache)")
    if not isinstance(heads, MedusaHeads):
        raise TypeError("heads must be a MedusaHeads")
    if heads.vocab_size != target.vocab_size or heads.d_model != target.config.d_model:
        raise ValueError(
            f"heads (V={heads.vocab_size}, d={heads.d_model}) do not fit the target "
            f"(V={target.vocab_size}, d={target.config.d_model})"
        )
    if rule not in MEDUSA_RULES:
        raise ValueError(f"rule must be one of {MEDUSA_RULES}, got {rule!r}")
    params = check_rule(rule, rule_params)
    prompt = check_prompt(prompt, target.vocab_size)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
    temperature = check_temperature(temperature)
    top_k, top_p = check_top_k(top_k), check_top_p(top_p)
    if (top_k, top_p) != (None, None) and rule != "exact":
        raise ValueError(f"top_k and top_p need rule='exact', got rule={rule!r}")
    if temperature == 0:
        top_k = top_p = None
    eos_id = check_eos(eos_id, target.vocab_size)
    if tree is None:
        tree = chain_tree(heads.n_heads) if rule == "exact" else dense_tree(
            [3, 2, 2, 1][: heads.n_heads])
    if not isinstance(tree, Tree):
        raise TypeError(f"tree must be a Tree (see make_tree), got {type(tree).__name__}")
    if tree.max_depth > heads.n_heads:
        raise ValueError(f"tree has depth {tree.max_depth} but there are {heads.n_heads} heads")
    if rule == "exact" and not tree.is_chain:
        raise ValueError('rule="exact" verifies a chain: pass tree=chain_tree(depth)')
    limit = target.config.max_len
    if len(prompt) + max_new_tokens + tree.max_depth > limit:
        raise ValueError(
            f"max_new_tokens: prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) + "
            f"tree depth ({tree.max_depth}) exceeds the target's max_len {limit}"
        )
    cache = target.new_state() if cache is None else cache
    run = MedusaRun(target, heads, tree, rule, params, temperature, top_k, top_p, eos_id,
                    max_new_tokens, as_generator(seed), cache,
                    Generation(tokens=np.zeros(0, dtype=np.int64), prompt=prompt),
                    started=time.perf_counter(),
                    first_child={int(p): i for i, p in reversed(list(enumerate(tree.parent)))
                                 if i > 0},
                    verify=tree_step_for(target, tree, rule, temperature))
    if max_new_tokens == 0:
        run.done = True
        return run
    logits = target.logits(prompt, cache=cache)[-1]  # [V]
    run.hidden = target.hidden_at(len(prompt) - 1, cache=cache)  # [d]
    run.gen.n_target_calls += 1
    run.root = run.emit_from(logits)
    run.out.append(run.root)
    run.gen.steps.append(Step((), 0, (run.root,), "sample"))
    run.done = len(run.out) >= max_new_tokens or run.root == eos_id
    return run


def medusa_step(run: MedusaRun) -> list[int]:
    """One step of ``run``: the heads propose the tree, one target call scores it, the
    deepest accepted path and one more token are emitted (returned) and committed."""
    if run.done:
        raise ValueError("this Medusa run is already done")
    target, tree, gen = run.target, run.tree, run.gen
    first_child = run.first_child
    head_logits = run.heads.logits(run.hidden[None])[:, 0]  # [H, V]
    gen.n_head_calls += 1
    node_tokens, q = _node_tokens(tree, head_logits, run.rule, run.temperature, run.rng,
                                  run.top_k, run.top_p)  # [N]
    tokens = np.concatenate([[run.root], node_tokens])  # [N+1], the root first
    gen.n_target_calls += 1
    verified = run.verify(run.cache, tokens) if run.verify is not None else None
    if verified is not None:  # greedy on the numba backend: scored, judged and committed
        path, extra_token = verified
        extra = "correction" if int(path[-1]) in first_child else "bonus"
    else:
        path, extra_token, extra = _verify(run, tokens, node_tokens, q)
        target.commit_path(path, cache=run.cache)
    last = int(path[-1])
    run.hidden = target.hidden_at(run.cache.n_causal - 1, cache=run.cache)  # [d]
    child = first_child.get(last)
    kept = tokens[path[1:]].tolist()  # the accepted path below the root
    proposed = kept + ([int(tokens[child])] if child else [])
    emitted = np.array(kept + [extra_token], dtype=np.int64)
    emitted = emitted[: run.max_new_tokens - len(run.out)]
    emitted, hit_eos = cut_at_eos(emitted, run.eos_id)
    gen.steps.append(Step(tuple(proposed), len(path) - 1, tuple(emitted.tolist()), extra))
    run.out += emitted.tolist()
    run.root = extra_token
    run.done = hit_eos or len(run.out) >= run.max_new_tokens
    return emitted.tolist()


def _verify(run: MedusaRun, tokens: np.ndarray, node_tokens: np.ndarray,
            q: np.ndarray | None) -> tuple[np.ndarray, int, str]:
    """Score the tree ``tokens`` [N+1] with one target call and judge it by the run's
    rule: the kept path (node indices, ascending), the extra token and its kind."""
    target, tree = run.target, run.tree
    forward = target.score_tree(tokens, tree.depth, tree.mask, cache=run.cache)
    if run.rule == "exact":
        p = warp(softmax(forward.logits), run.temperature, run.top_k, run.top_p)  # [N+1, V]
        result = verify_checked(node_tokens, q, p, run.rng, "exact", {})  # inputs built here
        path = np.arange(result.n_accepted + 1)  # root + accepted chain
        extra_token, extra = int(result.tokens[-1]), result.extra
    else:
        ok = _accept(tokens, tree.parent, forward.logits, run.rule, run.temperature,
                     run.params)  # [N+1]
        accepted = ~(tree.mask & ~ok[None, :]).any(axis=1)  # [N+1] whole path ok
        last = int(np.where(accepted, tree.depth, -1).argmax())
        path = np.flatnonzero(tree.mask[last])  # ancestors of last, ascending
        extra_token = run.emit_from(forward.logits[last])
        extra = "correction" if last in run.first_child else "bonus"
    return path, extra_token, extra


def medusa_finish(run: MedusaRun) -> Generation:
    """``run``'s trace, with its tokens and wall time."""
    run.gen.tokens = np.asarray(run.out, dtype=np.int64)
    run.gen.wall_time_s = time.perf_counter() - run.started
    return run.gen


def medusa_generate(target: TransformerModel, heads: MedusaHeads, prompt: np.ndarray, *,
                    max_new_tokens: int, temperature: float = 0.0, tree: Tree | None = None,
                    rule: str = "greedy", seed: int | np.random.Generator | None = None,
                    eos_id: int | None = None, top_k: int | None = None,
                    top_p: float | None = None, **rule_params: float) -> Generation:
    """Medusa decoding: one target forward per step verifies a whole candidate tree.

    The first target call runs the prompt and emits one token; each later call forwards
    the root plus ``tree``'s nodes (default :func:`chain_tree` for ``"exact"``, else
    ``dense_tree([3, 2, 2, 1])`` cut to the number of heads) and emits the deepest
    accepted path plus one token. In the trace, ``Step.proposed`` is the accepted path
    followed by the best-ranked child that was rejected (if the path could go deeper), so
    ``acceptance_rate`` is accepted / (accepted + rejections) along the chosen path.
    Calls are counted as ``n_target_calls`` (one per step) and ``n_head_calls`` (one per
    step after the first); there is no draft model, so ``n_draft_calls`` stays 0.
    ``top_k`` and ``top_p`` (rule ``"exact"`` only; ignored at ``temperature=0``) warp the
    heads' q and the target's p alike, after temperature, as in
    :func:`specdec_lite.engine.decode.speculative_generate`. Runs on a new cache, or on
    the filled one of ``target.bound(cache)`` (see :func:`medusa_start`).
    """
    run = medusa_start(target, heads, prompt, max_new_tokens=max_new_tokens,
                       temperature=temperature, tree=tree, rule=rule, seed=seed, eos_id=eos_id,
                       top_k=top_k, top_p=top_p, **rule_params)
    if not run.done:
        run_compiled(run)  # every step in one call, where it applies
    while not run.done:
        medusa_step(run)
    return medusa_finish(run)


def run_compiled(run: MedusaRun) -> bool:
    """Every step left of ``run`` in one compiled call of
    :mod:`~specdec_lite.engine.medusa_kernels`, the steps :func:`medusa_step` would take,
    with the same draws, recorded alike: the exact rule on a chain without top-k or top-p
    (:func:`~specdec_lite.engine.medusa_kernels.chain_run_kernel`), or a tree verified
    greedily (:func:`~specdec_lite.engine.medusa_kernels.tree_run_kernel`), with a GPT
    target on the numba backend whose cache holds the run. Elsewhere (or with a meter and
    no clock) it returns False and takes no step."""
    packed = packed_gpt(run.target)
    chain = (run.rule == "exact" and run.tree.is_chain and run.top_k is None
             and run.top_p is None)
    if packed is None or not (chain or run.verify is not None):
        return False
    observers = (run.target.observer, run.heads.observer)
    clock = clock_source() if observers != (None, None) else UNTIMED
    n_prompt, depth, cache, gen = len(run.gen.prompt), run.tree.max_depth, run.cache, run.gen
    total = n_prompt + run.max_new_tokens  # [prompt, every token]
    if clock is None or total + run.tree.n_nodes + 1 > cache.capacity:
        return False
    buf = np.concatenate([gen.prompt, run.out, np.zeros(run.max_new_tokens - len(run.out),
                                                        dtype=np.int64)])  # [total]
    left = run.max_new_tokens - len(run.out)  # at most one step per token left
    record = np.zeros((left, 4), dtype=np.int64)  # [steps, (proposed, accepted, out, extra)]
    proposed = np.zeros((left, depth + 1), dtype=np.int64)  # [steps, depth + 1]
    times = np.zeros((2 * left, 3))  # the heads and the target, each step
    state = np.array([cache.length, cache.n_causal], dtype=np.int64)
    heads, kernels, done = run.heads, compiled_kernels(), len(run.out)
    eos = -1 if run.eos_id is None else run.eos_id
    if chain:
        draw, source = uniform_source(run.rng)
        n_steps, produced, n_times = in_kernel(
            kernels.medusa_chain, packed, cache_arrays(cache), state, heads.w1, heads.b1,
            heads.w2, buf, n_prompt, done, run.max_new_tokens, depth, run.temperature, draw,
            source, eos, record, proposed, times, clock)
    else:
        tree, step = run.tree, run.verify
        first_child = np.full(tree.n_nodes + 1, -1, dtype=np.int64)  # [N+1]
        for node, child in run.first_child.items():
            first_child[node] = child
        n_steps, produced, n_times = in_kernel(
            kernels.medusa_tree, packed, cache_arrays(cache), state, heads.w1, heads.b1,
            heads.w2, buf, n_prompt, done, run.max_new_tokens, step.depth,
            np.ascontiguousarray(tree.rank, dtype=np.int64), step.parent, step.bias,
            step.ancestors, first_child, eos, record, proposed, times, clock)
    cache.length, cache.n_causal = int(state[0]), int(state[1])
    compiled_step.record_steps(gen, buf[n_prompt + done : n_prompt + produced],
                               record[:n_steps], proposed[:n_steps], model_calls=False)
    gen.n_target_calls += n_steps
    gen.n_head_calls += n_steps
    compiled_step.report_times(observers, times[:n_times])
    run.out = buf[n_prompt : n_prompt + produced].tolist()
    run.root = run.out[-1]
    run.hidden = run.target.hidden_at(cache.n_causal - 1, cache=cache)  # [d]
    run.done = True
    return True


def _node_tokens(tree: Tree, head_logits: np.ndarray, rule: str, temperature: float,
                 rng: np.random.Generator, top_k: int | None = None,
                 top_p: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Candidate tokens [N] for the tree's nodes (root excluded) from head logits [H, V].

    ``"exact"`` samples the chain x_i ~ q_i (returned as the second value, [N, V]); the other
    rules take each head's ranked tokens."""
    depth = tree.depth[1:] - 1  # [N] head index of each node
    if rule == "exact":
        q = warp(softmax(head_logits[: tree.max_depth]), temperature, top_k, top_p)  # [D, V]
        if temperature == 0:
            tokens = q.argmax(axis=1)
        else:
            tokens = np.array([sample(row, rng) for row in q])
        return tokens[depth], q
    top = int(tree.rank.max()) + 1
    ranked = np.argsort(-head_logits[: tree.max_depth], axis=1, kind="stable")[:, :top]  # [D, s]
    return ranked[depth, tree.rank[1:]], None


def _accept(tokens: np.ndarray, parent: np.ndarray, logits: np.ndarray, rule: str,
            temperature: float, params: dict) -> np.ndarray:
    """[N+1] bool: does the target, at each node's parent, accept the node's token?
    The root is always accepted."""
    parent_logits = logits[parent[1:]]  # [N, V]
    node = tokens[1:]  # [N]
    if temperature == 0 or rule == "greedy":
        ok = acceptance_mask(node, None, parent_logits, None, "greedy")
    else:
        p = apply_temperature(softmax(parent_logits), temperature)  # [N, V]
        ok = acceptance_mask(node, None, p, None, "typical", **params)
    return np.concatenate([[True], ok])


__all__ = ["MedusaRun", "medusa_finish", "medusa_generate", "medusa_start", "medusa_step",
           "run_compiled"]
