"""Shrunk programs the differential fuzzer (benchmarks/fuzz.py) found, one test each.

Each test builds the program exactly as the fuzzer printed it and checks it against the RASP
evaluator with the real JAX model (`assert_exact`), or checks the documented refusal.
"""

import time

from rasp import lib, rasp  # noqa: F401 - the pasted programs use both

from compiler import validate
from compiler.fuzzing.differential import assert_exact


def test_dense_float_means_are_refused_quickly():
    # Found: a numerical Aggregate (v17) of an s-op with 2623 float values (chained
    # LinearSequenceMaps with factors 0.5 and -3) spent ~50 s enumerating sumsets of up to
    # 1.7e8 entries before refusing. Now refused at once by the sumset work limit.
    v2 = rasp.Map(lambda x: min(x, 2), rasp.indices).named("v2")
    v3 = rasp.SequenceMap(lambda x, y: x == y, rasp.indices, v2).named("v3")
    v4 = rasp.Map(lambda x: 2 * x, v3).named("v4")
    v5 = rasp.Select(v4, v4, rasp.Comparison.LEQ).named("v5")
    v6 = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT).named("v6")
    v7 = (v5 & v6).named("v7")
    v8 = rasp.numerical(rasp.Aggregate(v7, v3, default=0)).named("v8")
    v9 = rasp.Map(lambda x: 1 - x, v8, simplify=False).named("v9")
    v10 = lib.make_sort_freq(5).named("v10")
    v11 = lib.make_sort(v9, v9, max_seq_len=5, min_key=1).named("v11")
    v12 = lib.shift_by(2, v10).named("v12")
    v13 = rasp.numerical(rasp.LinearSequenceMap(v8, v8, 2, -1)).named("v13")
    v14 = rasp.numerical(rasp.LinearSequenceMap(v13, v13, 0.5, -3)).named("v14")
    v15 = rasp.Map(lambda x: x.upper(), v12).named("v15")
    v16 = rasp.Select(v11, v12, rasp.Comparison.TRUE).named("v16")
    v17 = rasp.numerical(rasp.Aggregate(v16, v14, default=0)).named("v17")
    v18 = rasp.SequenceMap(lambda x, y: x + (y == 'a'), v17, v15).named("v18")
    started = time.perf_counter()
    problems = validate(v18, ["a", "b", "c"], 5)
    assert time.perf_counter() - started < 10
    assert problems and problems[0].startswith("v17:")
