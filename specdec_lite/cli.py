"""Command line: ``python -m specdec_lite generate ...``, ``... bench ...`` and ``... serve``.

``generate`` continues a prompt with the shipped GPT target and prints the text, a line
``---`` and its statistics. ``--draft`` picks what drafts (the distilled GPT, the corpus
n-gram, Medusa heads, prompt lookup, or none: plain decoding) and ``--policy`` how many
tokens per step (:func:`specdec_lite.drafting.draft_length.named_policy`). ``--ngram-demo`` runs
n-gram models fitted on the bundled corpus instead (CPython standard-library source, see
``specdec_lite/data``).

``bench`` benchmarks autoregressive, draft-model speculative and Medusa decoding
of the shipped models on held-out prompts (``specdec_lite.bench``), prints a
table and optionally writes JSON and PNG figures. Bad arguments print one line
on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .drafting.draft_length import POLICIES
from .drafting.medusa import chain_tree
from .drafting.proposers import PromptLookup
from .engine.decode import generate, speculative_generate
from .engine.medusa_decode import medusa_generate
from .models.corpus import fit_ngrams
from .models.tokenizer import CharTokenizer
from .rules.verify import RULES

DRAFTS = ("gpt", "ngram", "medusa", "eagle", "early-exit", "prompt-lookup", "none")


class _OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr, exit status 2, and whose
    options are spelled out (no prefix matching: ``--draft`` never means ``--draft-order``)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    return value


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def _positive(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _add_bench(commands: argparse._SubParsersAction) -> None:
    from .bench import Settings
    from .bench.config import BACKEND_CHOICES

    default = Settings()
    bench = commands.add_parser(
        "bench",
        help="benchmark AR, draft-model speculative and Medusa decoding of the shipped models",
        description="Decode the same held-out prompts with every method, interleaved, and "
        "report speedups (medians, bootstrap 95% CIs), alpha, tau, the target's cost "
        "curve T(n), the draft cost c, the predicted speedup and the engine overhead. "
        "Set OPENBLAS_NUM_THREADS=1 for stable timings (make bench does).",
    )
    bench.add_argument("--quick", action="store_true", help="a small run, under 30 s")
    bench.add_argument("--json", metavar="PATH", help="write the results as JSON")
    bench.add_argument("--plot", metavar="DIR", help="write PNG figures into DIR")
    bench.add_argument("--compare", metavar="PATH",
                       help="after the run, compare it row by row with the JSON result at "
                       "PATH (same settings): is each new median inside that run's CI? "
                       "The comparison is also written to --json, as 'comparison'")
    bench.add_argument(
        "--simulate-width", type=_positive, metavar="W", default=None,
        help="add SIMULATED-accelerator rows: a target forward over n <= W tokens costs T(1)",
    )
    bench.add_argument("--k", type=_int_list, metavar="K,K,...",
                       help=f"draft lengths (default {','.join(map(str, default.ks))})")
    bench.add_argument("--trees", type=_int_list, metavar="N,N,...",
                       help="Medusa sparse-tree sizes in nodes "
                       f"(default {','.join(map(str, default.trees))})")
    for name, help_text in (("prompts", "held-out prompts"), ("prompt-len", "prompt tokens"),
                            ("new-tokens", "tokens generated per run"),
                            ("repeats", "timed passes over the prompts")):
        bench.add_argument(f"--{name}", type=_positive, metavar="N",
                           help=f"{help_text} (default {getattr(default, name.replace('-', '_'))})")
    bench.add_argument("--seed", type=_integer, default=0, help="random seed (default 0)")
    bench.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                       help="the GPTs' forward: numpy (the reference), numba (the compiled "
                       "fast extra) or auto, numba where installed (default)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.add_argument("--hf", action="store_true", help="add the transformers rows "
                       "(specdec_lite.bench.hf; needs the hf extra)")
    bench.add_argument("--drafters", action="store_true",
                       help="instead, compare draft sources and draft-length policies (GPT "
                       "draft with fixed, adaptive and theory-chosen k and a confidence stop; "
                       "prompt lookup) with plain decoding (specdec_lite.bench.drafters); "
                       "takes --quick, --json, --prompts, --prompt-len, --new-tokens, "
                       "--repeats, --seed and --backend")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="specdec_lite",
        description="Speculative decoding with small numpy models. "
        "Use 'specdec_lite COMMAND --help' for each command's options.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    # Listed for --help only: main() hands `serve` to specdec_lite.service.server first.
    commands.add_parser("serve", add_help=False,
                        help="the HTTP service (FastAPI; see `serve --help`)")
    gen = commands.add_parser(
        "generate",
        help="speculative decoding with the shipped GPT pair (or n-gram models)",
        description="Continue PROMPT with speculative decoding: the shipped GPT target with "
        "its distilled draft or prompt lookup, or (--models ngram) an n-gram target and "
        "draft fitted on the bundled Python-stdlib corpus. Prints the text, then alpha "
        "(accepted / checked draft tokens), the acceptance rate (accepted / proposed), tau "
        "(tokens per target call), call counts and wall time.",
    )
    gen.add_argument("--prompt", required=True, help="text to continue (ASCII characters)")
    gen.add_argument("--draft", choices=DRAFTS, default="gpt",
                     help="what drafts: the distilled GPT (default), the corpus n-gram, "
                     "Medusa heads, the EAGLE drafter (one layer over the target's "
                     "features), early exit (the target's first blocks and a trained exit "
                     "head), prompt lookup (copying from earlier in the text), or none "
                     "(plain decoding)")
    gen.add_argument("--exit-layer", type=_integer, default=None,
                     help="for --draft early-exit: how many of the target's blocks draft "
                     "(default: the shipped manifest's best depth)")
    gen.add_argument("--policy", choices=POLICIES, default="fixed",
                     help="draft length: k every step (fixed, default), adapted after each "
                     "step (heuristic), cut short when the draft is unsure (confidence) or "
                     "when a rejection grows likely (specdec++), or chosen from step costs "
                     "timed on this machine, plain decoding where drafting cannot pay (auto)")
    gen.add_argument("--k", type=_integer, default=4,
                     help="draft tokens per step (the most, for heuristic and auto; "
                     "Medusa's chain depth at T > 0) (default 4)")
    gen.add_argument("--ngram-demo", action="store_true",
                     help="instead of the shipped GPT target, an n-gram target and draft "
                     "fitted on the bundled corpus at start-up (--target-order, --draft-order)")
    gen.add_argument(
        "--max-new-tokens", type=_integer, default=80, help="tokens to generate (default 80)"
    )
    gen.add_argument(
        "--rule", default="exact", choices=RULES, help="verification rule (default exact)"
    )
    gen.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature; 0 = greedy (default 1)",
    )
    gen.add_argument("--seed", type=_integer, default=0, help="random seed (default 0)")
    gen.add_argument("--theta", type=float, default=None, help="threshold for --rule threshold")
    gen.add_argument(
        "--eps", type=float, default=None, help="epsilon for --rule typical (default 0.09)"
    )
    gen.add_argument(
        "--delta", type=float, default=None, help="delta for --rule typical (default 0.3)"
    )
    gen.add_argument(
        "--target-order", type=_integer, default=5, help="target n-gram order (default 5)"
    )
    gen.add_argument(
        "--draft-order", type=_integer, default=3, help="draft n-gram order (default 3)"
    )
    _add_bench(commands)
    return parser


def _bench_settings(args: argparse.Namespace):
    from .bench import QUICK, Settings
    from .bench.config import resolve_backend

    overrides = {
        name: getattr(args, arg)
        for name, arg in (("ks", "k"), ("trees", "trees"), ("prompts", "prompts"),
                          ("prompt_len", "prompt_len"), ("new_tokens", "new_tokens"),
                          ("repeats", "repeats"))
        if getattr(args, arg) is not None
    }
    base = QUICK if args.quick else Settings()
    return replace(base, seed=args.seed, simulate_width=args.simulate_width,
                   backend=resolve_backend(args.backend), **overrides)


def _check_output(option: str, path: str | None, folder: bool) -> None:
    """Raise ``ValueError`` unless ``path`` can be written: a file for ``--json``, a
    folder for ``--plot`` (missing folders above it are created later)."""
    if path is None:
        return
    what = "folder" if folder else "file"
    target = Path(path)
    if not path:
        raise ValueError(f"{option} needs a {what} path, got {path!r}")
    if target.exists() and target.is_dir() != folder:
        raise ValueError(f"{option} needs a {what} path, got {path!r}, which is not a {what}")
    existing = target if target.exists() else target.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() and existing != target:
        raise ValueError(f"{option} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{option} {path}: {existing} is not writable")


def _read_reference(path: str, settings: dict) -> dict:
    """The ``--compare`` result, checked against the schema and the run's settings."""
    from .bench import check_comparable, compare_runs, format_comparison, read_json

    if not Path(path).is_file():
        raise ValueError(f"--compare needs a JSON result file, got {path!r}")
    try:
        reference = read_json(path)  # its errors name the file
    except ValueError as err:
        raise ValueError(f"--compare {err}") from None
    try:
        check_comparable(reference, settings)
    except ValueError as err:
        raise ValueError(f"--compare {path}: {err}") from None
    try:  # a dry run of the comparison on the reference alone, so nothing fails after the run
        format_comparison(compare_runs(reference, reference))
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise ValueError(f"--compare {path}: the reference cannot be compared "
                         f"({type(err).__name__}: {err})") from None
    return reference


def _check_plotting(path: str | None) -> None:
    """``--plot`` needs matplotlib (the ``book`` extra): say so before the run, not after."""
    if path is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'specdec_lite[book]'") from None


def _run_drafters(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from . import bench
    from .bench import drafters
    from .bench.config import resolve_backend

    for flag in ("plot", "compare", "simulate_width", "k", "trees"):
        if getattr(args, flag) not in (None, False):
            raise ValueError(f"--{flag.replace('_', '-')} does not apply to --drafters")
    if args.hf:
        raise ValueError("--hf does not apply to --drafters")
    settings = drafters.QUICK if args.quick else drafters.DrafterSettings()
    given = {name: getattr(args, name) for name in ("prompts", "prompt_len", "new_tokens",
                                                    "repeats") if getattr(args, name)}
    settings = replace(settings, seed=args.seed, backend=args.backend, **given)
    resolve_backend(settings.backend)  # an unusable backend fails before the run
    if not set(bench.BLAS_VARS) & set(os.environ):
        bench.pin_blas_threads(1)
    data = drafters.measure(settings, progress=not args.no_progress)
    print(drafters.format_rows(data))
    if args.json:
        drafters.write_json(data, args.json)
        print(f"wrote {args.json}")


def _run_bench(args: argparse.Namespace) -> None:
    from . import bench

    _check_output("--json", args.json, folder=False)  # bad paths fail before the run
    if args.drafters:
        _run_drafters(args)
        return
    _check_output("--plot", args.plot, folder=True)
    _check_plotting(args.plot)
    settings = _bench_settings(args).check()
    reference = None
    if args.compare is not None:
        reference = _read_reference(args.compare, settings.as_json())
    if not set(bench.BLAS_VARS) & set(os.environ):
        bench.pin_blas_threads(1)  # as make bench does with OPENBLAS_NUM_THREADS=1
    if args.hf:
        from .bench.hf import format_hf, require_hf, run_hf

        require_hf()  # before the run, not after it
    data = bench.run(settings, progress=not args.no_progress).to_json()
    if data.get("batch"):
        from .bench.batch import format_batch

        print(format_batch(data["batch"]))
    if args.hf:
        data["hf"] = run_hf(settings, progress=not args.no_progress)
        print(format_hf(data["hf"]))
    if reference is not None:
        data["comparison"] = bench.compare_runs(reference, data)
    print(bench.format_table(data))
    if args.json:
        bench.write_json(data, args.json)
        print(f"wrote {args.json}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        from .plots.bench import write_figures

        for path in write_figures(data, args.plot):
            print(f"wrote {path}")
    if reference is not None:
        print()
        print(bench.format_comparison(data["comparison"]))


def _run_generate(args: argparse.Namespace) -> None:
    rule_params = {
        name: getattr(args, name)
        for name in ("theta", "eps", "delta")
        if getattr(args, name) is not None
    }
    if args.ngram_demo and args.draft not in ("gpt", "none", "prompt-lookup"):
        raise ValueError(f"--draft {args.draft} needs the shipped GPT target (no --ngram-demo)")
    if args.policy != "fixed" and args.draft in ("none", "medusa"):
        raise ValueError(f"--policy {args.policy} applies to --draft gpt, ngram, eagle, "
                         f"early-exit or prompt-lookup, not {args.draft}")
    if args.exit_layer is not None and args.draft != "early-exit":
        raise ValueError(f"--exit-layer applies to --draft early-exit, not {args.draft}")
    start = time.perf_counter()
    if args.ngram_demo:
        tokenizer = CharTokenizer.ascii()
        tokenizer.encode(args.prompt)  # before fitting, so a bad prompt fails fast
        _, target, draft = fit_ngrams(args.target_order, args.draft_order)
        heads = None
    else:
        from .pretrained import load_eagle, load_early_exit, load_pretrained

        shipped = load_pretrained()
        tokenizer, target, draft, heads = (shipped.tokenizer, shipped.target, shipped.draft,
                                           shipped.heads)
        if args.draft == "ngram":
            draft = fit_ngrams()[2]
        elif args.draft == "eagle":
            draft = load_eagle(target)
        elif args.draft == "early-exit":
            try:
                draft = load_early_exit(args.exit_layer)
            except ValueError as err:
                raise ValueError(f"--exit-layer: {err}") from err
            args.exit_layer = draft.config.n_layer
    load_s = time.perf_counter() - start
    prompt = tokenizer.encode(args.prompt)
    common = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                  seed=args.seed)
    start = time.perf_counter()
    if args.draft == "none":
        gen = generate(target, prompt, **common)
    elif args.draft == "medusa":
        greedy = args.temperature == 0
        gen = medusa_generate(target, heads, prompt, tree=None if greedy else chain_tree(args.k),
                              rule="greedy" if greedy else args.rule, **common, **rule_params)
    else:
        if args.draft == "prompt-lookup":
            draft = PromptLookup()
        gen = speculative_generate(target, draft, prompt, k=args.k, policy=args.policy,
                                   rule=args.rule, **common, **rule_params)
    wall = time.perf_counter() - start
    print(args.prompt + tokenizer.decode(gen.tokens))
    print("---")
    models = "n-gram target (--ngram-demo)" if args.ngram_demo else "shipped GPT target"
    drafter = {"gpt": "n-gram draft" if args.ngram_demo else "distilled GPT draft",
               "ngram": "corpus n-gram draft", "medusa": "Medusa heads", "eagle": "EAGLE drafter",
               "early-exit": f"early-exit draft (the target's first {args.exit_layer} blocks)",
               "prompt-lookup": "prompt lookup", "none": "no draft"}[args.draft]
    print(f"{models}, {drafter}, policy {args.policy}; rule={args.rule} k={args.k} "
          f"temperature={args.temperature:g} seed={args.seed}")
    print(f"alpha (accepted / checked)   {gen.alpha:.3f}")
    print(f"accepted / proposed          {gen.acceptance_rate:.3f}")
    print(f"tau (tokens per target call) {gen.tau:.3f}")
    print(
        f"target calls {gen.n_target_calls}, draft calls {gen.n_draft_calls}, "
        f"head calls {gen.n_head_calls}, tokens {len(gen.tokens)}"
    )
    print(f"wall time {wall * 1000:.1f} ms decoding ({load_s * 1000:.0f} ms loading the "
          "models, not included)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:  # the service has its own parser (specdec_lite.service.server)
        from .service.server import main as serve

        return serve(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            _run_generate(args)
        elif args.command == "bench":
            _run_bench(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"specdec_lite: error: {err}", file=sys.stderr)
        return 2
    return 0
