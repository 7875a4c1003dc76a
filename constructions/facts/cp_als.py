"""Numerical CP (canonical polyadic) fits of three-tensors by alternating least squares.

A small residual at rank ``r`` shows ``rank <= r`` up to numerical error; a large residual
shows only that this fitter found nothing better.  No function here claims an exact rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from constructions.facts.db_rank import RankOneTerms


@dataclass(frozen=True)
class CPFit:
    """Best fit found at one rank: residual ``||T - fit||_F`` and relative residual."""

    rank: int
    residual: float
    relative_residual: float
    terms: RankOneTerms


def _khatri_rao(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Column-wise Kronecker product of ``(I, R)`` and ``(J, R)`` -> ``(I*J, R)``."""
    return np.einsum("ir,jr->ijr", x, y).reshape(-1, x.shape[1])


def _als_once(tensor: np.ndarray, rank: int, rng: np.random.Generator, n_iter: int,
              tol: float, ridge: float) -> tuple[float, list[np.ndarray]]:
    dims = tensor.shape
    factors = [rng.standard_normal((d, rank)) for d in dims]
    unfold = [np.moveaxis(tensor, mode, 0).reshape(dims[mode], -1) for mode in range(3)]
    eye = np.eye(rank)
    previous = np.inf
    residual = np.inf
    for _ in range(n_iter):
        for mode in range(3):
            others = [factors[m] for m in range(3) if m != mode]
            kr = _khatri_rao(others[0], others[1])
            gram = (others[0].T @ others[0]) * (others[1].T @ others[1])
            factors[mode] = np.linalg.solve(gram + ridge * eye, (unfold[mode] @ kr).T).T
        residual = float(np.linalg.norm(tensor - np.einsum("ir,jr,kr->ijk", *factors)))
        if residual < tol or abs(previous - residual) < tol * 1e-3:
            break
        previous = residual
    return residual, factors


def cp_als(tensor: np.ndarray, rank: int, seed: int = 0, restarts: int = 10,
           n_iter: int = 2000, tol: float = 1e-13, ridge: float = 1e-12) -> CPFit:
    """Best-of-``restarts`` CP-ALS fit of a 3-tensor at ``rank`` (seeded, deterministic)."""
    tensor = np.asarray(tensor, dtype=np.float64)
    if tensor.ndim != 3:
        raise ValueError(f"cp_als fits 3-tensors, got shape {tensor.shape}")
    rng = np.random.default_rng(seed)
    best_res = np.inf
    best_factors: list[np.ndarray] | None = None
    for _ in range(restarts):
        res, factors = _als_once(tensor, rank, rng, n_iter, tol, ridge)
        if res < best_res:
            best_res, best_factors = res, factors
        if best_res < tol:
            break
    if best_factors is None:
        raise ValueError(f"cp_als found no fit: restarts={restarts} (at least 1) or no finite residual")
    norm = float(np.linalg.norm(tensor)) or 1.0
    a, b, c = best_factors
    return CPFit(rank, best_res, best_res / norm, RankOneTerms(a.T, b.T, c.T))


def residual_by_rank(tensor: np.ndarray, ranks: range | list[int], seed: int = 0,
                     restarts: int = 10, n_iter: int = 2000) -> dict[int, CPFit]:
    """Fits at several ranks; callers read an upper bound off the residuals."""
    return {r: cp_als(tensor, r, seed=seed, restarts=restarts, n_iter=n_iter) for r in ranks}
