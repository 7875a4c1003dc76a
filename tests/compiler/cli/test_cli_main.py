"""`compiler.cli.main` in-process: argument parsing and the failure paths, one line each."""

from __future__ import annotations

import json

import pytest
from support import PROGRAM_FILE

from compiler.cli import main
from compiler.cli.args import UsageError, parse_input, parse_token, parse_vocab


@pytest.fixture()
def prog(tmp_path) -> str:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM_FILE, encoding="utf-8")
    return str(path)


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("a,b, c", ("a", "b", "c")),
        ("1,2,10", (1, 2, 10)),
        ("1,b", ("1", "b")),
        ("0..3", (0, 1, 2, 3)),
        ("-1 .. 1", (-1, 0, 1)),
        ('["x", 1, true, [1, 2]]', ("x", 1, True, (1, 2))),
    ],
)
def test_parse_vocab(text, tokens) -> None:
    assert parse_vocab(text) == tokens


@pytest.mark.parametrize("text", ["", "3..1", "a,,b", "[1, 2", "[]", '[{"a": 1}]'])
def test_parse_vocab_refuses(text) -> None:
    with pytest.raises(UsageError):
        parse_vocab(text)


def test_parse_tokens_follow_the_vocab_types() -> None:
    assert parse_token("3", {1, 3}) == 3
    assert parse_token("3", {"3"}) == "3"
    assert parse_token("true", {True, False}) is True
    assert parse_token("zzz", {1}) == "zzz"
    assert parse_input("1 3", (1, 3), "BOS", "PAD") == ["BOS", 1, 3]
    assert parse_input("BOS 1 PAD", (1, 3), "BOS", "PAD") == ["BOS", 1, "PAD"]


def test_help_lists_every_flag_and_exits_0(capsys) -> None:
    assert main(["compile", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--example", "--list-examples", "--load", "--vocab", "--max-seq-len", "--causal", "--bos",
                 "--pad", "--mlp-exactness", "--validate-only", "--out", "--input", "--plot", "--json", "--debug"):
        assert flag in out


def test_top_level_help_lists_every_sub_command(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("compile", "circuit", "zoo", "fuzz", "--debug"):
        assert command in out
    assert main(["zoo", "--help"]) == 0
    out = capsys.readouterr().out
    assert "generate" in out and "audit" in out


@pytest.mark.parametrize("argv, expected", [
    (["--example", "hist"], ["compile", "--example", "hist"]),
    (["--debug", "--example", "hist"], ["--debug", "compile", "--example", "hist"]),
    (["--debug", "circuit", "--out", "x"], ["--debug", "circuit", "--out", "x"]),
    (["zoo", "audit", "z"], ["zoo", "audit", "z"]),
    (["--help"], ["--help"]),
    ([], ["compile"]),
])
def test_compile_is_the_default_sub_command(argv, expected) -> None:
    from compiler.cli.command_line import with_command

    assert with_command(argv) == expected


@pytest.mark.parametrize("argv, fragment", [
    (["--debug", "circuit", "--example", "nope", "--out", "x"], "unknown example 'nope'"),
    (["zoo", "out"], "invalid choice: 'out'"),
    (["zoo"], "the following arguments are required"),
    (["fuzz", "-n", "1", "--program-timeout", "0"], "--program-timeout must be positive"),
])
def test_sub_commands_share_one_error_wrapper(argv, fragment, capsys) -> None:
    """Usage errors of every sub-command are one line with exit code 2; --debug is accepted
    before the sub-command (it used to fall through to the compile parser)."""
    if argv[0] == "--debug":
        with pytest.raises(UsageError, match=fragment):
            main(argv)
        return
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err


def test_circuit_out_under_a_file_is_refused_before_any_work(tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["circuit", "--example", "frac_prevs", "--out", str(blocker / "fp")]) == 1
    err = capsys.readouterr().err
    assert "file" in err and str(blocker) in err


def test_zoo_audit_of_a_folder_without_shards_is_a_usage_error(tmp_path, capsys) -> None:
    assert main(["zoo", "audit", str(tmp_path), "--quiet"]) == 2
    assert "holds no shards" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--example", "nope"], "unknown example 'nope'"),
        (["--example", "hist", "--max-seq-len", "many"], "invalid int value"),
        (["--example", "hist", "--max-seq-len", "0"], "at least 1"),
        (["--example", "hist", "--vocab", "[1, 2"], "not a valid JSON list"),
        (["--example", "hist", "--vocab", "a,b", "--plot", "x.png"], "--plot needs --input"),
        (["--example", "hist", "--load", "m.safetensors"], "exactly one of"),
        (["--load", "m.safetensors", "--vocab", "a"], "only apply when compiling"),
        (["--example", "hist", "--no-such-flag"], "unrecognized arguments"),
        (["{prog}:not_a_program", "--vocab", "1", "--max-seq-len", "2"], "not a RASP s-op"),
        (["{prog}:missing", "--vocab", "1", "--max-seq-len", "2"], "no module-level name 'missing'"),
        (["{prog}:doubled"], "needs --vocab and --max-seq-len"),
        (["nowhere.py:x", "--vocab", "1", "--max-seq-len", "2"], "does not exist"),
        (["just_a_name", "--vocab", "1", "--max-seq-len", "2"], "path/to/file.py:name"),
    ],
)
def test_usage_errors_exit_2(args, fragment, prog, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([a.format(prog=prog) for a in args]) == 2
    line = _error_line(capsys)
    assert line.startswith("tracr-compile: usage error: ") and fragment in line


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["{prog}:unsupported", "--vocab", "1,2,3", "--max-seq-len", "3"], "cannot be compiled exactly"),
        (["{prog}:broken", "--vocab", "1,2", "--max-seq-len", "3"], "the builder is broken"),
        (["--example", "hist", "--input", "BOS a z"], "token 'z'"),
        (["--example", "hist", "--causal", "--causal-strict"], "causal"),
        (["--example", "hist", "--bos", "a"], "also a vocabulary token"),
        (["--load", "{tmp}/garbage.safetensors"], "not a tracr-compile model file"),
    ],
)
def test_program_errors_exit_1(args, fragment, prog, capsys, tmp_path) -> None:
    (tmp_path / "garbage.safetensors").write_bytes(b"not a model at all, just some bytes")
    assert main([a.format(prog=prog, tmp=tmp_path) for a in args]) == 1
    line = _error_line(capsys)
    assert line.startswith("tracr-compile: error: ") and fragment in line


def test_validate_only_json(prog, capsys) -> None:
    assert main([f"{prog}:unsupported", "--vocab", "1,2", "--max-seq-len", "2", "--validate-only", "--json"]) == 1
    captured = capsys.readouterr()
    assert '"ok": false' in captured.out
    assert captured.err.count("tracr-compile: problem: ") >= 1


def test_every_example_builds_and_evaluates_its_example_input() -> None:
    from compiler.examples import EXAMPLES

    for example in EXAMPLES.values():
        program = example.build(example.max_seq_len)
        assert len(program(list(example.example_input))) == len(example.example_input)
        assert set(example.example_input) <= set(example.vocab)
        assert len(example.example_input) <= example.max_seq_len
        source = example.source(example.max_seq_len)
        assert example.call in source and f"def {example.function.__name__}" in source


def test_norm_and_huggingface_flags(tmp_path, capsys) -> None:
    """`--norm` compiles a normalised model (the summary says so); `--huggingface` writes the
    checkpoint, and without `--norm layernorm`, or into a folder holding other files, is refused
    before compiling."""
    assert main(["--example", "sort_unique", "--norm", "layernorm", "--huggingface", str(tmp_path / "hf")]) == 0
    out = capsys.readouterr().out
    assert "norm: layernorm before every sub-layer" in out and "Hugging Face GPT-2 checkpoint" in out
    assert (tmp_path / "hf" / "config.json").exists() and (tmp_path / "hf" / "model.safetensors").exists()
    assert main(["--example", "sort_unique", "--huggingface", str(tmp_path / "b")]) == 2
    assert "add --norm layernorm" in _error_line(capsys)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert main(["--example", "sort_unique", "--norm", "layernorm", "--huggingface", str(tmp_path / "busy")]) == 1
    assert "holds other files" in _error_line(capsys)
    assert main(["--example", "sort_unique", "--norm", "batchnorm"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_packed_folds_the_packed_projection_into_the_checkpoint(tmp_path, capsys) -> None:
    """`--packed` writes the compressed checkpoint (its stream is the folded one: 21 coordinates of
    mean zero and the anchor's 2) and reports the bound's claim with its check on 2,000 random inputs; without
    `--huggingface` it is refused before compiling."""
    assert main(["--example", "sort_unique", "--norm", "layernorm", "--huggingface", str(tmp_path / "hf"),
                 "--packed", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["packed"] == {"width": 28, "folded_width": 23, "claimed_exact": True, "checked": 2000,
                                "enumerated": False, "agree": 2000}
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert len(config["tracr_compile"]["residual_labels"]) == 23
    assert main(["--example", "sort_unique", "--packed"]) == 2
    assert "give it with --huggingface" in _error_line(capsys)
