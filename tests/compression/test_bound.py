"""The interference bound is sound: every sub-layer's measured error lies within the interval the
bound walks, on every input, and a claim of exactness is exact.

The measured error of sub-layer l is what the compressed model writes (``ModelOutput.written``,
in residual coordinates, before W) minus what the compiled model writes (the same pass with
``W = I``, whose reads and writes are exact), summed over the sub-layers so far: exactly the
``E`` the bound bounds (besides the amplification of merged classes, which its reference
includes). Categorical coordinates are compared with the on interval where the
compiled value is on (> 1/2) and the off interval elsewhere; a part proportional to the value
(``Errors.scale_*``) is added at the compiled value. The comparison needs no tolerance: both
sides are float64 renderings of the same float32 numbers, so 1e-12 absorbs the float64 sums only.
"""

import pytest
from bound_check import assert_within, task_of

from compression.analytic import packed_projection, packed_width, random_projection, residual_structure
from compression.analytic.bound import interference_bound, walk
from compression.exactness import exactness_check

CASES = [("reverse", 3, True, False), ("sort", 3, True, False), ("sort_freq", 3, True, False),
         ("count_less_freq", 3, True, True), ("dyck1", 4, True, False), ("nary_sum_mod_4", 3, True, False),
         ("frac_prevs", 3, False, False), ("detect_abc", 3, False, True), ("length", 4, True, True)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{s}{'-opt' if o else ''}{'-causal' if c else ''}" for n, s, o, c in CASES])
def case(request):
    name, size, optimize, causal = request.param
    task = task_of(name, size, optimize, causal)
    check = exactness_check(task)
    assert check.enumerated
    return task, residual_structure(task.compiled), check


def test_measured_errors_stay_within_the_bound(case):
    """At the packed projection's narrowest width, its full-margin width and a random
    projection, on every input: the walked intervals hold every sub-layer's error, and a claim
    of exactness is exact."""
    task, structure, check = case
    widths = sorted({packed_width(structure), len(structure.protected) + len(structure.groups)})
    projections = [packed_projection(structure, d) for d in widths if d <= structure.residual_dim]
    projections.append(random_projection(structure, max(packed_width(structure), len(structure.protected) + 1), seed=5))
    for w in projections:
        assert_within(task, structure, w, check.refs.ids)
        if interference_bound(structure, w).claims_exact:
            assert check.is_exact(w), (task.name, w.shape)


def test_the_compiled_model_is_exact_by_its_own_noise(case):
    """Walked without a projection (the compiled float32 model against exact arithmetic), the
    unembedding decodes every input right: the derived noise leaves the compiled model exact."""
    from compression.analytic.bound import unembedding_load

    task, structure, _ = case
    view = structure.view
    found = walk(view, None)
    output = unembedding_load(view, None, found.errors)
    assert output.load < 1.0, (task.name, output.load)
