"""Value inference keeps the evaluator's Python types, and refuses what a model cannot tell apart.

Every compiled program below reads an s-op through a type-sensitive function or predicate
(`isinstance`, `str`, `type(x).__name__`, `len(str(k)) == len(str(q))`); each is compiled with
and without the optimisation passes, plain and causal, and compared with `rasp.evaluate` on
every input of the small vocabulary and length, values and (for categorical outputs) types.
Then the programs whose s-op takes one value with two types (1 and 1.0) and whose reader tells
them apart: refused, naming the reader and the s-op. Then the inference itself: the recorded
variants, and the vectorised arithmetic's types.
"""

from __future__ import annotations

import itertools
import warnings

import pytest

from compiler import CausalSemanticsWarning, compile_rasp
from compiler.errors import ValueInferenceError
from compiler.fuzzing.differential import run_model
from compiler.model.agree import same_value
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.arithmetic import linear_values
from compiler.passes.values import bag_sums, infer_values
from compiler.passes.variants import Collector
from rasp import lib, rasp

MODES = [(causal, optimize) for causal in (False, True) for optimize in (True, False)]
MODE_IDS = [f"{'causal' if c else 'plain'}-{'opt' if o else 'noopt'}" for c, o in MODES]


def _ints() -> rasp.SOp:
    """tokens + indices: ints in the evaluator (the compiler used to infer floats)."""
    return rasp.LinearSequenceMap(rasp.tokens, rasp.indices, 1, 1).named("plus")


def _halves() -> rasp.SOp:
    """0.5 * tokens + indices: floats, some of them integral (2.0)."""
    return rasp.LinearSequenceMap(rasp.tokens, rasp.indices, 0.5, 1).named("halves")


def _numbers() -> rasp.SOp:
    return rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)).named("numbers")


def _earlier() -> rasp.Selector:
    return rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT).named("earlier")


def _prefix() -> rasp.Selector:
    return rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ).named("prefix")


def _sum_of_lsm() -> rasp.SOp:
    return rasp.SequenceMap(lambda x, y: x + y, _ints(), rasp.tokens).named("sum_of_lsm")


def _width_lsm() -> rasp.SOp:
    """A numerical LinearSequenceMap of a SelectorWidth (no per-position structure: the plain,
    vectorised inference)."""
    width = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT)).named("smaller")
    return rasp.numerical(rasp.LinearSequenceMap(rasp.numerical(width), _numbers(), 2, 1)).named("width_lsm")


def _isinstance_over_sum_of_lsm() -> rasp.SOp:
    both = _sum_of_lsm()
    return rasp.SelectorWidth(rasp.Select(both, both, lambda k, q: isinstance(k, int))).named("ints_seen")


def _type_of_lsm_with_itself() -> rasp.SOp:
    ints = _ints()
    zero = rasp.LinearSequenceMap(ints, ints, 1, -1).named("zero")
    return rasp.Map(lambda x: type(x).__name__, zero).named("type_name")


def _loop() -> rasp.SOp:
    """A loop whose body keeps a LinearSequenceMap's ints only if they are ints."""

    def body(state: rasp.SOp) -> rasp.SOp:
        step = rasp.LinearSequenceMap(state, rasp.tokens, 1, 1).named("step")
        return rasp.Map(lambda x: x % 4 if isinstance(x, int) else -1, step).named("wrapped")

    return rasp.Loop(body, rasp.Map(lambda t: t % 4, rasp.tokens).named("init"), 3).named("loop")


PROGRAMS = {
    # the issue's two examples
    "isinstance_over_sequence_map_of_lsm": _isinstance_over_sum_of_lsm,
    "str_of_sequence_map_of_lsm": lambda: rasp.Map(lambda x: str(x), _sum_of_lsm()).named("shown"),
    "str_of_lsm_with_float_factor": lambda: rasp.Map(lambda x: str(x), _halves()).named("shown"),
    "len_str_predicate_floats_against_ints": lambda: rasp.SelectorWidth(
        rasp.Select(_halves(), _ints(), lambda k, q: len(str(k)) == len(str(q)))
    ).named("same_length"),
    "lsm_with_itself_and_type_name": _type_of_lsm_with_itself,
    "str_of_lsm_of_selector_width": lambda: rasp.Map(lambda x: str(x), _width_lsm()).named("shown"),
    "type_name_of_numerical_mean": lambda: rasp.Map(
        lambda x: type(x).__name__,
        rasp.numerical(rasp.Aggregate(_earlier(), _numbers(), default=0)).named("mean"),
    ).named("type_name"),
    "str_of_prefix_mean": lambda: rasp.Map(
        lambda x: str(x), rasp.numerical(rasp.Aggregate(_prefix(), _numbers(), default=0)).named("mean")
    ).named("shown"),
    "str_of_sum_aggregate": lambda: rasp.Map(
        lambda x: str(x), rasp.SumAggregate(_prefix(), _numbers()).named("total")
    ).named("shown"),
    "str_of_float_sum_aggregate": lambda: rasp.Map(
        lambda x: str(x),
        rasp.SumAggregate(_prefix(), rasp.numerical(rasp.Map(lambda x: x / 2, rasp.tokens)).named("half"))
        .named("total"),
    ).named("shown"),
    "str_and_type_of_selector_width": lambda: rasp.Map(
        lambda x: str(x) + type(x).__name__,
        rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)).named("width"),
    ).named("shown"),
    "str_of_categorical_aggregate_of_lsm": lambda: rasp.Map(
        lambda x: str(x), lib.shift_by(1, _halves())
    ).named("shown"),
    "isinstance_predicate_on_categorical_aggregate": lambda: rasp.SelectorWidth(
        rasp.Select(lib.shift_by(1, _ints()), rasp.tokens, lambda k, q: isinstance(k, int) and k > q)
    ).named("ints_above"),
    "loop_of_lsm_read_by_isinstance": _loop,
}


def _inputs(vocab: list, max_seq_len: int) -> list[list]:
    return [list(xs) for n in range(1, max_seq_len + 1) for xs in itertools.product(vocab, repeat=n)]


def _assert_exact(
    program: rasp.SOp, vocab: list, max_seq_len: int, causal: bool, optimize: bool, types: bool = True
) -> int:
    """Compile and compare with the evaluator on every input, the types of categorical outputs
    too unless `types` is False (an output that takes 4 and 4.0 decodes to one of them);
    returns the number of inputs compared."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        model = compile_rasp(program, set(vocab), max_seq_len, causal=causal, optimize=optimize)
    inputs = _inputs(vocab, max_seq_len)
    numerical = rasp.is_numerical(program)
    compared = 0
    for xs, got in zip(inputs, run_model(model, inputs, "numpy")):
        try:
            want = rasp.evaluate(program, xs, causal=causal)
        except rasp.RaspEvaluationError:
            continue
        compared += 1
        assert len(got) == len(want) and all(same_value(a, b) for a, b in zip(got, want)), (xs, got, want)
        if types and not numerical:  # a categorical output decodes to the evaluator's value and type
            assert [type(v) for v in got] == [type(v) for v in want], (xs, got, want)
    return compared


@pytest.mark.parametrize("causal,optimize", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_type_sensitive_readers_compile_exactly(name, causal, optimize):
    compared = _assert_exact(PROGRAMS[name](), [1, 2, 3], 3, causal, optimize)
    assert compared >= 30


def test_the_issue_examples_give_the_evaluator_outputs():
    width = PROGRAMS["isinstance_over_sequence_map_of_lsm"]()
    model = compile_rasp(width, {1, 2, 3}, 4)
    assert rasp.evaluate(width, [1, 2, 3, 3]) == [4, 4, 4, 4]
    assert model.apply(["BOS", 1, 2, 3, 3]).decoded[1:] == [4, 4, 4, 4]
    shown = PROGRAMS["str_of_sequence_map_of_lsm"]()
    model = compile_rasp(shown, {1, 2, 3}, 4)
    assert model.apply(["BOS", 1, 2]).decoded[1:] == rasp.evaluate(shown, [1, 2]) == ["2", "5"]


# -- equal values of different types ------------------------------------------------------------


def _mean_with_int_default() -> rasp.SOp:
    """Means are floats (0.0 when the selected tokens are 0); the default is the int 0."""
    return rasp.numerical(rasp.Aggregate(_earlier(), _numbers(), default=0)).named("mean")


def _halved_above_two() -> rasp.SOp:
    """2 for the token 2 and 2.0 for the token 4."""
    return rasp.Map(lambda x: x / 2 if x > 2 else x, rasp.tokens, simplify=False).named("halved")


def _with_itself(f, sop: rasp.SOp) -> rasp.SOp:
    return rasp.SequenceMap(f, sop, sop)


REFUSED = {
    "str_of_mean_with_int_default": (
        lambda: rasp.Map(lambda x: str(x), _mean_with_int_default()).named("shown"), [0, 1, 2], "shown", "mean"),
    "str_of_map_returning_int_or_float": (
        lambda: rasp.Map(lambda x: str(x), _halved_above_two(), simplify=False).named("shown"),
        [1, 2, 4], "shown", "halved"),
    "isinstance_predicate_on_map_returning_int_or_float": (
        lambda: rasp.SelectorWidth(
            rasp.Select(_halved_above_two(), rasp.tokens, lambda k, q: isinstance(k, int)).named("int_keys")
        ),
        [1, 2, 4], "int_keys", "halved"),
    "type_name_of_categorical_aggregate_copying_both": (
        lambda: rasp.Map(lambda x: type(x).__name__, lib.shift_by(1, _halved_above_two())).named("type_name"),
        [1, 2, 4], "type_name", "shift_by"),
    "sequence_map_with_itself_telling_them_apart": (
        lambda: _with_itself(lambda x, y: repr(x) + repr(y), _halved_above_two()).named("pair"),
        [1, 2, 4], "pair", "halved"),
    "str_of_sum_of_ints_and_floats": (
        lambda: rasp.Map(
            lambda x: str(x),
            rasp.SumAggregate(_prefix(), rasp.numerical(rasp.Map(lambda x: x / 2 if x == 1 else x, rasp.tokens))
                              .named("mixed")).named("total"),
        ).named("shown"),
        [1, 2, 3], "shown", "total"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_readers_telling_equal_values_of_different_types_apart_are_refused(name):
    build, vocab, reader, source = REFUSED[name]
    program = build()
    with pytest.raises(ValueInferenceError) as error:
        compile_rasp(program, set(vocab), 3)
    message = str(error.value)
    assert message.startswith(reader) and source in message and "one type" in message, message
    with pytest.raises(ValueInferenceError):
        compile_rasp(program, set(vocab), 3, optimize=False)


def test_a_loop_whose_state_changes_type_under_a_type_sensitive_body_is_refused():
    def body(state: rasp.SOp) -> rasp.SOp:
        return rasp.Map(lambda x: float(x) if type(x) is int else x + 1, state, simplify=False).named("step")

    loop = rasp.Loop(body, rasp.Map(lambda t: t, rasp.tokens), 2).named("loop")
    assert rasp.evaluate(loop, [1, 2]) == [2.0, 3.0]  # 1 -> 1.0 -> 2.0: the type decides
    with pytest.raises(ValueInferenceError, match=r"^step: .*loop"):
        compile_rasp(loop, {1, 2}, 3)


TYPE_BLIND = {
    "plus_one_of_mean_with_int_default": (lambda: rasp.numerical(
        rasp.Map(lambda x: x + 1, _mean_with_int_default())).named("shifted"), [0, 1, 2]),
    "comparison_predicate_on_map_returning_int_or_float": (lambda: rasp.SelectorWidth(
        rasp.Select(_halved_above_two(), rasp.tokens, lambda k, q: k < q)).named("below"), [1, 2, 4]),
    "categorical_aggregate_copying_both_then_doubled": (lambda: rasp.Map(
        lambda x: 2 * x, lib.shift_by(1, _halved_above_two()), simplify=False).named("doubled"), [1, 2, 4]),
    "sequence_map_with_itself_adding": (
        lambda: _with_itself(lambda x, y: x + y > 3, _halved_above_two()).named("pair"), [1, 2, 4]),
    "bool_of_sum_of_ints_and_floats": (lambda: rasp.Map(
        lambda x: x > 2,
        rasp.SumAggregate(_prefix(), rasp.numerical(rasp.Map(lambda x: x / 2 if x == 1 else x, rasp.tokens))),
    ).named("big"), [1, 2, 3]),
}


@pytest.mark.parametrize("causal,optimize", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name", sorted(TYPE_BLIND))
def test_readers_that_cannot_tell_the_types_apart_still_compile(name, causal, optimize):
    build, vocab = TYPE_BLIND[name]
    assert _assert_exact(build(), vocab, 3, causal, optimize, types=False) >= 30


# -- the inference itself -------------------------------------------------------------------------


def _inferred(program: rasp.SOp, vocab, max_seq_len: int):
    graph = g.trace(program)
    infer_values(graph, vocab, max_seq_len)
    return graph


def _types(values) -> set[str]:
    return {type(v).__name__ for v in values}


def test_lsm_values_are_ints_of_ints_and_floats_with_a_float_factor():
    graph = _inferred(rasp.SequenceMap(lambda x, y: (x, y), _halves(), _ints()), [1, 2, 3], 4)
    assert graph.nodes["plus"][nodes.VALUE_SET] == set(range(1, 7)) and _types(graph.nodes["plus"][nodes.VALUE_SET]) == {"int"}
    halves = graph.nodes["halves"][nodes.VALUE_SET]
    assert halves == {0.5 * t + i for t in (1, 2, 3) for i in range(4)} and _types(halves) == {"float"}


def test_variants_record_the_mean_and_its_int_default():
    graph = _inferred(_mean_with_int_default(), [0, 1, 2], 3)
    variants = graph.nodes["mean"][nodes.VARIANTS]
    assert list(variants) == [0] and sorted(type(v).__name__ for v in variants[0]) == ["float", "int"]
    assert graph.nodes["numbers"][nodes.VARIANTS] == {}  # one type per value: nothing recorded


def test_variants_of_a_categorical_aggregate_are_its_values_variants():
    graph = _inferred(lib.shift_by(1, _halved_above_two()), [1, 2, 4], 3)
    assert {k: sorted(map(repr, v)) for k, v in graph.nodes["halved"][nodes.VARIANTS].items()} == {2: ["2", "2.0"]}
    assert {k: sorted(map(repr, v)) for k, v in graph.nodes["shift_by(1)"][nodes.VARIANTS].items()} == {2: ["2", "2.0"]}


def test_collector_keeps_the_first_object_and_every_other_type():
    found = Collector()
    for value in (1, 2, 1.0, True, (1, "a"), (1.0, "a"), (1, "a"), 2):
        found.add(value)
    assert found.values == {1, 2, (1, "a")}
    assert {k: [repr(v) for v in vs] for k, vs in found.variants.items()} == {
        1: ["1", "1.0", "True"], (1, "a"): ["(1, 'a')", "(1.0, 'a')"],
    }
    uniform = Collector()
    uniform.add_all([1, 2, 3], int)
    uniform.add_all([2, 3, 4], int)
    assert uniform.values == {1, 2, 3, 4} and uniform.variants == {}


def _by_type(blocks) -> dict[type, list]:
    found: dict[type, list] = {}
    for kind, values in blocks:
        assert all(type(v) is kind for v in values)
        found.setdefault(kind, []).extend(values)
    return {kind: sorted(values) for kind, values in found.items()}


def test_linear_values_follow_pythons_arithmetic_types():
    # 2 * x + y: ints (and bools) with ints give ints; a float anywhere gives a float
    assert _by_type(linear_values(2, 1, [1, True, 0.5], [3, 1.5], False)) == {int: [5], float: [2.5, 3.5, 4.0]}
    assert _by_type(linear_values(0.5, 1, [1, 2], [0], False)) == {float: [0.5, 1.0]}
    assert _by_type(linear_values(1, -1, [1, 2], [], True)) == {int: [0]}
    assert linear_values(1, 1, [1], [2**60], False) is None  # too large to compute exactly here
    assert linear_values(1, 1, [1], [complex(1, 0)], False) is None  # no plain number: the caller calls f


def test_sums_are_ints_for_bags_of_ints_and_floats_for_bags_with_a_float():
    aggregate = rasp.SumAggregate(_prefix(), _numbers())
    ints = bag_sums(aggregate, frozenset({1, 2}), 2)
    assert ints.values == {1, 2, 3, 4} and _types(ints.values) == {"int"} and ints.variants == {}
    mixed = bag_sums(aggregate, frozenset({1, 0.5}), 2)
    assert mixed.values == {0.5, 1, 1.5, 2}
    assert {k: sorted(map(repr, v)) for k, v in mixed.variants.items()} == {1: ["1", "1.0"]}
    assert type(next(v for v in mixed.values if v == 2)) is int  # only 1 + 1 sums to 2
