"""The model variants of one program: compiled literally, optimised, or compressed analytically.

* `unoptimised`: `compile_rasp(..., optimize=False)`, one block per s-op (Tracr's layout).
* `optimised`: `compile_rasp(...)` with every optimisation pass.
* `compressed`: the optimised model in superposition: the packed analytic projection
  (`compression.analytic.packed_projection`) at the width where every categorical s-op gets its
  full-margin code (`packed_width`, at most D), folded into the weights
  (`compiler.lab.zoo.weights.fold_projection`). Its interference bound says whether it is exact
  on every input (`claims_exact`); the record also says whether it was exact on its inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable

import numpy as np

from compiler.compiling import compile_rasp
from compiler.lab.zoo import weights as zoo_weights
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import MODULE_NAME
from compression.analytic import interference_bound, packed_projection, packed_width, residual_structure
from rasp import rasp


@dataclasses.dataclass(frozen=True)
class VariantModel:
    """One variant: the compiled model it comes from and the tensors a record stores."""

    variant: str
    model: CompiledModel
    tensors: dict[str, np.ndarray]
    compression: dict | None = None  # compressed only: D, d, claims_exact

    @property
    def d_model(self) -> int:
        return int(self.tensors[f"{MODULE_NAME}/embed/token"].shape[1])


def compress(model: CompiledModel, seed: int = 0) -> tuple[np.ndarray, dict]:
    """The packed projection of `model` and what its interference bound claims."""
    structure = residual_structure(model)
    d = min(packed_width(structure, seed), structure.residual_dim)
    w = packed_projection(structure, d, seed)
    bound = interference_bound(structure, w)
    info = {"method": "packed", "residual_dim": structure.residual_dim, "d": d,
            "protected": len(structure.protected), "claims_exact": bound.claims_exact}
    return w, info


def compile_variants(
    program: rasp.SOp, vocab: tuple[Hashable, ...], max_seq_len: int, variants: tuple[str, ...], causal: bool = False
) -> dict[str, VariantModel | BaseException]:
    """Each requested variant, or the exception that stopped it (each compiled at most once)."""
    compiled: dict[bool, CompiledModel | BaseException] = {}

    def model(optimize: bool) -> CompiledModel:
        if optimize not in compiled:
            try:
                compiled[optimize] = compile_rasp(program, vocab, max_seq_len, causal=causal, optimize=optimize)
            except Exception as error:  # noqa: BLE001 - returned to the caller, recorded per variant
                compiled[optimize] = error
        result = compiled[optimize]
        if isinstance(result, BaseException):
            raise result
        return result

    out: dict[str, VariantModel | BaseException] = {}
    for variant in variants:
        try:
            if variant == "compressed":
                base = model(True)
                w, info = compress(base)
                tensors = zoo_weights.fold_projection(zoo_weights.dense_tensors(base), w)
                out[variant] = VariantModel(variant, base, tensors, info)
            else:
                base = model(variant == "optimised")
                out[variant] = VariantModel(variant, base, zoo_weights.dense_tensors(base))
        except Exception as error:  # noqa: BLE001 - recorded per variant
            out[variant] = error
    return out
