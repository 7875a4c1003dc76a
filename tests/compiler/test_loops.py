"""Compiled `rasp.Loop`s: exact against the evaluator, one tied block of weights, refusals.

The library loops (`lib.make_parity_loop`, `lib.make_addition_loop`) run plain and causal at
max_seq_len 8 in the default run; 32 and 64 are marked slow. The loop models are also compared
with the compiles of the same loops unrolled in Python (parity by default, addition in the slow
run), and parity's file with its unrolled compile's file.
"""

from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest
from support import compare_with_evaluator, random_inputs

from compiler import compile_rasp, load_model, save_model
from compiler.compiling_loops import LOOP
from compiler.errors import UnsupportedProgramError, ValueInferenceError
from compiler.model.tying import untied
from compiler.passes.loops import MAX_VALUE_ROUNDS
from rasp import lib, rasp

BITS = (0, 1)
DIGIT_PAIRS = tuple((a, b) for a in range(10) for b in range(10))
LOOPS = {"parity": (lib.make_parity_loop, BITS), "addition": (lib.make_addition_loop, DIGIT_PAIRS)}


def _compiled(name: str, size: int, causal: bool):
    make, vocab = LOOPS[name]
    loop = make(size - 1)
    return loop, compile_rasp(loop, set(vocab), size, causal=causal)


def _carry_heavy(size: int, count: int, seed: int) -> list[list]:
    """Digit pairs with long carry chains (columns summing to 9), which random pairs rarely have."""
    rng = random.Random(seed)
    inputs = []
    for _ in range(count):
        n = rng.randint(1, size)
        a = [rng.randint(0, 9) for _ in range(n)]
        pairs = [(x, 9 - x) for x in a]
        pairs[0] = (a[0], min(9, 10 - a[0]))  # the first column generates (or propagates) a carry
        inputs.append(pairs)
    return inputs


def _inputs(name: str, size: int, count: int, seed: int) -> list[list]:
    vocab = LOOPS[name][1]
    if name == "addition":
        return random_inputs(vocab, size, count // 2, seed) + _carry_heavy(size, count - count // 2, seed)
    return random_inputs(vocab, size, count, seed)


def _differential(name: str, size: int, causal: bool) -> None:
    loop, model = _compiled(name, size, causal)
    tied = model.config.tied
    assert (tied.repeats, tied.stop - tied.start) == (size - 1, 2)  # one layer, run size - 1 times
    compared = compare_with_evaluator(model, loop, _inputs(name, size, 200, seed=size), causal, name)
    assert compared == 200


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
@pytest.mark.parametrize("name", sorted(LOOPS))
def test_library_loops_match_the_evaluator(name: str, causal: bool) -> None:
    _differential(name, 8, causal)


@pytest.mark.slow
@pytest.mark.parametrize("size", [32, 64])
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
@pytest.mark.parametrize("name", sorted(LOOPS))
def test_library_loops_match_the_evaluator_at_length(name: str, causal: bool, size: int) -> None:
    _differential(name, size, causal)


@pytest.fixture(scope="module")
def parity_pair():
    """The parity loop at max_seq_len 8, and the compile of the same loop unrolled."""
    loop, model = _compiled("parity", 8, False)
    return loop, model, compile_rasp(loop.unrolled(), set(BITS), 8)


def test_loop_model_equals_the_unrolled_compile(parity_pair) -> None:
    _, model, unrolled = parity_pair
    inputs = [["BOS", *xs] for xs in random_inputs(BITS, 8, 200, seed=3)]
    assert model.apply_batch(inputs) == unrolled.apply_batch(inputs)
    ids = model.input_encoder.encode_batch(inputs[:20])
    mine, theirs = model.run(ids), unrolled.run(ids)
    np.testing.assert_allclose(np.asarray(mine.output), np.asarray(theirs.output), atol=1e-5)
    assert len(mine.residuals) == 2 * model.config.num_executed_layers + 1


@pytest.mark.slow  # two JAX models of the 100-pair vocabulary: about 5 CPU s; parity runs by default
def test_addition_loop_model_equals_the_unrolled_compile() -> None:
    loop, model = _compiled("addition", 5, False)
    unrolled = compile_rasp(loop.unrolled(), set(DIGIT_PAIRS), 5)
    inputs = [["BOS", *xs] for xs in _inputs("addition", 5, 200, seed=9)]
    assert model.apply_batch(inputs) == unrolled.apply_batch(inputs)
    assert [row[1:] for row in model.apply_batch(inputs)] == [loop(xs[1:]) for xs in inputs]
    ids = model.input_encoder.encode_batch(inputs[:20])
    np.testing.assert_allclose(np.asarray(model.run(ids).output), np.asarray(unrolled.run(ids).output), atol=1e-5)


def test_config_records_the_tied_block(parity_pair) -> None:
    _, model, unrolled = parity_pair
    config = model.config
    assert config.tied.repeats == 7 and config.num_layers == 2 and config.num_executed_layers == 8
    assert config.layer_order == (0, 1, *(2, 3) * 7)
    assert model.stage_names[3] == "layer 1 attn (tied layer 1, iteration 1)"
    assert model.stage_names[-1] == "layer 7 mlp (tied layer 1, iteration 7)"
    record = model.graph.graph[LOOP]
    assert (record.value_count, record.closed, record.fused_commit) == (2, True, True)
    assert unrolled.config.tied is None and unrolled.config.num_layers == 8


def test_file_stores_one_copy_of_the_block(parity_pair, tmp_path) -> None:
    loop, model, unrolled = parity_pair
    longer = compile_rasp(lib.make_parity_loop(15), set(BITS), 8)
    sizes = {}
    for name, compiled in (("loop", model), ("longer", longer), ("unrolled", unrolled)):
        sizes[name] = save_model(compiled, tmp_path / f"{name}.safetensors").stat().st_size
    weight_bytes = sum(np.asarray(v).nbytes for group in model.params.values() for v in group.values())
    assert abs(sizes["longer"] - sizes["loop"]) < 64  # only the repeat count differs
    assert sizes["unrolled"] - sizes["loop"] > weight_bytes  # the unrolled file holds 7 blocks
    loaded = load_model(tmp_path / "loop.safetensors")
    assert loaded.config.tied == model.config.tied
    inputs = [["BOS", *xs] for xs in random_inputs(BITS, 8, 50, seed=4)]
    assert loaded.apply_batch(inputs) == model.apply_batch(inputs)


@pytest.mark.slow  # the TransformerLens test below runs untied() too, on the logits
def test_untied_model_runs_the_same_layers(parity_pair) -> None:
    _, model, _ = parity_pair
    flat = untied(model)
    assert flat.config.tied is None and flat.config.num_layers == model.config.num_executed_layers
    ids = model.input_encoder.encode_batch([["BOS", 1, 0, 1, 1, 0, 1]])
    for mine, theirs in zip(model.run(ids).residuals, flat.run(ids).residuals, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


@pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("torch", "transformer_lens")),
    reason="needs the export extra (torch, transformer-lens)",
)
def test_transformer_lens_export_unrolls_the_loop(parity_pair) -> None:
    import torch

    from compiler import to_transformer_lens

    _, model, _ = parity_pair
    tl_model = to_transformer_lens(model)
    assert tl_model.cfg.n_layers == model.config.num_executed_layers
    ids = model.input_encoder.encode_batch([["BOS", *xs] for xs in random_inputs(BITS, 8, 12, seed=5)])
    with torch.no_grad():
        logits = tl_model(torch.tensor(np.asarray(ids), dtype=torch.long)).numpy()
    np.testing.assert_allclose(logits, np.asarray(model.run(ids).output), atol=1e-4)


def test_numerical_counter_state_is_exact() -> None:
    start = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    loop = rasp.Loop(lambda s: rasp.numerical(rasp.Map(lambda x: x + 1, s)), start, 5)
    model = compile_rasp(loop, {0, 1, 2}, 6)
    record = model.graph.graph[LOOP]
    assert not record.closed and record.value_count == 8  # 0..2 plus up to 5 increments
    compare_with_evaluator(model, loop, random_inputs((0, 1, 2), 6, 50, seed=6), False, "counter")


def test_attention_result_gets_a_commit_layer_of_its_own() -> None:
    previous = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1 or k == q == 0)
    loop = rasp.Loop(lambda s: rasp.Aggregate(previous, s), rasp.tokens, 3)  # shift right, 3 times
    model = compile_rasp(loop, {"a", "b"}, 6, causal=True)
    assert not model.graph.graph[LOOP].fused_commit
    compare_with_evaluator(model, loop, random_inputs(("a", "b"), 6, 50, seed=7), True, "shift")


def test_state_growing_past_the_round_limit_is_refused() -> None:
    start = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    loop = rasp.Loop(lambda s: rasp.numerical(rasp.Map(lambda x: x + 1, s)), start, MAX_VALUE_ROUNDS + 1)
    with pytest.raises(ValueInferenceError, match=f"{loop.label}: the loop's state still takes new values"):
        compile_rasp(loop, {0, 1}, 4)


def test_loop_inside_a_larger_program_is_refused() -> None:
    loop = lib.make_parity_loop(3)
    with pytest.raises(UnsupportedProgramError, match="compiles only as the whole program"):
        compile_rasp(rasp.Map(lambda x: 1 - x, loop), set(BITS), 4)


def test_nested_loops_are_refused() -> None:
    def body(state: rasp.SOp) -> rasp.SOp:
        inner = rasp.Loop(lambda s: rasp.SequenceMap(lambda a, b: a ^ b, s, state), state, 2)
        return rasp.SequenceMap(lambda a, b: a ^ b, inner, state)

    loop = rasp.Loop(body, rasp.tokens, 2)
    with pytest.raises(UnsupportedProgramError, match="nested loops are not compiled"):
        compile_rasp(loop, set(BITS), 4)


def test_summary_and_pictures_show_the_tying(parity_pair, tmp_path) -> None:
    from compiler.cli.plots import plot_attention, plot_residuals
    from compiler.cli.summary import model_summary, summary_text

    _, model, _ = parity_pair
    summary = model_summary(model)
    assert summary["tied"] == {"layers": [1, 1], "repeats": 7, "executed_layers": 8}
    assert summary["sublayers"] == ["layer 0 attn", "layer 0 mlp", "layer 1 attn (tied)", "layer 1 mlp (tied)"]
    assert "tied: layer 1 stored once, run 7 times with shared weights" in summary_text(summary)
    tokens = ["BOS", 1, 0, 1, 1]
    heads = plot_attention(model, tokens, tmp_path / "attention.png")
    titles = [ax.get_title() for ax in heads.axes if ax.get_title()]
    assert titles[0] == "layer 1 head 0\n(tied layer 1, iteration 1)" and len(titles) == 7
    residuals = plot_residuals(model, tokens, tmp_path / "residuals.png")
    assert sum(bool(ax.get_title()) for ax in residuals.axes) == 1 + 2 * 7 + 1  # embed, block x 7, prefix MLP


@pytest.mark.parametrize("name", ["parity_loop"])  # addition_loop: same path, slower
def test_command_line_compiles_the_catalogue_loops(name: str, capsys) -> None:
    from compiler.cli.command_line import main
    from compiler.examples import CATALOGUE, EXAMPLES, LOOP_EXAMPLES

    assert name in CATALOGUE and name in LOOP_EXAMPLES and name not in EXAMPLES
    example = LOOP_EXAMPLES[name]
    assert main(["--example", name]) == 0
    printed = capsys.readouterr().out
    assert f"run {example.max_seq_len - 1} times with shared weights" in printed


def _mixed_body(state: rasp.SOp) -> rasp.SOp:
    """Numerical scratch (a mean), a selector width (its head writes a scratch direction) and a
    categorical result: every kind of direction the commit must clear."""
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    ones = rasp.numerical(rasp.Map(lambda s: 1 if s == 1 else 0, state))
    share = rasp.numerical(rasp.Aggregate(prefix, ones, default=0))
    same = rasp.SelectorWidth(rasp.Select(state, state, rasp.Comparison.EQ))
    bucket = rasp.Map(lambda f: int(f * 2.999), share)
    return rasp.SequenceMap(lambda w, b: (w + b) % 3, same, bucket)


@pytest.mark.filterwarnings("ignore::compiler.errors.CausalSemanticsWarning")  # the width looks ahead
@pytest.mark.parametrize("causal", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["plain", "causal"])
def test_body_with_numerical_and_width_scratch_is_exact(causal: bool) -> None:
    loop = rasp.Loop(_mixed_body, rasp.Map(lambda t: t % 3, rasp.tokens), 3)
    model = compile_rasp(loop, {0, 1, 2, 3}, 6, causal=causal)
    inputs = random_inputs((0, 1, 2, 3), 6, 200, seed=8)
    assert compare_with_evaluator(model, loop, inputs, causal, "mixed") == 200
    ids = model.input_encoder.encode_batch([["BOS", *xs] for xs in inputs[:8]])
    plain = model.forward(model.params, ids)
    width = model.config.residual_width
    projected = model.forward(model.params, ids, projection=np.eye(width, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(projected.output), np.asarray(plain.output), atol=1e-5)
    assert len(projected.written) == len(model.config.layer_order) == len(plain.residuals) - 1


def test_body_reading_another_loops_state_is_refused() -> None:
    outer = rasp.Loop(lambda s: rasp.Map(lambda v: 1 - v, s), rasp.tokens, 2)
    stray = rasp.Loop(lambda s: rasp.SequenceMap(lambda a, b: a ^ b, s, outer.state), rasp.tokens, 2)
    with pytest.raises(UnsupportedProgramError, match="the state of another loop"):
        compile_rasp(stray, set(BITS), 4)


def test_numerical_state_that_can_be_none_is_refused() -> None:
    previous = rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1)
    start = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    loop = rasp.Loop(lambda s: rasp.numerical(rasp.Aggregate(previous, s)), start, 2)  # None at position 0
    with pytest.raises(UnsupportedProgramError, match="numerical loop state that can be None"):
        compile_rasp(loop, {0, 1}, 4)
