"""`fold_outputs`: a Map of a categorical Aggregate's output is written by the head itself."""

from __future__ import annotations

import itertools

import pytest
from support import outputs_match

from compiler import compile_rasp
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.optimize import applied
from compiler.passes.optimize.fold_outputs import fold_outputs_into_heads
from compiler.passes.values import infer_values
from rasp import rasp

VOCAB = (0, 1, 2, 3)


def _graph(program: rasp.SOp):
    graph = g.trace(program)
    infer_values(graph, VOCAB, 4)
    graph = fuse_elementwise(graph)
    return graph


def _shifted(default=2, sop=rasp.tokens) -> rasp.SOp:
    previous = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1).named("previous")
    return rasp.Aggregate(previous, sop, default=default).named("shifted")


def _parity(sop: rasp.SOp) -> rasp.SOp:
    return rasp.Map(lambda x: "odd" if x % 2 else ("zero" if x == 0 else None), sop).named("parity")


def _every_input_matches(program: rasp.SOp, causal: bool, **options) -> None:
    model = compile_rasp(program, VOCAB, 4, causal=causal, **options)
    inputs = [list(t) for n in range(1, 5) for t in itertools.product(VOCAB, repeat=n)]
    for tokens, got in zip(inputs, model.apply_batch([["BOS", *t] for t in inputs])):
        expected = rasp.evaluate(program, tokens, causal=causal)
        assert outputs_match(got[1:], expected, tolerance=1e-5), (tokens, got, expected)


def test_the_map_becomes_the_head_and_the_aggregate_leaves_the_graph():
    program = rasp.SequenceMap(lambda p, t: f"{p}{t}", _parity(_shifted()), rasp.tokens).named("out")
    graph = _graph(program)
    folded = fold_outputs_into_heads(graph)
    assert "shifted" in graph and graph.nodes["parity"][nodes.KIND] is g.NodeKind.MAP  # the pass is pure
    assert "shifted" not in folded
    node = folded.nodes["parity"]
    assert node[nodes.KIND] is g.NodeKind.AGGREGATE and node[nodes.FOLDED_OUTPUT].aggregate == "shifted"
    assert node[nodes.EXPR].default is None  # f(2) is None: still writes nothing
    assert applied(folded) == (
        "fold_outputs: Map parity of the Aggregate shifted is written by shifted's head directly "
        "(W_OV writes parity; no shifted directions, no MLP)",
    )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("default", [None, 2])  # 2 maps to None
def test_folded_heads_equal_rasp_on_every_input(causal, default):
    categorical = rasp.SequenceMap(lambda p, t: f"{p}{t}", _parity(_shifted(default)), rasp.tokens).named("out")
    model = compile_rasp(categorical, VOCAB, 4, causal=causal)
    plain = compile_rasp(categorical, VOCAB, 4, causal=causal, optimize=False)
    assert (model.config.num_layers, plain.config.num_layers) == (1, 2)
    assert not any(label.startswith("shifted:") for label in model.residual_labels)
    _every_input_matches(categorical, causal)
    _every_input_matches(categorical, causal, optimize=False)
    if default is not None:  # a numerical Map of a None-able s-op is refused
        numerical = rasp.numerical(rasp.Map(lambda x: 0.5 * x + 1, _shifted(default))).named("half")
        _every_input_matches(numerical, causal)


def test_composes_with_a_value_map_folded_by_fold_maps():
    doubled = rasp.Map(lambda x: 2 * x, rasp.tokens).named("doubled")
    program = rasp.Map(lambda x: x % 3, _shifted(default=None, sop=doubled)).named("mod3")
    model = compile_rasp(program, VOCAB, 4)
    assert [line.split(":")[0] for line in applied(model.graph)] == ["fold_maps", "fold_outputs"]
    assert model.config.num_layers == 1
    assert compile_rasp(program, VOCAB, 4, optimize=False).config.num_layers == 2
    _every_input_matches(program, causal=False)


def test_numerical_shared_or_output_aggregates_are_not_folded():
    mean = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                         rasp.numerical(rasp.Map(lambda x: x, rasp.tokens)), default=0)).named("mean")
    assert "mean" in fold_outputs_into_heads(_graph(rasp.Map(lambda x: x > 1, mean).named("big")))
    shifted = _shifted()
    both = rasp.SequenceMap(lambda p, s: (p, s), _parity(shifted), shifted).named("both")
    assert "shifted" in fold_outputs_into_heads(_graph(both))
    assert not applied(fold_outputs_into_heads(_graph(shifted)))


def test_summary_and_head_picture_say_what_the_head_absorbed():
    from compiler.cli.head_notes import head_notes, written_sops
    from compiler.cli.plots import plot_heads
    from compiler.cli.summary import model_summary, summary_text

    program = rasp.SequenceMap(lambda p, t: f"{p}{t}", _parity(_shifted()), rasp.tokens).named("out")
    model = compile_rasp(program, VOCAB, 4)
    note = "writes parity (the head of Aggregate shifted, writing Map parity of it)"
    assert written_sops(model, 0, 0) == ("parity",)
    assert head_notes(model) == [f"layer 0 head 0: {note}"]
    text = summary_text(model_summary(model))
    assert f"optimised head: layer 0 head 0: {note}" in text
    assert "fold_outputs: Map parity of the Aggregate shifted" in text
    figure = plot_heads(model)
    titles = [ax.get_title() for ax in figure.axes if ax.images]
    assert titles[0].startswith("W_QK") and titles[1].startswith("W_OV")
    (head_title,) = [text.get_text() for text in figure.texts]
    assert head_title.startswith("layer 0 head 0\n") and " ".join(head_title.split()[4:]) == note
    plain = compile_rasp(program, VOCAB, 4, optimize=False)
    assert head_notes(plain) == [] and "optimised" not in summary_text(model_summary(plain))
