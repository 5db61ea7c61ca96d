"""The command line: ``bench`` argument parsing and one-line errors (no benchmark is run,
except the slow end-to-end ``--quick`` check)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import RESULTS

from specdec_lite import bench, cli
from specdec_lite.bench import QUICK, Settings
from specdec_lite.bench.config import resolve_backend
from specdec_lite.models import fast

COMMITTED = RESULTS / "bench.json"
# The committed run's settings on the command line (a full run with --simulate-width 16,
# on the backend it used), so that only what a test breaks can fail the comparison.
COMMITTED_BACKEND = json.loads(COMMITTED.read_text())["settings"]["backend"]
COMMITTED_ARGS = ["--simulate-width", "16", "--backend", COMMITTED_BACKEND]
needs_committed_backend = pytest.mark.skipif(
    COMMITTED_BACKEND == "numba" and not fast.available(),
    reason=f"the committed run used the numba backend: {fast.INSTALL_HINT}")


def test_bench_quick_arguments() -> None:
    args = cli.build_parser().parse_args(
        ["bench", "--quick", "--json", "out.json", "--plot", "figs", "--simulate-width", "8"])
    settings = cli._bench_settings(args)
    auto = resolve_backend("auto")  # the compiled backend where numba is installed
    assert settings == Settings(**{**QUICK.__dict__, "simulate_width": 8, "backend": auto})
    assert args.json == "out.json" and args.plot == "figs"


def test_bench_backend_argument() -> None:
    args = cli.build_parser().parse_args(["bench", "--quick", "--backend", "numpy"])
    assert cli._bench_settings(args).backend == "numpy"
    with pytest.raises(SystemExit):  # argparse: not one of the choices
        cli.build_parser().parse_args(["bench", "--backend", "cuda"])
    with pytest.raises(ValueError, match="backend"):
        Settings(backend="cuda").check()


def test_bench_overrides() -> None:
    args = cli.build_parser().parse_args(
        ["bench", "--k", "1,3", "--trees", "6", "--prompts", "3", "--new-tokens", "40",
         "--seed", "7"])
    settings = cli._bench_settings(args)
    assert settings.ks == (1, 3) and settings.trees == (6,) and settings.prompts == 3
    assert settings.new_tokens == 40 and settings.seed == 7 and not settings.quick


@pytest.mark.parametrize("argv", [
    ["bench", "--k", "0"],
    ["bench", "--k", "two"],
    ["bench", "--simulate-width", "-1"],
    ["bench", "--prompts", "0"],
    ["bench", "--repeats", "x"],
    ["bench", "--bogus"],
])
def test_bad_arguments_print_one_line_and_exit_2(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


def _no_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("the benchmark ran: the error was not caught up front")


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "run", _no_run)


def test_bad_output_paths_are_reported_before_running(tmp_path, capsys, no_run) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for option, path, message in (("--json", tmp_path, "not a file"),
                                  ("--json", "", "needs a file path"),
                                  ("--json", a_file / "out.json", "is a file, not a folder"),
                                  ("--json", a_file / "deeper" / "out.json", "not a folder"),
                                  ("--plot", a_file, "not a folder"),
                                  ("--plot", a_file / "figs", "not a folder")):
        assert cli.main(["bench", "--quick", option, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and option in err and message in err, err


def test_output_paths_that_can_be_created_pass_the_check(tmp_path) -> None:
    cli._check_output("--json", str(tmp_path / "new" / "dir" / "out.json"), folder=False)
    cli._check_output("--plot", str(tmp_path / "new" / "figs"), folder=True)
    cli._check_output("--plot", str(tmp_path), folder=True)
    assert not (tmp_path / "new").exists()  # checked, not created


def _committed(tmp_path, name: str, change) -> str:
    data = json.loads(COMMITTED.read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_bad_compare_file_is_reported_before_running(tmp_path, capsys, no_run) -> None:
    not_json = tmp_path / "bad.json"
    not_json.write_text("{")

    def broken_row(data: dict) -> None:
        data["rows"][3]["speedup_ci"] = "wide"

    def missing_field(data: dict) -> None:
        del data["rows"][0]["tau"]

    def old_version(data: dict) -> None:
        data["schema"] = "specdec_lite.bench/0"

    cases = ((tmp_path / "missing.json", "needs a JSON result file"),
             (not_json, "not JSON"),
             (_committed(tmp_path, "row.json", broken_row), "rows[3].speedup_ci must be pair"),
             (_committed(tmp_path, "tau.json", missing_field), "rows[0] lacks the field 'tau'"),
             (_committed(tmp_path, "v0.json", old_version), "not a specdec_lite.bench/1"),
             (COMMITTED, "different settings"))  # a full run, compared with --quick
    for path, message in cases:
        assert cli.main(["bench", "--quick", "--compare", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--compare" in err and message in err, err


def test_settings_that_do_not_fit_are_one_line(capsys) -> None:
    assert cli.main(["bench", "--prompt-len", "200", "--new-tokens", "200",
                     "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


@pytest.mark.slow
def test_quick_bench_writes_the_schema(tmp_path) -> None:
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-m", "specdec_lite", "bench", "--quick", "--no-progress",
                    "--json", str(out)], check=True, capture_output=True, timeout=120)
    data = json.loads(out.read_text())
    row = next(r for r in data["rows"] if r["method"] == "speculative")
    for key in ("speedup", "speedup_ci", "predicted_speedup", "alpha", "tau", "tokens_per_s"):
        assert key in row


def _set_row(i: int, key: str, value):
    return lambda data: data["rows"][i].__setitem__(key, value)


@pytest.mark.parametrize(("change", "message"), [
    (_set_row(3, "speedup_ci", [2.0, 1.0]), "rows[3].speedup_ci must be [lo, hi]"),
    (_set_row(3, "speedup_ci", [float("nan"), 1.0]), "rows[3].speedup_ci must be [lo, hi]"),
    (_set_row(3, "speedup", float("nan")), "rows[3].speedup must be a finite number"),
    (_set_row(3, "speedup", -1.0), "rows[3].speedup must be a finite number > 0"),
    (_set_row(3, "method", "beam"), "rows[3].method must be one of"),
    (lambda data: data["rows"][4].__setitem__("label", data["rows"][3]["label"]),
     "rows[4].label"),
    (lambda data: data["cost_curve"].pop("target_s"), "cost_curve.target_s must be a list"),
    (lambda data: data["cost_curve"].__setitem__("target_s", []),
     "cost_curve.target_s must hold"),
    (lambda data: data["cost_curve"].__setitem__("n", "1..17"), "cost_curve.n must be a list"),
    (lambda data: data["cost_curve"].__setitem__("ratio", [1.0]), "cost_curve.ratio must hold"),
    (lambda data: data["in_run_costs"].pop("c"), "in_run_costs lacks ['c']"),
    (lambda data: data["in_run_costs"].__setitem__("c", "cheap"), "in_run_costs.c must be"),
    (lambda data: data["in_run_costs"].__setitem__("n", "abc"), "in_run_costs.n must be a list"),
])
@needs_committed_backend
def test_compare_rows_and_costs_that_cannot_be_compared_fail_before_the_run(
        tmp_path, capsys, no_run, change, message) -> None:
    """Files with the right top level (they pass the schema) but rows or costs the
    comparison cannot use: one line naming the field, exit 2, before measuring (they used
    to pass, run the whole benchmark and then raise a traceback or print nonsense)."""
    path = _committed(tmp_path, "broken.json", change)
    assert cli.main(["bench", *COMMITTED_ARGS, "--compare", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--compare" in err and message in err, err


@needs_committed_backend
def test_the_committed_result_passes_the_compare_checks(monkeypatch) -> None:
    reached = []
    monkeypatch.setattr(bench, "run", lambda *a, **k: reached.append(True) or _no_run())
    with pytest.raises(AssertionError, match="the benchmark ran"):
        cli.main(["bench", *COMMITTED_ARGS, "--compare", str(COMMITTED)])
    assert reached  # every check passed, so the run started


def test_plot_without_matplotlib_is_reported_before_running(tmp_path, capsys, no_run,
                                                            monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    assert cli.main(["bench", "--quick", "--plot", str(tmp_path / "figs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plot needs matplotlib" in err, err


# ---------------------------------------------------------------- generate


def run_generate(argv: list[str], capsys) -> tuple[str, str]:
    assert cli.main(["generate", *argv]) == 0
    out = capsys.readouterr().out
    text, _, stats = out.partition("\n---\n")
    return text, stats


@pytest.mark.parametrize("extra", [
    [], ["--draft", "prompt-lookup"], ["--policy", "auto"], ["--policy", "heuristic"],
    ["--policy", "confidence"], ["--policy", "specdec++", "--k", "8"],
    ["--draft", "prompt-lookup", "--policy", "auto"],
    ["--draft", "ngram"], ["--draft", "medusa"], ["--draft", "eagle"],
    ["--draft", "eagle", "--policy", "auto"], ["--draft", "early-exit"],
    ["--draft", "early-exit", "--exit-layer", "3", "--policy", "heuristic"], ["--draft", "none"]])
def test_generate_greedy_prints_the_targets_greedy_text(extra, capsys) -> None:
    from specdec_lite import generate, load_pretrained

    shipped = load_pretrained()
    prompt = "def __init__(self"
    expected = generate(shipped.target, shipped.tokenizer.encode(prompt), max_new_tokens=40,
                        temperature=0).tokens
    text, stats = run_generate(["--prompt", prompt, "--max-new-tokens", "40",
                                "--temperature", "0", *extra], capsys)
    assert text == prompt + shipped.tokenizer.decode(expected)
    assert "shipped GPT target" in stats and "tau (tokens per target call)" in stats
    if "prompt-lookup" in extra or "none" in extra:
        assert "draft calls 0," in stats


def test_generate_with_the_ngram_demo(capsys) -> None:
    text, stats = run_generate(["--prompt", "import os\n", "--ngram-demo",
                                "--max-new-tokens", "20", "--seed", "3"], capsys)
    assert text.startswith("import os\n") and "n-gram target" in stats


@pytest.mark.parametrize("argv", [
    ["--k", "0"], ["--k", "often"], ["--draft", "eagle3"], ["--policy", "sometimes"],
    ["--max-new-tokens", "-1"], ["--draft-o", "3"], ["--dra", "gpt"],
    ["--ngram-demo", "--draft", "medusa"], ["--draft", "none", "--policy", "auto"],
    ["--exit-layer", "2"], ["--draft", "early-exit", "--exit-layer", "5"],
    ["--draft", "early-exit", "--exit-layer", "0"]])
def test_generate_bad_arguments_are_one_line(argv, capsys) -> None:
    assert exit_status(["generate", "--prompt", "x", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


def exit_status(argv: list[str]) -> int:
    """main's status: argparse exits for a malformed argument, main returns 2 for a value
    the library refuses."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code


def test_bench_drafters_refuses_options_it_does_not_take(capsys) -> None:
    assert exit_status(["bench", "--drafters", "--k", "3"]) == 2
    assert "--k does not apply to --drafters" in capsys.readouterr().err


def test_bench_drafters_quick_writes_its_result(tmp_path, capsys) -> None:
    from specdec_lite.bench import drafters

    out = tmp_path / "drafters.json"
    assert cli.main(["bench", "--drafters", "--quick", "--no-progress", "--backend", "numpy",
                     "--json", str(out)]) == 0
    data = drafters.read_json(out)
    labels = {(r["category"], r["method"], r["temperature"]) for r in data["rows"]}
    assert labels == {(c, m.label, t) for c in drafters.CATEGORIES for m in drafters.METHODS
                      for t in (0.0, 1.0) if m.policy != "oracle" or t == 0}
    for row in data["rows"]:
        lo, hi = row["speedup_ci"]
        assert lo <= row["speedup"] <= hi and row["tau"] >= 1
        if row["temperature"] == 0:
            assert row["matches_plain"] == 1.0  # greedy identity, every run
        if row["policy"] == "oracle":  # it drafts only what the target will accept
            assert row["alpha"] in (None, 1.0)
    assert data["backend"] == "numpy" and "numpy forward" in capsys.readouterr().out


DRAFTER_RESULTS = sorted(RESULTS.glob("drafters_*.json"))


@pytest.mark.parametrize("path", DRAFTER_RESULTS, ids=[p.stem for p in DRAFTER_RESULTS])
def test_the_committed_drafters_results_are_whole_and_greedy_identical(path) -> None:
    from specdec_lite.bench import drafters

    data = drafters.read_json(path)
    assert path.stem.endswith(data["backend"]) and data["machine"]["cpu_model"]
    cells = {(r["category"], r["method"], r["temperature"]) for r in data["rows"]}
    methods = {m for _, m, _ in cells}  # a run made before a method was added lacks it
    assert drafters.PLAIN in methods and methods <= {m.label for m in drafters.METHODS}
    oracles = {m.label for m in drafters.METHODS if m.policy == "oracle"}  # T = 0 only
    assert cells == {(c, m, t) for c in data["settings"]["categories"] for m in methods
                     for t in data["settings"]["temperatures"] if m not in oracles or t == 0}
    for row in data["rows"]:  # every row recomputes from the runs the file carries
        method = next(m for m in drafters.METHODS if m.label == row["method"])
        again = drafters.summarise(data["runs"], method, row["temperature"], row["category"],
                                   data["settings"]["seed"])
        assert again == row
        if row["temperature"] == 0:
            assert row["matches_plain"] == 1.0, row  # greedy identity in every timed run


def test_the_newest_committed_drafters_runs_have_every_method() -> None:
    from specdec_lite.bench import drafters

    newest = max(DRAFTER_RESULTS, key=lambda p: drafters.read_json(p)["timestamp"])
    rows = drafters.read_json(newest)["rows"]
    assert {r["method"] for r in rows} == {m.label for m in drafters.METHODS}
