"""Fixtures shared across the test packages.

pytest puts this folder on `sys.path` (it holds a conftest and no `__init__.py`), so every test
imports its plain helpers with `from support import ...`.
"""

from __future__ import annotations

import pytest
from support import example_model


@pytest.fixture(scope="session")
def frac_prevs_literal():
    """`frac_prevs` compiled without optimisation: two layers (one can be cut off), a head-less
    attention sub-layer, an empty MLP and a numerical output."""
    return example_model("frac_prevs", optimize=False)


@pytest.fixture(scope="session")
def sort_unique_model():
    """`sort_unique` compiled with its example vocabulary: integer tokens, categorical output."""
    return example_model("sort_unique")


@pytest.fixture(scope="session")
def reverse_4_model():
    """`reverse` over {a, b, c, d} at length 4 (340 inputs in all): three attention blocks, the
    middle one head-less (a padded head in TransformerLens), a categorical output."""
    from compiler import compile_rasp
    from rasp import lib, rasp

    return compile_rasp(lib.make_reverse(rasp.tokens), {"a", "b", "c", "d"}, 4)
