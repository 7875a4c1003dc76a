"""Training on the hand-built fake: determinism, learning, checkpoint and resume."""

import dataclasses
import json

import compression_fake as fake
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compression.learned import checkpoint
from compression.learned.config import OptimizerConfig, TrainConfig
from compression.learned.losses import compression_loss
from compression.learned.train import Compressor, column_scale

CONFIG = TrainConfig(d=10, steps=120, batch_size=32, chunk_size=20, seed=7, optimizer=OptimizerConfig(lr_init=1e-2))


MODEL = fake.frozen_model()


def _train(config=CONFIG, **kwargs):
    return Compressor(MODEL, fake.input_space(), config).train(progress=False, **kwargs)


def test_training_is_deterministic_for_a_seed_and_varies_with_it():
    a, b = _train(), _train()
    np.testing.assert_array_equal(a.projection, b.projection)
    np.testing.assert_array_equal(a.history["total"], b.history["total"])
    c = _train(TrainConfig(**{**CONFIG.__dict__, "seed": 8}))
    assert not np.array_equal(a.projection, c.projection)


def test_training_reduces_the_loss_and_records_every_step():
    result = _train()
    assert result.finished and result.steps_done == CONFIG.steps
    assert result.projection.shape == (MODEL.residual_dim, CONFIG.d)
    for name in ("out", "layer", "total"):
        assert result.history[name].shape == (CONFIG.steps,)
    assert result.history["total"][-20:].mean() < 0.5 * result.history["total"][:5].mean()


def test_interrupted_run_resumes_to_the_identical_projection(tmp_path):
    reference = _train()
    partial = _train(checkpoint_dir=tmp_path, max_chunks=2, checkpoint_every=1)
    assert not partial.finished and partial.steps_done == 40
    record = json.loads((tmp_path / checkpoint.RECORD_FILE).read_text())
    assert record["step"] == 40 and record["config"]["d"] == CONFIG.d
    resumed = _train(checkpoint_dir=tmp_path)
    assert resumed.finished
    np.testing.assert_array_equal(resumed.projection, reference.projection)
    np.testing.assert_array_equal(resumed.history["total"], reference.history["total"])
    # a finished checkpoint resumes to the same result without training
    again = _train(checkpoint_dir=tmp_path)
    np.testing.assert_array_equal(again.projection, reference.projection)


def test_checkpoint_is_not_pickle_and_leaves_no_temporaries(tmp_path):
    _train(checkpoint_dir=tmp_path, max_chunks=1)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [checkpoint.RECORD_FILE, checkpoint.CHECKPOINT_FILE]
    assert not (tmp_path / checkpoint.CHECKPOINT_FILE).read_bytes().startswith(b"\x80")


def test_resume_with_a_different_config_is_refused(tmp_path):
    _train(checkpoint_dir=tmp_path, max_chunks=1)
    with pytest.raises(ValueError, match="different config"):
        _train(TrainConfig(**{**CONFIG.__dict__, "d": 9}), checkpoint_dir=tmp_path)


def test_callback_can_stop_training_early():
    seen = []

    def stop_after_two(state, history):
        seen.append(len(history["total"]))
        return len(seen) == 2

    result = _train(on_chunk=stop_after_two)
    assert seen == [20, 40] and result.steps_done == 40 and not result.finished


def test_batch_must_split_across_devices():
    from compression.learned.sharding import data_parallel

    parallel = data_parallel()
    parallel.check_batch(parallel.num_devices * 3)
    if parallel.num_devices > 1:
        with pytest.raises(ValueError, match="divisible"):
            parallel.check_batch(parallel.num_devices + 1)


def test_checkpoint_written_before_new_config_fields_still_resumes(tmp_path):
    from safetensors.numpy import load_file, save_file

    reference = _train()
    _train(checkpoint_dir=tmp_path, max_chunks=2, checkpoint_every=1)
    path = tmp_path / checkpoint.CHECKPOINT_FILE
    record = checkpoint.read_record(tmp_path)
    for field in ("schedule", "warmup_fraction"):  # as an older version wrote it
        del record["config"]["optimizer"][field]
    save_file(load_file(str(path)), str(path), metadata={"record": json.dumps(record)})
    assert "schedule" not in checkpoint.read_record(tmp_path)["config"]["optimizer"]
    resumed = _train(checkpoint_dir=tmp_path)
    np.testing.assert_array_equal(resumed.projection, reference.projection)


def test_faded_columns_fall_to_zero_and_stop_counting():
    """``fade_columns``: the last columns enter the loss scaled by 1 - step / fade_steps, then 0."""
    config = dataclasses.replace(CONFIG, fade_columns=2, fade_fraction=0.5)
    assert config.fade_steps == 60
    np.testing.assert_allclose(np.asarray(column_scale(10, (2, 60), 15)), [1.0] * 8 + [0.75, 0.75])
    np.testing.assert_allclose(np.asarray(column_scale(10, (2, 60), 90)), [1.0] * 8 + [0.0, 0.0])
    np.testing.assert_array_equal(np.asarray(column_scale(4, (0, 0), 5)), np.ones(4))
    compressor = Compressor(MODEL, fake.input_space(), config)
    result = compressor.train(progress=False)
    assert np.all(result.projection[:, 8:] == 0)  # the result is the W the model uses
    state = compressor.init_state()._replace(projection=jnp.asarray(result.projection),
                                             step=jnp.asarray(config.steps, jnp.int32))
    effective = compressor.effective_projection(state)
    assert np.all(effective[:, 8:] == 0) and np.array_equal(effective[:, :8], result.projection[:, :8])
    # after the fade the loss no longer depends on the faded columns: what it learned is a width-8 W
    ids = jnp.asarray(np.stack([fake.input_space().token_ids[:3]] * 4))
    ids = jnp.concatenate([jnp.full((4, 1), fake.input_space().bos_id), ids], axis=1)
    moved = result.projection.copy()
    moved[:, 8:] += 1.0
    a = compression_loss(jnp.asarray(effective), MODEL, ids, CONFIG.loss)[0]
    b = compression_loss(jnp.asarray(moved) * column_scale(10, (2, 60), config.steps), MODEL, ids, CONFIG.loss)[0]
    assert float(a) == float(b)
    with pytest.raises(ValueError, match="fade_columns"):
        TrainConfig(d=3, fade_columns=3)
    with pytest.raises(ValueError, match="fade_fraction"):
        TrainConfig(d=3, fade_columns=1, fade_fraction=0.0)


def test_a_padded_width_trains_the_same_w_and_compiles_once_for_every_d():
    """``TrainConfig.width``: W held with zero columns beyond d trains the same [D, d] W (up to
    float summation order), and runs at two different d share one compiled training chunk."""
    from compression.learned.train import _run_chunk

    config = dataclasses.replace(CONFIG, d=6, steps=40)
    plain = _train(config)
    width = MODEL.residual_dim
    padded = _train(dataclasses.replace(config, width=width))
    assert padded.projection.shape == plain.projection.shape == (width, 6)
    np.testing.assert_allclose(padded.projection, plain.projection, atol=1e-4)
    np.testing.assert_allclose(padded.history["total"], plain.history["total"], rtol=1e-4, atol=1e-6)
    compiled = _run_chunk._cache_size()
    narrower = _train(dataclasses.replace(config, d=4, width=width))
    assert _run_chunk._cache_size() == compiled and narrower.projection.shape == (width, 4)
    with pytest.raises(ValueError, match="width must be >= d"):
        TrainConfig(d=5, width=4)


def test_replay_inputs_fill_their_share_of_every_batch_and_none_change_nothing():
    """``SamplingConfig.replay_fraction``: that share of each batch comes from the rows given to
    ``set_replay``; with no rows the run is the plain one, bit for bit."""
    from compression.learned.config import SamplingConfig
    from compression.learned.train import Replay

    space = fake.input_space()
    row = np.asarray([[space.bos_id, 3, 3, 0, space.pad_id, space.pad_id]], np.int32)
    replay = Replay.of(row, capacity=4, width=space.width)
    assert int(replay.filled) == 1 and replay.ids.shape == (4, space.width)
    batch = jnp.zeros((8, space.width), jnp.int32)
    mixed = np.asarray(replay.mix(jax.random.key(0), batch, 3))
    assert (mixed[:3] == row).all() and (mixed[3:] == 0).all()
    empty = Replay.of(np.zeros((0, space.width)), capacity=4, width=space.width)
    assert (np.asarray(empty.mix(jax.random.key(0), batch, 3)) == 0).all()
    many = Replay.of(np.arange(10 * space.width).reshape(10, space.width), capacity=4, width=space.width, seed=1)
    assert int(many.filled) == 4  # a seeded choice of 4 of the 10 rows
    assert set(np.asarray(many.ids)[:, 0] // space.width) <= set(range(10))

    config = dataclasses.replace(CONFIG, sampling=SamplingConfig(replay_fraction=0.25))
    assert config.sampling.replay_rows(config.batch_size) == 8
    np.testing.assert_array_equal(_train(config).projection, _train().projection)
    replayed = Compressor(MODEL, space, config)
    replayed.set_replay(row)
    assert not np.array_equal(replayed.train(progress=False).projection, _train().projection)
    with pytest.raises(ValueError, match="replay_fraction"):
        SamplingConfig(replay_fraction=1.0)
