"""Fixtures shared across the test packages.

pytest puts this folder on `sys.path` (it holds a conftest and no `__init__.py`), so every test
imports its plain helpers with `from support import ...`.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from support import example_model

# The test run keeps JAX's compiled executables in one fresh folder that every xdist worker reads
# and writes: many tests compile models of the same shapes (the same program, the same library
# example, the same padded widths), and loading an executable costs milliseconds where compiling
# it costs up to a second. Measured on tests/compression, 2 workers, cold folder: 198 s without,
# 157 s with. The folder is made by the controlling process and removed when the run ends.
_CACHE_VARIABLE = "TRACR_COMPILE_TEST_JAX_CACHE"
_OWNED = pytest.StashKey[str]()  # the folder, in the process that made it


def pytest_configure(config: pytest.Config) -> None:
    from compiler.model.jit_cache import enable_compilation_cache

    if not hasattr(config, "workerinput") and _CACHE_VARIABLE not in os.environ:
        os.environ[_CACHE_VARIABLE] = tempfile.mkdtemp(prefix="tracr-compile-test-jax-")
        config.stash[_OWNED] = os.environ[_CACHE_VARIABLE]
    enable_compilation_cache(os.environ[_CACHE_VARIABLE])


def pytest_unconfigure(config: pytest.Config) -> None:
    owned = config.stash.get(_OWNED, None)
    if owned is not None:
        shutil.rmtree(owned, ignore_errors=True)
        os.environ.pop(_CACHE_VARIABLE, None)



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
