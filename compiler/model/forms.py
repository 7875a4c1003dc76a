"""Choose how each weight is applied: a cost model per weight and per backend.

Every weight of a compiled model is a `SparseLinear`; its *form* (`compiler.model.config.FORMS`)
says how the forward pass computes `x @ M`. All forms give the same product (up to the order of
float32 additions), so the choice is only about speed, and it differs by backend: on a CPU a
gather or a scatter-add costs tens of multiply-adds of a dense matmul, on a GPU hundreds, so a
GPU keeps dense products for much larger matrices.

The cost of a form is estimated per call, for a nominal batch of `NOMINAL_BATCH` sequences of
full length, from the weight's shape and pattern and the backend's `OpCosts`:

| form | cost |
|---|---|
| dense | tokens x rows x cols x matmul |
| rebuild | tokens x rows x cols x matmul + nnz x scatter (once per call) |
| columns | tokens x steps x cols x gather (steps: the fullest column) |
| rows | tokens x steps x rows x scatter (steps: the fullest row) |
| interval | tokens x (r x (gather + scan) + 2 x cols x gather) (r: rows holding a non-zero) |

The interval form is possible only when the rows can be ordered so that each column's non-zeros
are contiguous and equal (`SparseLinear.interval`, `one_value_per_column`): the dyadic factors
of order comparisons (sort, sort_freq, any `<` / `<=` selector) and staircases, where it
replaces `O(log m)` scatter-adds per input by one prefix sum.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler.model.config import ModelConfig, SparseLinear

# Sequences per call the costs are estimated for (the benchmarks' batch).
NOMINAL_BATCH = 64

# A form replaces the default one only when it saves this fraction of its estimated cost and
# this many nanoseconds per call.
MIN_SAVING = 0.25
MIN_SAVING_NS = 1e6


@dataclasses.dataclass(frozen=True)
class OpCosts:
    """Nanoseconds per element of each primitive on one backend (measured, rounded).

    `matmul` is per multiply-add of a dense product, `gather` per gathered element (and its
    multiply-add), `scatter` per scatter-added element, `scan` per element of a prefix sum.
    """

    matmul: float
    gather: float
    scatter: float
    scan: float


# CPU: measured with XLA on 2 shared cores (jax 0.10), float32 at HIGHEST precision. GPU: not
# measured (no GPU was at hand), set from the usual ratios of a data-centre GPU, where a dense
# multiply-add is hundreds of times cheaper than a gather or scatter; a TPU is costed the same.
BACKENDS: dict[str, OpCosts] = {
    "cpu": OpCosts(matmul=0.08, gather=3.0, scatter=20.0, scan=13.0),
    "gpu": OpCosts(matmul=0.0005, gather=0.02, scatter=0.1, scan=0.05),
}
BACKENDS["cuda"] = BACKENDS["rocm"] = BACKENDS["tpu"] = BACKENDS["gpu"]


def one_value_per_column(spec: SparseLinear, param: np.ndarray) -> bool:
    """Whether every column of the sparse weight holds one value (what `interval` reads)."""
    if not spec.is_sparse:
        return False
    _, cols = spec.pattern
    values = np.asarray(param, dtype=np.float32)
    if values.size == 0:
        return True
    order = np.argsort(cols, kind="stable")
    sorted_cols, sorted_values = cols[order], values[order]
    starts = np.flatnonzero(np.r_[True, sorted_cols[1:] != sorted_cols[:-1]])
    lows = np.minimum.reduceat(sorted_values, starts)
    highs = np.maximum.reduceat(sorted_values, starts)
    return bool(np.array_equal(lows, highs))


def form_costs(spec: SparseLinear, param: np.ndarray, costs: OpCosts, tokens: int) -> dict[str, float]:
    """Estimated nanoseconds per call of every form `spec` allows (see the module docstring)."""
    rows, cols = spec.shape
    dense = float(tokens) * rows * cols * costs.matmul
    if not spec.is_sparse:
        return {"dense": dense}
    nnz = spec.nnz
    estimates = {
        "rebuild": dense + nnz * costs.scatter,
        "columns": float(tokens) * spec.padded_work(1) * costs.gather,
        "rows": float(tokens) * spec.padded_work(0) * costs.scatter,
    }
    if _interval_ok(spec, param, estimates):
        found = spec.interval
        assert found is not None  # checked by _interval_ok
        perm = found[0]
        estimates["interval"] = float(tokens) * (len(perm) * (costs.gather + costs.scan) + 2 * cols * costs.gather)
    return estimates


def _interval_ok(spec: SparseLinear, param: np.ndarray, others: dict[str, float]) -> bool:
    """Whether the interval form is possible; skips the pattern analysis for weights so small
    that the other forms already cost nothing worth saving."""
    if min(others.values()) < 1e5:
        return False
    return one_value_per_column(spec, param) and spec.interval is not None


def choose_form(spec: SparseLinear, param: np.ndarray, backend: str, tokens: int) -> str:
    """The cheapest form of `spec` on `backend` for calls of `tokens` tokens.

    A weight keeps its `default_form` unless another form saves at least `MIN_SAVING` of its
    cost and `MIN_SAVING_NS`: small weights then run as they always did (forms agree only up to
    the order of float32 additions, so changing them for no gain would only move the last bits).
    """
    costs = BACKENDS.get(backend, BACKENDS["cpu"])
    estimates = form_costs(spec, param, costs, tokens)
    best = min(estimates, key=lambda form: (estimates[form], form))
    default = estimates[spec.default_form]
    if default - estimates[best] < max(MIN_SAVING * default, MIN_SAVING_NS):
        return spec.default_form
    return best


def choose_forms(config: ModelConfig, weights: dict[str, dict[str, np.ndarray]], backend: str) -> ModelConfig:
    """`config` with every weight's form chosen for `backend` (recorded in `config.backend`)."""
    tokens = NOMINAL_BATCH * (config.max_seq_len + 1)
    specs = {
        key: dataclasses.replace(spec, form=choose_form(spec, weights[key[0]][key[1]], backend, tokens))
        for key, spec in config.linears().items()
    }
    return config.with_linears(specs, backend)


def forced_forms(config: ModelConfig, weights: dict[str, dict[str, np.ndarray]], form: str) -> ModelConfig:
    """`config` with every weight that allows `form` applied that way, the others unchanged.

    For comparing forms (tests, benchmarks): `interval` is used only where the weight has its
    shape (`SparseLinear.interval` and `one_value_per_column`).
    """
    specs = {}
    for key, spec in config.linears().items():
        if form not in spec.possible_forms:
            continue
        if form == "interval" and (spec.interval is None or not one_value_per_column(spec, weights[key.module][key.name])):
            continue
        specs[key] = dataclasses.replace(spec, form=form)
    return config.with_linears(specs, config.backend)


def check_forms(config: ModelConfig, weights: dict[str, dict[str, np.ndarray]]) -> None:
    """Refuse a recorded `interval` form whose weight does not have its shape (one contiguous run
    and one value per column): applied that way it would compute another matrix.

    Raises:
      ValueError: naming the weight.
    """
    for (module, name), spec in config.linears().items():
        if spec.form != "interval":
            continue
        if spec.interval is None or not one_value_per_column(spec, weights[module][name]):
            raise ValueError(
                f"weight {module}/{name} is recorded with the 'interval' form but its columns are not "
                "contiguous runs of one value; choose its form again (compiler.model.forms.choose_forms)"
            )


__all__ = [
    "BACKENDS",
    "MIN_SAVING",
    "MIN_SAVING_NS",
    "NOMINAL_BATCH",
    "OpCosts",
    "check_forms",
    "choose_form",
    "choose_forms",
    "form_costs",
    "forced_forms",
    "one_value_per_column",
]
