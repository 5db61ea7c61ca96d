"""Train the bundled models with PyTorch (the optional ``train`` extra).

Three stages, each reproducible from a fixed seed and a fixed number of steps::

    python -m specdec_lite.training.train target --budget-minutes 80
    python -m specdec_lite.training.train draft-heads --steps 1200

(The shipped weights came from the exact commands recorded in ``weights/manifest.json``.)

1. ``target``: a character GPT trained with cross-entropy on ``load_text("train")``.
2. ``draft-heads``: with the target frozen, one loop shares each target forward between
   - a smaller **draft** GPT distilled from the target: loss ``mix * KL(p_target || p_draft)
     + (1 - mix) * CE``, which raises the acceptance rate alpha;
   - four **Medusa heads** (Cai et al. 2024): head i reads the target's final hidden state
     ``h_t`` and predicts token ``t + i + 2`` with ``W2 @ (h + SiLU(W1 @ h))``, ``W1 = 0`` at
     init; loss ``sum_i 0.8**i * CE_i``.

Each stage checkpoints to ``runs/`` and exports its current weights to
``specdec_lite/weights/`` (``<name>.npz`` plus ``manifest.json`` with configs, corpus
provenance, seed, steps, wall time, held-out loss in nats/char and sha256 of each file), so
an interrupted run still leaves usable weights. Nothing at inference time imports torch.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from specdec_lite.models import corpus
from specdec_lite.models.tokenizer import CharTokenizer
from specdec_lite.models.transformer import TransformerConfig, file_sha256

WEIGHTS_DIR = Path(__file__).parents[1] / "weights"
RUNS_DIR = Path("runs")
MEDUSA_DECAY = 0.8


class Block(nn.Module):
    """Pre-LayerNorm block: ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        d = config.d_model
        self.n_head = config.n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [b, n, d] -> [b, n, d]
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)  # 3 x [b, n, d]
        q, k, v = (t.view(b, n, self.n_head, d // self.n_head).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [b, h, n, hd]
        x = x + self.attn_proj(a.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """Token + learned position embeddings, pre-LN blocks, final LN, tied output projection."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: scale the residual projections by 1/sqrt(2 L)
            for proj in (block.attn_proj, block.mlp_proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(logits [b, n, V], hidden [b, n, d])``; hidden is after the final LN."""
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # [b, n, d]
        for block in self.blocks:
            x = block(x)
        hidden = self.ln_f(x)
        return hidden @ self.wte.weight.T, hidden

    def numpy_state(self) -> dict[str, np.ndarray]:
        """Parameters under the names ``specdec_lite.models.transformer`` loads (float32)."""
        state = {"wte": self.wte.weight, "wpe": self.wpe.weight,
                 "ln_f.g": self.ln_f.weight, "ln_f.b": self.ln_f.bias}
        for i, blk in enumerate(self.blocks):
            state |= {
                f"blocks.{i}.ln1.g": blk.ln1.weight, f"blocks.{i}.ln1.b": blk.ln1.bias,
                f"blocks.{i}.qkv.w": blk.qkv.weight.T, f"blocks.{i}.qkv.b": blk.qkv.bias,
                f"blocks.{i}.attn_proj.w": blk.attn_proj.weight.T,
                f"blocks.{i}.attn_proj.b": blk.attn_proj.bias,
                f"blocks.{i}.ln2.g": blk.ln2.weight, f"blocks.{i}.ln2.b": blk.ln2.bias,
                f"blocks.{i}.fc.w": blk.fc.weight.T, f"blocks.{i}.fc.b": blk.fc.bias,
                f"blocks.{i}.mlp_proj.w": blk.mlp_proj.weight.T,
                f"blocks.{i}.mlp_proj.b": blk.mlp_proj.bias,
            }
        return {k: v.detach().float().contiguous().numpy() for k, v in state.items()}


class MedusaHeadsTorch(nn.Module):
    """``n_heads`` residual heads: ``logits_i = W2_i @ (h + SiLU(W1_i @ h + b1_i))``."""

    def __init__(self, n_heads: int, d_model: int, unembed: torch.Tensor) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.zeros(n_heads, d_model, d_model))  # [H, d_in, d_out]
        self.b1 = nn.Parameter(torch.zeros(n_heads, d_model))  # [H, d]
        self.w2 = nn.Parameter(unembed.detach().T.clone().repeat(n_heads, 1, 1))  # [H, d, V]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # [b, n, d] -> [H, b, n, V]
        z = torch.einsum("bnd,hde->hbne", hidden, self.w1) + self.b1[:, None, None, :]
        return torch.einsum("hbnd,hdv->hbnv", hidden + F.silu(z), self.w2)

    def numpy_state(self) -> dict[str, np.ndarray]:
        return {k: v.detach().float().contiguous().numpy()
                for k, v in (("w1", self.w1), ("b1", self.b1), ("w2", self.w2))}


def random_windows(ids: torch.Tensor, batch: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``batch`` windows of ``length + 1`` consecutive ids at uniform offsets: [batch, length+1]."""
    starts = torch.randint(0, ids.numel() - length - 1, (batch,), generator=g)
    return torch.stack([ids[s : s + length + 1] for s in starts.tolist()])


def heldout_batches(ids: torch.Tensor, length: int, n_windows: int, batch: int = 16):
    """Yield the first ``n_windows`` non-overlapping windows of ``length + 1`` ids, in
    batches of up to ``batch``: [b, length+1] each."""
    for first in range(0, n_windows, batch):
        starts = range(first * length, min(first + batch, n_windows) * length, length)
        yield torch.stack([ids[s : s + length + 1] for s in starts])


@torch.no_grad()
def heldout_loss(model: GPT, ids: torch.Tensor, max_windows: int | None = None) -> float:
    """Mean next-char cross-entropy (nats/char) over non-overlapping windows of ``max_len``.

    Each window starts with an empty context, so this slightly overestimates the loss a
    model reaches with a long running context.
    """
    model.eval()
    length = model.config.max_len
    n_windows = (ids.numel() - 1) // length
    if max_windows is not None:
        n_windows = min(n_windows, max_windows)
    total, count = 0.0, 0
    for x in heldout_batches(ids, length, n_windows):  # [b, length+1]
        logits, _ = model(x[:, :-1])
        total += F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten(), reduction="sum").item()
        count += x[:, 1:].numel()
    model.train()
    return total / count


def float16_rounded(model: nn.Module) -> nn.Module:
    """A copy whose parameters are rounded through float16, as exported."""
    rounded = copy.deepcopy(model)
    for p in rounded.parameters():
        p.data = p.data.half().float()
    return rounded


def lr_at(step: int, peak: float, warmup: int, decay_start: int | None, decay_steps: int) -> float:
    """Warmup-stable-decay: linear warmup to ``peak``, constant, then a cosine decay to
    ``peak / 10`` over ``decay_steps`` steps starting at ``decay_start``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if decay_start is None or step < decay_start:
        return peak
    progress = min(1.0, (step - decay_start) / decay_steps)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on gains, biases or positions)."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "wpe" not in n]
    rest = [p for n, p in model.named_parameters() if p.ndim < 2 or "wpe" in n]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def encoded(split: str) -> torch.Tensor:
    return torch.from_numpy(CharTokenizer.ascii().encode(corpus.load_text(split)))


def export(name: str, state: dict[str, np.ndarray], entry: dict, dtype: str = "float16") -> None:
    """Write ``weights/<name>.npz`` and record ``entry`` plus its sha256 in ``manifest.json``."""
    WEIGHTS_DIR.mkdir(exist_ok=True)
    path = WEIGHTS_DIR / f"{name}.npz"
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **{k: v.astype(dtype) for k, v in state.items()})
    tmp.replace(path)
    manifest_path = WEIGHTS_DIR / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    files = corpus.manifest()["files"]
    manifest["corpus"] = {
        "source": corpus.manifest()["source"],
        **{f: {"sha256_of_text": files[f]["sha256_of_text"]} for f in files},
    }
    manifest.setdefault("models", {})[name] = {
        **entry, "file": path.name, "dtype": dtype, "sha256": file_sha256(path),
    }
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def train_target(args: argparse.Namespace) -> None:
    """Stage 1: cross-entropy training of the target GPT.

    The decay phase starts at ``--decay-start`` if given; otherwise at the first step where
    the remaining wall-clock budget only fits ``--decay-steps`` more steps at the recent pace
    (the machine is shared, so the pace varies). The chosen step is logged and exported, and
    passing it as ``--decay-start`` reproduces the run.
    """
    torch.manual_seed(args.seed)
    config = TransformerConfig(vocab_size=96, n_layer=args.n_layer, n_head=args.n_head,
                               d_model=args.d_model, max_len=args.max_len)
    model = GPT(config)
    opt = make_optimizer(model, args.lr, weight_decay=0.1)
    g = torch.Generator().manual_seed(args.seed)
    train_ids, heldout_ids = encoded("train"), encoded("heldout")
    ckpt_path = RUNS_DIR / "target.pt"
    step, wall, decay_start = 0, 0.0, args.decay_start
    if args.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        g.set_state(ckpt["generator"])
        step, wall, decay_start = ckpt["step"], ckpt["wall_s"], ckpt["decay_start"]
    log = open(RUNS_DIR / "target.jsonl", "a")  # noqa: SIM115 - open for the whole run
    start = time.time() - wall
    step_time = None  # moving average of the seconds per training step
    while decay_start is None or step < decay_start + args.decay_steps:
        tic = time.time()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.lr, args.warmup, decay_start, args.decay_steps)
        x = random_windows(train_ids, args.batch, config.max_len, g)  # [b, n+1]
        logits, _ = model(x[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        toc = time.time()
        step_time = toc - tic if step_time is None else 0.95 * step_time + 0.05 * (toc - tic)
        if decay_start is None and (
            step >= args.max_steps - args.decay_steps
            or toc - start + args.decay_steps * step_time >= 60 * args.budget_minutes
        ):
            decay_start = step
        record = {"step": step, "loss": round(loss.item(), 4), "wall_s": round(toc - start),
                  "lr": round(opt.param_groups[0]["lr"], 6), "decay_start": decay_start}
        last = decay_start is not None and step == decay_start + args.decay_steps
        if step % args.eval_every == 0 or last:
            record["heldout_subset"] = round(heldout_loss(model, heldout_ids, 64), 4)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "generator": g.get_state(), "wall_s": time.time() - start,
                        "decay_start": decay_start}, ckpt_path)
            rounded = float16_rounded(model)
            full = heldout_loss(rounded, heldout_ids, None if last else args.export_windows)
            record["heldout_export"] = round(full, 4)
            export("target", rounded.numpy_state(), {
                "config": asdict(config), "seed": args.seed, "steps": step, "batch": args.batch,
                "schedule": {"peak_lr": args.lr, "warmup": args.warmup,
                             "decay_start": decay_start, "decay_steps": args.decay_steps},
                "finished": last, "wall_s": round(time.time() - start),
                "heldout_loss_nats_per_char": full,
                "heldout_windows": "all" if last else args.export_windows,
                "torch_version": torch.__version__,
            })
        if step % 10 == 0 or "heldout_export" in record:
            print(json.dumps(record), file=log, flush=True)


def load_target() -> GPT:
    """The trained target from ``runs/target.pt``, rounded through float16 as shipped."""
    entry = json.loads((WEIGHTS_DIR / "manifest.json").read_text())["models"]["target"]
    model = GPT(TransformerConfig(**entry["config"]))
    model.load_state_dict(torch.load(RUNS_DIR / "target.pt")["model"])
    model = float16_rounded(model).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


@torch.no_grad()
def heldout_draft_metrics(draft: GPT, target: GPT, heads: MedusaHeadsTorch, ids: torch.Tensor,
                          n_windows: int = 128) -> dict:
    """Held-out draft loss, mean alpha = sum_x min(p, q) between target and draft at T = 1,
    greedy agreement, and each head's top-1/top-5 accuracy, on ``n_windows`` windows."""
    draft.eval()
    length = target.config.max_len
    stats = {"ce": 0.0, "alpha": 0.0, "greedy_agree": 0.0, "count": 0}
    top1 = torch.zeros(heads.w1.shape[0])
    top5 = torch.zeros(heads.w1.shape[0])
    counts = torch.zeros(heads.w1.shape[0])
    for x in heldout_batches(ids, length, n_windows):  # [b, length+1]
        t_logits, hidden = target(x[:, :-1])
        d_logits, _ = draft(x[:, :-1])
        p, q = t_logits.softmax(-1), d_logits.softmax(-1)  # [b, n, V]
        stats["ce"] += F.cross_entropy(d_logits.flatten(0, 1), x[:, 1:].flatten(),
                                       reduction="sum").item()
        stats["alpha"] += torch.minimum(p, q).sum(-1).sum().item()
        stats["greedy_agree"] += (p.argmax(-1) == q.argmax(-1)).sum().item()
        stats["count"] += x[:, 1:].numel()
        for i, head in enumerate(heads(hidden)):  # head: [b, n, V]
            want = x[:, i + 2 :]  # [b, n-1-i]
            ranked = head[:, : length - 1 - i].topk(5, dim=-1).indices  # [b, n-1-i, 5]
            top1[i] += (ranked[..., 0] == want).sum()
            top5[i] += (ranked == want[..., None]).any(-1).sum()
            counts[i] += want.numel()
    draft.train()
    n = stats.pop("count")
    return {"heldout_loss_nats_per_char": stats["ce"] / n, "alpha_T1": stats["alpha"] / n,
            "greedy_agreement": stats["greedy_agree"] / n,
            "head_top1": (top1 / counts).tolist(), "head_top5": (top5 / counts).tolist()}


def train_draft_heads(args: argparse.Namespace) -> None:
    """Stage 2: distil the draft from the frozen target and train the Medusa heads.

    Every step runs the frozen target once on a batch; the draft learns from its logits
    (``mix * KL(p || q) + (1 - mix) * CE``) and the heads from its hidden states.
    """
    torch.manual_seed(args.seed)
    target = load_target()
    config = TransformerConfig(vocab_size=96, n_layer=args.n_layer, n_head=args.n_head,
                               d_model=args.d_model, max_len=target.config.max_len)
    draft = GPT(config)
    heads = MedusaHeadsTorch(args.n_heads, target.config.d_model, target.wte.weight)
    opt = make_optimizer(draft, args.lr, weight_decay=0.1)
    opt.add_param_group({"params": list(heads.parameters()), "lr": args.lr, "weight_decay": 0})
    g = torch.Generator().manual_seed(args.seed)
    train_ids, heldout_ids = encoded("train"), encoded("heldout")
    log = open(RUNS_DIR / "draft_heads.jsonl", "w")  # noqa: SIM115 - open for the whole run
    start = time.time()
    for step in range(1, args.steps + 1):
        lr = lr_at(step - 1, args.lr, args.warmup, args.steps - args.decay_steps, args.decay_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        x = random_windows(train_ids, args.batch, config.max_len, g)  # [b, n+1]
        with torch.no_grad():
            t_logits, hidden = target(x[:, :-1])  # [b, n, V], [b, n, d]
        d_logits, _ = draft(x[:, :-1])
        log_q = F.log_softmax(d_logits, -1).flatten(0, 1)  # [b*n, V]
        log_p = F.log_softmax(t_logits, -1).flatten(0, 1)
        kl = F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")
        ce = F.nll_loss(log_q, x[:, 1:].flatten())
        head_loss = sum(
            MEDUSA_DECAY**i * F.cross_entropy(h[:, : config.max_len - 1 - i].flatten(0, 1),
                                              x[:, i + 2 :].flatten())
            for i, h in enumerate(heads(hidden))
        )
        loss = args.mix * kl + (1 - args.mix) * ce + head_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(draft.parameters()) + list(heads.parameters()), 1.0)
        opt.step()
        record = {"step": step, "kl": round(kl.item(), 4), "ce": round(ce.item(), 4),
                  "heads": round(head_loss.item(), 4), "wall_s": round(time.time() - start)}
        if step % args.eval_every == 0 or step == args.steps:
            rounded_draft, rounded_heads = float16_rounded(draft), float16_rounded(heads)
            metrics = heldout_draft_metrics(rounded_draft, target, rounded_heads, heldout_ids,
                                            args.eval_windows)
            record |= metrics
            common = {"seed": args.seed, "steps": step, "finished": step == args.steps,
                      "batch": args.batch, "peak_lr": args.lr, "wall_s": record["wall_s"],
                      "heldout_windows": args.eval_windows, "torch_version": torch.__version__}
            export("draft", rounded_draft.numpy_state(), {
                **common, "config": asdict(config), "distill_mix": args.mix,
                "heldout_loss_nats_per_char": metrics["heldout_loss_nats_per_char"],
                "alpha_T1_vs_target": metrics["alpha_T1"],
                "greedy_agreement_vs_target": metrics["greedy_agreement"],
            })
            export("heads", rounded_heads.numpy_state(), {
                **common, "n_heads": args.n_heads, "loss_decay": MEDUSA_DECAY,
                "head_top1": metrics["head_top1"], "head_top5": metrics["head_top5"],
            })
        if step % 10 == 0 or "alpha_T1" in record:
            print(json.dumps(record), file=log, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specdec_lite.training.train",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="stage", required=True)
    target = sub.add_parser("target", help="train the target GPT")
    target.add_argument("--budget-minutes", type=float, default=80.0,
                        help="wall-clock budget that places the decay phase")
    target.add_argument("--decay-start", type=int, default=None,
                        help="step where the LR decay starts (overrides the budget)")
    target.add_argument("--decay-steps", type=int, default=500)
    target.add_argument("--max-steps", type=int, default=100_000)
    target.add_argument("--batch", type=int, default=16)
    target.add_argument("--max-len", type=int, default=256)
    target.add_argument("--d-model", type=int, default=256)
    target.add_argument("--n-layer", type=int, default=6)
    target.add_argument("--n-head", type=int, default=8)
    target.add_argument("--lr", type=float, default=2e-3)
    target.add_argument("--warmup", type=int, default=100)
    target.add_argument("--eval-every", type=int, default=250)
    target.add_argument("--export-windows", type=int, default=256,
                        help="held-out windows scored at intermediate exports (all at the end)")
    target.add_argument("--seed", type=int, default=0)
    target.add_argument("--resume", action="store_true", help="continue from runs/target.pt")
    both = sub.add_parser("draft-heads", help="distil the draft and train the Medusa heads")
    both.add_argument("--steps", type=int, default=1200)
    both.add_argument("--decay-steps", type=int, default=300)
    both.add_argument("--warmup", type=int, default=50)
    both.add_argument("--batch", type=int, default=16)
    both.add_argument("--d-model", type=int, default=128)
    both.add_argument("--n-layer", type=int, default=1)
    both.add_argument("--n-head", type=int, default=4)
    both.add_argument("--n-heads", type=int, default=4, help="Medusa heads")
    both.add_argument("--mix", type=float, default=0.8, help="weight of the KL term")
    both.add_argument("--lr", type=float, default=2e-3)
    both.add_argument("--eval-every", type=int, default=200)
    both.add_argument("--eval-windows", type=int, default=128)
    both.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    RUNS_DIR.mkdir(exist_ok=True)
    {"target": train_target, "draft-heads": train_draft_heads}[args.stage](args)


if __name__ == "__main__":
    main()
