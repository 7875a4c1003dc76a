"""One program per refusal bucket the compiler used to have, now compiled and equal to RASP.

Buckets (as `compiler.fuzzing.buckets` named them): numerical SequenceMap / Map / Aggregate of a
None-able s-op, numerical Aggregate with default None (the none flag, `craft.chamber.definedness`),
a negated selector over a None-able s-op (`categorical_attn.selects_absent_qk`), `or` / `not
and` over selectors of different s-ops (`compiler.passes.joint_selectors`), the same over an
s-op that can be None (`joint_selectors.defined_or_absent`), and a numerical Map of a numerical
s-op whose function returns None (`numerical_maps.fit_none_flag`), and a categorical copy
(lookup input or read-out) of a numerical s-op with float-rounding twins
(`compiler.passes.rounding`). Each is checked
plain and causal at max_seq_len 6 and 32 on 200 random inputs (the inputs the evaluator
rejects, e.g. a numerical mean selecting None, are skipped, as the fuzzer does).
"""

from __future__ import annotations

import warnings

import pytest
from support import compare_with_evaluator, random_inputs

from compiler import CausalSemanticsWarning, compile_rasp
from rasp import rasp

VOCAB = [1, 2, 3]
INPUTS = 200


def _previous() -> rasp.SOp:
    """The previous token: None at position 0 (a categorical s-op that can be None)."""
    before = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1).named("before")
    return rasp.Aggregate(before, rasp.tokens).named("previous")


def _value() -> rasp.SOp:
    return rasp.numerical(rasp.Map(lambda t: t, rasp.tokens)).named("value")


def _programs() -> dict[str, rasp.SOp]:
    previous = _previous()
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ).named("prefix")
    smaller = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT).named("smaller")
    same_index = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ).named("same_index")
    defined = rasp.Select(rasp.indices, rasp.indices, lambda k, q: 0 < k <= q).named("defined")
    gap = rasp.numerical(rasp.SequenceMap(lambda p, t: p - t if p != t else None, previous, rasp.tokens))
    doubled = rasp.numerical(rasp.Map(lambda p: 2 * p, previous)).named("doubled")
    mean = rasp.numerical(rasp.Aggregate(prefix, _value(), default=0)).named("mean")
    mean_or_none = rasp.numerical(rasp.Aggregate(smaller, _value(), default=None)).named("mean_or_none")
    doubled_unless_2 = lambda m: None if m == 2 else 2 * m
    tenth = rasp.numerical(rasp.Map(lambda t: 0.1 if t == 1 else 0, rasp.tokens)).named("tenth")
    share = rasp.numerical(rasp.Aggregate(prefix, tenth, default=0)).named("share")  # 0.05 twice
    return {
        "float_rounding_twins_read_by_a_lookup": rasp.SequenceMap(
            lambda m, t: m > 0.0123 * t, share, rasp.tokens
        ).named("share_above"),
        "float_rounding_twin_sums_read_out": rasp.numerical(
            rasp.LinearSequenceMap(previous, share, 1, 1)
        ).named("previous_plus_share"),
        "float_rounding_twins_read_out": rasp.numerical(
            rasp.Map(lambda m: None if m == 0 else 10 * m, share)
        ).named("share_or_none"),
        "numerical_map_returning_none": rasp.categorical(rasp.SequenceMap(
            lambda h, t: h > t, rasp.numerical(rasp.Map(doubled_unless_2, mean)).named("twice"), rasp.tokens
        )).named("twice_above"),
        "numerical_map_of_none_returning_none": rasp.categorical(rasp.SequenceMap(
            lambda h, t: h > t, rasp.numerical(rasp.Map(doubled_unless_2, mean_or_none)).named("twice_or_none"),
            rasp.tokens,
        )).named("twice_or_none_above"),
        "numerical_sequence_map_of_none": rasp.categorical(rasp.Map(lambda x: x > 0, gap.named("gap"))),
        "numerical_map_of_none": rasp.categorical(
            rasp.Map(lambda x: round(x), rasp.numerical(rasp.Map(lambda d: d / 2 + 1, doubled)))
        ).named("map_of_none"),
        "numerical_aggregate_of_none": rasp.numerical(rasp.Aggregate(defined, doubled, default=0)).named("mean"),
        "numerical_aggregate_default_none": rasp.categorical(
            rasp.Map(lambda m: m > 1.5, rasp.numerical(rasp.Aggregate(smaller, _value(), default=None)))
        ).named("default_none"),
        "negated_selector_over_none": rasp.SelectorWidth(~rasp.Select(previous, rasp.tokens, rasp.Comparison.EQ)),
        "numerical_output_that_can_be_none": doubled,
        "or_of_different_sops": rasp.numerical(rasp.Aggregate(smaller | same_index, _value(), default=0)),
        "not_and_of_different_sops": rasp.SelectorWidth(~(smaller & prefix)),
        "or_over_none_able_keys": rasp.numerical(
            rasp.Aggregate(rasp.Select(previous, rasp.tokens, rasp.Comparison.EQ) | same_index, _value(), default=0)
        ).named("or_none_keys"),
        "not_and_over_none_able_queries": rasp.SelectorWidth(
            ~(rasp.Select(rasp.tokens, previous, rasp.Comparison.LEQ) & prefix)
        ).named("not_and_none_queries"),
    }


SETTINGS = (
    (6, False),
    (32, True),
    pytest.param(6, True, marks=pytest.mark.slow),
    pytest.param(32, False, marks=pytest.mark.slow),
)


# Second programs of a bucket (its first runs by default): in the slow run only.
SECOND_OF_A_BUCKET = {
    "numerical_map_of_none_returning_none", "not_and_over_none_able_queries", "float_rounding_twins_read_out",
    "float_rounding_twin_sums_read_out",
}
NAMES = [pytest.param(n, marks=pytest.mark.slow) if n in SECOND_OF_A_BUCKET else n for n in sorted(_programs())]


@pytest.mark.parametrize("max_seq_len,causal", SETTINGS)
@pytest.mark.parametrize("name", NAMES)
def test_former_refusal_compiles_and_matches(name, max_seq_len, causal):
    program = _programs()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CausalSemanticsWarning)
        model = compile_rasp(program, VOCAB, max_seq_len, causal=causal)
    inputs = random_inputs(VOCAB, max_seq_len, INPUTS, seed=max_seq_len)
    compared = compare_with_evaluator(model, program, inputs, causal, name)
    assert compared >= 20, f"{name}: only {compared} inputs inside the evaluator's domain"
