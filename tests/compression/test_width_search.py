"""GD width search: the downward scan, the GD starts, the recipe record."""

import jax.numpy as jnp
import numpy as np
import pytest

from compression.analytic.packing import packed_projection, packed_width
from compression.analytic.structure import residual_structure
from compression.exactness import exactness_check
from compression.experiments.sweep import program_task
from compression.learned.config import GDRecipe, LossConfig, OptimizerConfig, TrainConfig
from compression.learned.projection import gram
from compression.width_search import (
    gd_fade_run,
    gd_shrink_scan,
    gd_start,
    gd_width_scan,
    scan_down,
    scan_from,
    smallest_exact,
    truncated_projection,
)


def test_scan_down_is_honest_when_exactness_is_not_monotone():
    exact = {15, 14, 12, 9}  # 13, 11 and 10 fail: a binary search over 8..15 would miss 9 or report 12 wrongly
    calls = []

    def reaches(d):
        calls.append(d)
        return d in exact

    tried, reached = scan_down(range(15, 7, -1), reaches, patience=3)
    assert tried == [15, 14, 13, 12, 11, 10, 9, 8] and reached == [15, 14, 12, 9]
    tried, reached = scan_down(range(15, 7, -1), lambda d: d in exact, patience=2)
    assert tried == [15, 14, 13, 12, 11, 10] and reached == [15, 14, 12]  # stops after 11 and 10 fail
    assert smallest_exact(lambda d: d in exact, 8, 15) == 14  # binary search: 11 fails, then 13 fails
    with pytest.raises(ValueError, match="patience"):
        scan_down([3], lambda d: True, patience=0)


def test_scan_from_a_start_goes_up_until_reached_then_down():
    exact = {15, 14, 12, 9, 8}
    assert scan_from(12, 1, 15, lambda d: d in exact, patience=2) == ([12, 11, 10], [12])
    assert scan_from(12, 1, 15, lambda d: d in exact, patience=3) == ([12, 11, 10, 9, 8, 7, 6, 5], [12, 9, 8])
    # upwards it goes on until a width is reached; the two misses on the way use up patience 2
    assert scan_from(10, 1, 15, lambda d: d in exact, patience=2) == ([10, 11, 12], [12])
    assert scan_from(10, 1, 15, lambda d: d in exact, patience=3) == ([10, 11, 12, 9, 8, 7, 6, 5], [12, 9, 8])
    assert scan_from(13, 1, 13, lambda d: False) == ([13], [])  # nothing above to try
    with pytest.raises(ValueError, match="outside"):
        scan_from(16, 1, 15, lambda d: True)


def test_recipe_builds_the_trainer_config():
    recipe = GDRecipe(steps=600, check_every=250, seeds=2)
    config = recipe.train_config(7, seed=3)
    assert config == TrainConfig(d=7, steps=600, batch_size=256, chunk_size=250, seed=3,
                                 optimizer=recipe.optimizer, loss=recipe.loss, sampling=recipe.sampling)
    assert recipe.optimizer.schedule == "warmup_cosine" and recipe.optimizer.lr_init == 1e-2
    assert recipe.optimizer.weight_decay == 0.1 and recipe.loss == LossConfig.exact(balance_outputs=True)
    assert recipe.loss.written_margin and recipe.sampling.replay_fraction == 0.1
    assert GDRecipe(steps=100, check_every=250).train_config(5, 0).chunk_size == 100
    with pytest.raises(ValueError, match="seeds"):
        GDRecipe(seeds=0)


def test_truncated_projection_keeps_the_best_rank_d_gram():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(12, 7))
    t = truncated_projection(w, 4)
    assert t.shape == (12, 4)
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    best = (u[:, :4] * s[:4] ** 2) @ u[:, :4].T  # Eckart-Young: the best rank-4 approximation of W Wᵀ
    np.testing.assert_allclose(gram(t), best, atol=1e-5)
    np.testing.assert_allclose(truncated_projection(w, 9)[:, :7], w, atol=1e-6)  # wider: zero-padded
    assert not truncated_projection(w, 9)[:, 7:].any()


def test_gd_starts():
    task = program_task("length", 3)
    structure = residual_structure(task.compiled)
    full = packed_width(structure)
    w, name = gd_start("packed", full, structure)
    np.testing.assert_array_equal(w, packed_projection(structure, full))
    assert name == "packed"
    assert gd_start("packed", 2, structure)[1] == "orthogonal (packed needs more width)"
    assert gd_start("orthogonal", 5, structure) == (None, "orthogonal")
    p = len(structure.protected)
    w, name = gd_start("packed_truncated", p + 1, structure)
    assert w.shape == (structure.residual_dim, p + 1) and name == "packed_truncated"
    full_w = packed_projection(structure, full)
    np.testing.assert_array_equal(w[:, :p], full_w[:, :p])  # protected axes kept
    np.testing.assert_allclose(w[:, p:], truncated_projection(full_w[:, p:], 1), atol=1e-6)
    assert gd_start("packed_truncated", p, structure)[1] == "orthogonal (truncated packed needs more width)"
    with pytest.raises(ValueError, match="unknown init"):
        gd_start("svd", 5, structure)
    with pytest.raises(ValueError, match="ResidualStructure"):
        gd_start("packed", 5, None)


def test_gd_scan_reports_every_run_and_the_smallest_width_reached():
    task = program_task("length", 3)
    structure = residual_structure(task.compiled)
    check = exactness_check(task)
    d_packed = packed_width(structure)
    recipe = GDRecipe(steps=100, check_every=50, seeds=2, optimizer=OptimizerConfig(lr_init=1e-2, weight_decay=0.0))
    scan = gd_width_scan(check, [d_packed, d_packed - 1], recipe, "packed", structure, patience=1)
    first = scan.runs[0]
    assert (first.d, first.exact, first.steps_to_exact, first.steps) == (d_packed, True, 0, 0)  # starts exact
    assert scan.tried[0] == d_packed and scan.smallest == min(scan.reached) <= d_packed
    assert scan.median_steps_to_exact(d_packed) == 0.0
    for d in scan.tried:  # a width is reached iff one of its runs is exact; at most `seeds` runs per width
        mine = [r for r in scan.runs if r.d == d]
        assert 1 <= len(mine) <= 2 and (d in scan.reached) == any(r.exact for r in mine)
        assert all(r.steps_to_exact % 50 == 0 for r in mine if r.exact)


def test_shrink_scan_fades_one_column_per_width():
    task = program_task("length", 3)
    structure = residual_structure(task.compiled)
    check = exactness_check(task)
    d_packed = packed_width(structure)
    w = packed_projection(structure, d_packed)
    recipe = GDRecipe(steps=100, check_every=50, seeds=2)
    run, narrower = gd_fade_run(check, w, recipe, seed=0, fade_fraction=0.5)
    assert run.d == d_packed - 1 and narrower.shape == (structure.residual_dim, d_packed - 1)
    assert run.init == "packed_shrink" and run.steps in (50, 100)  # never checked before the fade ends
    assert run.exact == check.is_exact(narrower) and (run.steps_to_exact or 50) >= 50
    scan = gd_shrink_scan(check, w, recipe, patience=1, lo=d_packed - 3)
    assert list(scan.tried) == list(range(d_packed - 1, d_packed - 1 - len(scan.tried), -1))
    assert len(scan.tried) <= 3 and set(scan.reached) <= set(scan.tried)
    for d in scan.tried:
        mine = [r for r in scan.runs if r.d == d]
        assert 1 <= len(mine) <= 2 and (d in scan.reached) == any(r.exact for r in mine)
    if len(scan.tried) < 3:  # stopped early: the last width tried was not reached (patience 1)
        assert scan.tried[-1] not in scan.reached


def test_wrong_inputs_are_those_with_a_position_unlike_rasp():
    """An input is wrong when a position decodes unlike RASP, as the model's decoder reads it:
    the argmax, or None when every logit is below the threshold 1/2."""
    from compression.analytic.packing import random_projection
    from compression.evaluation import EMPTY_THRESHOLD

    task = program_task("length", 3)
    check = exactness_check(task)
    assert check.wrong_inputs(None).size == 0
    structure = residual_structure(task.compiled)
    w = random_projection(structure, len(structure.protected) + 1, seed=1)  # one shared dimension: 12 of 39 wrong
    out = np.asarray(task.model.forward(task.model.params, jnp.asarray(check.refs.ids), projection=jnp.asarray(w)).output)
    shown = out.max(-1) >= EMPTY_THRESHOLD
    right = np.where(check.refs.none > 0, ~shown, shown & (out.argmax(-1) == check.refs.targets))
    differs = (~right & (check.refs.scored > 0)).any(axis=1)
    wrong = check.wrong_inputs(w)
    assert 0 < len(wrong) < check.size
    np.testing.assert_array_equal(wrong, np.nonzero(differs)[0])
    assert len(wrong) / check.size == 1 - check.sequence_accuracy(w)


