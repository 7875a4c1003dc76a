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
