"""Operator overloads on s-ops and selectors equal the explicit expressions they stand for."""

import operator

import pytest

import rasp
from rasp import functions

NUMBERS = [3, -1, 4, 0, 2]
BOOLS = [True, False, True, True, False]

# (name, overload applied to an s-op and a constant, the Python operation it stands for)
WITH_CONSTANT = [
    ("add", lambda s: s + 2, lambda x: x + 2),
    ("radd", lambda s: 2 + s, lambda x: 2 + x),
    ("sub", lambda s: s - 2, lambda x: x - 2),
    ("rsub", lambda s: 1 - s, lambda x: 1 - x),
    ("mul", lambda s: s * 3, lambda x: x * 3),
    ("rmul", lambda s: 3 * s, lambda x: 3 * x),
    ("truediv", lambda s: s / 4, lambda x: x / 4),
    ("rtruediv", lambda s: 12 / (s + 10), lambda x: 12 / (x + 10)),
    ("eq", lambda s: s == 4, lambda x: x == 4),
    ("ne", lambda s: s != 4, lambda x: x != 4),
    ("lt", lambda s: s < 2, lambda x: x < 2),
    ("le", lambda s: s <= 2, lambda x: x <= 2),
    ("gt", lambda s: s > 2, lambda x: x > 2),
    ("ge", lambda s: s >= 2, lambda x: x >= 2),
    ("reflected_lt", lambda s: 2 < s, lambda x: 2 < x),
    ("and", lambda s: s & 0, lambda x: x and 0),
    ("rand", lambda s: 5 & s, lambda x: 5 and x),
    ("or", lambda s: s | 7, lambda x: x or 7),
    ("ror", lambda s: 0 | s, lambda x: 0 or x),
    ("invert", lambda s: ~s, lambda x: not x),
]


@pytest.mark.parametrize(
    "name, overload, python_op", WITH_CONSTANT, ids=[w[0] for w in WITH_CONSTANT]
)
def test_sop_with_constant_is_a_map(name, overload, python_op):
    sop = overload(rasp.tokens)
    assert isinstance(sop, rasp.Map)
    explicit = rasp.Map(python_op, rasp.tokens)
    assert sop(NUMBERS) == explicit(NUMBERS) == [python_op(x) for x in NUMBERS]


# (name, overload of two s-ops, the Python operation it stands for)
WITH_SOP = [
    ("add", operator.add, lambda x, y: x + y),
    ("sub", operator.sub, lambda x, y: x - y),
    ("mul", operator.mul, lambda x, y: x * y),
    ("truediv", operator.truediv, lambda x, y: x / y),
    ("eq", operator.eq, lambda x, y: x == y),
    ("ne", operator.ne, lambda x, y: x != y),
    ("lt", operator.lt, lambda x, y: x < y),
    ("le", operator.le, lambda x, y: x <= y),
    ("gt", operator.gt, lambda x, y: x > y),
    ("ge", operator.ge, lambda x, y: x >= y),
    ("and", operator.and_, lambda x, y: x and y),
    ("or", operator.or_, lambda x, y: x or y),
]


@pytest.mark.parametrize("name, overload, python_op", WITH_SOP, ids=[w[0] for w in WITH_SOP])
def test_sop_with_sop_is_a_sequence_map(name, overload, python_op):
    divisor = rasp.indices + 1
    sop = overload(rasp.tokens, divisor)
    assert isinstance(sop, rasp.SequenceMap)
    assert sop.fst is rasp.tokens and sop.snd is divisor
    explicit = rasp.SequenceMap(python_op, rasp.tokens, divisor)
    expected = [python_op(x, i + 1) for i, x in enumerate(NUMBERS)]
    assert sop(NUMBERS) == explicit(NUMBERS) == expected


def test_logical_operators_on_booleans():
    flags = rasp.tokens
    assert (flags & ~flags)(BOOLS) == [False] * 5
    assert (flags | ~flags)(BOOLS) == [True] * 5


def test_chained_constant_operators_fuse_into_one_map():
    sop = (rasp.tokens + 1) * 2
    assert isinstance(sop, rasp.Map) and sop.inner is rasp.tokens
    assert sop([1, 2]) == [4, 6]


def test_overload_callables_are_readable_values():
    sop = rasp.tokens + 1
    assert sop.f == functions.RightOperand(operator.add, 1)
    assert (1 - rasp.tokens).f == functions.LeftOperand(operator.sub, 1)


def test_sop_operator_with_selector_is_rejected():
    selector = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    with pytest.raises(TypeError):
        rasp.tokens + selector


def test_selector_operators_without_fusion():
    fst = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LEQ)
    snd = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GEQ)
    both, either, negated = fst & snd, fst | snd, ~fst
    assert isinstance(both, rasp.SelectorAnd) and both.fst is fst and both.snd is snd
    assert isinstance(either, rasp.SelectorOr)
    assert isinstance(negated, rasp.SelectorNot) and negated.inner is fst
    xs = [2, 1, 2]
    explicit_and = rasp.SelectorAnd(fst, snd)(xs)
    assert both(xs) == explicit_and
    a, b = fst(xs), snd(xs)
    assert both(xs) == [[x and y for x, y in zip(r, s)] for r, s in zip(a, b)]
    assert either(xs) == [[x or y for x, y in zip(r, s)] for r, s in zip(a, b)]
    assert negated(xs) == [[not x for x in r] for r in a]


def test_selects_over_same_sops_fuse():
    fst = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.LEQ)
    snd = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.GEQ)
    both, either = fst & snd, fst | snd
    assert isinstance(both, rasp.Select) and isinstance(either, rasp.Select)
    assert both.keys is rasp.tokens and both.queries is rasp.indices
    xs = [0, 2, 1, 3]
    assert both(xs) == rasp.SelectorAnd(fst, snd)(xs)
    assert either(xs) == rasp.SelectorOr(fst, snd)(xs)
    assert both(xs) == rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.EQ)(xs)


def test_fused_select_still_skips_none():
    keys = rasp.Map(lambda x: None if x == 0 else x, rasp.tokens)
    fused = rasp.Select(keys, keys, rasp.Comparison.LEQ) | rasp.Select(
        keys, keys, rasp.Comparison.GT
    )
    assert isinstance(fused, rasp.Select)
    assert fused([0, 1]) == [[False, False], [False, True]]
