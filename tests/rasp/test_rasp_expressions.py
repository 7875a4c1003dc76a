"""Construction, attributes, labels, annotations and immutability of RASP expressions."""

import operator

import pytest

import rasp
from rasp import functions


def test_primitives_are_labelled_and_categorical():
    assert rasp.tokens.label == "tokens" and rasp.tokens.name == "tokens"
    assert rasp.indices.label == "indices"
    assert rasp.is_categorical(rasp.tokens) and rasp.is_categorical(rasp.indices)
    assert rasp.tokens.children == () and rasp.indices.children == ()
    assert rasp.tokens("ab") == ["a", "b"]
    assert rasp.indices("ab") == [0, 1]


def test_default_labels_name_the_kind():
    rasp.reset_label_counter(40)
    sop = rasp.Map(abs, rasp.tokens)
    selector = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    assert sop.label == "map_40"
    assert selector.label == "select_41"
    assert rasp.SequenceMap(operator.add, sop, sop).label == "sequence_map_42"
    assert rasp.LinearSequenceMap(sop, sop, 1, 2).label == "linear_sequence_map_43"
    assert rasp.Full(0).label == "full_44"
    assert rasp.ConstantSOp([1]).label == "constant_sop_45"
    assert rasp.Aggregate(selector, sop).label == "aggregate_46"
    assert rasp.SelectorWidth(selector).label == "selector_width_47"
    assert rasp.ConstantSelector([[True]]).label == "constant_selector_48"
    assert rasp.SelectorAnd(selector, selector).label == "selector_and_49"
    assert rasp.SelectorOr(selector, selector).label == "selector_or_50"
    assert rasp.SelectorNot(selector).label == "selector_not_51"


def test_attributes_and_children():
    inner = rasp.Map(abs, rasp.tokens)
    seq = rasp.SequenceMap(operator.add, inner, rasp.indices)
    assert seq.f is operator.add and seq.fst is inner and seq.snd is rasp.indices
    assert seq.children == (inner, rasp.indices)
    linear = rasp.LinearSequenceMap(inner, rasp.indices, 2, -3)
    assert (linear.fst_fac, linear.snd_fac) == (2, -3)
    assert isinstance(linear, rasp.SequenceMap)
    assert linear.f(5, 1) == 7
    select = rasp.Select(rasp.indices, inner, rasp.Comparison.LT)
    assert select.keys is rasp.indices and select.queries is inner
    assert select.predicate is rasp.Comparison.LT
    assert select.children == (rasp.indices, inner)
    aggregate = rasp.Aggregate(select, inner, default=0)
    assert aggregate.selector is select and aggregate.sop is inner and aggregate.default == 0
    assert aggregate.children == (select, inner)
    width = rasp.SelectorWidth(select)
    assert width.selector is select and width.children == (select,)
    full = rasp.Full(7)
    assert full.fill == 7 and full.children == ()
    constant = rasp.ConstantSOp((1, 2), check_length=False)
    assert constant.value == [1, 2] and constant.check_length is False
    constant_selector = rasp.ConstantSelector([[True, False], [False, True]])
    assert constant_selector.value == [[True, False], [False, True]]
    assert constant_selector.check_length is True
    both = rasp.SelectorAnd(select, constant_selector)
    assert both.fst is select and both.snd is constant_selector
    assert both.children == (select, constant_selector)
    negated = rasp.SelectorNot(select)
    assert negated.inner is select and negated.children == (select,)
    assert not isinstance(rasp.SelectorOr(select, select), rasp.SelectorAnd)


def test_unique_ids_differ_even_for_copies():
    sop = rasp.Map(abs, rasp.tokens)
    copy = sop.named("other")
    assert len({sop.unique_id, copy.unique_id, rasp.tokens.unique_id}) == 3


def test_map_of_map_fuses_by_default():
    inner = rasp.Map(lambda x: x + 1, rasp.tokens)
    outer = rasp.Map(lambda x: x * 10, inner)
    assert outer.inner is rasp.tokens
    assert outer.simplify is True
    assert outer([1, 2]) == [20, 30]


def test_map_of_map_kept_with_simplify_false():
    inner = rasp.Map(lambda x: x + 1, rasp.tokens)
    outer = rasp.Map(lambda x: x * 10, inner, simplify=False)
    assert outer.inner is inner and outer.simplify is False
    assert outer([1, 2]) == [20, 30]


def test_fused_map_keeps_none_propagation():
    inner = rasp.Map(lambda x: None if x == 0 else x, rasp.tokens)
    outer = rasp.Map(lambda x: 1 / x, inner)
    assert outer.inner is rasp.tokens
    assert outer([0, 2]) == [None, 0.5]


def test_named_returns_relabelled_copy():
    sop = rasp.Map(abs, rasp.tokens)
    original_label = sop.label
    renamed = sop.named("magnitude")
    assert renamed is not sop
    assert renamed.label == "magnitude" and renamed.name == "magnitude"
    assert sop.label == original_label
    assert renamed.f is sop.f and renamed.inner is sop.inner


def test_annotated_merges_and_copies():
    sop = rasp.Map(abs, rasp.tokens).named("m")
    tagged = sop.annotated(colour="red")
    assert tagged is not sop
    assert dict(tagged.annotations) == {
        "name": "m",
        "encoding": rasp.Encoding.CATEGORICAL,
        "colour": "red",
    }
    assert "colour" not in sop.annotations
    again = rasp.annotate(tagged, colour="blue", size=3)
    assert again.annotations["colour"] == "blue" and again.annotations["size"] == 3
    assert tagged.annotations["colour"] == "red"


def test_annotations_are_read_only():
    sop = rasp.Map(abs, rasp.tokens)
    with pytest.raises(TypeError):
        sop.annotations["name"] = "x"


def test_expressions_are_immutable():
    sop = rasp.Map(abs, rasp.tokens)
    with pytest.raises(AttributeError, match=sop.label):
        sop.inner = rasp.indices
    with pytest.raises(AttributeError):
        rasp.tokens.f = abs


def test_encodings_are_copies():
    sop = rasp.Map(abs, rasp.tokens)
    number = rasp.numerical(sop)
    assert rasp.is_numerical(number) and not rasp.is_categorical(number)
    assert rasp.get_encoding(number) is rasp.Encoding.NUMERICAL
    assert rasp.is_categorical(sop) and rasp.get_encoding(sop) is rasp.Encoding.CATEGORICAL
    assert number.label == sop.label
    back = rasp.categorical(number)
    assert rasp.is_categorical(back) and rasp.is_numerical(number)


def test_primitives_can_be_annotated():
    numeric_tokens = rasp.numerical(rasp.tokens)
    assert isinstance(numeric_tokens, rasp.TokensType)
    assert numeric_tokens.label == "tokens" and rasp.is_numerical(numeric_tokens)
    assert rasp.is_categorical(rasp.tokens)
    assert numeric_tokens([1, 2]) == [1, 2]
    assert rasp.numerical(rasp.indices)("ab") == [0, 1]


def test_encoding_given_as_string_is_normalised():
    sop = rasp.annotate(rasp.Map(abs, rasp.tokens), encoding="numerical")
    assert rasp.get_encoding(sop) is rasp.Encoding.NUMERICAL


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: rasp.Map(abs, "tokens"), "inner must be an SOp"),
        (lambda: rasp.Map(3, rasp.tokens), "f must be callable"),
        (lambda: rasp.SequenceMap(operator.add, rasp.tokens, 1), "snd must be an SOp"),
        (lambda: rasp.Select(rasp.tokens, rasp.tokens, "=="), "predicate must be callable"),
        (lambda: rasp.Aggregate(rasp.tokens, rasp.tokens), "selector must be a Selector"),
        (lambda: rasp.SelectorWidth(rasp.tokens), "selector must be a Selector"),
        (lambda: rasp.SelectorNot(rasp.tokens), "inner must be a Selector"),
        (lambda: rasp.numerical(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)),
         "only s-ops carry an encoding"),
        (lambda: rasp.tokens.named(3), "must be a str"),
        (lambda: rasp.get_encoding(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)),
         "only s-ops have an encoding"),
        (lambda: rasp.annotate("tokens", name="x"), "expects a RASP expression"),
    ],
)
def test_construction_type_errors(build, message):
    with pytest.raises(TypeError, match=message):
        build()


def test_expressions_hash_by_identity_and_work_as_dict_keys():
    sop = rasp.Map(abs, rasp.tokens)
    same_structure = rasp.Map(abs, rasp.tokens)
    table = {sop: 1, same_structure: 2, rasp.tokens: 3}
    assert table[sop] == 1 and table[same_structure] == 2 and table[rasp.tokens] == 3


def test_repr_names_class_and_label():
    assert repr(rasp.tokens) == "TokensType('tokens')"
    assert repr(rasp.Map(abs, rasp.tokens).named("m")) == "Map('m')"


def test_comparisons_follow_key_query_order():
    cmp = rasp.Comparison
    assert cmp.LT(1, 2) and not cmp.LT(2, 1)
    assert cmp.LEQ(2, 2) and cmp.GT(3, 2) and cmp.GEQ(2, 2)
    assert cmp.EQ("a", "a") and cmp.NEQ("a", "b")
    assert cmp.TRUE(1, 5) and not cmp.FALSE(1, 1)
    with pytest.raises(ValueError, match="key is None"):
        cmp.EQ(None, 1)
    with pytest.raises(ValueError, match="query is None"):
        cmp.TRUE(1, None)


def test_operator_callables_compare_by_value():
    assert functions.RightOperand(operator.add, 1) == functions.RightOperand(operator.add, 1)
    assert functions.LeftOperand(operator.sub, 1)(3) == -2
    assert functions.RightOperand(operator.sub, 1)(3) == 2
    assert functions.Composed(str, abs)(-3) == "3"
    assert functions.LinearCombination(2, 3)(1, 1) == 5


def test_without_none_check_unwraps_comparisons_only():
    from rasp.comparison import without_none_check

    raw_lt = without_none_check(rasp.Comparison.LT)
    assert raw_lt is not rasp.Comparison.LT and raw_lt(1, 2) and not raw_lt(2, 1)
    custom = lambda key, query: key == query
    assert without_none_check(custom) is custom
