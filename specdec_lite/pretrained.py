"""The shipped models: a character GPT target, a distilled draft GPT and Medusa heads
(:func:`load_pretrained`), an EAGLE drafter for the target (:func:`load_eagle`) and
early-exit drafts made of the target's first blocks (:func:`load_early_exit`).

The first three were trained by ``specdec_lite.training.train``, the drafter by
``specdec_lite.training.train_eagle``, the exit heads by
``specdec_lite.training.train_early_exit``, on the bundled standard-library corpus;
``weights/manifest.json`` records each one's configuration, seed, steps, held-out loss
or acceptance, and sha256, and loading checks every file against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import check_int
from .drafting.eagle import EagleDraft, EagleWeights
from .drafting.early_exit import early_exit_model
from .drafting.medusa import MedusaHeads
from .models import fast
from .models.tokenizer import CharTokenizer
from .models.transformer import BACKENDS, TransformerConfig, TransformerModel, load_npz

WEIGHTS_DIR = Path(__file__).parent / "weights"
CONFIG_FIELDS = ("vocab_size", "n_layer", "n_head", "d_model", "max_len")


@dataclass
class Pretrained:
    """What :func:`load_pretrained` returns."""

    target: TransformerModel
    draft: TransformerModel
    heads: MedusaHeads
    tokenizer: CharTokenizer
    manifest: dict


def load_manifest(weights_dir: str | Path = WEIGHTS_DIR) -> dict:
    """The parsed ``manifest.json`` of ``weights_dir``."""
    path = Path(weights_dir) / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"weights manifest {path} does not exist")
    return json.loads(path.read_text())


def read_config(config: object, where: str) -> TransformerConfig:
    """A manifest entry's ``config`` as a :class:`TransformerConfig`: exactly the five
    fields, each an int >= 1, with ``d_model`` a multiple of ``n_head``. ``ValueError``
    names ``where`` and the field."""
    if not isinstance(config, dict) or set(config) != set(CONFIG_FIELDS):
        have = sorted(config) if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"{where}.config must hold exactly {list(CONFIG_FIELDS)}, got {have}")
    values = {name: check_int(config[name], f"{where}.config.{name}", 1)
              for name in CONFIG_FIELDS}
    if values["d_model"] % values["n_head"]:
        raise ValueError(f"{where}.config: d_model={values['d_model']} is not a multiple of "
                         f"n_head={values['n_head']}")
    return TransformerConfig(**values)


def gpt_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every array a GPT of ``config`` is stored as (matrices [in, out],
    as ``train.GPT.numpy_state`` writes them)."""
    d, v = config.d_model, config.vocab_size
    shapes = {"wte": (v, d), "wpe": (config.max_len, d), "ln_f.g": (d,), "ln_f.b": (d,)}
    for i in range(config.n_layer):
        b = f"blocks.{i}."
        shapes |= {b + "ln1.g": (d,), b + "ln1.b": (d,), b + "qkv.w": (d, 3 * d),
                   b + "qkv.b": (3 * d,), b + "attn_proj.w": (d, d), b + "attn_proj.b": (d,),
                   b + "ln2.g": (d,), b + "ln2.b": (d,), b + "fc.w": (d, 4 * d),
                   b + "fc.b": (4 * d,), b + "mlp_proj.w": (4 * d, d), b + "mlp_proj.b": (d,)}
    return shapes


def check_gpt_arrays(config: TransformerConfig, arrays: dict[str, np.ndarray],
                     where: str) -> None:
    """Raise ``ValueError`` unless ``arrays`` (a weights file) are a GPT of ``config``.

    The sizes the file itself fixes are compared first, so the message names the config
    field that disagrees: ``vocab_size`` and ``d_model`` (``wte``), ``max_len``
    (``wpe``), ``n_layer`` (how many ``blocks.i``); then every array's shape. ``n_head``
    shapes no array (the heads split d_model), so it can only be checked against a
    config the file carries itself, as ``config.<field>`` scalars: when those are there,
    all five fields must equal the manifest's. ``where`` names the file in messages.
    """
    stored = {name[len("config."):]: value for name, value in arrays.items()
              if name.startswith("config.")}
    for name, value in stored.items():
        if name not in CONFIG_FIELDS or np.shape(value) != ():
            raise ValueError(f"{where}: unknown config entry config.{name} in the file")
        if int(value) != getattr(config, name):
            raise ValueError(f"{where}: the manifest says {name}={getattr(config, name)}, "
                             f"the weights file says {name}={int(value)}")
    weights = {name: np.shape(a) for name, a in arrays.items() if not name.startswith("config.")}
    found = {}
    if len(weights.get("wte", ())) == 2:
        found["vocab_size"], found["d_model"] = weights["wte"]
    if len(weights.get("wpe", ())) == 2:
        found["max_len"] = weights["wpe"][0]
    layers = {name.split(".")[1] for name in weights if name.startswith("blocks.")}
    found["n_layer"] = len(layers)
    for name, value in found.items():
        if value != getattr(config, name):
            raise ValueError(f"{where}: the manifest says {name}={getattr(config, name)}, "
                             f"the weights have {name}={value}")
    expected = gpt_shapes(config)
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        raise ValueError(f"{where}: arrays missing {missing[:4]}, unexpected {extra[:4]} "
                         f"for the manifest's config {config}")
    for name, shape in expected.items():
        if weights[name] != shape:
            raise ValueError(f"{where}: {name} has shape {weights[name]}, the manifest's "
                             f"config {config} needs {shape}")


BACKEND_CHOICES = ("auto", *BACKENDS)


def resolve_backend(backend: str) -> str:
    """The forward a run uses: ``"auto"`` is the compiled one (``"numba"``) where the
    ``fast`` extra is installed, else ``"numpy"``. Raises ``ValueError`` naming ``backend``
    for an unknown name, or for ``"numba"`` without numba."""
    if backend not in BACKEND_CHOICES:
        raise ValueError(f"backend must be one of {BACKEND_CHOICES}, got {backend!r}")
    if backend == "auto":
        return "numba" if fast.available() else "numpy"
    if backend == "numba" and not fast.available():
        raise ValueError(f"backend 'numba' needs numba: {fast.INSTALL_HINT}")
    return backend


def load_pretrained(weights_dir: str | Path = WEIGHTS_DIR, backend: str = "numpy") -> Pretrained:
    """Load the target, draft, Medusa heads and tokenizer.

    ``backend`` is the GPTs' forward: ``"numpy"`` (the reference) or ``"numba"`` (the
    compiled, fused forward of the ``fast`` extra; see ``TransformerModel.use_backend``).

    Each file is checked against its sha256, and its arrays against the manifest's config
    (:func:`check_gpt_arrays`: vocabulary, width, window, layers, every shape; the heads'
    count, width and vocabulary): a manifest that disagrees with its weights raises
    ``ValueError`` naming the model and the field, instead of loading a different network.
    Each call returns fresh models with empty KV caches.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    weights_dir = Path(weights_dir)
    manifest = load_manifest(weights_dir)
    models = manifest.get("models", {})
    missing = [name for name in ("target", "draft", "heads") if name not in models]
    if missing:
        raise ValueError(f"{weights_dir / 'manifest.json'} lacks entries for {missing}")

    def gpt(name: str) -> TransformerModel:
        entry = models[name]
        config = read_config(entry.get("config"), f"manifest models.{name}")
        arrays = load_npz(weights_dir / entry["file"], entry["sha256"])
        check_gpt_arrays(config, arrays, f"models.{name} ({entry['file']})")
        return TransformerModel(config, {key: value for key, value in arrays.items()
                                         if not key.startswith("config.")}, backend=backend)

    target, draft = gpt("target"), gpt("draft")
    entry = models["heads"]
    heads = MedusaHeads.from_npz(weights_dir / entry["file"], entry["sha256"])
    where = f"models.heads ({entry['file']})"
    for field, have, want in (("n_heads", heads.n_heads, entry.get("n_heads", heads.n_heads)),
                              ("d_model", heads.d_model, target.config.d_model),
                              ("vocab_size", heads.vocab_size, target.vocab_size)):
        if have != want:
            raise ValueError(f"{where}: the heads have {field}={have}, expected {want} "
                             "(the manifest's n_heads, or the target's config)")
    tokenizer = CharTokenizer.ascii()
    for name, model in (("target", target), ("draft", draft)):
        if model.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"models.{name}: vocab_size={model.vocab_size} differs from the "
                             f"tokenizer's {tokenizer.vocab_size}")
    return Pretrained(target=target, draft=draft, heads=heads, tokenizer=tokenizer,
                      manifest=manifest)



def shipped_target(backend: str = "numpy") -> TransformerModel:
    """The shipped target alone, on ``backend``: a picklable factory for a worker process
    (``ProcessVerifier(partial(shipped_target, "numba"), step=batch_boundary.rows_step)``)."""
    return load_pretrained(backend=backend).target

def load_eagle(target: TransformerModel, weights_dir: str | Path = WEIGHTS_DIR) -> EagleDraft:
    """The shipped EAGLE drafter (:mod:`specdec_lite.drafting.eagle`) as a proposer for ``target``,
    the shipped GPT target (``load_pretrained().target``) it was trained on.

    The file is checked against its sha256 and its arrays against the manifest's config;
    a ``target`` whose width, vocabulary or window differs from that config raises
    ``ValueError`` naming the field. (A target of the same sizes but other weights would
    load, and its drafts stay exact, but few of them would be accepted.)
    """
    if not isinstance(target, TransformerModel):
        raise TypeError(f"target must be a TransformerModel, got {type(target).__name__}")
    weights_dir = Path(weights_dir)
    entry = load_manifest(weights_dir).get("models", {}).get("eagle")
    if entry is None:
        raise ValueError(f"{weights_dir / 'manifest.json'} lacks an entry for eagle")
    config = entry.get("config")
    fields = ("d_model", "n_head", "max_len", "vocab_size")
    if not isinstance(config, dict) or set(config) != set(fields):
        raise ValueError(f"manifest models.eagle.config must hold exactly {list(fields)}")
    for name in ("d_model", "max_len", "vocab_size"):
        have = getattr(target.config, name)
        if check_int(config[name], f"models.eagle.config.{name}", 1) != have:
            raise ValueError(f"models.eagle: the drafter has {name}={config[name]}, the "
                             f"target has {name}={have}")
    arrays = load_npz(weights_dir / entry["file"], entry["sha256"])
    try:
        weights = EagleWeights.from_arrays(arrays, config["n_head"])
    except ValueError as err:
        raise ValueError(f"models.eagle ({entry['file']}): {err}") from err
    return EagleDraft(target, weights)


def load_early_exit(exit_layer: int | None = None, weights_dir: str | Path = WEIGHTS_DIR,
                    backend: str = "numpy") -> TransformerModel:
    """The shipped target's early-exit draft (:mod:`specdec_lite.drafting.early_exit`): its first
    ``exit_layer`` blocks read out by the exit head trained for that depth, a draft model
    for ``load_pretrained().target``. ``exit_layer=None`` takes the manifest's
    ``default_exit_layer`` (the depth with the best predicted speedup on held-out text).

    Both files are checked against their sha256, the target's arrays against its config,
    the exit head's against its shapes; errors raise ``ValueError`` naming the field.
    """
    weights_dir = Path(weights_dir)
    models = load_manifest(weights_dir).get("models", {})
    if "early_exit" not in models or "target" not in models:
        raise ValueError(f"{weights_dir / 'manifest.json'} lacks an entry for early_exit "
                         "or target")
    entry, target_entry = models["early_exit"], models["target"]
    if entry.get("target_sha256") != target_entry["sha256"]:
        raise ValueError("models.early_exit: its heads were trained on another target "
                         "(target_sha256 differs from models.target.sha256)")
    if exit_layer is None:
        exit_layer = entry["default_exit_layer"]
    config = read_config(target_entry.get("config"), "manifest models.target")
    target_arrays = load_npz(weights_dir / target_entry["file"], target_entry["sha256"])
    check_gpt_arrays(config, target_arrays, f"models.target ({target_entry['file']})")
    heads = load_npz(weights_dir / entry["file"], entry["sha256"])
    return early_exit_model(config, target_arrays, heads, exit_layer, backend)
