"""Input spaces, enumeration and in-JAX sampling; projection init; the LR schedule."""

import compression_fake as fake
import jax
import numpy as np
import pytest

from compression.learned.config import OptimizerConfig, SamplingConfig
from compression.learned.optim import learning_rate_schedule
from compression.learned.projection import gram, init_projection
from compression.learned.sampling import (
    InputSpace,
    draw_batch,
    enumerate_inputs,
    input_lengths,
    sample_inputs,
    training_pool,
    use_enumeration,
)


def _check_rows(rows: np.ndarray, space: InputSpace) -> None:
    assert rows.shape[1] == space.max_seq_len + 1
    assert np.all(rows[:, 0] == space.bos_id)
    for row in rows:
        body = row[1:]
        n = int(np.sum(body != space.pad_id))
        assert space.min_length <= n <= space.max_seq_len
        assert np.all(body[n:] == space.pad_id)  # padding only at the end
        assert set(body[:n].tolist()) <= set(space.token_ids)
        if space.unique_tokens:
            assert len(set(body[:n].tolist())) == n


def test_enumeration_matches_size_and_is_distinct():
    space = fake.input_space()
    rows = enumerate_inputs(space)
    assert len(rows) == space.size() == 4 + 16 + 64 + 256 + 1024
    assert len({tuple(r) for r in rows}) == len(rows)
    _check_rows(rows, space)


def test_unique_enumeration_is_permutations():
    space = fake.input_space(unique_tokens=True, max_seq_len=3, min_length=2)
    rows = enumerate_inputs(space)
    assert len(rows) == space.size() == 4 * 3 + 4 * 3 * 2
    _check_rows(rows, space)


@pytest.mark.parametrize("unique", [False, True])
def test_sampled_inputs_are_valid_and_seeded(unique):
    space = fake.input_space(unique_tokens=unique, min_length=2, max_seq_len=4 if unique else 5)
    key = jax.random.key(3)
    rows = np.asarray(sample_inputs(key, space, 512))
    _check_rows(rows, space)
    np.testing.assert_array_equal(rows, np.asarray(sample_inputs(key, space, 512)))
    lengths = np.sum(rows[:, 1:] != space.pad_id, axis=1)
    assert set(lengths.tolist()) == set(range(2, space.max_seq_len + 1))


def test_decode_drops_bos_and_pad():
    space = fake.input_space()
    assert space.decode([fake.BOS_ID, 3, 0, fake.PAD_ID, fake.PAD_ID, fake.PAD_ID]) == ["x", "a"]


def test_auto_mode_enumerates_small_spaces_only():
    space = fake.input_space()
    assert use_enumeration(space, SamplingConfig())
    assert not use_enumeration(space, SamplingConfig(enumerate_limit=100))
    assert not use_enumeration(space, SamplingConfig(mode="random"))
    pool = {tuple(r) for r in enumerate_inputs(space)}
    assert training_pool(space, SamplingConfig(mode="random")) is None
    source = training_pool(space, SamplingConfig(mode="enumerate"))
    batch = np.asarray(draw_batch(jax.random.key(0), space, 64, source.ids, source.probs))
    assert all(tuple(r) in pool for r in batch)


def test_pool_balances_lengths_or_sequences():
    space = fake.input_space()
    balanced = training_pool(space, SamplingConfig())
    lengths = input_lengths(balanced.ids, space.pad_id)
    for n in range(1, 6):  # each length carries 1/5 of the probability
        assert balanced.probs[lengths == n].sum() == pytest.approx(0.2, abs=1e-5)
    flat = training_pool(space, SamplingConfig(balance_lengths=False))
    np.testing.assert_allclose(flat.probs, 1 / len(flat.ids))
    batch = np.asarray(draw_batch(jax.random.key(1), space, 4000, balanced.ids, balanced.probs))
    share_of_single_tokens = np.mean(input_lengths(batch, space.pad_id) == 1)
    assert 0.17 < share_of_single_tokens < 0.23


def test_invalid_spaces_are_refused():
    with pytest.raises(ValueError, match="unique_tokens"):
        fake.input_space(unique_tokens=True, max_seq_len=6)
    with pytest.raises(ValueError, match="min_length"):
        fake.input_space(min_length=0)


@pytest.mark.parametrize("method", ["orthogonal", "gaussian", "identity"])
def test_projection_init_is_seeded(method):
    a = init_projection(jax.random.key(1), 14, 6, method)
    b = init_projection(jax.random.key(1), 14, 6, method)
    assert a.shape == (14, 6) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)


def test_square_orthogonal_and_identity_inits_are_invertible():
    for method in ("orthogonal", "identity"):
        w = init_projection(jax.random.key(0), 14, 14, method)
        np.testing.assert_allclose(gram(w), np.eye(14), atol=1e-5)
    with pytest.raises(ValueError, match="init method"):
        init_projection(jax.random.key(0), 14, 6, "svd")


def test_learning_rate_decays_linearly_over_first_half_then_stays():
    schedule = learning_rate_schedule(OptimizerConfig(), total_steps=1000)
    assert float(schedule(0)) == pytest.approx(1e-3)
    assert float(schedule(250)) == pytest.approx((1e-3 + 1e-6) / 2, rel=1e-5)
    assert float(schedule(500)) == pytest.approx(1e-6)
    assert float(schedule(999)) == pytest.approx(1e-6)


def test_warmup_cosine_schedule_rises_then_follows_a_cosine():
    config = OptimizerConfig(lr_init=1e-2, lr_final=1e-6, schedule="warmup_cosine", warmup_fraction=0.1)
    schedule = learning_rate_schedule(config, total_steps=1000)
    assert float(schedule(0)) == 0.0
    assert float(schedule(50)) == pytest.approx(5e-3, rel=1e-5)  # halfway up the warmup
    assert float(schedule(100)) == pytest.approx(1e-2, rel=1e-5)  # peak
    assert float(schedule(550)) == pytest.approx((1e-2 + 1e-6) / 2, rel=1e-4)  # cosine midpoint
    assert float(schedule(1000)) == pytest.approx(1e-6, rel=1e-4)
    with pytest.raises(ValueError, match="unknown schedule"):
        OptimizerConfig(schedule="step")
    with pytest.raises(ValueError, match="warmup_fraction"):
        OptimizerConfig(warmup_fraction=1.0)


def test_a_program_with_no_output_value_is_refused_before_any_compression():
    """A categorical program None at every position (a selector that never selects: `k > q` and
    `k < q`) compiles to an output with no value; a compression task of it is refused with the
    reason, not left to fail in an argmax over zero columns later."""
    from compression.task import make_task
    from rasp import rasp

    never = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.GT) & rasp.Select(
        rasp.indices, rasp.indices, rasp.Comparison.LT)
    program = rasp.Aggregate(never, rasp.tokens).named("never")
    with pytest.raises(ValueError, match="task 'never': the program's output has no values"):
        make_task("never", program, {1, 2, 3}, 4)
