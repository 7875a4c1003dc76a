"""Different expressions sharing a name (helper functions) compile; labels become unique."""

import pytest
from support import outputs_match, random_inputs

from compiler import compile_rasp
from compiler.cli.summary import model_summary, summary_text
from compiler.passes import nodes
from rasp import lib, rasp

VOCAB = ("a", "b", "c")


def _fraction_of(token: str) -> rasp.SOp:
    """A helper every call of which names its result "frac"."""
    return lib.make_frac_prevs((rasp.tokens == token).named("is_token")).named("frac")


def _check(program: rasp.SOp, max_seq_len: int, causal: bool = False):
    """Optimised and unoptimised models both match RASP; returns the unoptimised one, in which
    every s-op keeps its own directions (the optimiser folds the Maps these tests name)."""
    inputs = random_inputs(VOCAB, max_seq_len, 200, seed=max_seq_len)
    for optimize in (True, False):
        model = compile_rasp(program, VOCAB, max_seq_len, causal=causal, optimize=optimize)
        for tokens, out in zip(inputs, model.apply_batch([["BOS"] + x for x in inputs])):
            expected = rasp.evaluate(program, tokens, causal=causal)
            assert outputs_match(out[1:], expected), (optimize, tokens, out[1:], expected)
    return model


@pytest.mark.parametrize("causal", [False, True])
def test_two_helper_calls_with_the_same_names_compile_and_match(causal):
    diff = rasp.numerical(rasp.LinearSequenceMap(_fraction_of("a"), _fraction_of("b"), 1, -1))
    model = _check(diff.named("diff"), 8, causal)
    labels = set(model.residual_labels)
    assert {"frac", "frac_2", "is_token", "is_token_2"} <= labels  # numerical s-ops: one direction
    names = {label: data[nodes.NAME] for label, data in model.graph.nodes(data=True)}
    assert names["frac_2"] == "frac" and names["is_token_2"] == "is_token"
    summary = model_summary(model)
    assert summary["renamed"] == {"frac_2": "frac", "is_token_2": "is_token"}
    assert "frac_2 (your 'frac')" in summary_text(summary)


def test_output_keeps_its_name_and_a_taken_suffix_is_skipped():
    first = rasp.Map(lambda t: t == "a", rasp.tokens).named("x")
    taken = rasp.Map(lambda t: t == "b", rasp.tokens).named("x_2")
    both = rasp.SequenceMap(lambda p, q: p or q, first, taken).named("x")
    model = _check(rasp.SequenceMap(lambda p, q: (p, q), both, first).named("x"), 5)
    assert model.graph.graph[nodes.SINK] == "x"
    assert {n for n in model.graph if n.startswith("x")} == {"x", "x_2", "x_3", "x_4"}


def test_distinct_labels_keep_the_program_unchanged():
    program = lib.make_length()
    model = compile_rasp(program, VOCAB, 4, optimize=False)
    assert model.graph.nodes["length"][nodes.EXPR] is program
    assert model_summary(model)["renamed"] == {}
