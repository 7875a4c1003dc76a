"""Several programs compiled side by side into one model (`compile_rasp([p1, p2, ...])`)."""

from __future__ import annotations

import numpy as np
import pytest
from support import outputs_match, random_inputs

from compiler import InvalidInputError, UnsupportedProgramError, compile_rasp, load_model, save_model
from compiler.passes import nodes
from rasp import lib, rasp

VOCAB = ("a", "b", "x")


def programs() -> list[rasp.SOp]:
    """Categorical, categorical (selector width) and numerical outputs, sharing `length`."""
    length = lib.make_length()
    opp = (length - rasp.indices).named("opp_idx")
    opp = (opp - 1).named("opp_idx-1")
    flip = rasp.Select(rasp.indices, opp, rasp.Comparison.EQ).named("flip")
    reverse = rasp.Aggregate(flip, rasp.tokens).named("reverse")
    shifted = rasp.numerical(rasp.Map(lambda n: n / 10, length).named("length_tenths"))
    return [reverse, lib.make_hist(), lib.make_frac_prevs(rasp.tokens == "x"), shifted]


@pytest.fixture(scope="module")
def model_and_programs():
    progs = programs()
    return compile_rasp(progs, set(VOCAB), 5), progs


@pytest.mark.parametrize("causal", [False, True])
def test_every_output_equals_its_program_on_random_inputs(causal):
    progs = programs()[1:3] if causal else programs()  # length and reverse read later positions
    model = compile_rasp(progs, set(VOCAB), 5, causal=causal)
    labels = list(model.output_columns)
    for xs in random_inputs(VOCAB, 5, 150, seed=3):
        decoded = model.apply(["BOS", *xs]).decoded
        assert list(decoded) == labels
        for label, program in zip(labels, progs):
            expected = ["BOS", *rasp.evaluate(program, xs, causal=causal)]
            assert outputs_match(decoded[label], expected), (label, xs, decoded[label], expected)


def test_output_columns_are_consecutive_blocks_in_program_order(model_and_programs):
    model, progs = model_and_programs
    columns = model.output_columns
    assert list(columns) == [p.label for p in progs]
    widths = [c.stop - c.start for c in columns.values()]
    assert widths == [3, 6, 1, 1]  # 3 tokens; a selector width 0..5; two numbers
    assert [c.start for c in columns.values()] == [0, 3, 9, 10]
    ids = model.input_encoder.encode_batch([["BOS", "a", "x"]])
    assert np.asarray(model.run(ids).output).shape == (1, 3, 11)


def test_shared_sub_expressions_are_computed_once(model_and_programs):
    model, progs = model_and_programs
    # `length` feeds reverse and length_tenths: one node, one set of directions.
    assert model.graph.graph[nodes.SINKS] == tuple(p.label for p in progs)
    assert sum(1 for label in model.graph if model.graph.nodes[label][nodes.NAME] == "length") == 1
    alone = compile_rasp(progs[0], set(VOCAB), 5)
    length_dirs = [lab for lab in model.residual_labels if lab.startswith("length:")]
    assert length_dirs == [lab for lab in alone.residual_labels if lab.startswith("length:")]


def test_apply_batch_cuts_every_output_to_its_input(model_and_programs):
    model, progs = model_and_programs
    batch = [["BOS", "a"], ["BOS", "x", "b", "x"]]
    decoded = model.apply_batch(batch)
    for row, tokens in zip(decoded, batch):
        for label, program in zip(model.output_columns, progs):
            assert outputs_match(row[label], ["BOS", *rasp.evaluate(program, tokens[1:])])


def test_a_list_of_one_program_decodes_as_a_dict_and_a_single_program_is_unchanged():
    hist = lib.make_hist()
    listed = compile_rasp([hist], set(VOCAB), 4)
    single = compile_rasp(hist, set(VOCAB), 4)
    assert listed.apply(["BOS", "a", "a"]).decoded == {"hist": ["BOS", 2, 2]}
    assert single.apply(["BOS", "a", "a"]).decoded == ["BOS", 2, 2]
    assert listed.residual_labels == single.residual_labels


def test_a_saved_multi_output_model_loads_and_decodes_the_same(model_and_programs, tmp_path):
    model, _ = model_and_programs
    path = tmp_path / "multi.safetensors"
    save_model(model, path)
    loaded = load_model(path)
    tokens = ["BOS", "x", "a", "b", "x"]
    assert loaded.apply(tokens).decoded == model.apply(tokens).decoded
    assert loaded.output_columns == model.output_columns


def test_bad_program_lists_are_refused_with_the_reason():
    hist = lib.make_hist()
    with pytest.raises(InvalidInputError, match="empty list"):
        compile_rasp([], set(VOCAB), 3)
    with pytest.raises(InvalidInputError, match="program 1 of the list is a Select"):
        compile_rasp([hist, rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)], set(VOCAB), 3)
    with pytest.raises(UnsupportedProgramError, match="given twice"):
        compile_rasp([hist, hist], set(VOCAB), 3)


def test_outputs_with_the_same_name_get_unique_labels():
    first, second = lib.make_hist(), lib.make_hist()  # two expressions both named "hist"
    model = compile_rasp([first, second], set(VOCAB), 3)
    assert list(model.output_columns) == ["hist", "hist_2"]
    assert model.apply(["BOS", "b", "b"]).decoded == {"hist": ["BOS", 2, 2], "hist_2": ["BOS", 2, 2]}
