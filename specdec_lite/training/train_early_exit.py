"""Train the exit heads of the early-exit draft (:mod:`specdec_lite.drafting.early_exit`) on the
shipped target, with PyTorch (the optional ``train`` extra)::

    python -m specdec_lite.training.train_early_exit

The target (``weights/target.npz``, loaded exactly and frozen) runs once per step on a
batch of training windows. For every exit depth m in 1 .. L-1 a head (a LayerNorm and an
untied [d, V] projection, started from the target's own final LayerNorm and tied LM
head) reads the residual stream after block m, and is trained to minimise
KL(p || q_m) against the target's distribution p at the same position. The heads are
independent; they share only the target's forward.

Every evaluation records, for each depth on held-out windows, alpha = sum_x min(p, q) at
T = 1 and the greedy agreement of the trained head and of the untrained one (the target's
own head read early), and exports all heads in one file through
:func:`specdec_lite.training.train.export`. At the end :func:`decode_comparison` decodes held-out
prompts with each depth's draft (numpy, as a user would), checks greedy output against
plain greedy decoding, records tau at T = 0 and alpha at T = 1, and sets
``default_exit_layer`` to the depth with the best predicted speedup at k = 3 when a draft
token costs m / L of a target forward. Nothing at inference time imports torch.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from specdec_lite.pretrained import load_manifest
from specdec_lite.rules.theory import expected_speedup
from specdec_lite.training.train import (
    GPT,
    encoded,
    export,
    float16_rounded,
    heldout_batches,
    lr_at,
    make_optimizer,
    random_windows,
)
from specdec_lite.training.train_eagle import heldout_decode, load_target_npz

WEIGHTS_DIR = Path(__file__).parents[1] / "weights"
LOG = Path("logs") / "early_exit_train.jsonl"


class ExitHeads(nn.Module):
    """One exit head per depth 1 .. L-1: ``LN_m(x_m) @ U_m``, started as the target's
    final LayerNorm and tied LM head."""

    def __init__(self, target: GPT) -> None:
        super().__init__()
        n_layer, d = target.config.n_layer, target.config.d_model
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(n_layer - 1))
        self.unembed = nn.ParameterList(
            nn.Parameter(target.wte.weight.detach().T.clone()) for _ in range(n_layer - 1))
        with torch.no_grad():
            for norm in self.norms:
                norm.weight.copy_(target.ln_f.weight)
                norm.bias.copy_(target.ln_f.bias)

    def forward(self, streams: list[torch.Tensor]) -> list[torch.Tensor]:
        """Streams after blocks 1 .. L-1 ([b, n, d] each) -> log q_m [b, n, V] each."""
        return [F.log_softmax(norm(x) @ u, -1)
                for norm, u, x in zip(self.norms, self.unembed, streams, strict=True)]

    def numpy_state(self) -> dict[str, np.ndarray]:
        """Arrays under the names :func:`specdec_lite.drafting.early_exit.head_shapes` lists."""
        state = {}
        for m, (norm, u) in enumerate(zip(self.norms, self.unembed, strict=True), start=1):
            state |= {f"layer{m}.ln_f.g": norm.weight, f"layer{m}.ln_f.b": norm.bias,
                      f"layer{m}.unembed": u}
        return {k: v.detach().float().contiguous().numpy() for k, v in state.items()}


@torch.no_grad()
def streams_and_target(target: GPT, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The residual stream after blocks 1 .. L-1 and the target's log p, on windows x [b, n]."""
    h = target.wte(x) + target.wpe(torch.arange(x.shape[1]))  # [b, n, d]
    streams = []
    for block in target.blocks:
        h = block(h)
        streams.append(h)
    log_p = F.log_softmax(target.ln_f(h) @ target.wte.weight.T, -1)  # [b, n, V]
    return streams[:-1], log_p


def kl_losses(log_q: list[torch.Tensor], log_p: torch.Tensor) -> list[torch.Tensor]:
    """KL(p || q_m) per row, one loss per depth."""
    p_rows = log_p.flatten(0, 1)
    return [F.kl_div(q.flatten(0, 1), p_rows, log_target=True, reduction="batchmean")
            for q in log_q]


@torch.no_grad()
def heldout_metrics(heads: ExitHeads, target: GPT, windows: torch.Tensor) -> list[dict]:
    """For each depth: alpha at T = 1 and greedy agreement with the target, over ``windows``."""
    sums = np.zeros((len(heads.norms), 2))
    count = 0
    for i in range(0, len(windows), 16):
        streams, log_p = streams_and_target(target, windows[i : i + 16])
        p = log_p.exp()
        for m, log_q in enumerate(heads(streams)):
            sums[m, 0] += torch.minimum(p, log_q.exp()).sum().item()
            sums[m, 1] += (p.argmax(-1) == log_q.argmax(-1)).sum().item()
        count += p.shape[0] * p.shape[1]
    return [{"alpha_T1": a / count, "greedy_agreement": g / count} for a, g in sums]


def train(args: argparse.Namespace) -> dict:
    """Train all heads for ``--steps`` steps of ``--batch`` windows; export at every
    evaluation. Returns the manifest entry written last."""
    torch.manual_seed(args.seed)
    start = time.time()
    target = load_target_npz()
    config = target.config
    heads = ExitHeads(target)
    heldout = heldout_windows(args.eval_windows)
    untrained = heldout_metrics(heads, target, heldout)
    opt = make_optimizer(heads, args.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(args.seed)
    train_ids = encoded("train")
    LOG.parent.mkdir(exist_ok=True)
    log = open(LOG, "w")  # noqa: SIM115 - open for the whole run
    entry: dict = {}
    for step in range(1, args.steps + 1):
        lr = lr_at(step - 1, args.lr, args.warmup, args.steps - args.decay_steps, args.decay_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        x = random_windows(train_ids, args.batch, config.max_len - 1, g)  # [b, max_len]
        streams, log_p = streams_and_target(target, x)
        losses = kl_losses(heads(streams), log_p)
        opt.zero_grad(set_to_none=True)
        sum(losses).backward()
        opt.step()
        record = {"step": step, "kl": [round(loss.item(), 4) for loss in losses],
                  "wall_s": round(time.time() - start)}
        if step % args.eval_every == 0 or step == args.steps:
            rounded = float16_rounded(heads)
            metrics = heldout_metrics(rounded, target, heldout)
            record["alpha_T1"] = [round(m["alpha_T1"], 4) for m in metrics]
            entry = {
                "config": {"d_model": config.d_model, "vocab_size": config.vocab_size,
                           "target_n_layer": config.n_layer},
                "exit_layers": list(range(1, config.n_layer)),
                "target_sha256": load_manifest()["models"]["target"]["sha256"],
                "seed": args.seed, "steps": step, "finished": step == args.steps,
                "batch": args.batch, "peak_lr": args.lr, "wall_s": record["wall_s"],
                "heldout_windows": args.eval_windows, "torch_version": torch.__version__,
                "default_exit_layer": best_depth(
                    {m: metrics[m - 1]["alpha_T1"] for m in range(1, config.n_layer)},
                    config.n_layer)[0],  # until the decode check replaces it
                "heldout": {str(m): {"trained": metrics[m - 1], "untrained": untrained[m - 1]}
                            for m in range(1, config.n_layer)},
            }
            export("early_exit", rounded.numpy_state(), entry)
        if step % 10 == 0 or "alpha_T1" in record:
            print(json.dumps(record), file=log, flush=True)
    return entry


def heldout_windows(n: int) -> torch.Tensor:
    """The first ``n`` held-out windows of max_len tokens, [n, max_len]."""
    max_len = load_manifest()["models"]["target"]["config"]["max_len"]
    return torch.cat(list(heldout_batches(encoded("heldout"), max_len, n)))[:, :-1]


def best_depth(alphas: dict[int, float], n_layer: int, k: int = 3) -> tuple[int, dict]:
    """The exit depth with the best predicted speedup at ``k`` (Theorem 3.8, flat
    verification) when depth m has acceptance ``alphas[m]`` and a draft token costs m / L
    of a target forward; also each depth's prediction."""
    predicted = {m: float(expected_speedup(alpha, k, m / n_layer)) for m, alpha in alphas.items()}
    return max(predicted, key=predicted.get), predicted


def decode_comparison(n_prompts: int = 8, prompt_chars: int = 64, new_tokens: int = 64,
                      k: int = 3, seeds: int = 4) -> dict:
    """Speculative decoding of the shipped target with each depth's early-exit draft
    (:func:`specdec_lite.training.train_eagle.heldout_decode`: tau at T = 0, checked against plain
    greedy decoding, and alpha at T = 1), the predicted speedup at ``k`` with c = m / L,
    and the depth that predicts best."""
    from specdec_lite.pretrained import load_early_exit

    n_layer = load_manifest()["models"]["target"]["config"]["n_layer"]
    depths = {str(m): load_early_exit(m) for m in range(1, n_layer)}
    result = heldout_decode(depths, n_prompts, prompt_chars, new_tokens, k, seeds)
    result["layers"] = {m: result.pop(m) for m in depths}
    best, predicted = best_depth({int(m): row["alpha_T1"] for m, row in result["layers"].items()},
                                 n_layer, k)
    for m, row in result["layers"].items():
        row["predicted_speedup_T1"] = predicted[int(m)]
    result["default_exit_layer"] = best
    return result


def record_decode_comparison() -> dict:
    """Measure :func:`decode_comparison` into ``models.early_exit`` of the manifest (its
    ``heldout_decode`` and ``default_exit_layer``; the weights and sha256 stay)."""
    comparison = decode_comparison()
    path = WEIGHTS_DIR / "manifest.json"
    manifest = json.loads(path.read_text())
    entry = manifest["models"]["early_exit"]
    entry["heldout_decode"] = comparison
    entry["default_exit_layer"] = comparison["default_exit_layer"]
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return comparison


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specdec_lite.training.train_early_exit",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--decay-steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--eval-windows", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--decode-only", action="store_true",
                        help="skip training: measure the shipped heads' decoding into the "
                        "manifest")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    if not args.decode_only:
        train(args)
    print(json.dumps(record_decode_comparison()))


if __name__ == "__main__":
    main()
