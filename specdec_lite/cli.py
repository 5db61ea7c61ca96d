"""Command line: ``python -m specdec_lite generate ...``.

``generate`` fits an n-gram target and a smaller n-gram draft on the bundled
corpus (CPython standard-library source, see ``specdec_lite/data``), decodes
the prompt speculatively and prints the text with its statistics. Bad
arguments print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from .corpus import fit_ngrams
from .decode import speculative_generate
from .tokenizer import CharTokenizer
from .verify import RULES


class _OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr, exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="specdec_lite",
        description="Speculative decoding with small numpy models. "
        "Use 'specdec_lite COMMAND --help' for each command's options.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    gen = commands.add_parser(
        "generate",
        help="speculative decoding with n-gram models fitted on the bundled corpus",
        description="Fit an n-gram target and draft on the bundled Python-stdlib corpus and "
        "continue PROMPT with speculative decoding. Prints the text, then alpha (acceptance "
        "rate), tau (tokens per target call), call counts and wall time.",
    )
    gen.add_argument("--prompt", required=True, help="text to continue (ASCII characters)")
    gen.add_argument("--k", type=_integer, default=4, help="draft tokens per step (default 4)")
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
    return parser


def _run_generate(args: argparse.Namespace) -> None:
    tokenizer = CharTokenizer.ascii()
    prompt = tokenizer.encode(args.prompt)  # before fitting, so a bad prompt fails fast
    rule_params = {
        name: getattr(args, name)
        for name in ("theta", "eps", "delta")
        if getattr(args, name) is not None
    }
    _, target, draft = fit_ngrams(args.target_order, args.draft_order)
    start = time.perf_counter()
    gen = speculative_generate(
        target,
        draft,
        prompt,
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        rule=args.rule,
        seed=args.seed,
        **rule_params,
    )
    wall = time.perf_counter() - start
    print(args.prompt + tokenizer.decode(gen.tokens))
    print("---")
    print(f"rule={args.rule} k={args.k} temperature={args.temperature:g} seed={args.seed}")
    print(f"alpha (acceptance rate)      {gen.acceptance_rate:.3f}")
    print(f"tau (tokens per target call) {gen.mean_tokens_per_step:.3f}")
    print(
        f"target calls {gen.target_calls}, draft calls {gen.draft_calls}, tokens {len(gen.tokens)}"
    )
    print(f"wall time {wall * 1000:.1f} ms (decoding only, n-gram fit excluded)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            _run_generate(args)
    except (ValueError, TypeError) as err:
        print(f"specdec_lite: error: {err}", file=sys.stderr)
        return 2
    return 0
