"""Analytic projections: their constructions, exact where the bound says so (all inputs).

That the bound holds sub-layer by sub-layer is tests/compression/test_bound.py."""

import dataclasses

import numpy as np
import pytest

from compression.analytic.bound import interference_bound
from compression.analytic.codes import code_overlap, exclusive_code, smallest_code
from compression.analytic.packing import min_width, packed_projection, packed_width, random_projection
from compression.analytic.structure import residual_structure
from compression.exactness import analytic_projection, exactness_check, never_on
from compression.experiments.sweep import program_task
from compression.learned.config import TrainConfig
from compression.learned.projection import gram
from compression.learned.train import Compressor

# Small sizes: every input is enumerated. Together they exercise every tolerant reader: value
# copies, lookups of margin weight 2 (Map) and 4 (SequenceMap), and the unembedding.
PROGRAMS = [("length", 4), ("reverse", 3), ("detect_abc", 4), ("sort", 3), ("nary_sum_mod_4", 3)]


@pytest.fixture(scope="module", params=PROGRAMS, ids=[f"{n}-{s}" for n, s in PROGRAMS])
def case(request):
    name, size = request.param
    task = program_task(name, size)
    check = exactness_check(task)
    assert check.enumerated
    return task, residual_structure(task.compiled), check


def test_packed_projection_is_exact_where_its_bound_claims(case):
    task, structure, check = case
    d = packed_width(structure)
    assert d < structure.residual_dim
    w, report = analytic_projection(task, "packed", d, check=check, structure=structure)
    assert report.claimed_exact and report.bound.max_load < 1.0
    assert report.measured_exact and report.sequence_accuracy == 1.0
    assert report.inputs_enumerated and report.inputs_checked == task.space.size()


@pytest.mark.parametrize("method", ["packed", "random"])
def test_every_claim_is_exact(case, method):
    """At the construction's narrowest width, halfway to D and the packed full-margin width: each
    width the bound calls exact is exact on every input."""
    task, structure, check = case
    lo = min_width(structure, method)
    claimed = 0
    for d in sorted({lo, (lo + structure.residual_dim) // 2, packed_width(structure)}):
        w = packed_projection(structure, d) if method == "packed" else random_projection(structure, d, seed=3)
        if interference_bound(structure, w).claims_exact:
            claimed += 1
            assert check.is_exact(w), d
    assert method == "random" or claimed


def test_alike_values_share_a_direction():
    """nary_sum_mod_4 at 4/4: (a + b + i) mod 4 is read from the pair (a, b) by the last MLP, which
    only the unembedding reads, so pairs with equal a + b mod 4 form a class and share one code
    vector; the last layer then writes its output up to 4 times (4 pairs per class), which the argmax
    ignores. Exact on all 340 inputs, narrower than with one vector per pair."""
    task = program_task("nary_sum_mod_4", 4)
    structure = residual_structure(task.compiled)
    labels = structure.labels
    pairs = [tuple(int(v) for v in labels[i].split(":")[1].strip("()").split(",")) for c in structure.classes for i in c]
    assert len(structure.classes) == 4 and len(pairs) == 16
    for members in structure.classes:
        sums = {sum(int(v) for v in labels[i].split(":")[1].strip("()").split(",")) % 4 for i in members}
        assert len(sums) == 1 and len(members) == 4
    amplified = {labels[i]: a for i, a in enumerate(structure.amplification_of()) if a != 1}
    assert amplified == {f"nary_sequence_map:{v}": 4.0 for v in range(4)}
    check = exactness_check(task)
    d = packed_width(structure)
    w, report = analytic_projection(task, "packed", d, check=check, structure=structure)
    assert report.claimed_exact and report.measured_exact and report.inputs_enumerated
    for members in structure.classes:
        assert all(np.array_equal(w[i], w[members[0]]) for i in members)
    apart = dataclasses.replace(structure, classes=(), amplification=())  # one vector per pair
    assert packed_width(apart) > d


def test_never_on_values_get_the_zero_row():
    """Enumerating nary_sum_mod_4 at 3/3 shows that only the pairs (a, a) occur (both inputs are
    the tokens): the other pairs are never on, and ``never_on`` turns them into zero rows."""
    task = program_task("nary_sum_mod_4", 3)
    check = exactness_check(task)
    dead = never_on(check)
    labels = task.model.residual_labels
    pairs = {labels[i].split(":")[1]: i for i in range(len(labels)) if labels[i].startswith("args_2")}
    off_diagonal = {pairs[f"({a}, {b})"] for a in range(3) for b in range(3) if a != b}
    assert off_diagonal <= set(dead) and not {pairs[f"({a}, {a})"] for a in range(3)} & set(dead)
    assert labels.index("one") not in dead and labels.index("tokens:0") not in dead
    structure = residual_structure(task.compiled, never_on=dead)
    assert set(dead) <= set(structure.unread)
    assert not set(dead) & {i for r in structure.reads for i in r.coords}
    d = packed_width(structure)
    w, report = analytic_projection(task, "packed", d, check=check, structure=structure)
    assert np.all(w[list(dead)] == 0) and report.measured_exact and report.claimed_exact
    assert d <= packed_width(residual_structure(task.compiled))


def test_protected_coordinates_are_read_exactly(case):
    task, structure, check = case
    d = packed_width(structure)
    g = gram(packed_projection(structure, d))
    protected = list(structure.protected)
    np.testing.assert_allclose(g[protected], np.eye(structure.residual_dim)[protected], atol=1e-6)
    labels = structure.labels
    assert labels.index("one") in protected and labels.index("tokens:BOS") in protected
    for i in structure.unread:
        assert np.all(g[i] == 0)


def test_query_key_and_numerical_coordinates_are_protected():
    task = program_task("frac_prevs", 4)  # numerical aggregate, numerical output
    structure = residual_structure(task.compiled)
    labels = structure.labels
    for label in ("frac_prevs", "is_x", "one", "tokens:BOS"):
        assert labels.index(label) in structure.protected
    assert all(labels[i].startswith("indices") or labels[i] in ("one", "tokens:BOS", "frac_prevs", "is_x")
               or labels[i].startswith("tokens") for i in structure.protected)
    assert not structure.reads  # a numerical output leaves no tolerant reader


def test_analytic_beats_nothing_below_protected_width():
    task = program_task("reverse", 3)
    structure = residual_structure(task.compiled)
    p = len(structure.protected)
    with pytest.raises(ValueError, match="protected coordinates"):
        random_projection(structure, p - 1)
    with pytest.raises(ValueError, match="packed projection needs d >="):
        packed_projection(structure, p)


def test_exclusive_codes():
    cross = exclusive_code(6, 3, one_sided=True)
    assert code_overlap(cross, one_sided=True) == 0.0
    pentagon = exclusive_code(5, 2, one_sided=True)
    assert code_overlap(pentagon, one_sided=True) < np.cos(2 * np.pi / 5) + 0.02
    np.testing.assert_allclose(np.linalg.norm(pentagon, axis=1), 1.0, atol=1e-9)
    assert smallest_code(5, 0.45, one_sided=True).shape == (5, 2)
    assert smallest_code(4, 0.2, one_sided=False).shape == (4, 4)
    with pytest.raises(ValueError, match="n >= 1"):
        exclusive_code(0, 2, one_sided=True)


@pytest.mark.parametrize("n, limit, one_sided", [(12, 0.3, True), (20, 0.45, True), (33, 0.6, False)])
def test_smallest_code_finds_the_width_a_scan_from_one_finds(n, limit, one_sided):
    """The doubling-and-bisecting search gives the width (and the code) of a scan k = 1, 2, ..."""
    scan = next(k for k in range(1, n + 1)
                if code_overlap(exclusive_code(n, k, one_sided), one_sided) <= limit)
    code = smallest_code(n, limit, one_sided)
    assert code.shape == (n, scan)
    np.testing.assert_array_equal(code, exclusive_code(n, scan, one_sided))


def test_compressor_starts_from_a_given_projection():
    task = program_task("length", 3)
    structure = residual_structure(task.compiled)
    d = packed_width(structure)
    w = packed_projection(structure, d)
    compressor = Compressor(task.model, task.space, TrainConfig(d=d, steps=10, chunk_size=10), initial_projection=w)
    np.testing.assert_array_equal(np.asarray(compressor.init_state().projection), w)
    with pytest.raises(ValueError, match="initial_projection has shape"):
        Compressor(task.model, task.space, TrainConfig(d=d + 1, steps=10), initial_projection=w)


def test_project_returns_the_projection_with_its_bound_and_checked_claim():
    """`compression.project`: the one way from a model to a W with its claim. The packed default
    width is the full-margin one (at most D); a given width and the random method are honoured."""
    from compiler import compile_rasp
    from compiler.errors import CompressionError
    from compression import project, task_of
    from rasp import lib, rasp

    program = lib.make_sort_unique(rasp.tokens, rasp.tokens)
    task = task_of(compile_rasp(program, {1, 2, 3, 4}, 4), program)
    found = project(task)
    structure = found.structure
    assert found.d == min(packed_width(structure), structure.residual_dim) == found.claim.d
    np.testing.assert_array_equal(found.w, packed_projection(structure, found.d))
    assert found.claim.bound_claims == found.bound.claims_exact
    assert found.claim.exact and found.claim.check.kind == "exhaustive" and found.claim.check.inputs == 340
    narrow = project(task, "random", width=found.d - 1, seed=3)
    assert narrow.method == "random" and narrow.d == found.d - 1 and narrow.claim.check.inputs == 340
    with pytest.raises(CompressionError, match="unknown analytic method"):
        project(task, "pca")
