"""Layer allocation: the longest-path schedule is optimal, checked against an exact MILP."""

from __future__ import annotations

import pytest

from compiler import CompilerError, compile_rasp
from compiler.passes import graph as g
from compiler.passes.allocate import EMBEDDED_KINDS, longest_path, milp_schedule, node_inputs
from compiler.passes.discretise import discretise_numerical_inputs
from compiler.cli.examples import EXAMPLES
from compiler.passes.lower import fuse_elementwise
from rasp import program_spec, random_programs, rasp

from compiler_test_helpers import outputs_match, random_inputs


def _graph(program: rasp.SOp):
    graph = g.trace(discretise_numerical_inputs(program))
    fuse_elementwise(graph)
    return graph


def _layers(schedule: dict[str, int]) -> int:
    last = max(schedule.values(), default=-1)
    return (last + 2) // 2


def _assert_valid(graph, schedule: dict[str, int]) -> None:
    for label in g.sop_nodes(graph):
        kind = graph.nodes[label][g.KIND]
        if kind in EMBEDDED_KINDS:
            assert schedule[label] == -1
            continue
        first = schedule[label] - (1 if kind == "selector_width" else 0)
        assert first % 2 == (1 if kind in ("map", "sequence_map", "linear_sequence_map") else 0), label
        assert all(schedule[source] < first for source in node_inputs(graph, label)), label


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
