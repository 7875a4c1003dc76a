"""Bad input gets a clear error early: before any large allocation, naming what is wrong.

Every case here is bounded in time by construction: the refusals happen before the work they
guard (a size estimate before lowering, a path check before the file's bytes are built), so
these tests run in well under a second each without asserting on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings

import pytest

from compiler import (
    InvalidInputError,
    ModelFileError,
    ModelSizeError,
    ModelSizeWarning,
    ValueInferenceError,
    atomic,
    compile_rasp,
    save_model,
)
from compiler.passes.size_estimate import DEFAULT_MAX_WEIGHT_BYTES
from rasp import lib, rasp


@pytest.fixture(scope="module")
def length_model():
    return compile_rasp(lib.make_length(), {"a", "b"}, 3)


# -- oversized compiles ---------------------------------------------------------------------


def test_hist_with_a_100000_token_vocabulary_is_refused_before_building(monkeypatch):
    from compiler import compiling

    monkeypatch.setattr(compiling, "lower", lambda *a, **k: pytest.fail("lowering started"))
    vocab = [f"t{i}" for i in range(100_000)]
    with pytest.raises(ModelSizeError) as raised:
        compile_rasp(lib.make_hist(), vocab, 5)
    message = str(raised.value)
    assert "'hist'" in message and "GiB" in message and "max_weight_bytes=1073741824" in message
    assert "smaller vocabulary" in message and "raise max_weight_bytes" in message
    assert raised.value.label == "hist" and raised.value.limit == DEFAULT_MAX_WEIGHT_BYTES
    assert raised.value.estimated_bytes > 30 * 2**30  # the 100k x 100k float32 token embedding


def test_length_at_max_seq_len_10000_is_refused_up_front():
    with pytest.raises(ModelSizeError, match="'length'.*max_weight_bytes"):
        compile_rasp(lib.make_length(), {"a"}, 10_000)


def test_a_large_but_allowed_compile_warns_with_its_size():
    with pytest.warns(ModelSizeWarning, match=r"about 78.9 KiB .*'length' with 62.0 KiB"):
        compile_rasp(lib.make_length(), {"a"}, 60, max_weight_bytes=200_000)


def test_the_limit_can_be_raised_or_disabled():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelSizeWarning)
        model = compile_rasp(lib.make_length(), {"a"}, 60, max_weight_bytes=None)
    assert model.apply(["BOS"] + ["a"] * 7).decoded[1:] == [7] * 7


@pytest.mark.parametrize("limit", [0, -5, 1.5, "1GiB", True])
def test_a_bad_limit_is_refused(limit):
    with pytest.raises(InvalidInputError, match="max_weight_bytes"):
        compile_rasp(lib.make_length(), {"a"}, 3, max_weight_bytes=limit)


def test_cli_takes_sizes_with_units_and_none(capsys):
    from compiler.cli.command_line import main

    assert main(["--example", "hist", "--max-weight-bytes", "1KiB"]) == 1
    assert "max_weight_bytes=1024" in capsys.readouterr().err
    assert main(["--example", "hist", "--max-weight-bytes", "lots"]) == 2
    assert "--max-weight-bytes 'lots'" in capsys.readouterr().err
    assert main(["--example", "hist", "--max-weight-bytes", "none"]) == 0


# -- functions and predicates that raise while compiling --------------------------------------


def _picky(key, query):
    if key == "b":
        raise TypeError("cannot compare b")
    return key == query


@pytest.mark.parametrize("wrap", ["aggregate", "selector_width", "not"])
def test_a_raising_predicate_names_the_selector_and_the_values(wrap):
    select = rasp.Select(rasp.tokens, rasp.tokens, _picky).named("picky_select")
    if wrap == "aggregate":
        program = rasp.numerical(rasp.Aggregate(select, rasp.numerical(rasp.Map(lambda t: 1, rasp.tokens)), default=0))
    elif wrap == "selector_width":
        program = rasp.SelectorWidth(select)
    else:
        program = rasp.SelectorWidth(rasp.SelectorNot(select))
    with pytest.raises(ValueInferenceError) as raised:
        compile_rasp(program, {"a", "b"}, 3)
    message = str(raised.value)
    assert "picky_select" in message and "TypeError: cannot compare b" in message and "key='b'" in message
    assert isinstance(raised.value.__cause__, TypeError)


def test_a_standard_comparison_failing_on_mixed_types_names_the_pair():
    select = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LT).named("mixed")
    with pytest.raises(ValueInferenceError, match=r"mixed \(keys tokens, queries indices\).*'<' not supported.*key='a', query=0"):
        compile_rasp(rasp.SelectorWidth(select), {"a", "b"}, 3)


def test_a_raising_map_and_sequence_map_name_the_expression_and_the_value():
    program = rasp.Map(lambda x: 10 // (x - 2), rasp.tokens).named("divide")
    with pytest.raises(ValueInferenceError, match=r"divide: .*ZeroDivisionError.*\(2\)"):
        compile_rasp(program, {1, 2, 3}, 3)
    pairs = rasp.SequenceMap(lambda x, i: x[i], rasp.tokens, rasp.indices).named("index_into")
    with pytest.raises(ValueInferenceError, match=r"index_into: .*IndexError.*\('ab', 2\)"):
        compile_rasp(pairs, {"ab", "abc"}, 3)


# -- vocabulary and special tokens ----------------------------------------------------------


def test_none_is_refused_as_a_token_bos_or_pad():
    with pytest.raises(InvalidInputError, match="vocab holds None.*'no value'"):
        compile_rasp(lib.make_length(), {"a", None}, 3)
    with pytest.raises(InvalidInputError, match="compiler_bos is None"):
        compile_rasp(lib.make_length(), {"a"}, 3, compiler_bos=None)
    with pytest.raises(InvalidInputError, match="compiler_pad is None"):
        compile_rasp(lib.make_length(), {"a"}, 3, compiler_pad=None)


# -- inputs to a compiled model -------------------------------------------------------------


def test_an_empty_batch_gives_an_empty_list(length_model):
    assert length_model.apply_batch([]) == []
    assert length_model.apply_batch(()) == []


def test_a_string_instead_of_a_token_list_asks_for_a_list(length_model):
    with pytest.raises(InvalidInputError, match=r"list of tokens.*string 'BOS a b'.*\['BOS', 'a', 'b'\]"):
        length_model.apply("BOS a b")
    with pytest.raises(InvalidInputError, match="a batch must be a list of token lists, got the string"):
        length_model.apply_batch("BOS a b")
    with pytest.raises(InvalidInputError, match=r"one sequence starting with BOS.*wrap it"):
        length_model.apply_batch(["BOS", "a"])
    with pytest.raises(InvalidInputError, match="got int 5"):
        length_model.apply(5)
    assert length_model.apply_batch([["BOS", "a"], "BOS a b".split()]) == [["BOS", 1], ["BOS", 2, 2]]


def test_none_as_an_input_token_is_named(length_model):
    with pytest.raises(InvalidInputError, match="token None at position 1 is not in the vocabulary"):
        length_model.apply(["BOS", None])


# -- saving -----------------------------------------------------------------------------------


def test_saving_to_a_folder_names_the_folder_and_a_file_inside(length_model, tmp_path):
    with pytest.raises(ModelFileError, match=rf"{tmp_path} is a folder; give a file path, e.g. .*model.safetensors"):
        save_model(length_model, tmp_path)


def test_saving_under_a_file_names_the_file(length_model, tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(ModelFileError, match=r"notes.txt is a file, not a folder"):
        save_model(length_model, tmp_path / "notes.txt" / "model.safetensors")
    assert (tmp_path / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("path", ["", "   "])
def test_saving_to_an_empty_path_is_refused(length_model, path):
    with pytest.raises(ModelFileError, match="the path is empty"):
        save_model(length_model, path)


def test_saving_over_a_device_is_refused_and_leaves_it(length_model):
    with pytest.raises(ModelFileError, match="/dev/null is a character device.*refused"):
        save_model(length_model, "/dev/null")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_saving_over_a_named_pipe_is_refused(length_model, tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(ModelFileError, match="is a named pipe"):
        save_model(length_model, pipe)


def test_saving_in_a_read_only_place_names_the_folder(length_model, tmp_path):
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        # Root ignores folder permissions; /sys is read-only for everyone.
        target = folder if not os.access(folder, os.W_OK) else "/sys"
        with pytest.raises(ModelFileError, match=r"cannot write in .*choose a folder you can write to"):
            save_model(length_model, os.path.join(target, "model.safetensors"))
    finally:
        folder.chmod(0o755)


def test_saving_through_a_symbolic_link_writes_its_file(length_model, tmp_path):
    real = tmp_path / "real.safetensors"
    real.write_bytes(b"old")
    link = tmp_path / "link.safetensors"
    link.symlink_to(real)
    save_model(length_model, link)
    assert link.is_symlink() and real.stat().st_size > 100


_KILLED_WRITER = """
import sys, time
from compiler.atomic import atomic_write
def write(temporary):
    temporary.write_bytes(b"x" * 100_000)
    print("writing", flush=True)
    time.sleep(60)
atomic_write(sys.argv[1], write)
"""


def test_a_killed_save_leaves_a_partial_file_the_next_save_removes(length_model, tmp_path):
    target = tmp_path / "model.safetensors"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True, cwd=root,
    )
    try:
        assert writer.stdout.readline().strip() == "writing"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    (partial,) = [p for p in tmp_path.iterdir() if ".partial" in p.name]
    assert partial.name.startswith(".model.safetensors.") and f"-{writer.pid}-" in partial.name
    save_model(length_model, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


def test_partial_files_of_live_processes_and_other_hosts_stay(tmp_path):
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    host = atomic._host()
    dead = tmp_path / f".a.bin.{host}-{done.pid}-{'0' * 16}.partial.bin"
    live = tmp_path / f".b.bin.{host}-{os.getppid()}-{'1' * 16}.partial.bin"
    other = tmp_path / f".c.bin.elsewhere{host}-{done.pid}-{'2' * 16}.partial.bin"
    unrelated = tmp_path / ".d.bin.partial"
    for path in (dead, live, other, unrelated):
        path.write_bytes(b"half")
    assert atomic.remove_stale_partials(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, other, unrelated))


def test_cli_refuses_bad_destinations_before_compiling(tmp_path, capsys, monkeypatch):
    from compiler import compiling
    from compiler.cli.command_line import main

    monkeypatch.setattr(compiling, "lower", lambda *a, **k: pytest.fail("compiled before checking --out"))
    assert main(["--example", "hist", "--out", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert "is a folder" in error and "internal error" not in error
    assert main(["--example", "hist", "--out", ""]) == 1
    assert "the path is empty" in capsys.readouterr().err


def test_a_normalised_compile_counts_its_saturated_lookups_twice():
    """Under a norm each lookup unit is two (saturated), so the size estimate doubles the lookup:
    a 200-value Map's 625 KiB becomes 1.2 MiB, and a limit between the two refuses only the
    normalised compile."""
    program = rasp.Map(lambda x: (x * 7) % 200, rasp.tokens).named("scrambled")
    compile_rasp(program, set(range(200)), 3, max_weight_bytes=1_200_000)
    with pytest.raises(ModelSizeError, match="'scrambled' with 1.2 MiB"):
        compile_rasp(program, set(range(200)), 3, norm="layernorm", max_weight_bytes=1_200_000)
