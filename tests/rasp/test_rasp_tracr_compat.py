"""Programs written exactly as a Tracr user writes them run here after the import change.

Only the import line differs from Tracr (``from tracr.rasp import rasp``).
"""

import pytest

from rasp import rasp


def make_length():
    all_true_selector = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named(
        "all_true_selector"
    )
    return rasp.SelectorWidth(all_true_selector).named("length")


def make_frac_prevs(bools):
    bools = rasp.numerical(bools)
    prevs = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    return rasp.numerical(rasp.Aggregate(prevs, bools, default=0)).named("frac_prevs")


def test_length():
    assert make_length()([1, 2, 3, 4]) == [4, 4, 4, 4]


def test_frac_prevs_as_in_the_tracr_paper():
    frac = make_frac_prevs(rasp.tokens == "x")
    assert frac("xaxb") == [1, 0.5, 2 / 3, 0.5]
    assert rasp.is_numerical(frac)


def test_reverse():
    length = make_length()
    opp_idx = (length - rasp.indices).named("opp_idx")
    opp_idx = (opp_idx - 1).named("opp_idx-1")
    reverse_selector = rasp.Select(rasp.indices, opp_idx, rasp.Comparison.EQ).named(
        "reverse_selector"
    )
    reverse = rasp.Aggregate(reverse_selector, rasp.tokens).named("reverse")
    assert reverse("abcd") == ["d", "c", "b", "a"]
    assert reverse.label == "reverse" and opp_idx.label == "opp_idx-1"


def test_histogram_and_categorical_annotation():
    same_tok = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ).named("same_tok")
    hist = rasp.categorical(rasp.SelectorWidth(same_tok)).named("hist")
    assert hist("aabca") == [3, 3, 1, 1, 3]
    assert rasp.is_categorical(hist)
    assert rasp.get_encoding(hist) == rasp.Encoding.CATEGORICAL


def test_numerical_mean_and_linear_sequence_map():
    x = rasp.numerical(rasp.Map(lambda t: t / 10, rasp.tokens)).named("x")
    mean = rasp.numerical(
        rasp.Aggregate(
            rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.TRUE), x, default=0
        )
    ).named("mean")
    centred = rasp.numerical(rasp.LinearSequenceMap(x, mean, 1, -1)).named("centred")
    assert centred([10, 20, 30]) == pytest.approx([-1.0, 0.0, 1.0])


def test_map_sequence_map_and_constants():
    doubled = rasp.Map(lambda t: 2 * t, rasp.tokens).named("doubled")
    plus_index = rasp.SequenceMap(lambda a, b: a + b, doubled, rasp.indices).named("plus_index")
    offset = rasp.ConstantSOp([100, 200, 300])
    total = rasp.SequenceMap(lambda a, b: a + b, plus_index, offset)
    assert total([1, 2, 3]) == [102, 205, 308]
    assert rasp.Full(1)([7, 7]) == [1, 1]


def test_selector_combinators_and_width():
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    earlier_same = rasp.SelectorAnd(before, same)
    assert rasp.SelectorWidth(earlier_same)("abab") == [0, 0, 1, 1]
    assert rasp.SelectorWidth(before & same)("abab") == [0, 0, 1, 1]
    assert rasp.SelectorWidth(rasp.SelectorNot(before))("abc") == [3, 2, 1]
    assert rasp.SelectorWidth(rasp.SelectorOr(before, same))("aba") == [2, 2, 3]


def test_evaluate_function_and_annotate():
    program = rasp.annotate(
        rasp.Map(lambda t: t + 1, rasp.tokens), encoding=rasp.Encoding.NUMERICAL
    )
    assert rasp.evaluate(program, [1, 2]) == [2, 3]
    assert rasp.is_numerical(program)
    assert program.annotations["encoding"] == rasp.Encoding.NUMERICAL


def test_reset_style_default_names_are_prefixed():
    program = rasp.Map(lambda t: t, rasp.tokens)
    assert program.label.startswith("map_")
    assert program.name == program.label


def test_public_face_exports_every_expression_name():
    """`rasp.rasp.__all__` is written out (for type checkers); it must match rasp.expressions'."""
    import rasp as package
    from rasp import evaluator, expressions

    evaluator_names = ["DefaultRASPEvaluator", "RASPEvaluator", "evaluate"]
    assert rasp.__all__ == [*expressions.__all__, *evaluator_names]
    for name in expressions.__all__:
        assert getattr(rasp, name) is getattr(expressions, name)
    for name in evaluator_names:
        assert getattr(rasp, name) is getattr(evaluator, name)
    assert package.__all__ == [*rasp.__all__, "lib", "rasp"]
    assert all(hasattr(package, name) for name in package.__all__)
