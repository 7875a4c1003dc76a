"""Compressing a compiled loop (tied weights): analysed in the order it runs, trained as it runs."""

import numpy as np
import pytest

from compiler.model.tying import untied
from compression.analytic.packing import make_projection
from compression.analytic.structure import residual_structure
from compression.exactness import exactness_check
from compression.experiments.sweep import program_task
from compression.learned.config import GDRecipe
from compression.width_search import analytic_exact_width, claimed_width, gd_run


@pytest.fixture(scope="module")
def parity():
    task = program_task("parity_loop", 4)  # a loop of the catalogue: one tied block run 3 times
    assert task.compiled.config.tied is not None
    check = exactness_check(task)
    assert check.enumerated and check.is_exact(None)
    return task, check


def test_structure_of_a_loop_follows_the_executed_sub_layers(parity):
    task, _ = parity
    structure = residual_structure(task.compiled)
    flat = untied(task.compiled)
    assert structure.num_sublayers == len(task.compiled.config.layer_order) == len(flat.config.layers)
    assert structure.num_sublayers > len(task.compiled.config.layers)
    assert structure == residual_structure(flat)


def test_packed_projection_of_a_loop_is_exact_where_its_bound_claims(parity):
    task, check = parity
    structure = residual_structure(task.compiled)
    claimed = claimed_width(structure, "packed")
    assert claimed is not None and claimed < structure.residual_dim
    assert check.is_exact(make_projection(structure, "packed", claimed))


@pytest.mark.slow
def test_gd_compresses_a_loop_below_the_packed_width(parity):
    task, check = parity
    structure = residual_structure(task.compiled)
    packed = analytic_exact_width(check, structure, "packed")
    run, w = gd_run(check, packed - 1, GDRecipe(steps=1000, seeds=1), "orthogonal", structure)
    assert run.exact and np.shape(w) == (structure.residual_dim, packed - 1)
    assert check.is_exact(w)
