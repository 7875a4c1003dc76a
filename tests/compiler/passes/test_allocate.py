"""Layer allocation: the longest-path schedule is optimal, checked against an exact MILP."""

from __future__ import annotations

import pytest
from support import outputs_match, random_inputs

from compiler import CompilerError, compile_rasp
from compiler.examples import EXAMPLES
from compiler.fuzzing import program_spec, random_programs
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.allocate import longest_path, milp_schedule, place_blocks
from compiler.passes.discretise import discretise_numerical_inputs
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.lower import LoweringOptions, lower
from compiler.passes.sums import expand_sums
from compiler.passes.values import infer_values
from craft.bases import bos_direction
from rasp import rasp


def _graph(program: rasp.SOp):
    graph = g.trace(expand_sums(discretise_numerical_inputs(program), 5))
    graph = fuse_elementwise(graph)
    return graph


def _layers(schedule: dict[str, int]) -> int:
    last = max(schedule.values(), default=-1)
    return (last + 2) // 2


def _assert_valid(graph, schedule: dict[str, int]) -> None:
    for label in g.sop_nodes(graph):
        kind = graph.nodes[label][nodes.KIND]
        if kind.embedded:
            assert schedule[label] == -1
            continue
        first = schedule[label] - (1 if kind is g.NodeKind.SELECTOR_WIDTH else 0)
        assert first % 2 == (1 if kind.elementwise else 0), label
        assert all(schedule[source] < first for source in g.node_inputs(graph, label)), label


def _fuzz_programs(count: int):
    for seed in range(count):
        vocab = ["a", "b", "c"] if seed % 2 else [0, 1, 2]
        spec = random_programs.generate(seed, 4 + seed % 20, vocab, 4)
        yield seed, program_spec.build(spec)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_exact_allocation_matches_longest_path_on_library_programs(name):
    graph = _graph(EXAMPLES[name].build(5))
    exact, greedy = milp_schedule(graph), longest_path(graph)
    _assert_valid(graph, exact)
    _assert_valid(graph, greedy)
    assert _layers(exact) <= _layers(greedy)
    assert _layers(exact) == _layers(greedy)  # longest path is optimal (proof in allocate.py)


def test_exact_allocation_matches_longest_path_on_fuzz_programs():
    compared = 0
    for seed, program in _fuzz_programs(80):
        try:
            graph = _graph(program)
            longest_path(graph)
        except CompilerError:
            continue  # a selector without a single-head construction: nothing to allocate
        exact, greedy = milp_schedule(graph), longest_path(graph)
        _assert_valid(graph, exact)
        assert _layers(exact) == _layers(greedy), seed
        compared += 1
    assert compared >= 50


def test_no_valid_schedule_places_a_node_earlier_than_longest_path():
    # The induction step of the optimality proof: shifting any node one layer earlier breaks
    # a precedence or parity constraint.
    graph = _graph(EXAMPLES["sort_freq"].build(5))
    greedy = longest_path(graph)
    for label, index in greedy.items():
        if index < 0:
            continue
        earlier = dict(greedy, **{label: index - 2})
        with pytest.raises(AssertionError):
            _assert_valid(graph, earlier)


@pytest.mark.parametrize("name", ["sort", "frac_prevs", "shuffle_dyck2"])
def test_the_exact_allocator_plugs_into_compile_rasp(name):
    example = EXAMPLES[name]
    program = example.build(5)
    model = compile_rasp(program, example.vocab, 5, allocator=milp_schedule)
    assert model.config.num_layers == compile_rasp(program, example.vocab, 5).config.num_layers
    inputs = random_inputs(list(example.vocab), 5, 30, seed=3)
    for tokens, got in zip(inputs, model.apply_batch([["BOS"] + x for x in inputs])):
        assert outputs_match(got[1:], rasp.evaluate(program, tokens)), tokens


def test_place_blocks_puts_each_block_on_its_layer():
    # tokens -> parity (MLP, layer 0) -> previous (head, layer 1) -> width (head + MLP, layer 2)
    parity = rasp.Map(lambda x: x % 2, rasp.tokens).named("parity")
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT).named("before")
    previous = rasp.Aggregate(before, parity).named("previous")
    same = rasp.Select(previous, previous, rasp.Comparison.EQ).named("same")
    width = rasp.SelectorWidth(same).named("width")
    graph = g.trace(width)
    infer_values(graph, (1, 2, 3), 3)
    lower(graph, LoweringOptions(max_seq_len=3, causal=False, bos=bos_direction()))
    assert longest_path(graph) == {"tokens": -1, "indices": -1, "parity": 1, "previous": 2, "width": 5}
    sublayers = place_blocks(graph)
    layers = {label: graph.nodes[label][nodes.LAYER] for label in g.sop_nodes(graph)}
    assert layers == {"tokens": None, "indices": None, "parity": 0, "previous": 1, "width": 2}
    assert [type(block).__name__ if block else None for block in sublayers] == [
        None, "MLP", "MultiAttentionHead", None, "MultiAttentionHead", "MLP"
    ]
    (_, parity_mlp), = graph.nodes["parity"][nodes.BLOCKS]
    (_, previous_head), = graph.nodes["previous"][nodes.BLOCKS]
    (_, width_head), (_, width_mlp) = graph.nodes["width"][nodes.BLOCKS]
    assert sublayers[1].output_space == parity_mlp.output_space
    assert sublayers[2].heads() == (previous_head,) and sublayers[4].heads() == (width_head,)
    assert sublayers[5].output_space == width_mlp.output_space
