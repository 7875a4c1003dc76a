"""A small seeded differential fuzz pass (see benchmarks/fuzz.py) and generator coverage."""

import collections

from compiler.fuzzing import checkpoint, driver, function_menu, program_spec, random_programs
from compiler.fuzzing.differential import FAILURES
from compiler.fuzzing.shrink import Case, shrink
from rasp import lib, rasp


def test_fifty_seeded_programs_are_exact_or_refused(tmp_path):
    options = driver.Options(programs=50, seed=7, inputs=48, jax_every=25, out=tmp_path)
    results = list(driver.run(options))
    failures = [(r.index, o.status, o.reason) for r in results for o in r.outcomes if o.status in FAILURES]
    assert failures == [], driver.summary(results, 1.0)
    statuses = collections.Counter(o.status for r in results for o in r.outcomes)
    assert statuses["exact"] >= 15  # the pass really compares compiled models


def test_generator_covers_every_construct():
    seen = collections.Counter()
    for seed in range(300):
        vocab = ["a", "b", "c"] if seed % 2 else [0, 1, 2]
        spec = random_programs.generate(seed, 3 + seed % 13, vocab, 4)
        assert 1 <= spec.size
        for op in spec.ops:
            seen[op.kind] += 1
            if op.kind == "select":
                seen["predicate " + (op.params[0] if op.params[0].startswith("Comparison.") else "custom")] += 1
            if op.kind == "lib":
                seen["lib " + op.params[0]] += 1
            if op.kind in ("map", "aggregate", "width", "seqmap", "linmap") and op.numerical:
                seen["numerical " + op.kind] += 1
            if op.kind in ("map", "seqmap", "select"):
                for marker in ("str(", "isinstance(", "type(", "len(str(k)) == len(str(q))"):
                    seen["type-sensitive " + marker] += marker in op.params[0]
            seen.update(_shapes(spec, op))
    for kind in ("map", "seqmap", "linmap", "full", "aggregate", "width", "shift", "select", "and", "or", "not"):
        assert seen[kind], kind
    for comparison in rasp.Comparison:
        assert seen[f"predicate Comparison.{comparison.name}"], comparison
    assert seen["predicate custom"]
    for name in random_programs.LIB_PROGRAMS:
        assert seen["lib " + name], name
    for kind in ("map", "aggregate", "width", "seqmap", "linmap"):
        assert seen["numerical " + kind], kind
    for marker in ("str(", "isinstance(", "type(", "len(str(k)) == len(str(q))"):
        assert seen["type-sensitive " + marker], marker
    for shape in ("seqmap of an s-op with itself", "seqmap of an s-op and a Map of it",
                  "copy of a many-to-one Map, read", "numerical copy of a many-to-one Map"):
        assert seen[shape], shape


def _shapes(spec, op) -> list[str]:
    """The value-inference shapes (`random_programs.add_chain`, `add_self_seqmap`) `op` ends."""
    ops, shapes = spec.ops, []
    many_to_one = {f.source for f in function_menu.MANY_TO_ONE}
    if op.kind == "seqmap":
        x, y = op.args
        if x == y:
            shapes.append("seqmap of an s-op with itself")
        elif (ops[x].kind == "map" and ops[x].args == (y,)) or (ops[y].kind == "map" and ops[y].args == (x,)):
            shapes.append("seqmap of an s-op and a Map of it")
    if op.kind in ("map", "seqmap"):
        source = ops[op.args[0]]
        values = source.args[-1] if source.kind in ("aggregate", "shift") else None
        if values is not None and ops[values].kind == "map" and ops[values].params[0] in many_to_one:
            shapes.append("copy of a many-to-one Map, read")
            if source.numerical:
                shapes.append("numerical copy of a many-to-one Map")
    return shapes


def test_printed_source_rebuilds_the_same_program():
    spec = random_programs.generate(3, 12, [1, 2, 3], 4)
    source = program_spec.to_source(spec)
    namespace = {"rasp": rasp, "lib": lib}
    exec(source, namespace)
    for xs in ([1], [3, 1, 2], [2, 2, 1, 3]):
        try:
            expected = program_spec.build(spec)(xs)
        except rasp.RaspEvaluationError:
            continue
        assert namespace["program"](xs) == expected


def test_shrink_keeps_the_failure_and_reduces_the_program():
    def has_sequence_map(candidate, case):  # a stand-in "failure"
        return any(op.kind == "seqmap" for op in candidate.ops)

    spec = next(
        s for s in (random_programs.generate(seed, 14, [1, 2, 3], 4) for seed in range(100))
        if has_sequence_map(s, None) and s.size > 6
    )
    small, small_case = shrink(spec, Case((1, 2, 3), 4, False), has_sequence_map)
    assert has_sequence_map(small, small_case)
    assert small.size < spec.size and small_case.max_seq_len == 1 and len(small_case.vocab) == 1


def test_results_file_resumes_and_redoes(tmp_path, capsys):
    path = tmp_path / "results.json"
    common = ["--seed", "5", "--inputs", "16", "--jax-every", "0", "--quiet", "--results", str(path)]
    assert driver.main(["-n", "3", *common]) == 0
    first = path.read_text()
    assert driver.main(["-n", "5", *common]) == 0
    out = capsys.readouterr().out
    assert "3 programs stored, 2 to check" in out and "programs: 5" in out
    options = driver.Options(programs=5, seed=5, inputs=16, jax_every=0)
    stored = checkpoint.load(path, options, driver.ProgramResult)
    assert sorted(stored) == [0, 1, 2, 3, 4]
    assert first.split('"results":')[1][:200] == path.read_text().split('"results":')[1][:200]
    redone = checkpoint.load(path, options, driver.ProgramResult, redo=["exact"])
    assert all(all(o.status != "exact" for o in r.outcomes) for r in redone.values())
    assert driver.main(["-n", "5", "--seed", "6", *common[2:]]) == 2  # other settings
    assert "other settings" in capsys.readouterr().err


def test_a_gzip_results_file_resumes_and_a_broken_one_is_refused(tmp_path, capsys):
    """A `.gz` results file is written compressed and read back (the claims run's file kept in
    the repository); one that is not gzip data is refused with its path named."""
    import gzip
    import json

    path = tmp_path / "results.json.gz"
    common = ["--seed", "5", "--inputs", "16", "--jax-every", "0", "--quiet", "--results", str(path)]
    assert driver.main(["-n", "2", *common]) == 0
    rows = json.loads(gzip.decompress(path.read_bytes()))["results"]
    assert [row["index"] for row in rows] == [0, 1]
    assert driver.main(["-n", "3", *common]) == 0
    assert "2 programs stored, 1 to check" in capsys.readouterr().out
    path.write_text("not gzip")
    assert driver.main(["-n", "3", *common]) == 2
    assert f"{path}: not a fuzz results file" in capsys.readouterr().err


def test_a_non_positive_program_timeout_is_refused(capsys):
    assert driver.main(["-n", "1", "--jobs", "2", "--program-timeout", "0", "--quiet"]) == 2
    assert "--program-timeout must be positive, got 0" in capsys.readouterr().err


def test_the_oracle_repeats_a_compiled_loops_tied_block():
    """The numpy interpreter runs the layers in `config.layer_order` (it used to run a loop's
    tied block once, so a loop model's numpy output was one iteration's)."""
    import numpy as np

    from compiler import compile_rasp
    from compiler.model import oracle

    loop = lib.make_parity_loop(3)
    model = compile_rasp(loop, {0, 1}, 4)
    assert model.config.tied.repeats == 3
    batch = [["BOS", 1, 0, 1, 1], ["BOS", 0, 1, 1, 0]]
    ids = model.input_encoder.encode_batch(batch)
    logits = oracle.forward(model.config, model.params, ids)
    decoded = [model.output_encoder.decode(row)[1:] for row in np.asarray(logits)]
    assert decoded == [loop([1, 0, 1, 1]), loop([0, 1, 1, 0])] == [row[1:] for row in model.apply_batch(batch)]


class _Done(collections.namedtuple("_Done", "index")):
    """A stand-in result: only its index, which is all `driver.run` reads."""


def _slow_first(args):
    """A worker whose program 0 takes a while and every other program none."""
    import time

    _, index = args
    time.sleep(3.0 if index == 0 else 0.0)
    return _Done(index)


def test_with_several_workers_results_come_as_they_finish():
    """A slow program holds up only its own worker: the others' results are not queued behind it."""
    got = [r.index for r in driver.run(driver.Options(programs=4), jobs=2, worker=_slow_first, timeout=60)]
    assert sorted(got) == [0, 1, 2, 3] and got[-1] == 0
