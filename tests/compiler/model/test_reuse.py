"""The residual-reuse pass (`compiler.model.reuse`): narrower streams, the same outputs.

Every model compiled with `reuse_residual=True` is run through the numpy interpreter (no jit, so
the whole library fits the default run) and compared with `rasp.evaluate` and with the model
compiled without reuse; the fuzz programs are the slow, larger check.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from compiler import compile_rasp
from compiler.errors import CompilerError, InvalidInputError
from compiler.examples import EXAMPLES
from compiler.fuzzing import random_programs
from compiler.fuzzing.differential import run_model
from compiler.fuzzing.driver import SETTINGS
from compiler.fuzzing.program_spec import build
from compiler.model import oracle
from compiler.model.agree import same_value
from compiler.model.reuse import SEPARATOR
from rasp import lib, rasp

SIZE = 5


def _inputs(vocab, max_seq_len: int, count: int, seed: int) -> list[list]:
    rng = np.random.default_rng(seed)
    return [
        [vocab[i] for i in rng.integers(len(vocab), size=int(rng.integers(1, max_seq_len + 1)))]
        for _ in range(count)
    ]


def _check(program, vocab, max_seq_len: int, causal: bool, inputs: list[list]) -> tuple[int, int]:
    """Compile with and without reuse, assert both agree with the evaluator; the two widths."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = compile_rasp(program, vocab, max_seq_len, causal=causal)
        reused = compile_rasp(program, vocab, max_seq_len, causal=causal, reuse_residual=True)
    kept = []
    for xs in inputs:
        try:
            kept.append((xs, rasp.evaluate(program, xs, causal=causal)))
        except rasp.RaspEvaluationError:
            continue
    got = run_model(reused, [xs for xs, _ in kept], "numpy")
    before = run_model(plain, [xs for xs, _ in kept], "numpy")
    for (xs, want), out, old in zip(kept, got, before):
        assert len(out) == len(want) and all(same_value(g, w) for g, w in zip(out, want)), (xs, out, want)
        assert all(same_value(g, o) for g, o in zip(out, old)), (xs, out, old)
    return plain.config.residual_width, reused.config.residual_width


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_library_programs_stay_exact_and_never_widen(causal):
    widths = {}
    for name, example in EXAMPLES.items():
        vocab = example.scaled_vocab(SIZE)
        widths[name] = _check(example.build(SIZE), vocab, SIZE, causal, _inputs(vocab, SIZE, 24, seed=len(name)))
    assert all(after <= before for before, after in widths.values()), widths
    assert sum(after for _, after in widths.values()) < 0.85 * sum(before for before, _ in widths.values()), widths


def test_reverse_is_narrower_and_labels_name_every_owner():
    example = EXAMPLES["reverse"]
    vocab = example.scaled_vocab(SIZE)
    plain = compile_rasp(example.build(SIZE), vocab, SIZE)
    reused = compile_rasp(example.build(SIZE), vocab, SIZE, reuse_residual=True)
    record = reused.residual_reuse
    assert plain.residual_reuse is None
    assert record.width_before == plain.config.residual_width
    assert record.width_after == reused.config.residual_width == len(reused.residual_space.basis)
    assert reused.config.residual_width <= 0.8 * plain.config.residual_width
    assert 0 < record.peak_alive <= record.width_after
    shared = [slot for slot, owners in enumerate(record.owners) if len(owners) > 1]
    assert shared
    for slot in shared:
        owners = record.owners[slot]
        assert reused.residual_labels[slot] == SEPARATOR.join(owner.label for owner in owners)
        # Each owner holds the slot from its first write until the MLP that clears it.
        for first, second in zip(owners, owners[1:]):
            assert first.cleared is not None and first.cleared <= second.start
            assert record.owner_at(slot, second.start) == second.label
            assert record.owner_at(slot, first.start) == first.label
    # The residual snapshots hold the current owner's values: zero right after a clearing MLP
    # that no new owner writes in the same sub-layer.
    ids = reused.input_encoder.encode_batch([["BOS", *vocab[:SIZE]]])
    residuals = reused.run(ids).residuals
    for slot in shared:
        first, second = record.owners[slot][:2]
        if second.start > first.cleared:
            assert np.all(np.asarray(residuals[first.cleared + 1])[0, :, slot] == 0)


def test_numpy_and_jax_forward_agree_on_a_reused_model():
    example = EXAMPLES["sort"]
    vocab = example.scaled_vocab(SIZE)
    model = compile_rasp(example.build(SIZE), vocab, SIZE, reuse_residual=True)
    ids = model.input_encoder.encode_batch([["BOS", *xs] for xs in _inputs(vocab, SIZE, 8, seed=3)])
    np.testing.assert_allclose(
        np.asarray(model.run(ids).output), oracle.forward(model.config, model.params, ids), atol=1e-5
    )


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_two_hundred_fuzz_programs_stay_exact(causal):
    checked = 0
    for seed in range(200):
        vocab, max_seq_len = SETTINGS[seed % len(SETTINGS)]
        program = build(random_programs.generate(seed, 3 + seed % 13, list(vocab), max_seq_len))
        try:
            _check(program, list(vocab), max_seq_len, causal, _inputs(list(vocab), max_seq_len, 16, seed))
        except CompilerError:
            continue  # refused programs are the fuzz pass's business, not this pass's
        checked += 1
    assert checked >= 100


def test_reuse_refused_for_loops():
    """A loop's iterations share one block of layers, so its slots cannot change owner: refused early."""
    with pytest.raises(InvalidInputError, match="reuse_residual"):
        compile_rasp(lib.make_parity_loop(3), {0, 1}, 4, reuse_residual=True)
