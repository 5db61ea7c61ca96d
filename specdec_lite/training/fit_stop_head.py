"""Fit the SpecDec++-style stop head (:mod:`specdec_lite.drafting.stop_head`) for the shipped
draft and target, with numpy only::

    python -m specdec_lite.training.fit_stop_head

The data are windows of the training split. In each window both models score every
position at once (teacher forcing: the context is real text, where SpecDec++ trains on
the draft's own continuations); at each position a token x is drawn from the draft's row
q at temperature 1 and labelled with the chance the exact rule accepts it,
min(1, p(x) / q(x)). The head is the logistic regression of those labels on the row's
features. Windows of the held-out split, never used in the fit, measure its calibration:
the mean predicted chance against the mean label, by tenths of the prediction.

It writes ``weights/stop_head.json`` (the head) and the manifest's ``stop_head`` entry
(the file's sha256, the data, the calibration).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from specdec_lite.drafting.stop_head import features, fit_head
from specdec_lite.models.corpus import load_text
from specdec_lite.pretrained import WEIGHTS_DIR, load_manifest, load_pretrained

WINDOW = 256


def labelled(models: object, split: str, n_windows: int, seed: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """Features [m, 3] and labels [m] from ``n_windows`` windows of ``split``."""
    ids = models.tokenizer.encode(load_text(split))
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for start in rng.integers(0, len(ids) - WINDOW, n_windows):
        tokens = ids[start : start + WINDOW]  # [n]
        p = models.target.probs(tokens)  # [n, V] row i: after tokens[:i + 1]
        q = models.draft.probs(tokens)  # [n, V]
        cdf = np.cumsum(q, axis=1)  # [n, V]
        drawn = (cdf < rng.random((len(q), 1)) * cdf[:, -1:]).sum(axis=1)  # [n] x ~ q
        drawn = np.minimum(drawn, q.shape[1] - 1)
        at = np.arange(len(q))
        xs.append(features(q, drawn))
        ys.append(np.minimum(1.0, p[at, drawn] / q[at, drawn]))
    return np.concatenate(xs), np.concatenate(ys)


def calibration(head: object, x: np.ndarray, y: np.ndarray) -> list[dict]:
    """Mean predicted chance and mean label in each tenth of the prediction."""
    predicted = head.predict(x)  # [m]
    bins = np.minimum((predicted * 10).astype(int), 9)
    return [{"from": b / 10, "n": int((bins == b).sum()),
             "predicted": round(float(predicted[bins == b].mean()), 4),
             "label": round(float(y[bins == b].mean()), 4)}
            for b in range(10) if (bins == b).any()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    models = load_pretrained(backend="numpy")
    x, y = labelled(models, "train", args.windows, args.seed)
    head = fit_head(x, y)
    x_held, y_held = labelled(models, "heldout", args.windows // 2, args.seed + 1)
    path = WEIGHTS_DIR / "stop_head.json"
    path.write_text(json.dumps(head.record(), indent=1) + "\n")
    manifest = load_manifest()
    manifest["stop_head"] = {
        "file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "data": {"split": "train", "windows": args.windows, "window": WINDOW,
                 "seed": args.seed, "tokens": len(y), "temperature": 1.0},
        "heldout_calibration": calibration(head, x_held, y_held),
        "heldout_mean_label": round(float(y_held.mean()), 4)}
    Path(WEIGHTS_DIR / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(json.dumps({"head": head.record(), **manifest["stop_head"]}, indent=1))


if __name__ == "__main__":
    main()
