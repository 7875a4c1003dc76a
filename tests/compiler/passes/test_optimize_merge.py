"""`merge_common`: duplicate computations become one s-op / selector."""

from __future__ import annotations

import itertools

from compiler import compile_rasp
from compiler.passes import graph as g
from compiler.passes.optimize import applied
from compiler.passes.optimize.merge_common import function_key, merge_common
from rasp import rasp

VOCAB = (0, 1, 2, 3)


def _shift(sop: rasp.SOp, k: int, name: str) -> rasp.SOp:
    return rasp.Map(lambda v: v + k, sop).named(name)  # a fresh lambda per call


def _every_input_matches(program: rasp.SOp, causal: bool, *models) -> None:
    """Each model equals RASP on all 340 inputs of length 1..4."""
    inputs = [list(t) for n in range(1, 5) for t in itertools.product(VOCAB, repeat=n)]
    expected = [rasp.evaluate(program, tokens, causal=causal) for tokens in inputs]
    for model in models:
        got = model.apply_batch([["BOS", *tokens] for tokens in inputs])
        assert [out[1:] for out in got] == expected


def _labels(program: rasp.SOp) -> set[str]:
    return set(g.trace(program).nodes)


def test_functions_compare_by_code_globals_and_closure_constants():
    assert function_key(_shift(rasp.tokens, 1, "a").f) == function_key(_shift(rasp.tokens, 1, "b").f)
    assert function_key(_shift(rasp.tokens, 1, "a").f) != function_key(_shift(rasp.tokens, 2, "b").f)
    assert function_key(lambda v: v + 1) != function_key(lambda v: v + 1)  # two source lines
    first, second = [1], [1]  # equal but distinct mutable objects: compared by identity
    assert function_key((lambda: lambda: first)()) != function_key((lambda: lambda: second)())
    assert function_key(rasp.Comparison.LT) == function_key(rasp.Comparison.LT)


def test_two_equal_maps_become_one_and_their_reader_reads_it_twice():
    a, b = _shift(rasp.tokens, 1, "a"), _shift(rasp.tokens, 1, "b")
    program = rasp.SequenceMap(lambda x, y: x * y, a, b).named("out")
    merged, lines = merge_common(program)
    assert len(lines) == 1 and lines[0] in {
        f"merge_common: {x} computes the same as {y} (same operation of the same inputs); its readers read {y}"
        for x, y in (("a", "b"), ("b", "a"))
    }
    assert merged.label == "out" and merged.fst is merged.snd
    assert len(_labels(merged)) == len(_labels(program)) - 1
    for causal in (False, True):
        model = compile_rasp(program, VOCAB, 4, causal=causal)
        plain = compile_rasp(program, VOCAB, 4, causal=causal, optimize=False)
        assert model.residual_space.num_dims < plain.residual_space.num_dims
        assert applied(model.graph)[0].startswith("merge_common: ")
        _every_input_matches(program, causal, model, plain)


def test_equal_selectors_and_aggregates_merge_through_the_tree():
    def reversed_tokens(name: str) -> rasp.SOp:
        opposite = rasp.SequenceMap(lambda n, i: n - i - 1, rasp.length, rasp.indices)
        flip = rasp.Select(rasp.indices, opposite, rasp.Comparison.EQ)
        return rasp.Aggregate(flip, rasp.tokens).named(name)

    program = rasp.SequenceMap(lambda a, b: a == b, reversed_tokens("r1"), reversed_tokens("r2")).named("palindrome")
    merged, lines = merge_common(program)
    assert merged.fst is merged.snd
    assert len(lines) == 3  # the SequenceMap, the Select and the Aggregate
    model = compile_rasp(program, VOCAB, 4)
    plain = compile_rasp(program, VOCAB, 4, optimize=False)
    assert len(model.config.layers) <= len(plain.config.layers)
    assert model.residual_space.num_dims < plain.residual_space.num_dims
    _every_input_matches(program, False, model, plain)  # reads length: non-causal only


def test_different_parameters_or_encodings_are_not_merged():
    one, two = _shift(rasp.tokens, 1, "one"), _shift(rasp.tokens, 2, "two")
    assert merge_common(rasp.SequenceMap(lambda a, b: a + b, one, two))[1] == ()
    f = lambda v: v + 1
    numeric = rasp.numerical(rasp.Map(f, rasp.tokens)).named("numeric")
    category = rasp.Map(f, rasp.tokens).named("category")
    assert merge_common(rasp.SequenceMap(lambda a, b: a + b, numeric, category))[1] == ()
    defaults = [
        rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ), rasp.tokens, default=d)
        for d in (0, False)
    ]
    (line,) = merge_common(rasp.SequenceMap(lambda a, b: (a, b), *defaults))[1]
    assert line.startswith("merge_common: select_")  # the selectors merge, the Aggregates do not


def test_merge_common_is_pure_and_switchable():
    a, b = _shift(rasp.tokens, 1, "a"), _shift(rasp.tokens, 1, "b")
    program = rasp.SequenceMap(lambda x, y: x - y, a, b).named("out")
    merge_common(program)
    assert program.fst is a and program.snd is b  # the input program is unchanged
    kept = compile_rasp(program, VOCAB, 4, optimize=["fold_maps"])
    assert {"a", "b"} <= set(kept.graph.nodes)



def test_predicates_compare_as_frozen_dataclasses_and_objects_by_identity():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Within:
        distance: int

        def __call__(self, key, query) -> bool:
            return abs(key - query) <= self.distance

    assert function_key(Within(1)) == function_key(Within(1)) != function_key(Within(2))
    first, second = rasp.Map(lambda x: x, rasp.tokens), rasp.Map(lambda x: x, rasp.tokens)
    # An s-op's == builds an s-op: closures over different s-ops must not compare equal.
    assert function_key((lambda s: lambda x: s)(first)) != function_key((lambda s: lambda x: s)(second))
    near = [rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, Within(1)), rasp.tokens) for _ in range(2)]
    merged, lines = merge_common(rasp.SequenceMap(lambda a, b: a + b, *near))
    assert merged.fst is merged.snd and len(lines) == 2
