"""The command line: ``bench`` argument parsing and one-line errors (no benchmark is run,
except the slow end-to-end ``--quick`` check)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specdec_lite import cli
from specdec_lite.bench import QUICK, Settings


def test_bench_quick_arguments() -> None:
    args = cli.build_parser().parse_args(
        ["bench", "--quick", "--json", "out.json", "--plot", "figs", "--simulate-width", "8"])
    settings = cli._bench_settings(args)
    assert settings == Settings(**{**QUICK.__dict__, "simulate_width": 8})
    assert args.json == "out.json" and args.plot == "figs"


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


def test_bad_output_path_is_reported_before_running(tmp_path, capsys) -> None:
    assert cli.main(["bench", "--quick", "--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json" in err


def test_bad_compare_file_is_reported_before_running(tmp_path, capsys) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "specdec_lite.bench/1", "rows": [],
                                 "settings": Settings().as_json()}))
    not_json = tmp_path / "bad.json"
    not_json.write_text("{")
    for path, message in ((tmp_path / "missing.json", "needs a JSON result file"),
                          (not_json, "--compare"), (other, "different settings")):
        assert cli.main(["bench", "--quick", "--compare", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err


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
