"""EAGLE: a one-layer drafter that extrapolates the target's features (Li et al. 2024).

The target's *feature* at position i is its final hidden state f_i [d], after the last
LayerNorm: the vector its LM head turns into the distribution of token i+1. EAGLE drafts
in feature space. One transformer layer of its own reads the feature f_i together with
the token t_{i+1} that was drawn from it, predicts the next feature, and the target's own
LM head reads the prediction out::

    z_i       = [f_i, e_{i+1}] W_in + b_in     # e_{i+1} = wte[t_{i+1}] + wpe[i+1], the target's
    f^_{i+1}  = block(z_0 .. z_i)              # one pre-LN causal block with its own KV cache
    q_{i+2}   = softmax(f^_{i+1} wte^T / T)    # the target's LM head: the row of token i+2

Giving the layer the drawn token removes the uncertainty the paper names: from f_i alone
the next feature depends on which token was sampled, from (f_i, t_{i+1}) it does not.

One call of :meth:`EagleDraft.propose` after a context t_0 .. t_{n-1}:

1. **Read the features.** The target has already read t_0 .. t_{n-2} (verifying the last
   step), and its KV cache keeps the feature of every entry. ``target.hidden(context[:-1],
   start=m)`` returns f_m .. f_{n-2} without a forward (on the first call it reads the
   prompt once, a forward the verification then reuses instead of doing itself).
2. **Catch up.** The drafter keeps entries 0 .. m-1 from its last call (built from real
   features of tokens the context still has) and runs entries m .. n-2 in one call; the
   last one predicts f^_{n-1}, whose row q_1 gives the first draft x_1.
3. **Draft.** Entry n-2+i reads (f^_{n-2+i}, x_i), its own prediction and token, and gives
   q_{i+1}; k - 1 calls of one entry each. These entries are never kept: the next call
   redoes them from the target's real features.

Each x_i is drawn from q_i (warped as the target's rows are: temperature, top-k, top-p;
the argmax at T = 0), and q_i is what the proposal reports, so the exact rule stays exact
and greedy verification reproduces the target's greedy decoding whatever the drafter
predicts. The features only decide how many drafts are accepted.

The drafter needs a :class:`~specdec_lite.models.transformer.TransformerModel` target (the
features, the embeddings and the LM head are the target's); the shipped one is
``pretrained.load_eagle(target)``, trained by ``specdec_lite.training.train_eagle``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..checks import check_int, check_tokens
from ..functional import softmax32
from ..models import fast
from ..models.kernels import LN_EPS, causal_bias, fold_gain, gelu, linear, normalize
from ..models.transformer import Block, TransformerModel
from ..rules.distributions import Sampling, sample
from .proposers import Draft, FeatureView


def eagle_shapes(d: int) -> dict[str, tuple[int, ...]]:
    """The name and shape of every array a drafter of width ``d`` is stored as (matrices
    [in, out], as ``train_eagle.EagleTorch.numpy_state`` writes them)."""
    block = {"ln1.g": (d,), "ln1.b": (d,), "qkv.w": (d, 3 * d), "qkv.b": (3 * d,),
             "attn_proj.w": (d, d), "attn_proj.b": (d,), "ln2.g": (d,), "ln2.b": (d,),
             "fc.w": (d, 4 * d), "fc.b": (4 * d,), "mlp_proj.w": (4 * d, d), "mlp_proj.b": (d,)}
    return {"in_proj.w": (2 * d, d), "in_proj.b": (d,),
            **{"block." + name: shape for name, shape in block.items()}}


@dataclass(frozen=True)
class EagleWeights:
    """The drafter's own weights (read-only float32): the input map W_in [2d, d], b_in [d]
    and one block, its LayerNorm gains and the attention scale folded in as the target's
    are (:class:`~specdec_lite.models.transformer.Block`)."""

    in_w: np.ndarray  # [2d, d] reads [feature, embedding]
    in_b: np.ndarray  # [d]
    block: Block
    n_head: int

    @property
    def d_model(self) -> int:
        return self.in_b.shape[0]

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], n_head: int) -> EagleWeights:
        """Build from the stored arrays (:func:`eagle_shapes`); a missing, extra or
        misshapen array raises ``ValueError`` naming it, as does a width that ``n_head``
        does not divide."""
        n_head = check_int(n_head, "n_head", 1)
        width = np.shape(arrays.get("in_proj.b", ()))
        if len(width) != 1 or width[0] % n_head:
            raise ValueError(f"arrays: in_proj.b has shape {width}, expected (d,) with d a "
                             f"multiple of n_head={n_head}")
        d = width[0]
        expected = eagle_shapes(d)
        if set(arrays) != set(expected):
            raise ValueError(f"arrays: missing {sorted(set(expected) - set(arrays))}, "
                             f"unexpected {sorted(set(arrays) - set(expected))}")
        for name, shape in expected.items():
            if np.shape(arrays[name]) != shape:
                raise ValueError(f"arrays: {name} has shape {np.shape(arrays[name])}, "
                                 f"expected {shape}")
        p = {name: np.array(value, dtype=np.float32) for name, value in arrays.items()}
        q_scale = np.ones(3 * d, dtype=np.float32)  # [3d]
        q_scale[:d] = 1.0 / np.sqrt(d // n_head)
        qkv_w, qkv_b = fold_gain(p["block.ln1.g"], p["block.ln1.b"], p["block.qkv.w"],
                                 p["block.qkv.b"])
        fc_w, fc_b = fold_gain(p["block.ln2.g"], p["block.ln2.b"], p["block.fc.w"],
                               p["block.fc.b"])
        block = Block(qkv_w * q_scale, qkv_b * q_scale, p["block.attn_proj.w"],
                      p["block.attn_proj.b"], fc_w, fc_b, p["block.mlp_proj.w"],
                      p["block.mlp_proj.b"])
        for array in (p["in_proj.w"], p["in_proj.b"], *block):
            array.flags.writeable = False
        return cls(p["in_proj.w"], p["in_proj.b"], block, n_head)


def eagle_forward(weights: EagleWeights, features: np.ndarray, embeddings: np.ndarray,
                  kv: np.ndarray, start: int) -> np.ndarray:  # [n, d], [n, d] -> [n, d]
    """Predicted next features of n new entries after ``start`` cached ones.

    Entry i reads ``features[i]`` and ``embeddings[i]`` (the feature of a position and the
    target's embedding of the token after it); its key and value go to slot ``start + i``
    of ``kv`` [2, H, capacity, d_head], and it attends to every cached entry and to the
    new entries up to itself.
    """
    n, d = features.shape
    heads = weights.n_head
    w = weights.block
    x = np.concatenate([features, embeddings], axis=1) @ weights.in_w + weights.in_b  # [n, d]
    qkv = linear(normalize(x), w.c_attn_w, w.c_attn_b)  # [n, 3d]
    qkv = qkv.reshape(n, 3, heads, d // heads).transpose(1, 2, 0, 3)  # [3, H, n, d_head]
    end = start + n
    kv[:, :, start:end] = qkv[1:]
    scores = qkv[0] @ kv[0, :, :end].transpose(0, 2, 1)  # [H, n, end], q already scaled
    if n > 1:
        scores[:, :, start:] += causal_bias(n)
    attended = (softmax32(scores) @ kv[1, :, :end]).transpose(1, 0, 2).reshape(n, d)  # [n, d]
    x = x + linear(attended, w.attn_c_proj_w, w.attn_c_proj_b)
    hidden = gelu(linear(normalize(x), w.c_fc_w, w.c_fc_b))  # [n, 4d]
    return x + linear(hidden, w.mlp_c_proj_w, w.mlp_c_proj_b)


class EagleState:
    """One sequence's drafter cache: keys and values [2, H, capacity, d_head] of its
    entries, and the context tokens they were built from. The first ``length`` entries
    came from the target's real features of ``tokens[:length + 1]``."""

    def __init__(self, weights: EagleWeights, capacity: int) -> None:
        d_head = weights.d_model // weights.n_head
        self.kv = np.zeros((2, weights.n_head, capacity, d_head), dtype=np.float32)
        self.tokens = np.zeros(capacity + 1, dtype=np.int64)  # [capacity + 1]
        self.length = 0

    def reusable(self, context: np.ndarray) -> int:
        """How many cached entries stay valid for ``context`` [n]: entry j needs
        ``context[:j + 2]`` to equal the tokens it was built from."""
        m = min(len(context), self.length + 1)
        same = context[:m] == self.tokens[:m]  # [m]
        common = m if same.all() else int(same.argmin())
        return max(0, min(self.length, common - 1))


class EagleDraft:
    """The EAGLE drafter as a proposer for ``target`` (a
    :class:`~specdec_lite.models.transformer.TransformerModel`) with ``weights``: see the module.

    :meth:`propose_with` takes its state explicitly: a drafter cache (:meth:`new_state`,
    one per sequence) and a function that reads the target's features from wherever the
    decoder keeps them. The decoders call it through :meth:`for_sequence`, with a drafter
    cache of the run's own and the features of the cache the run verifies with, so they
    cost no target forward; ``BatchEngine`` passes each sequence's own state and the
    features of its batched target cache, so sequences sharing a batch share no drafter
    state. A drafter cache follows one sequence: a context that does not extend the last
    one is caught up from where the two agree. Drafts stay exact either way. So
    :meth:`propose_with` is the drafting every decoder runs: a subclass that drafts
    differently overrides it.

    :meth:`propose`, a direct call, drafts on a drafter cache and a target cache of its
    own, which it then drops: a pure function of its arguments.
    """

    def __init__(self, target: TransformerModel, weights: EagleWeights) -> None:
        if not isinstance(target, TransformerModel):
            raise TypeError("target must be a TransformerModel (the drafter reads its features "
                            f"and LM head), got {type(target).__name__}")
        if not isinstance(weights, EagleWeights):
            raise TypeError(f"weights must be EagleWeights, got {type(weights).__name__}")
        if weights.d_model != target.config.d_model:
            raise ValueError(f"weights have d_model={weights.d_model}, the target's features "
                             f"have d_model={target.config.d_model}")
        self.target, self.weights = target, weights
        self._compiled = None  # the layer compiled, made when the target runs numba
        self.vocab_size = target.vocab_size
        self.max_len = target.config.max_len

    def new_state(self) -> EagleState:
        """An empty drafter cache, for one sequence (see :meth:`propose_with`)."""
        return EagleState(self.weights, self.max_len)

    def layer(self, features: np.ndarray, embeddings: np.ndarray, kv: np.ndarray,
              start: int) -> np.ndarray:  # [n, d], [n, d] -> [n, d]
        """:func:`eagle_forward` on the target's backend: with the compiled (numba) one,
        the input map and the block run as one compiled call (:class:`fast.CompiledBlock`,
        the GPT's own kernels), equal to numpy's to float32 rounding."""
        compiled = self.compiled_block()
        if compiled is None:
            return eagle_forward(self.weights, features, embeddings, kv, start)
        n = len(features)
        bias = causal_bias(n) if n > 1 else np.zeros((1, 1), dtype=np.float32)  # [n, n]
        return compiled(np.concatenate([features, embeddings], axis=1), kv, start, bias)

    def compiled_block(self) -> fast.CompiledBlock | None:
        """The layer compiled (made on first use) when the target runs on the numba
        backend, else None. The compiled step of :mod:`specdec_lite.engine.compiled_step`
        drafts with it inside its kernel."""
        if getattr(self.target, "backend", "numpy") != "numba":
            return None
        if self._compiled is None:
            w = self.weights
            self._compiled = fast.CompiledBlock(w.in_w, w.in_b, w.block, w.n_head, LN_EPS)
        return self._compiled

    def embed(self, tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:  # [n] -> [n, d]
        """The target's input embedding of ``tokens`` at ``positions``."""
        return self.target.wte[tokens] + self.target.wpe[positions]

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        """Up to ``k`` tokens after ``context`` [n] and the rows q [m, V] they were drawn
        from; none for a context of one token (there is no feature yet) and fewer near the
        end of the target's window. ``n_calls`` counts drafter forwards."""
        return self.for_sequence(self.target).propose(context, k, sampling, rng)

    def for_sequence(self, target: object) -> FeatureView:
        """This drafter for one run: a drafter cache of its own, and the target's features
        read from ``target`` when it is this drafter's target on the run's cache (a
        :class:`~specdec_lite.models.bound.BoundModel`, as the decoders pass), so verifying
        and drafting share one target cache; otherwise from a target cache of its own."""
        reads = target if getattr(target, "model", None) is self.target else self.target.bound()
        return FeatureView(self, self.new_state(), reads.hidden)

    def propose_with(self, state: EagleState,
                     read_features: Callable[[np.ndarray, int], np.ndarray],
                     context: np.ndarray, k: int, sampling: Sampling,
                     rng: np.random.Generator) -> Draft:
        """:meth:`propose` with the drafter cache ``state`` (:meth:`new_state`) and
        ``read_features(tokens, start)``, which returns the target's features [n - start, d] of
        ``tokens[start:]`` after ``tokens`` [n] (as ``target.hidden(tokens, start=start)``
        does)."""
        if not isinstance(state, EagleState):
            raise TypeError(f"state must be an EagleState (see new_state), got "
                            f"{type(state).__name__}")
        context = check_tokens(context, self.vocab_size, "context")  # [n]
        n = len(context)
        k = min(check_int(k, "k", 0), self.max_len + 1 - n)
        if k <= 0 or n < 2:
            return Draft(np.zeros(0, dtype=np.int64), None, 0)
        m = min(state.reusable(context), n - 2)  # keep >= 1 entry to run: it gives q_1
        features = read_features(context[: n - 1], m)  # [n-1-m, d] f_m..f_{n-2}
        positions = np.arange(m + 1, n)  # [n-1-m] where t_{m+1}..t_{n-1} sit
        predicted = self.layer(features, self.embed(context[m + 1 :], positions),
                               state.kv, m)[-1]  # [d] f^_{n-1}
        state.tokens[:n] = context
        state.length = n - 1
        tokens = np.zeros(k, dtype=np.int64)  # [k]
        q = np.zeros((k, self.vocab_size))  # [k, V]
        compiled = self.target.compiled  # its LM head in the compiled step's arithmetic
        for i in range(k):
            logits = (predicted @ self.target.unembed if compiled is None
                      else compiled.readout(predicted[None])[0])  # [V]
            q[i] = sampling.warp(self.target.rows_from_logits(logits[None],
                                                              sampling.temperature))[0]
            tokens[i] = int(q[i].argmax()) if sampling.greedy else sample(q[i], rng)
            if i + 1 < k:  # entry n-1+i reads its own prediction and token x_{i+1}
                position = np.array([n + i])
                predicted = self.layer(predicted[None],
                                       self.embed(tokens[i : i + 1], position),
                                       state.kv, n - 1 + i)[0]
        return Draft(tokens, q, k)


__all__ = ["EagleDraft", "EagleState", "EagleWeights", "eagle_forward", "eagle_shapes"]
