"""Library programs at scale: value sets through elementwise cones, blocks sized by what they store.

The 100/100 differential runs are marked slow; the same code paths run at smaller sizes by
default (30/30, or with a lowered limit). 200 random inputs each, causal and plain where the
example is causal; outputs compared exactly (categorical programs).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import outputs_match, random_inputs

from compiler import compile_rasp
from compiler.errors import ValueInferenceError
from compiler.examples import EXAMPLES
from compiler.passes import graph as g
from compiler.passes import nodes, values
from compiler.passes.validate import validate
from craft import maps as craft_maps
from craft.blocks import MLP, AttentionHead, MultiAttentionHead
from craft.maps import FactoredBilinearMap
from rasp import lib, rasp

INPUTS = 200


def _check_differential(name: str, size: int, seed: int = 3) -> None:
    example = EXAMPLES[name]
    vocab = list(example.scaled_vocab(size))
    program = example.build(size)
    inputs = random_inputs(vocab, size, INPUTS, seed=seed)
    for causal in (False, True) if example.causal else (False,):
        model = compile_rasp(program, vocab, size, causal=causal)
        outputs = model.apply_batch([["BOS"] + x for x in inputs])
        wrong = [
            tokens
            for tokens, out in zip(inputs, outputs)
            if not outputs_match(out[1:], rasp.evaluate(program, tokens, causal=causal))
        ]
        assert not wrong, (name, size, causal, len(wrong), wrong[0])


def _inferred(program: rasp.SOp, vocab, max_seq_len: int):
    graph = g.trace(program)
    values.infer_values(graph, vocab, max_seq_len)
    return graph


# -- value sets through elementwise cones ---------------------------------------------------------


def test_cone_lists_each_source_once_and_evaluates_the_chain():
    program = lib.make_nary_sequencemap(lambda a, b, i: a + b + i, rasp.tokens, rasp.tokens, rasp.indices)
    graph = _inferred(program, [0, 1, 2], 4)
    sources, function = values.elementwise_cone(graph, program.label)
    assert set(sources) == {"tokens", "indices"}
    token_slot, index_slot = sources.index("tokens"), sources.index("indices")
    point = [None, None]
    point[token_slot], point[index_slot] = 2, 3
    assert function(tuple(point)) == 2 + 2 + 3


def test_cone_propagates_none_like_the_evaluator():
    maybe = rasp.Map(lambda x: None if x == 0 else x, rasp.tokens)
    pair = rasp.SequenceMap(lambda x, y: (x, y), maybe, rasp.tokens)
    graph = _inferred(pair, [0, 1], 2)
    sources, function = values.elementwise_cone(graph, pair.label)
    assert sources == ("tokens",)
    assert function((0,)) is None and function((1,)) == (1, 1)


def test_over_the_limit_a_chain_reading_one_sop_twice_is_enumerated_through_its_sources(monkeypatch):
    # tokens x tokens x indices: 27 direct combinations of args_2 (9) and indices (3) exceed the
    # lowered limit of 20, but the cone has only tokens x indices = 9.
    monkeypatch.setattr(values, "MAX_VALUE_SET_SIZE", 20)
    program = lib.make_nary_sequencemap(lambda a, b, i: (a, b, i), rasp.tokens, rasp.tokens, rasp.indices)
    graph = _inferred(program, [0, 1, 2], 3)
    args_3 = next(label for label in graph.nodes if label.startswith("args_3"))
    expected = {(t, t, i) for t in range(3) for i in range(3)}
    assert graph.nodes[args_3][nodes.VALUE_SET] == expected
    assert graph.nodes[program.label][nodes.VALUE_SET] == expected
    assert graph.nodes[program.label][nodes.NULLABLE] is False


def test_over_the_limit_with_independent_sources_the_message_is_unchanged(monkeypatch):
    monkeypatch.setattr(values, "MAX_VALUE_SET_SIZE", 20)
    width = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))
    program = rasp.SequenceMap(lambda x, y: (x, y), rasp.Map(lambda x: x + 1, rasp.tokens), width)
    with pytest.raises(ValueInferenceError) as refused:
        _inferred(program, list(range(5)), 5)
    assert str(refused.value) == (
        f"{program.label}: combines 5 x 6 input values, more than the limit of 20 evaluations; "
        "reduce the inputs' value sets first (e.g. a Map that buckets values) or shrink vocab / "
        "max_seq_len"
    )


# -- nary_sum_mod_4: sized after the optimisation passes -----------------------------------------


def test_nary_block_is_sized_after_fusion_and_pruning():
    # Literal layout: a lookup table over args_2 (10,000 tuples) x indices (100), one hidden
    # unit per pair. After fuse_inputs and prune_values args_2 has 100 values.
    example = EXAMPLES["nary_sum_mod_4"]
    program, vocab = example.build(100), example.scaled_vocab(100)
    assert validate(program, vocab, 100) == []
    (problem,) = validate(program, vocab, 100, optimize=False)
    assert problem.startswith("nary_sequence_map: its MLP needs 1,000,000 hidden units")


def test_nary_matches_rasp_at_30():
    _check_differential("nary_sum_mod_4", 30)


def test_nary_matches_rasp_through_the_cone_at_30(monkeypatch):
    # A lowered limit sends args_3 through the cone enumeration, as at 100/100.
    monkeypatch.setattr(values, "MAX_VALUE_SET_SIZE", 5_000)
    _check_differential("nary_sum_mod_4", 30)


@pytest.mark.slow
def test_nary_matches_rasp_at_100():
    _check_differential("nary_sum_mod_4", 100)


# -- sort / sort_freq: large blocks built sparse and factored ------------------------------------


def _heads(model):
    return [head for block in model.sublayers if isinstance(block, (AttentionHead, MultiAttentionHead)) for head in block.heads()]


@pytest.mark.parametrize("name", ["sort", "sort_freq"])
def test_sort_with_every_large_block_sparse_matches_rasp_at_30(name, monkeypatch):
    # SPARSE_ABOVE lowered so that the 900-value unique_keys blocks take the 100/100 path:
    # sparse lookup MLPs and the LT selector as dyadic factors, never a dense 900 x 900 matrix.
    monkeypatch.setattr(craft_maps, "SPARSE_ABOVE", 10_000)
    example = EXAMPLES[name]
    model = compile_rasp(example.build(30), example.scaled_vocab(30), 30)
    factored = [h for h in _heads(model) if isinstance(h.w_qk, FactoredBilinearMap)]
    assert len(factored) == 1 and factored[0].w_qk.left_space.num_dims > 900
    assert any(isinstance(b, MLP) and craft_maps.is_sparse(b.second.matrix) for b in model.sublayers)
    _check_differential(name, 30)


@pytest.mark.parametrize("name", ["sort", "sort_freq"])
def test_sort_factored_and_dense_models_compute_the_same_scores(name, monkeypatch):
    example = EXAMPLES[name]
    program, vocab = example.build(12), example.scaled_vocab(12)
    dense = compile_rasp(program, vocab, 12)
    monkeypatch.setattr(craft_maps, "SPARSE_ABOVE", 100)
    factored = compile_rasp(program, vocab, 12)
    assert dense.residual_space.basis == factored.residual_space.basis
    assert len(_heads(factored)) == len(_heads(dense))
    assert any(isinstance(h.w_qk, FactoredBilinearMap) for h in _heads(factored))
    for mine, theirs in zip(_heads(factored), _heads(dense)):
        mine_qk = mine.w_qk.on_spaces(theirs.w_qk.left_space, theirs.w_qk.right_space)
        np.testing.assert_array_equal(craft_maps.to_dense(mine_qk.matrix), theirs.w_qk.matrix)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sort", "sort_freq"])
def test_sort_matches_rasp_at_100(name):
    _check_differential(name, 100)
