"""Tracr's whole public RASP API, used the way Tracr programs use it, compiled and checked.

Only the import line differs from a Tracr program (``from tracr.rasp import rasp``). Each
program is compiled (where Tracr compiles it) and checked against the evaluator on random inputs.
"""


import pytest
from support import outputs_match, random_inputs

from compiler import UnsupportedProgramError, compile_rasp
from rasp import rasp

TRACR_PUBLIC_NAMES = (
    "Aggregate Annotator Comparison ConstantSOp ConstantSelector DEFAULT_ANNOTATORS "
    "DefaultRASPEvaluator Encoding Full IndicesType LengthType LinearSequenceMap Map "
    "NumericValue Predicate RASPEvaluator RASPExpr SOp Select Selector SelectorAnd SelectorNot "
    "SelectorOr SelectorValue SelectorWidth SequenceMap TokensType Value annotate categorical "
    "default_encoding default_name evaluate get_encoding indices is_categorical is_numerical "
    "length numerical selector_and selector_not selector_or sop_not tokens"
).split()


def test_every_tracr_public_name_exists():
    missing = [name for name in TRACR_PUBLIC_NAMES if not hasattr(rasp, name)]
    assert missing == []
    assert isinstance(rasp.length, rasp.LengthType) and rasp.length.label == "length"


def _matches(program, vocab, max_seq_len, count=200):
    model = compile_rasp(program, vocab, max_seq_len)
    inputs = random_inputs(sorted(vocab), max_seq_len, count, seed=len(vocab) + max_seq_len)
    evaluator = rasp.DefaultRASPEvaluator()
    for tokens, out in zip(inputs, model.apply_batch([["BOS"] + x for x in inputs])):
        expected = evaluator.evaluate(program, tokens)
        assert outputs_match(out[1:], expected), (tokens, out[1:], expected)
    return model


# --- programs written as Tracr users write them --------------------------------------------


def make_reverse(sop: rasp.SOp) -> rasp.SOp:
    opp_idx = (rasp.length - rasp.indices).named("opp_idx")
    opp_idx = (opp_idx - 1).named("opp_idx-1")
    reverse_selector = rasp.Select(rasp.indices, opp_idx, rasp.Comparison.EQ).named("reverse_selector")
    return rasp.Aggregate(reverse_selector, sop).named("reverse")


def shift_by(offset: int, sop: rasp.SOp) -> rasp.SOp:
    select_off_by_offset = rasp.Select(rasp.indices, rasp.indices, lambda k, q: q == k + offset)
    return rasp.Aggregate(select_off_by_offset, sop, default=None).named(f"shift_by({offset})")


def detect_pattern(sop: rasp.SOp, pattern: list[rasp.Value]) -> rasp.SOp:
    """Annotated with rasp.Value, as Tracr's library does."""
    operands: list[rasp.SOp] = []
    for i, element in enumerate(pattern):
        matches = rasp.Map(lambda x, e=element: x == e, sop).named(f"pattern_{i}")
        shift = len(pattern) - i - 1
        operands.append(shift_by(shift, matches) if shift else matches)
    result = operands[0]
    for operand in operands[1:]:
        result = rasp.SequenceMap(lambda a, b: bool(a) and bool(b), result, operand)
    return result.named("detect_pattern")


def test_reverse_with_rasp_length():
    program = make_reverse(rasp.tokens)
    model = _matches(program, {"a", "b", "c", "d"}, 8)
    assert model.apply(["BOS", "a", "b", "c"]).decoded[1:] == ["c", "b", "a"]
    with pytest.raises(UnsupportedProgramError, match="rasp.length is the length of the whole input"):
        compile_rasp(program, {"a", "b"}, 4, causal=True)


def test_length_alone_and_annotated_numerical():
    _matches(rasp.length, {"a", "b"}, 6)
    _matches(rasp.numerical(rasp.Map(lambda n: n / 2, rasp.length)).named("half"), {"a", "b"}, 6)


def test_detect_pattern_with_value_annotations():
    _matches(detect_pattern(rasp.tokens, ["a", "b"]), {"a", "b", "c"}, 8)


def test_selector_combinators():
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    both = rasp.selector_and(same, before)
    assert isinstance(both, rasp.SelectorAnd)
    _matches(rasp.SelectorWidth(both).named("earlier_same"), {"a", "b", "c"}, 8)
    not_same = rasp.selector_not(same)
    assert isinstance(not_same, rasp.Select)  # simplified into the predicate
    assert isinstance(rasp.selector_not(same, simplify=False), rasp.SelectorNot)
    _matches(rasp.SelectorWidth(not_same).named("others"), {"a", "b", "c"}, 8)
    fused = rasp.selector_or(before, rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ))
    assert isinstance(fused, rasp.Select)
    assert isinstance(rasp.selector_or(before, same, simplify=False), rasp.SelectorOr)
    upto = rasp.SelectorWidth(fused)
    _matches(rasp.SequenceMap(lambda w, t: (w, t), upto, rasp.tokens).named("upto"), {"a", "b"}, 8)


def test_sop_not_and_default_evaluator():
    is_a = rasp.Map(lambda t: t == "a", rasp.tokens)
    program = rasp.sop_not(is_a).named("not_a")
    assert rasp.DefaultRASPEvaluator().evaluate(program, ["a", "b"]) == [False, True]
    assert isinstance(rasp.DefaultRASPEvaluator(), rasp.RASPEvaluator)
    _matches(program, {"a", "b"}, 5)


def test_default_name_and_default_encoding():
    assert rasp.default_name(rasp.Map(abs, rasp.tokens)) == "map"
    assert rasp.default_name(rasp.tokens) == "tokens"
    assert rasp.default_name(rasp.length) == "length"
    assert rasp.default_encoding(rasp.tokens) is rasp.Encoding.CATEGORICAL
    with pytest.raises(TypeError):
        rasp.default_encoding(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))
    assert rasp.DEFAULT_ANNOTATORS["encoding"] is rasp.default_encoding


def test_custom_annotator_supplies_a_default_and_compiles():
    def phase(expr: rasp.RASPExpr) -> str:
        return "attention" if isinstance(expr, rasp.Aggregate) else "mlp"

    annotator: rasp.Annotator = phase
    rasp.DEFAULT_ANNOTATORS["phase"] = annotator
    try:
        frac = rasp.numerical(
            rasp.Aggregate(
                rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                rasp.numerical(rasp.Map(lambda t: 1 if t == "x" else 0, rasp.tokens)),
                default=0,
            )
        ).named("frac")
        assert frac.annotations["phase"] == "attention"
        assert frac.annotations["encoding"] is rasp.Encoding.NUMERICAL
        assert "phase" in frac.annotations
        assert frac.annotated(phase="custom").annotations["phase"] == "custom"
        _matches(frac, {"x", "y"}, 8)
    finally:
        del rasp.DEFAULT_ANNOTATORS["phase"]


def test_value_type_aliases_in_annotations():
    def square(x: rasp.NumericValue) -> rasp.NumericValue:
        return x * x

    program = rasp.numerical(rasp.Map(square, rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))))
    selector_value: rasp.SelectorValue = rasp.evaluate(
        rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), [1, 2]
    )
    assert selector_value == [[True, False], [False, True]]
    _matches(program.named("square"), {1, 2, 3}, 5)
