"""Compression of compiled library programs: identity exactness, a quick run, the experiments."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rasp
from compression.evaluation import accuracy, nearest_value_tolerance
from compression.experiments import frac_prevs as frac_prevs_experiment
from compression.experiments import sort_unique as sort_unique_experiment
from compression.learned.config import LossConfig, OptimizerConfig, TrainConfig
from compression.learned.losses import compression_loss
from compression.learned.projection import init_projection
from compression.learned.sampling import enumerate_inputs, sample_inputs
from compression.learned.train import Compressor
from compression.task import frac_prevs_task, make_task, sort_unique_task


@pytest.fixture(scope="module")
def frac_prevs():
    return frac_prevs_task()


@pytest.fixture(scope="module")
def sort_unique():
    return sort_unique_task()


def _library_tasks():
    lib = rasp.lib
    yield frac_prevs_task()
    yield sort_unique_task()
    yield make_task("reverse", lib.make_reverse(rasp.tokens), {"a", "b", "c"}, 6)
    yield make_task("length", lib.make_length(), {"a", "b"}, 7)


def test_paper_models_have_the_papers_sizes(frac_prevs):
    assert frac_prevs.model.residual_dim == 14
    assert {"is_x", "frac_prevs", "tokens:x", "one", "tokens:BOS"} <= set(frac_prevs.model.residual_labels)
    assert frac_prevs.model.output_kind == "numerical"


@pytest.mark.parametrize("task", list(_library_tasks()), ids=lambda t: t.name)
def test_identity_projection_reproduces_the_compiled_model_exactly(task):
    model = task.model
    ids = jnp.asarray(np.asarray(sample_inputs(jax.random.key(0), task.space, 64)))
    plain = model.forward(model.params, ids)
    squeezed = model.forward(model.params, ids, projection=jnp.eye(model.residual_dim))
    np.testing.assert_array_equal(np.asarray(squeezed.output), np.asarray(plain.output))
    assert len(squeezed.residuals) == len(plain.residuals)
    for a, b in zip(squeezed.residuals, plain.residuals):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    refs = task.reference_set(np.asarray(ids))
    atol = nearest_value_tolerance(refs) if model.output_kind == "numerical" else 0.5
    assert accuracy(model, np.eye(model.residual_dim, dtype=np.float32), refs, atol).position == 1.0


def test_square_orthogonal_projection_is_exact_up_to_rounding(sort_unique):
    model = sort_unique.model
    w = init_projection(jax.random.key(1), model.residual_dim, model.residual_dim, "orthogonal")
    ids = jnp.asarray(enumerate_inputs(sort_unique.space))
    plain = model.forward(model.params, ids)
    rotated = model.forward(model.params, ids, projection=w)
    for a, b in zip(rotated.residuals, plain.residuals):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-4)
    refs = sort_unique.reference_set(np.asarray(ids))
    assert accuracy(model, w, refs).position == 1.0


def test_the_exactness_objective_is_zero_where_every_value_is_read_right(sort_unique):
    # an orthogonal W reads every value right (up to rounding); the paper's objective is 0 there too,
    # but only the exactness objective stays 0 for an exact W that is not orthogonal (benchmarks/gd_objective.py)
    model = sort_unique.model
    ids = jnp.asarray(sample_inputs(jax.random.key(2), sort_unique.space, 64))
    w = init_projection(jax.random.key(3), model.residual_dim, model.residual_dim, "orthogonal")
    total, parts = compression_loss(w, model, ids, LossConfig.exact())
    assert float(total) == pytest.approx(0.0, abs=1e-4), parts
    narrow = init_projection(jax.random.key(3), model.residual_dim, model.residual_dim // 2, "orthogonal")
    assert float(compression_loss(narrow, model, ids, LossConfig.exact())[0]) > 1e-2


# 4000 steps at batch 128 with the exactness objective and a linear decay from lr 1e-2 over all the
# steps: at d = 8 every frac_prevs output lands within half the value gap of RASP's at >= 98% of
# positions (100% measured for seeds 0-7). The paper's objective and schedule (its lr reaches 1e-6
# halfway, so half the steps do nothing) gave 85-100% depending on the seed and the float rounding
# of the forward pass.
QUICK_D, QUICK_ACCURACY = 8, 0.98


def test_quick_run_reaches_the_stated_accuracy_on_frac_prevs(frac_prevs):
    config = TrainConfig(d=QUICK_D, steps=4000, batch_size=128, chunk_size=1000, seed=0, loss=LossConfig.exact(),
                         optimizer=OptimizerConfig(lr_init=1e-2, decay_fraction=1.0))
    result = Compressor(frac_prevs.model, frac_prevs.space, config).train(progress=False)
    refs = frac_prevs.reference_set(enumerate_inputs(frac_prevs.space))
    got = accuracy(frac_prevs.model, result.projection, refs, nearest_value_tolerance(refs))
    assert got.position >= QUICK_ACCURACY, got


def test_frac_prevs_experiment_quick_mode_writes_its_files(tmp_path):
    summary = frac_prevs_experiment.main(["--quick", "--out", str(tmp_path), "--no-progress", "--steps", "100"])
    names = {p.name for p in tmp_path.iterdir()}
    for name in ("frac_prevs_loss_curves.png", "frac_prevs_final_loss.png", "frac_prevs_wtw_d8.png",
                 "frac_prevs_pca_d8.png", "frac_prevs_widths.csv", "frac_prevs_features_d8.csv",
                 "frac_prevs_summary.json", "frac_prevs_projections.npz"):
        assert name in names
    saved = json.loads((tmp_path / "frac_prevs_summary.json").read_text())
    assert saved["paper"]["good_from_d"] == 6 and saved["ours"]["residual_dim"] == 14
    assert [row["d"] for row in saved["ours"]["widths"]] == list(frac_prevs_experiment.QUICK_WIDTHS)
    assert summary["ours"]["steps"] == 100
    with np.load(tmp_path / "frac_prevs_projections.npz", allow_pickle=False) as data:
        assert data["d8"].shape == (14, 8)


def test_sort_unique_experiment_quick_mode_writes_its_files(tmp_path):
    summary = sort_unique_experiment.main(["--quick", "--out", str(tmp_path), "--no-progress", "--steps", "100",
                                           "--chunk-size", "50"])
    names = {p.name for p in tmp_path.iterdir()}
    for name in ("sort_unique_training.png", "sort_unique_layer_outputs.png", "sort_unique_wtw.png",
                 "sort_unique_curve.csv", "sort_unique_variables.csv", "sort_unique_summary.json"):
        assert name in names
    assert len((tmp_path / "sort_unique_curve.csv").read_text().splitlines()) == 1 + 2  # header + 2 chunks
    assert summary["ours"]["largest_discrepancy"] in {v.split(":")[0] for v in summary["ours"]["residual_labels"]}
