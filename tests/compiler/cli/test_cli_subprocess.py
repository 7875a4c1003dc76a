"""`tracr-compile` through a subprocess: every flag and every exit code.

All runs start together in one module fixture (each pays the JAX import, ~2 s), then the tests
read their results. More failure cases run in-process in test_cli_main.py.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import PROGRAM_FILE, CliRun, run_cli

from compiler.io.files import read_model_file

FRAC_INPUT = "BOS x a c x"


def _runs(workdir: pathlib.Path) -> dict[str, tuple[str, ...]]:
    prog = str(workdir / "prog.py")
    return {
        "example": ("--example", "frac_prevs", "--input", FRAC_INPUT, "--plot", "frac.png", "--out", "frac.safetensors"),
        "file_sop": (f"{prog}:doubled", "--vocab", "0..3", "--max-seq-len", "4", "--input", "BOS 1 2 3", "--json"),
        "file_function": (f"{prog}:make_reverse", "--vocab", '["a", "b"]', "--max-seq-len", "3", "--validate-only"),
        "flags": ("--example", "frac_prevs", "--causal", "--bos", "S", "--pad", "P", "--mlp-exactness", "50",
                  "--vocab", "a,b,x", "--max-seq-len", "4", "--input", "S x x a", "--json"),
        "invalid": (f"{prog}:unsupported", "--vocab", "1,2,3", "--max-seq-len", "3", "--validate-only"),
        "bad_token_debug": ("--example", "hist", "--input", "BOS a z", "--debug"),
        "no_program": ("--vocab", "a,b"),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, CliRun]:
    workdir = tmp_path_factory.mktemp("cli")
    (workdir / "prog.py").write_text(PROGRAM_FILE, encoding="utf-8")
    commands = _runs(workdir)
    example = commands.pop("example")
    load = ("--load", "frac.safetensors", "--input", "x x", "--json")

    def example_then_load() -> tuple[CliRun, CliRun]:
        # The model file the example run writes is loaded by a second run.
        return run_cli(example, workdir), run_cli(load, workdir)

    with ThreadPoolExecutor(max_workers=4) as pool:
        chained = pool.submit(example_then_load)
        futures = {name: pool.submit(run_cli, args, workdir) for name, args in commands.items()}
        results = {name: future.result() for name, future in futures.items()}
        results["example"], results["load"] = chained.result()
    results["workdir"] = workdir  # type: ignore[assignment]
    return results


def _one_line_error(run: CliRun) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    return lines[0]


def test_example_runs_prints_table_saves_and_plots(runs) -> None:
    run, workdir = runs["example"], runs["workdir"]
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert "output: BOS 1 0.5 0.333333 0.5" in run.stdout
    assert "residual labels: frac_prevs, indices:0" in run.stdout
    # Optimised by default: is_x is folded into the head, which now sits in layer 0.
    assert "== layer 0 attn" in run.stdout and "* frac_prevs" in run.stdout
    assert "optimised: fold_maps: Map is_x (of tokens) folded into the values of head(s) frac_prevs" in run.stdout
    for name in ("frac.png", "frac-attention.png", "frac-heads.png"):
        assert (workdir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = read_model_file(workdir / "frac.safetensors")
    assert record.model.apply(FRAC_INPUT.split()).decoded[1:3] == [1.0, 0.5]
    assert "lib.make_frac_prevs" in record.source and record.program_label == "frac_prevs"


def test_load_runs_a_saved_model_and_adds_bos(runs) -> None:
    run = runs["load"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["program"] == "frac_prevs"
    assert report["input"] == ["BOS", "x", "x"]
    assert report["decoded"] == ["BOS", 1.0, 1.0]


def test_program_file_sop_with_int_range_vocab_and_json(runs) -> None:
    run = runs["file_sop"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["vocab"] == [0, 1, 2, 3]
    assert report["decoded"] == ["BOS", 2, 4, 6]
    assert report["program"] == "doubled"
    assert {"layers", "residual_width", "heads", "parameters", "labels"} <= set(report)
    assert report["parameters"]["nonzero"] <= report["parameters"]["total"]
    assert report["residual_width"] == len(report["labels"])
    assert "doubled:6" in report["labels"]


def test_program_file_function_validates(runs) -> None:
    run = runs["file_function"]
    assert run.returncode == 0, run.stderr
    assert "reverse: compiles exactly" in run.stdout


def test_compile_flags_reach_the_compiler(runs) -> None:
    run = runs["flags"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["causal"] is True
    assert (report["bos"], report["pad"], report["max_seq_len"]) == ("S", "P", 4)
    assert report["vocab"] == ["a", "b", "x"]
    assert "tokens:S" in report["labels"] and "tokens:P" in report["labels"]
    assert report["decoded"] == ["S", 1.0, 1.0, pytest.approx(2 / 3)]


def test_validate_only_prints_every_problem_and_exits_1(runs) -> None:
    run = runs["invalid"]
    assert run.returncode == 1
    problems = run.stderr.strip().splitlines()
    assert problems and all(line.startswith("tracr-compile: problem: ") for line in problems)
    assert "round the values" in run.stderr  # the problem names its fix


def test_run_failure_exits_1_and_debug_shows_the_traceback(runs) -> None:
    debug = runs["bad_token_debug"]
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "InvalidInputError" in debug.stderr and "'z'" in debug.stderr


def test_usage_error_exits_2_with_one_line(runs) -> None:
    run = runs["no_program"]
    assert run.returncode == 2
    assert _one_line_error(run).startswith("tracr-compile: usage error: give exactly one of")


def test_list_examples_through_the_console_script(tmp_path) -> None:
    script = shutil.which("tracr-compile", path=str(pathlib.Path(sys.executable).parent))
    if script is None:  # not pip-installed here: the module entry point runs the same main()
        run = run_cli(("--list-examples",), tmp_path)
        returncode, stdout = run.returncode, run.stdout
    else:
        done = subprocess.run([script, "--list-examples"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        returncode, stdout = done.returncode, done.stdout
    assert returncode == 0
    assert "frac_prevs" in stdout and "sort_unique" in stdout
