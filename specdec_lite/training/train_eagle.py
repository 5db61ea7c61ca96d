"""Train the EAGLE drafter (:mod:`specdec_lite.drafting.eagle`) on the shipped target's features,
with PyTorch (the optional ``train`` extra)::

    python -m specdec_lite.training.train_eagle

The target is the shipped ``weights/target.npz``, frozen (its float16 weights are loaded
exactly). Every step runs it once on a batch of training windows t_0 .. t_n; its final
hidden states f_0 .. f_{n-1} [b, n, d] and their distributions p_1 .. p_{n-1} are the
data. The drafter reads (f_j + noise, embedding of t_{j+1}) and predicts f^_{j+1}; the
loss is EAGLE's (Li et al. 2024): smooth-L1 between f^_{j+1} and f_{j+1}, plus ``w_cls``
times the classification loss of the target's LM head on f^_{j+1} against p_{j+1}
(here KL(p || q), which differs from EAGLE's cross-entropy with soft labels by a
constant). The uniform noise on the input features is EAGLE's data augmentation: at
drafting time the layer reads its own, slightly wrong, predictions.

The drafter's weights and a ``models.eagle`` entry (config, seed, steps, wall time,
held-out alpha at T = 1 and greedy agreement against the target, sha256) are exported
through :func:`specdec_lite.training.train.export` at every evaluation, so a stopped run still
leaves usable weights. At the end, :func:`decode_comparison` decodes held-out prompts with
the drafter and with the draft GPT (numpy, as any user would) and records tau at T = 0
and alpha at T = 1 of both in the entry (``--decode-only`` redoes just that). Nothing at
inference time imports torch.
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

from specdec_lite.models.transformer import TransformerConfig, load_npz
from specdec_lite.pretrained import load_manifest, read_config
from specdec_lite.training.train import (
    GPT,
    Block,
    encoded,
    export,
    float16_rounded,
    heldout_batches,
    lr_at,
    make_optimizer,
    random_windows,
)

WEIGHTS_DIR = Path(__file__).parents[1] / "weights"
LOG = Path("logs") / "eagle_train.jsonl"


def load_target_npz(weights_dir: Path = WEIGHTS_DIR) -> GPT:
    """The shipped target as a frozen torch :class:`~specdec_lite.training.train.GPT` (the inverse
    of ``GPT.numpy_state``; float16 weights widen to float32 exactly)."""
    entry = load_manifest(weights_dir)["models"]["target"]
    config = read_config(entry["config"], "manifest models.target")
    arrays = load_npz(weights_dir / entry["file"], entry["sha256"])
    model = GPT(config)
    names = {"wte.weight": "wte", "wpe.weight": "wpe", "ln_f.weight": "ln_f.g",
             "ln_f.bias": "ln_f.b"}
    for i in range(config.n_layer):
        for layer in ("qkv", "attn_proj", "fc", "mlp_proj"):
            names |= {f"blocks.{i}.{layer}.weight": f"blocks.{i}.{layer}.w",
                      f"blocks.{i}.{layer}.bias": f"blocks.{i}.{layer}.b"}
        for norm in ("ln1", "ln2"):
            names |= {f"blocks.{i}.{norm}.weight": f"blocks.{i}.{norm}.g",
                      f"blocks.{i}.{norm}.bias": f"blocks.{i}.{norm}.b"}
    state = {}
    for name, stored in names.items():
        value = torch.from_numpy(arrays[stored])
        state[name] = value.T.contiguous() if stored.endswith(".w") else value
    model.load_state_dict(state)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


class EagleTorch(nn.Module):
    """The drafter: ``block([f, e] W_in + b_in)``, one pre-LN block of the target's width.

    ``W_in`` starts as the identity on the feature half (and small on the embedding half),
    so an untrained drafter predicts f^_{j+1} ~ f_j."""

    def __init__(self, d_model: int, n_head: int, max_len: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(2 * d_model, d_model)
        self.block = Block(TransformerConfig(vocab_size=1, n_layer=1, n_head=n_head,
                                             d_model=d_model, max_len=max_len))
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)
        with torch.no_grad():
            self.in_proj.weight[:, :d_model] += torch.eye(d_model)

    def forward(self, features: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        """[b, n, d] features and [b, n, d] next-token embeddings -> [b, n, d] predictions."""
        return self.block(self.in_proj(torch.cat([features, embeddings], dim=-1)))

    def numpy_state(self) -> dict[str, np.ndarray]:
        """Parameters under the names :func:`specdec_lite.drafting.eagle.eagle_shapes` lists."""
        b = self.block
        state = {"in_proj.w": self.in_proj.weight.T, "in_proj.b": self.in_proj.bias,
                 "block.ln1.g": b.ln1.weight, "block.ln1.b": b.ln1.bias,
                 "block.qkv.w": b.qkv.weight.T, "block.qkv.b": b.qkv.bias,
                 "block.attn_proj.w": b.attn_proj.weight.T, "block.attn_proj.b": b.attn_proj.bias,
                 "block.ln2.g": b.ln2.weight, "block.ln2.b": b.ln2.bias,
                 "block.fc.w": b.fc.weight.T, "block.fc.b": b.fc.bias,
                 "block.mlp_proj.w": b.mlp_proj.weight.T, "block.mlp_proj.b": b.mlp_proj.bias}
        return {k: v.detach().float().contiguous().numpy() for k, v in state.items()}


@torch.no_grad()
def target_features(target: GPT, windows: torch.Tensor, batch: int = 16) -> torch.Tensor:
    """The target's features of every window [N, n] -> [N, n, d], stored as float16."""
    return torch.cat([target(windows[i : i + batch])[1].half()
                      for i in range(0, len(windows), batch)])


def losses(drafter: EagleTorch, target: GPT, x: torch.Tensor, features: torch.Tensor,
           noise: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """On windows ``x`` [b, n] with the target's features ``features`` [b, n, d]: the
    drafter reads f_0..f_{n-2} (plus uniform ``noise``) and the embeddings of t_1..t_{n-1}
    at their positions, and predicts f_1..f_{n-1}. Returns the smooth-L1 regression loss,
    KL(p || q) per row, and the target's and drafter's distributions p, q [b, n-1, V]."""
    features = features.float()
    with torch.no_grad():
        embeddings = target.wte(x[:, 1:]) + target.wpe(torch.arange(1, x.shape[1]))
        log_p = F.log_softmax(features[:, 1:] @ target.wte.weight.T, -1)  # [b, n-1, V]
    inputs = features[:, :-1]
    if noise:
        inputs = inputs + (torch.rand_like(inputs) * 2 - 1) * noise
    predicted = drafter(inputs, embeddings)  # [b, n-1, d]
    log_q = F.log_softmax(predicted @ target.wte.weight.T, -1)  # [b, n-1, V]
    kl = F.kl_div(log_q.flatten(0, 1), log_p.flatten(0, 1), log_target=True,
                  reduction="batchmean")
    return F.smooth_l1_loss(predicted, features[:, 1:]), kl, log_p.exp(), log_q.exp()


@torch.no_grad()
def heldout_metrics(drafter: EagleTorch, target: GPT, windows: torch.Tensor,
                    features: torch.Tensor) -> dict:
    """Mean alpha = sum_x min(p, q) at T = 1 and greedy agreement of the drafter's first
    token (fed the target's real features) with the target, over the held-out
    ``windows`` [N, n], as ``train.heldout_draft_metrics`` measures the draft GPT."""
    drafter.eval()
    alpha = agree = count = 0.0
    for i in range(0, len(windows), 16):
        _, _, p, q = losses(drafter, target, windows[i : i + 16], features[i : i + 16], 0.0)
        alpha += torch.minimum(p, q).sum().item()
        agree += (p.argmax(-1) == q.argmax(-1)).sum().item()
        count += p.shape[0] * p.shape[1]
    drafter.train()
    return {"alpha_T1": alpha / count, "greedy_agreement": agree / count}


def train(args: argparse.Namespace) -> None:
    """Train on a fixed pool of ``--pool`` training windows whose target features are
    computed once (the target's forward is most of a step's cost), ``--batch`` of them a
    step; evaluate on the first ``--eval-windows`` held-out windows."""
    torch.manual_seed(args.seed)
    start = time.time()
    target = load_target_npz()
    config = target.config
    drafter = EagleTorch(config.d_model, args.n_head, config.max_len)
    opt = make_optimizer(drafter, args.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(args.seed)
    pool = random_windows(encoded("train"), args.pool, config.max_len - 1, g)  # [N, n]
    pool_features = target_features(target, pool)  # [N, n, d] float16
    heldout = torch.cat(list(heldout_batches(encoded("heldout"), config.max_len,
                                             args.eval_windows)))[:, :-1]  # [N_h, n]
    heldout_features = target_features(target, heldout)
    target_sha = load_manifest()["models"]["target"]["sha256"]
    LOG.parent.mkdir(exist_ok=True)
    log = open(LOG, "w")  # noqa: SIM115 - open for the whole run
    print(json.dumps({"features_s": round(time.time() - start)}), file=log, flush=True)
    for step in range(1, args.steps + 1):
        lr = lr_at(step - 1, args.lr, args.warmup, args.steps - args.decay_steps, args.decay_steps)
        for group in opt.param_groups:
            group["lr"] = lr
        rows = torch.randint(0, args.pool, (args.batch,), generator=g)
        reg, kl, _, _ = losses(drafter, target, pool[rows], pool_features[rows], args.noise)
        loss = reg + args.w_cls * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        record = {"step": step, "reg": round(reg.item(), 4), "kl": round(kl.item(), 4),
                  "wall_s": round(time.time() - start)}
        if step % args.eval_every == 0 or step == args.steps:
            rounded = float16_rounded(drafter)
            record |= heldout_metrics(rounded, target, heldout, heldout_features)
            export("eagle", rounded.numpy_state(), {
                "config": {"d_model": config.d_model, "n_head": args.n_head,
                           "max_len": config.max_len, "vocab_size": config.vocab_size},
                "target_sha256": target_sha, "seed": args.seed, "steps": step,
                "finished": step == args.steps, "batch": args.batch, "pool": args.pool,
                "peak_lr": args.lr, "noise": args.noise, "w_cls": args.w_cls,
                "wall_s": record["wall_s"], "heldout_windows": args.eval_windows,
                "alpha_T1_vs_target": record["alpha_T1"],
                "greedy_agreement_vs_target": record["greedy_agreement"],
                "torch_version": torch.__version__,
            })
        if step % 10 == 0 or "alpha_T1" in record:
            print(json.dumps(record), file=log, flush=True)


def decode_comparison(n_prompts: int = 8, prompt_chars: int = 64, new_tokens: int = 64,
                      k: int = 3, seeds: int = 4) -> dict:
    """Speculative decoding of the shipped target with the EAGLE drafter and with the
    distilled draft GPT on held-out prompts (:func:`heldout_decode`)."""
    from specdec_lite.pretrained import load_eagle, load_pretrained

    shipped = load_pretrained()
    drafters = {"eagle": load_eagle(shipped.target), "gpt_draft": shipped.draft}
    return heldout_decode(drafters, n_prompts, prompt_chars, new_tokens, k, seeds)


def heldout_decode(drafters: dict[str, object], n_prompts: int = 8, prompt_chars: int = 64,
                   new_tokens: int = 64, k: int = 3, seeds: int = 4) -> dict:
    """Speculative decoding of the shipped target with each of ``drafters`` (a name to a
    proposer or draft model), on ``n_prompts`` held-out prompts (each the
    ``prompt_chars`` characters before an evenly spaced line start of the held-out text):
    tau at T = 0 (checked token for token against plain greedy decoding) and alpha at
    T = 1 over ``seeds`` seeds, both with ``k`` drafts a step. numpy only, like any user
    of the library. Returns the settings and, under each name, ``tau_T0`` and ``alpha_T1``."""
    from specdec_lite.engine.decode import generate, speculative_generate
    from specdec_lite.models.corpus import load_text
    from specdec_lite.pretrained import load_pretrained

    shipped = load_pretrained()
    text = load_text("heldout")
    starts = [text.index("\n", i) + 1 for i in np.linspace(prompt_chars, len(text) // 2,
                                                           n_prompts).astype(int)]
    prompts = [shipped.tokenizer.encode(text[s - prompt_chars : s]) for s in starts]
    result = {"k": k, "n_prompts": n_prompts, "prompt_chars": prompt_chars,
              "new_tokens": new_tokens, "seeds_T1": seeds}
    for name, drafter in drafters.items():
        emitted = calls = accepted = checked = 0
        for prompt in prompts:
            gen = speculative_generate(shipped.target, drafter, prompt, k=k,
                                       max_new_tokens=new_tokens, temperature=0)
            plain = generate(shipped.target, prompt, max_new_tokens=new_tokens, temperature=0)
            if not np.array_equal(gen.tokens, plain.tokens):
                raise AssertionError(f"{name}: greedy speculative decoding differs from greedy")
            emitted, calls = emitted + len(gen.tokens), calls + gen.n_target_calls
            for seed in range(seeds):
                gen = speculative_generate(shipped.target, drafter, prompt, k=k,
                                           max_new_tokens=new_tokens, temperature=1.0,
                                           seed=seed)
                accepted, checked = accepted + gen.n_accepted, checked + gen.n_checked
        result[name] = {"tau_T0": emitted / calls, "alpha_T1": accepted / checked}
    return result


def record_decode_comparison() -> dict:
    """Measure :func:`decode_comparison` and store it in ``models.eagle.heldout_decode``
    of the manifest (the weights file and its sha256 stay as they are)."""
    comparison = decode_comparison()
    path = WEIGHTS_DIR / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["models"]["eagle"]["heldout_decode"] = comparison
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return comparison


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specdec_lite.training.train_eagle",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--decay-steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--pool", type=int, default=1600,
                        help="training windows of max_len tokens whose features are computed once")
    parser.add_argument("--n-head", type=int, default=6)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--noise", type=float, default=0.1,
                        help="half-width of the uniform noise added to input features")
    parser.add_argument("--w-cls", type=float, default=0.1,
                        help="weight of the classification (KL) loss")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--eval-windows", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--decode-only", action="store_true",
                        help="skip training: measure the shipped drafter's decoding "
                        "(tau at T = 0, alpha at T = 1, next to the draft GPT's) into the "
                        "manifest")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    if not args.decode_only:
        train(args)
    print(json.dumps(record_decode_comparison()))


if __name__ == "__main__":
    main()
