"""The JSON result of a benchmark run: its fields, and reading and writing it.

A result is one JSON object. ``schema`` names the format and its version,
``specdec_lite.bench/1``; the number goes up when a field is removed or changes meaning
(a new optional field keeps it). ``FIELDS`` lists the top-level fields and ``ROW_FIELDS``
the fields of each entry of ``rows``, every one as (name, kind, meaning), where kind is

* ``str``, ``int``, ``float``, ``bool``, ``object`` (a JSON object) or ``list``;
* ``pair``: a list of two floats;
* ``...|null``: the value may be ``null`` (where it does not apply).

``describe()`` renders both lists as text, ``read_json`` reads a result and checks it
against them (raising ``ValueError`` that names the file and the field), and
``write_json`` checks and writes one.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path

SCHEMA = "specdec_lite.bench/1"

FIELDS: tuple[tuple[str, str, str], ...] = (
    ("schema", "str", f'"{SCHEMA}"'),
    ("timestamp", "str", "when the run finished, ISO 8601 UTC"),
    ("machine", "object", "platform, python, cpu_model, cpu_count, numpy, blas "
     "({library, version, kernel}; runs before it lack it), blas_threads "
     "({variable: value}), load_average (3 floats)"),
    ("settings", "object", "ks, trees, temperatures, prompts, prompt_len, new_tokens, "
     "repeats, seed, simulate_width, cost_repeats, quick (as in bench.Settings)"),
    ("models", "object", "target and draft (their configs), backend {target, draft}, "
     "skinny_rows {target, draft} (the block sizes a compiled forward sends to the skinny "
     "kernel, measured when it was built; null on numpy; absent before it existed), heads "
     "(how many), ngram ({order, smoothing, fitted_on} or null), source"),
    ("cost_curve", "object", "the isolated cost curve: prefix (tokens cached), n [int], "
     "target_s [float] (median seconds of a target forward over n tokens), ratio "
     "[T(n)/T(1)], draft_s, heads_s, ngram_s (one call; null for a model not run), "
     "in_run ({target | draft | heads | ngram: [[n, mean seconds, calls]]}, "
     "every forward of the timed runs)"),
    ("in_run_costs", "object", "the costs as the runs paid them: n [int], ratio "
     "[T_run(n)/T_run(1)], c, c_ngram, c_heads (float or null)"),
    ("c", "float", "draft GPT cost, T_draft(1)/T(1), isolated"),
    ("c_heads", "float|null", "one Medusa heads call over T(1), isolated"),
    ("c_ngram", "float|null", "one n-gram row over T(1), isolated"),
    ("alpha_text", "object", "α of target vs draft GPT on held-out text, greedy and "
     "T=1, and ngram: the same for the n-gram draft"),
    ("head_accuracy", "list", "[heads][ranks] top-k accuracies of the Medusa heads on "
     "held-out text"),
    ("rows", "list", "one object per method, measured rows first (ROW_FIELDS)"),
    ("profile", "object", "{label: {wall_s, forward_s, engine: [[function, seconds]], "
     "split}}, one cProfile'd run of a few methods; split: {runs, wall_s, forwards, "
     "compiled, python}, shares of the wall clock, a run on each prompt, no profiler"),
    ("greedy_loops", "float|null", "fraction of greedy autoregressive outputs that end "
     "in a loop"),
    ("bars", "list", "[{name, threshold, value, status}], speed targets the harness "
     "checks on the measured rows (reported, not asserted)"),
    ("notes", "list", "[str], how the run was made"),
    ("runs", "list", "one object per timed generation: label, prompt, repeat, wall_s, "
     "forward_s, tokens, target_calls, draft_calls, accepted, checked, sim_s"),
)

OPTIONAL_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("comparison", "object", "only with --compare: reference and new (timestamps), "
     "rows [{label, reference: [median, lo, hi], new: [median, lo, hi], "
     "in_reference_ci, reproduced, overlap}], in_reference_ci, reproduced and overlap "
     "(counts; reproduced: inside the reference CI or within 0.05 of its median), costs "
     "({name: [reference, new]})"),
    ("batch", "object", "throughput against batch size (bench.batch): settings ({sizes, "
     "k, temperatures, new_tokens, repeats, seed, spec_max_batch, spec_gains}) and rows "
     "[{method: plain | speculative | auto, temperature, batch, k, tokens_per_s, "
     "tokens_per_s_ci, tokens, tau, alpha, speedup, speedup_ci, n_runs}]; runs before it "
     "lack it, and runs before the auto rows lack them and spec_max_batch/spec_gains"),
    ("hf", "object", "only with --hf (bench.hf): HF generate, HF assisted and our engine "
     "over the HF adapter and over numpy on the exported weights: settings, k, rows "
     "[{label, tokens_per_s, tokens_per_s_ci, speedup_vs_hf_greedy, speedup_ci, "
     "forward_share, ms_per_token_forward, ms_per_token_engine, target_calls, draft_calls, "
     "n_runs}], runs, same_tokens, versions, machine, notes"),
)

ROW_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("method", "str", "autoregressive | speculative | ngram | medusa"),
    ("label", "str", "unique; SIMULATED rows start with 'SIMULATED'"),
    ("k", "int|null", "draft tokens per step, or the depth of a Medusa chain"),
    ("tree_nodes", "int|null", "Medusa sparse-tree size, root excluded"),
    ("rule", "str", "greedy (T = 0) or exact"),
    ("temperature", "float", "sampling temperature"),
    ("simulated", "bool", "priced by the SIMULATED accelerator, not measured"),
    ("speedup", "float", "median over cells of tokens/s over autoregressive tokens/s"),
    ("speedup_ci", "pair", "bootstrap 95% interval of that median"),
    ("predicted_speedup", "float|null", "E(α, k) / step cost, at the in-run costs"),
    ("predicted_speedup_tau", "float|null", "τ / step cost, at the in-run costs"),
    ("predicted_speedup_isolated", "float|null", "predicted_speedup at the isolated costs"),
    ("measured_over_predicted", "float|null", "speedup / predicted_speedup"),
    ("alpha", "float|null", "accepted / checked draft tokens"),
    ("tau", "float", "tokens per target call"),
    ("tokens_per_s", "float", "median over cells"),
    ("target_calls", "float", "mean per generation"),
    ("draft_calls", "float", "mean per generation"),
    ("overhead", "float|null", "1 - forward time / wall time (measured rows)"),
    ("matches_autoregressive", "float|null", "fraction of greedy outputs equal to "
     "autoregressive decoding's"),
    ("n_runs", "int", "timed generations summarised"),
)

_KINDS = {"str": str, "bool": bool, "object": dict, "list": list}


def describe() -> str:
    """The fields of a result as indented text: top level, then a row."""
    def block(fields: tuple[tuple[str, str, str], ...]) -> list[str]:
        return [f"  {name:<28}{kind:<12}{meaning}" for name, kind, meaning in fields]

    return "\n".join([f"{SCHEMA}: a JSON object with", *block(FIELDS),
                      "optional", *block(OPTIONAL_FIELDS),
                      "each entry of rows: an object with", *block(ROW_FIELDS)])


def _fits(value: object, kind: str) -> bool:
    if kind.endswith("|null"):
        return value is None or _fits(value, kind.removesuffix("|null"))
    if kind == "pair":
        return isinstance(value, list) and len(value) == 2 and all(
            _fits(x, "float") for x in value)
    if kind in ("int", "float"):
        number = numbers.Integral if kind == "int" else numbers.Real
        return isinstance(value, number) and not isinstance(value, bool)
    return isinstance(value, _KINDS[kind])


def _check_fields(obj: dict, fields: tuple[tuple[str, str, str], ...], owner: str,
                  prefix: str, required: bool = True) -> None:
    """``owner`` names ``obj`` in a message, ``prefix`` + name one of its fields."""
    for name, kind, _ in fields:
        if name not in obj:
            if required:
                raise ValueError(f"{owner} lacks the field {name!r}")
            continue
        if not _fits(obj[name], kind):
            raise ValueError(f"{prefix}{name} must be {kind}, got {obj[name]!r:.60}")


def check_result(data: object, name: str = "result") -> dict:
    """Return ``data`` if it is a result of this schema, else raise ``ValueError`` naming
    ``name`` and the first field that is missing or of the wrong kind."""
    if not isinstance(data, dict):
        raise ValueError(f"{name}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{name}: not a {SCHEMA} result (schema {data.get('schema')!r})")
    _check_fields(data, FIELDS, name, f"{name}: ")
    _check_fields(data, OPTIONAL_FIELDS, name, f"{name}: ", required=False)
    for i, row in enumerate(data["rows"]):
        where = f"{name}: rows[{i}]"
        if not isinstance(row, dict):
            raise ValueError(f"{where} must be an object, got {row!r:.60}")
        _check_fields(row, ROW_FIELDS, where, f"{where}.")
    return data


def read_json(path: str | Path) -> dict:
    """Read a result file and check it (:func:`check_result`); ``ValueError`` names the
    file and what is wrong (a missing file raises ``FileNotFoundError``)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    return check_result(data, str(path))


def write_json(data: dict, path: str | Path) -> None:
    """Check ``data`` (:func:`check_result`) and write it to ``path``, creating its folder."""
    check_result(data)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
