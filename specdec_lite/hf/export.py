"""Export the shipped GPTs to Hugging Face ``transformers``' GPT-2 format.

:func:`export_pretrained` writes the shipped target and draft (``specdec_lite.pretrained``)
as two ``GPT2LMHeadModel`` directories made with ``save_pretrained`` (``config.json`` and
``model.safetensors``), each with a character tokenizer that ``AutoTokenizer`` loads
(``tokenizer.json``), so that ``transformers`` and :class:`specdec_lite.hf.bridge.HFModel` read
them from disk with no hub.

The weights are the trained ones, unfolded: the numpy GPT folds each LayerNorm's gain and
shift into the linear map after it, and the attention scale 1/sqrt(d_head) into the query
columns, when it *loads* a file (``TransformerModel.__init__``). The ``.npz`` files keep the
parameters as trained, so the export reads those (checksum-verified) and copies them into
GPT-2's layout unchanged: real LayerNorm gains and shifts, plain query weights, and GPT-2
applies the scale itself (``scale_attn_weights``). No arithmetic touches a weight, so the
exported network is the numpy one up to float32 rounding in a different summation order.

Layout map (both store matrices as [in, out]; GPT-2's ``Conv1D`` does too)::

    wte, wpe                -> transformer.wte.weight, transformer.wpe.weight (lm_head tied)
    blocks.i.ln1.{g,b}      -> transformer.h.i.ln_1.{weight,bias}
    blocks.i.qkv.{w,b}      -> transformer.h.i.attn.c_attn.{weight,bias}   (q | k | v)
    blocks.i.attn_proj.{w,b}-> transformer.h.i.attn.c_proj.{weight,bias}
    blocks.i.ln2.{g,b}      -> transformer.h.i.ln_2.{weight,bias}
    blocks.i.fc.{w,b}       -> transformer.h.i.mlp.c_fc.{weight,bias}
    blocks.i.mlp_proj.{w,b} -> transformer.h.i.mlp.c_proj.{weight,bias}
    ln_f.{g,b}              -> transformer.ln_f.{weight,bias}

The Medusa heads are not exported: GPT-2 has no place for them.
Needs the ``hf`` extra (torch, transformers); imported lazily.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..models.tokenizer import ASCII_ALPHABET
from ..models.transformer import LN_EPS, TransformerConfig, load_npz
from ..pretrained import WEIGHTS_DIR, load_manifest

NAMES = ("target", "draft")


def gpt2_config(config: TransformerConfig) -> object:
    """The ``GPT2Config`` of a numpy GPT of ``config``: tied embeddings, tanh GELU
    (``gelu_new``), LayerNorm epsilon 1e-5, no dropout and no special tokens."""
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=config.vocab_size, n_positions=config.max_len, n_embd=config.d_model,
        n_layer=config.n_layer, n_head=config.n_head, n_inner=4 * config.d_model,
        activation_function="gelu_new", layer_norm_epsilon=LN_EPS,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, scale_attn_weights=True,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )


def gpt2_state_dict(config: TransformerConfig, params: dict[str, np.ndarray]) -> dict:
    """GPT-2 tensors (float32) from parameters named as in ``train.GPT.numpy_state``.

    Raises ``ValueError`` naming a missing parameter or one of the wrong shape.
    """
    import torch

    d, V = config.d_model, config.vocab_size
    shapes = {"wte": (V, d), "wpe": (config.max_len, d), "ln_f.g": (d,), "ln_f.b": (d,)}
    names = {"wte": "transformer.wte.weight", "wpe": "transformer.wpe.weight",
             "ln_f.g": "transformer.ln_f.weight", "ln_f.b": "transformer.ln_f.bias"}
    per_block = {"ln1.g": ("ln_1.weight", (d,)), "ln1.b": ("ln_1.bias", (d,)),
                 "qkv.w": ("attn.c_attn.weight", (d, 3 * d)),
                 "qkv.b": ("attn.c_attn.bias", (3 * d,)),
                 "attn_proj.w": ("attn.c_proj.weight", (d, d)),
                 "attn_proj.b": ("attn.c_proj.bias", (d,)),
                 "ln2.g": ("ln_2.weight", (d,)), "ln2.b": ("ln_2.bias", (d,)),
                 "fc.w": ("mlp.c_fc.weight", (d, 4 * d)), "fc.b": ("mlp.c_fc.bias", (4 * d,)),
                 "mlp_proj.w": ("mlp.c_proj.weight", (4 * d, d)),
                 "mlp_proj.b": ("mlp.c_proj.bias", (d,))}
    for i in range(config.n_layer):
        for ours, (theirs, shape) in per_block.items():
            names[f"blocks.{i}.{ours}"] = f"transformer.h.{i}.{theirs}"
            shapes[f"blocks.{i}.{ours}"] = shape
    state = {}
    for ours, theirs in names.items():
        if ours not in params:
            raise ValueError(f"params lacks {ours!r}")
        value = np.asarray(params[ours], dtype=np.float32)
        if value.shape != shapes[ours]:
            raise ValueError(f"params[{ours!r}] has shape {value.shape}, expected {shapes[ours]}")
        state[theirs] = torch.from_numpy(value.copy())
    state["lm_head.weight"] = state["transformer.wte.weight"]  # tied
    return state


def gpt2_model(config: TransformerConfig, params: dict[str, np.ndarray]) -> object:
    """A float32 ``GPT2LMHeadModel`` in eval mode holding ``params`` (see module docstring)."""
    import torch
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel(gpt2_config(config)).to(torch.float32)
    missing, unexpected = model.load_state_dict(gpt2_state_dict(config, params), strict=False)
    # the causal-mask buffers some versions keep are not parameters; nothing else may be left
    missing = [m for m in missing if not m.endswith((".attn.bias", ".attn.masked_bias"))]
    if missing or unexpected:
        raise ValueError(f"GPT-2 state mismatch: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model.eval()


def char_tokenizer(alphabet: str = ASCII_ALPHABET) -> object:
    """A ``PreTrainedTokenizerFast`` with one id per character of ``alphabet``, in order
    (the ids of :class:`specdec_lite.models.tokenizer.CharTokenizer`), no special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({ch: i for i, ch in enumerate(alphabet)},
                                      unk_token=None))
    # every character, newline included, is its own word; decoding glues them back
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, clean_up_tokenization_spaces=False)


def export_pretrained(out_dir: str | Path, names: tuple[str, ...] = NAMES,
                      weights_dir: str | Path = WEIGHTS_DIR) -> dict[str, Path]:
    """Write each shipped model of ``names`` to ``out_dir/<name>`` (``save_pretrained``,
    safetensors, plus the character tokenizer); return {name: directory}.

    The parameters come from the checksum-verified ``.npz`` files named in the weights
    manifest, as trained (see the module docstring).
    """
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names:
        raise ValueError(f"names must be a non-empty subset of {NAMES}, got {names}")
    weights_dir = Path(weights_dir)
    models = load_manifest(weights_dir)["models"]
    out, tokenizer = {}, char_tokenizer()
    for name in names:
        entry = models[name]
        config = TransformerConfig(**entry["config"])
        params = load_npz(weights_dir / entry["file"], entry["sha256"])
        path = Path(out_dir) / name
        gpt2_model(config, params).save_pretrained(path, safe_serialization=True)
        tokenizer.save_pretrained(path)
        out[name] = path
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m specdec_lite.hf.export OUT_DIR``: export the target and the draft."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m specdec_lite.hf.export",
                                     description="export the shipped GPTs to GPT-2 format")
    parser.add_argument("out_dir", help="directory to write target/ and draft/ into")
    args = parser.parse_args(argv)
    for name, path in export_pretrained(args.out_dir).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
