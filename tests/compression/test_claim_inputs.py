"""The inputs claims are checked on, prepared once per model and shared by every width.

A sampled check (a space of more than 10^5 inputs) is the random inputs plus the first inputs
of a random pool on which the compiled model outputs a value the bound names tightest; these
tests rebuild that set directly (the whole pool run at once) and compare. Scoring pads a batch to
a shared shape; padded and unpadded scoring must give the same flags and totals."""

import jax.numpy as jnp
import numpy as np
import pytest

from compiler import compile_rasp
from compression import task_of
from compression.analytic import packed_projection, packed_width, random_projection, residual_structure
from compression.analytic.bound import interference_bound
from compression.claims import ENUMERATE_LIMIT, SAMPLES, TIGHTEST_POOL, claim_check, claim_exactness, claim_inputs
from compression.evaluation import accuracy, sequences_right
from compression.learned.sampling import distinct_inputs
from rasp import lib, rasp


@pytest.fixture(scope="module")
def sampled_task():
    program = lib.make_hist()
    task = task_of(compile_rasp(program, set(range(1, 9)), 6), program)
    assert task.space.size() > ENUMERATE_LIMIT
    return task


def _expected_extra(task, bound, seed):
    """The tightest inputs as the claim's definition states them: the whole pool run through the
    compiled model, the first SAMPLES of it whose output shows a tightest value at a real position,
    minus those already among the random inputs."""
    pool = distinct_inputs(task.space, TIGHTEST_POOL, seed + 1)
    out = np.asarray(task.model.forward(task.model.params, jnp.asarray(pool), outputs_only=True).output)
    real = pool != task.model.pad_id
    real[:, 0] = False
    hits = np.any(real & np.isin(out.argmax(-1), bound.tightest), axis=1)
    extra = pool[hits][:SAMPLES]
    random_ids = distinct_inputs(task.space, SAMPLES, seed)
    return extra[~(extra[:, None, :] == random_ids[None, :, :]).all(-1).any(-1)], random_ids


def test_shared_inputs_give_every_width_the_check_its_definition_names(sampled_task):
    task = sampled_task
    structure = residual_structure(task.compiled)
    shared = claim_inputs(task, seed=3)
    full = min(packed_width(structure), structure.residual_dim)
    projections = [packed_projection(structure, full), packed_projection(structure, full - 2),
                   random_projection(structure, full, 1)]
    seen_tightest = 0
    for w in projections:
        bound = interference_bound(structure, w)
        check, kind, tightest = claim_check(task, bound, seed=3, inputs=shared)
        extra, random_ids = _expected_extra(task, bound, 3)  # no tightest values: no extra inputs
        np.testing.assert_array_equal(check.refs.ids, np.concatenate([random_ids, extra]))
        assert tightest == len(extra)
        assert kind == "sampled"
        seen_tightest += tightest
        alone, _, alone_tightest = claim_check(task, bound, seed=3)  # built afresh, not shared
        np.testing.assert_array_equal(alone.refs.ids, check.refs.ids)
        np.testing.assert_array_equal(alone.refs.targets, check.refs.targets)
        np.testing.assert_array_equal(alone.refs.none, check.refs.none)
        assert alone_tightest == tightest and alone.atol == check.atol
        claim = claim_exactness(task, w, structure, seed=3, bound=bound, inputs=shared)
        assert claim.check.inputs == check.refs.checked and claim.check.tightest == tightest
    assert seen_tightest > 0  # the tightest inputs were exercised


def test_padded_scoring_gives_the_flags_and_totals_of_unpadded_scoring():
    """100 inputs are scored as one batch of 128 (padded) and, for comparison, one at a time."""
    program = lib.make_sort_unique(rasp.tokens, rasp.tokens)
    task = task_of(compile_rasp(program, {1, 2, 3, 4, 5}, 4), program, unique_tokens=True)
    structure = residual_structure(task.compiled)
    check, kind, _ = claim_check(task)
    assert kind == "exhaustive"
    refs = check.refs
    refs = type(refs)(refs.ids[:100], refs.targets[:100], refs.mask[:100], refs.kind, refs.none[:100],
                      refs.defined[:100])
    dim = structure.residual_dim
    w = np.random.default_rng(0).normal(size=(dim, dim - 3)).astype(np.float32) / np.sqrt(dim)  # wrong on some
    padded = sequences_right(task.model, w, refs)
    one_by_one = sequences_right(task.model, w, refs, batch_size=1)
    np.testing.assert_array_equal(padded, one_by_one)
    assert 0 < padded.sum() < len(padded)
    a, b = accuracy(task.model, w, refs), accuracy(task.model, w, refs, batch_size=1)
    assert a.sequence == b.sequence == padded.mean()
    assert a.position == pytest.approx(b.position, abs=1e-12)
