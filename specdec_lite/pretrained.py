"""The shipped models: a character GPT target, a distilled draft GPT and Medusa heads.

All three were trained by ``specdec_lite.train`` on the bundled standard-library corpus;
``weights/manifest.json`` records each one's configuration, seed, steps, held-out loss
and sha256, and loading checks every file against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .medusa import MedusaHeads
from .tokenizer import CharTokenizer
from .transformer import TransformerConfig, TransformerModel

WEIGHTS_DIR = Path(__file__).parent / "weights"


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


def load_pretrained(weights_dir: str | Path = WEIGHTS_DIR) -> Pretrained:
    """Load the target, draft, Medusa heads and tokenizer (checksums verified).

    Each call returns fresh models with empty KV caches.
    """
    weights_dir = Path(weights_dir)
    manifest = load_manifest(weights_dir)
    models = manifest.get("models", {})
    missing = [name for name in ("target", "draft", "heads") if name not in models]
    if missing:
        raise ValueError(f"{weights_dir / 'manifest.json'} lacks entries for {missing}")

    def gpt(name: str) -> TransformerModel:
        entry = models[name]
        config = TransformerConfig(**entry["config"])
        return TransformerModel.from_npz(weights_dir / entry["file"], config, entry["sha256"])

    heads = models["heads"]
    return Pretrained(
        target=gpt("target"),
        draft=gpt("draft"),
        heads=MedusaHeads.from_npz(weights_dir / heads["file"], heads["sha256"]),
        tokenizer=CharTokenizer.ascii(),
        manifest=manifest,
    )
