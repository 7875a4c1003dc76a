"""Selector attention reproduces RASP select/aggregate on random sequences (tolerance 1e-6),
including rows with no selected key (BOS default -> 0 / None) and max_seq_len 64."""

import enum
import operator

import numpy as np
import pytest
from support import BOS_SPACE, ONE_SPACE, decode_categorical, stream

from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.chamber.categorical_attn import (
    attention_head,
    categorical_value_map,
    numerical_value_map,
    predicate_table,
    selector_qk,
)

TOL = 1e-6


class Cmp(enum.Enum):
    """Stand-in for rasp.Comparison (craft must not import rasp): fast paths go by member name."""

    EQ = "=="
    LT = "<"
    LEQ = "<="
    GT = ">"
    GEQ = ">="
    NEQ = "!="
    TRUE = "T"
    FALSE = "F"

    def __call__(self, key, query):
        ops = {"==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt,
               ">=": operator.ge, "!=": operator.ne, "T": lambda k, q: True, "F": lambda k, q: False}
        return ops[self.value](key, query)


@pytest.mark.parametrize("cmp", list(Cmp))
@pytest.mark.parametrize("values", [[3, -1, 2.5, 0, 7, True], ["b", "a", "ab", "B"], [1, "a", (2, 3), None]])
def test_predicate_table_matches_callable(cmp, values):
    def slow(k, q):
        try:
            return cmp(k, q)
        except TypeError:
            return False

    keys, queries = values, list(reversed(values))
    mixed = any(isinstance(v, str) for v in values) and any(not isinstance(v, str) for v in values)
    table = predicate_table(slow if mixed else cmp, keys, queries)
    for qi, q in enumerate(queries):
        for ki, k in enumerate(keys):
            expected = k is not None and q is not None and bool(slow(k, q))
            assert table[qi, ki] == expected, (q, k)


def test_selector_qk_entries():
    qs = VectorSpaceWithBasis.from_values("q", range(4))
    ks = VectorSpaceWithBasis.from_values("k", range(5))
    bl = selector_qk(qs, ks, Cmp.LT)  # key < query
    for i, q in enumerate(range(4)):
        for j, k in enumerate(range(5)):
            assert bl.matrix[i, j] == float(k < q)


def _random_rows(rng, n, name, values, p_none=0.0):
    out = []
    for _ in range(n):
        if rng.random() < p_none:
            out.append(None)
        else:
            out.append(values[rng.integers(len(values))])
    return out


def _reference(q_vals, k_vals, v_vals, pred, causal):
    """RASP numerical aggregate: mean of selected values, 0 when none (positions 1..n)."""
    out = []
    for i, q in enumerate(q_vals):
        sel = [j for j, k in enumerate(k_vals) if (not causal or j <= i) and q is not None and k is not None and pred(k, q)]
        out.append(float(np.mean([v_vals[j] for j in sel])) if sel else 0.0)
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pred", [Cmp.LT, Cmp.EQ, Cmp.GEQ, lambda k, q: (k + q) % 3 == 0])
def test_numerical_aggregate_random_sequences(causal, pred):
    rng = np.random.default_rng(7)
    qs = VectorSpaceWithBasis.from_values("q", range(6))
    ks = VectorSpaceWithBasis.from_values("k", range(8))
    v = BasisDirection("v")
    out_dir = BasisDirection("out")
    head = attention_head(
        selector_qk(qs, ks, pred), 1,
        numerical_value_map(VectorSpaceWithBasis((v,)), VectorSpaceWithBasis((out_dir,))),
        BOS_SPACE, ONE_SPACE, causal=causal,
    )
    for n in (1, 5, 17, 64):
        q_vals = _random_rows(rng, n, "q", list(range(6)), p_none=0.1)
        k_vals = _random_rows(rng, n, "k", list(range(8)), p_none=0.1)
        v_vals = rng.normal(size=n).tolist()
        rows = [
            {**({BasisDirection("q", q): 1.0} if q is not None else {}),
             **({BasisDirection("k", k): 1.0} if k is not None else {}), v: x}
            for q, k, x in zip(q_vals, k_vals, v_vals)
        ]
        out = head.apply(stream(VectorSpaceWithBasis(qs.basis + ks.basis + (v,)), rows)).magnitudes[:, 0]
        assert abs(out[0]) < TOL  # BOS query reads BOS only
        np.testing.assert_allclose(out[1:], _reference(q_vals, k_vals, v_vals, pred, causal), atol=TOL)


def test_categorical_aggregate_with_default_and_conjunction():
    """Aggregate(Select(indices, target, EQ) & Select(flag, flag, EQ), tokens): at most one key."""
    rng = np.random.default_rng(11)
    n = 64
    idx = VectorSpaceWithBasis.from_values("indices", range(n))
    tgt = VectorSpaceWithBasis.from_values("target", range(n + 5))  # some targets out of range
    flag_k = VectorSpaceWithBasis.from_values("flag", [0, 1])
    tokens = VectorSpaceWithBasis.from_values("tokens", ["a", "b", "c"])
    out_space = VectorSpaceWithBasis.from_values("out", ["a", "b", "c"])
    direct = selector_qk(tgt, idx, Cmp.EQ) + selector_qk(flag_k, flag_k, Cmp.EQ)
    for causal in (False, True):
        head = attention_head(direct, 2, categorical_value_map(tokens, out_space), BOS_SPACE, ONE_SPACE, causal=causal)
        toks = _random_rows(rng, n, "tokens", ["a", "b", "c"])
        targets = rng.integers(0, n + 5, n).tolist()
        flags = rng.integers(0, 2, n).tolist()
        rows = [
            {BasisDirection("indices", i): 1.0, BasisDirection("target", t): 1.0,
             BasisDirection("flag", f): 1.0, BasisDirection("tokens", tok): 1.0}
            for i, (t, f, tok) in enumerate(zip(targets, flags, toks))
        ]
        space = VectorSpaceWithBasis(idx.basis + tgt.basis + flag_k.basis + tokens.basis)
        got = decode_categorical(head.apply(stream(space, rows)), "out")
        expected = [None]
        for i, (t, f) in enumerate(zip(targets, flags)):
            ok = t < n and flags[t] == f and (not causal or t <= i)
            expected.append(toks[t] if ok else None)
        assert got == expected
        assert expected.count(None) > 5  # the BOS default is exercised


def test_numerical_value_map_from_categorical_values():
    vs = VectorSpaceWithBasis.from_values("v", [1, 2.5, -3])
    m = numerical_value_map(vs, VectorSpaceWithBasis((BasisDirection("o"),)))
    np.testing.assert_array_equal(m.matrix[:, 0], [-3, 1, 2.5])
    with pytest.raises(ValueError, match="non-numeric"):
        numerical_value_map(VectorSpaceWithBasis.from_values("v", ["x"]), VectorSpaceWithBasis((BasisDirection("o"),)))


def test_always_attend_to_bos_splits_evenly():
    qs = VectorSpaceWithBasis.from_values("q", [0])
    head = attention_head(selector_qk(qs, qs, Cmp.TRUE), 1, categorical_value_map(BOS_SPACE, BOS_SPACE),
                          BOS_SPACE, ONE_SPACE, always_attend_to_bos=True)
    out = head.apply(stream(qs, [{BasisDirection("q", 0): 1.0}] * 3))
    np.testing.assert_allclose(out.magnitudes[1:, 0], [0.25] * 3, atol=TOL)
