"""Early exit: the target drafts for itself with its first layers (self-speculation).

A GPT's residual stream after block m already holds a rough guess of the next token; the
last blocks refine it. An early-exit draft runs only the target's first ``m`` blocks and
reads the stream there with a small *exit head* of its own::

    x_m = block_{m-1}( ... block_0(wte[t] + wpe[i]) ... )   # the target's own blocks, [n, d]
    q   = softmax(LN_exit(x_m) U_exit / T)                  # U_exit [d, V], trained

The target's final LayerNorm and tied LM head were trained to read the stream after the
*last* block; read at block m they give a poor guess, so the exit head (a LayerNorm and an
untied [d, V] projection, about 19 k parameters for the shipped target) is trained to
match the target's distributions, with the target frozen
(``specdec_lite.training.train_early_exit``,
LayerSkip's idea without retraining the target). The draft is a plain
:class:`~specdec_lite.models.transformer.TransformerModel` of ``m`` layers, so it drafts wherever a
draft model does (every decoder, the batched engine, the compiled backend), and the exact
rule and greedy verification hold as for any draft.

What it costs: m of the target's L blocks per drafted token, so c is about m / L, more
than a separately trained small draft; what it saves is a second model to train, ship and
keep in memory, beyond the head.

Its cache is the target's. The draft's first m blocks are the target's, so the keys and
values they give each committed token are the ones the target already holds in its first
m layers. Drafting beside its target (:func:`shared_blocks` says when), the draft reads
them there (:meth:`~specdec_lite.models.kv_cache.KVCache.sharing`) instead of computing its
own: it never catches up over the tokens decoded while it was idle, which a draft with a
cache of its own must (LayerSkip's cache reuse, on the drafting side). Before each
drafting step both caches are brought to the sequence less its last token, the target
forwarding what it lacks of it (a prompt, once:
:meth:`~specdec_lite.drafting.proposers.ModelDraft.align`), so the entries the draft
writes, from there on, are the ones the target's verification then writes over; the
target never reads an entry the draft wrote. The batched engine keeps its drafts' caches
in its own arrays and does not share them.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..models.transformer import TransformerConfig, TransformerModel


def head_shapes(d: int, vocab: int, exit_layer: int) -> dict[str, tuple[int, ...]]:
    """The arrays of the exit head after block ``exit_layer`` (1-based: it reads the
    stream after that many blocks), as the weights file stores them."""
    return {f"layer{exit_layer}.ln_f.g": (d,), f"layer{exit_layer}.ln_f.b": (d,),
            f"layer{exit_layer}.unembed": (d, vocab)}


def early_exit_model(config: TransformerConfig, target_arrays: dict[str, np.ndarray],
                     head_arrays: dict[str, np.ndarray], exit_layer: int,
                     backend: str = "numpy") -> TransformerModel:
    """The draft that runs the first ``exit_layer`` blocks of the target stored as
    ``target_arrays`` (a GPT of ``config``, named as ``train.GPT.numpy_state`` writes it)
    and reads them out with the exit head in ``head_arrays``.

    Raises ``ValueError`` naming ``exit_layer`` when it is not in [1, n_layer - 1] (an
    exit after the last block is the target itself) or the file has no head for it, and
    naming the array whose shape differs from :func:`head_shapes`."""
    if isinstance(exit_layer, bool) or not isinstance(exit_layer, int | np.integer):
        raise TypeError(f"exit_layer must be an int, got {type(exit_layer).__name__}")
    if not 1 <= exit_layer < config.n_layer:
        raise ValueError(f"exit_layer must be in [1, {config.n_layer - 1}] (the target has "
                         f"{config.n_layer} blocks), got {exit_layer}")
    shapes = head_shapes(config.d_model, config.vocab_size, int(exit_layer))
    for name, shape in shapes.items():
        if name not in head_arrays:
            raise ValueError(f"exit_layer: the weights hold no exit head after block "
                             f"{exit_layer} (no array {name})")
        if np.shape(head_arrays[name]) != shape:
            raise ValueError(f"{name} has shape {np.shape(head_arrays[name])}, expected {shape}")
    g, b, unembed = (head_arrays[name] for name in shapes)
    params = {"wte": target_arrays["wte"], "wpe": target_arrays["wpe"],
              "ln_f.g": g, "ln_f.b": b, "unembed": unembed}
    params |= {name: value for name, value in target_arrays.items()
               if name.startswith("blocks.") and int(name.split(".")[1]) < exit_layer}
    draft_config = TransformerConfig(vocab_size=config.vocab_size, n_layer=int(exit_layer),
                                     n_head=config.n_head, d_model=config.d_model,
                                     max_len=config.max_len)
    return TransformerModel(draft_config, params, backend=backend)


_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # draft -> (target ref, m)


def shared_blocks(draft: object, target: object) -> int:
    """m when ``draft`` (a GPT) runs ``target``'s first m blocks unchanged, with the same
    embeddings, head count and window, so that its keys and values for a token are the
    target's first m layers' (an early-exit draft of that target); else 0. Compared once
    per pair of models, then remembered while both live."""
    if not isinstance(draft, TransformerModel) or not isinstance(target, TransformerModel):
        return 0
    known = _SHARED.get(draft)
    if known is not None and known[0]() is target:
        return known[1]
    d, t = draft.config, target.config
    same = (d.n_layer < t.n_layer and (d.vocab_size, d.n_head, d.d_model, d.max_len)
            == (t.vocab_size, t.n_head, t.d_model, t.max_len)
            and np.array_equal(draft.wte, target.wte) and np.array_equal(draft.wpe, target.wpe)
            and all(np.array_equal(a, b)
                    for mine, theirs in zip(draft.layers, target.layers, strict=False)
                    for a, b in zip(mine, theirs, strict=True)))
    m = d.n_layer if same else 0
    _SHARED[draft] = (weakref.ref(target), m)
    return m
