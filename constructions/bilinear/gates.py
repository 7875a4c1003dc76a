"""Exact boolean functions from one bilinear layer.

On ``{0,1}^n`` a function is a multilinear polynomial ``sum_S a_S prod_{i in S} x_i`` (the
Möbius coefficients).  One bilinear layer with readout all-ones computes any quadratic form of
``h~ = (x, 1)``, which on booleans is exactly a polynomial of degree <= 2.  So a function is
exact iff every coefficient of degree >= 3 vanishes; the layer comes from eigendecomposing the
symmetric matrix of the form, with one neuron per non-zero eigenvalue.

Truth tables list ``f`` in ``itertools.product((0, 1), repeat=n)`` order (first input most
significant), e.g. ``(f(0,0), f(0,1), f(1,0), f(1,1))``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from constructions.bilinear.layer import BilinearLayer

# ``f(z)`` for every boolean input ``z`` in `boolean_inputs` order (any sequence of numbers).
TruthTable = Sequence[float] | np.ndarray


def boolean_inputs(n: int) -> np.ndarray:
    """All ``2^n`` inputs as rows, in truth-table order."""
    return np.array(list(itertools.product((0.0, 1.0), repeat=n)))


def mobius_coefficients(truth_table: TruthTable) -> dict[frozenset, float]:
    """``a_S = sum_{T subset S} (-1)^{|S|-|T|} f(1_T)`` for every subset ``S`` of the inputs."""
    table = np.asarray(truth_table, dtype=np.float64)
    n = int(round(np.log2(len(table))))
    if 2 ** n != len(table):
        raise ValueError(f"truth table length {len(table)} is not a power of two")
    points = boolean_inputs(n)
    coeffs = {}
    for subset in itertools.chain.from_iterable(itertools.combinations(range(n), k)
                                                for k in range(n + 1)):
        total = 0.0
        for row, value in zip(points, table):
            on = {i for i in range(n) if row[i] == 1.0}
            if on <= set(subset):
                total += (-1) ** (len(subset) - len(on)) * value
        coeffs[frozenset(subset)] = total
    return coeffs


def top_coefficient(truth_table: TruthTable) -> float:
    """``sum_z (-1)^{n-|z|} f(z)``: the coefficient of the full product ``x_1 ... x_n``."""
    coeffs = mobius_coefficients(truth_table)
    return coeffs[max(coeffs, key=len)]


def quadratic_form(truth_table: TruthTable, tol: float = 1e-12) -> np.ndarray:
    """Symmetric ``M`` with ``(x, 1) M (x, 1) = f(x)`` on booleans; raises above degree 2."""
    coeffs = mobius_coefficients(truth_table)
    n = max(len(s) for s in coeffs)
    high = {tuple(sorted(s)): a for s, a in coeffs.items() if len(s) > 2 and abs(a) > tol}
    if high:
        raise ValueError(f"function has degree > 2 (coefficients {high}); one bilinear layer "
                         "cannot compute it exactly")
    m = np.zeros((n + 1, n + 1))
    for subset, a in coeffs.items():
        idx = sorted(subset)
        if not idx:
            m[n, n] += a
        elif len(idx) == 1:
            m[idx[0], n] += a / 2
            m[n, idx[0]] += a / 2
        else:
            m[idx[0], idx[1]] += a / 2
            m[idx[1], idx[0]] += a / 2
    return m


def layer_from_form(form: np.ndarray, tol: float = 1e-10) -> BilinearLayer:
    """Bilinear layer (readout all-ones) with ``sum_o out_o = h~ M h~``; width ``rank(M)``.

    The last row/column of ``M`` belongs to the constant input.
    """
    eigvals, eigvecs = np.linalg.eigh(form)
    keep = np.abs(eigvals) > tol
    left = eigvecs[:, keep] * eigvals[keep][None]
    right = eigvecs[:, keep]
    return BilinearLayer(left[:-1], right[:-1], left[-1], right[-1])


@dataclass(frozen=True)
class BooleanBilinear:
    """A bilinear layer and its readout computing one boolean function exactly."""

    layer: BilinearLayer
    readout: np.ndarray

    @property
    def width(self) -> int:
        return self.layer.d_hidden

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.layer(np.asarray(x, dtype=np.float64)) @ self.readout


def exact_boolean(truth_table: TruthTable) -> BooleanBilinear:
    """One bilinear layer computing ``f`` exactly (``f`` of degree <= 2)."""
    layer = layer_from_form(quadratic_form(truth_table))
    return BooleanBilinear(layer, np.ones(layer.d_hidden))


def max_error(gate: BooleanBilinear, truth_table: TruthTable) -> float:
    """Largest ``|gate(x) - f(x)|`` over all boolean inputs."""
    table = np.asarray(truth_table, dtype=np.float64)
    n = int(round(np.log2(len(table))))
    return float(np.abs(gate(boolean_inputs(n)) - table).max())


def quadratic_fit_residual(truth_table: TruthTable) -> float:
    """Least-squares residual of ``f`` on the monomials of degree <= 2 (0 iff exact)."""
    table = np.asarray(truth_table, dtype=np.float64)
    n = int(round(np.log2(len(table))))
    x = boolean_inputs(n)
    columns = [np.ones(len(x))] + [x[:, i] for i in range(n)]
    columns += [x[:, i] * x[:, j] for i, j in itertools.combinations(range(n), 2)]
    basis = np.stack(columns, axis=1)
    coef, *_ = np.linalg.lstsq(basis, table, rcond=None)
    return float(np.linalg.norm(basis @ coef - table))


def all_truth_tables(n: int) -> tuple[tuple[int, ...], ...]:
    """Every boolean function of ``n`` inputs (``2^(2^n)`` tables)."""
    return tuple(itertools.product((0, 1), repeat=2 ** n))


@dataclass(frozen=True)
class TableEntry:
    """Exactness of one function: constructed width and error if exact, fit residual if not."""

    truth_table: tuple[int, ...]
    top_coefficient: float
    exact: bool
    width: int | None
    error: float | None
    fit_residual: float


def exactness_table(n: int, tol: float = 1e-9) -> tuple[TableEntry, ...]:
    """For every function of ``n`` inputs: build the layer when possible and verify it.

    "exact" means the constructed layer reproduces the table to ``tol``; for the rest the
    degree-<=2 least-squares residual shows that no bilinear layer can.
    """
    entries = []
    for table in all_truth_tables(n):
        residual = quadratic_fit_residual(table)
        try:
            gate = exact_boolean(table)
        except ValueError:
            gate = None
        error = max_error(gate, table) if gate is not None else None
        entries.append(TableEntry(table, top_coefficient(table), error is not None and error < tol,
                                  gate.width if gate is not None else None, error, residual))
    return tuple(entries)


def single_neuron_and() -> BooleanBilinear:
    """``x * y``."""
    return BooleanBilinear(BilinearLayer.without_bias([[1.0], [0.0]], [[0.0], [1.0]]),
                           np.ones(1))


def single_neuron_xor() -> BooleanBilinear:
    """``(x - y)^2``: no bias needed."""
    return BooleanBilinear(BilinearLayer.without_bias([[1.0], [-1.0]], [[1.0], [-1.0]]),
                           np.ones(1))


def single_neuron_or() -> BooleanBilinear:
    """``(x + y) * (3/2 - x/2 - y/2)``."""
    layer = BilinearLayer(np.array([[1.0], [1.0]]), np.array([[-0.5], [-0.5]]),
                          np.zeros(1), np.array([1.5]))
    return BooleanBilinear(layer, np.ones(1))


AND3 = (0, 0, 0, 0, 0, 0, 0, 1)
PARITY3 = (0, 1, 1, 0, 1, 0, 0, 1)
MAJORITY3 = (0, 0, 0, 1, 0, 1, 1, 1)
