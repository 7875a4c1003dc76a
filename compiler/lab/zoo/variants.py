"""The model variants of one program: compiled literally, optimised, compressed, reparametrised.

* `unoptimised`: `compile_rasp(..., optimize=False)`, one block per s-op (Tracr's layout).
* `optimised`: `compile_rasp(...)` with every optimisation pass.
* `compressed`: the optimised model in superposition: the packed analytic projection
  (`compression.analytic.packed_projection`) at the width where every categorical s-op gets its
  full-margin code (`packed_width`, at most D), folded into the weights
  (`compiler.lab.zoo.weights.fold_projection`). Its claim (`compression.claims`) says whether it
  is exact on every input: the interference bound's proof and the check on the model (every input
  when there are at most 10^5, else a stated sample plus the inputs where the bound's margin is
  tightest), stored together (`claims_exact` is true only when both hold); the record also says
  whether it was exact on its stored inputs.
* `reparametrised`: the optimised model with weights that look trained and the same function:
  `compiler.lab.circuits.variants.reparametrise` (a random rotation of the residual basis,
  random invertible maps inside every head's QK and OV products, a permutation and positive
  rescaling of ReLU neurons) applied to its `Network`, written back by
  `compiler.lab.zoo.weights.network_tensors`. Its seed is `variant_seed(seed, index)`.
* `layernorm`: `compile_rasp(..., norm="layernorm")`, optimised: a LayerNorm before every
  sub-layer and the unembedding (GPT-2's pre-norm layout), the norm stated in the weights'
  metadata. Exact like `optimised`; its circuit is measured through the norm.
* `gd`: the optimised model through a projection learned by gradient descent: the analytic
  projection at its smallest width exact against RASP on the whole input space
  (`compiler.lab.circuits.variants.analytic_projection`), rotated randomly, perturbed and
  retrained by `compression`'s trainer for at most `gd_steps` steps, stopping at the first exact
  check (`gd_projection`), then folded into the weights. It may be inexact: its sequence accuracy
  over the input space is recorded.

A loop program (`rasp.Loop`) compiles to a block of layers run once per iteration with shared
weights; every variant is made of its `untied` model, one copy of the block per iteration, so that
the stored tensors, the numpy forward pass, the circuit and the variants' changes all see one
component per executed layer. `VariantModel.loop` says which stored layers are copies of the
block (`loop_info`); the record keeps it in the weights' metadata.

The circuit of `reparametrised` and `gd` is the optimised model's (the components are the same);
`VariantModel.net` is the variant's own network, on which the record re-verifies it
(`compiler.lab.zoo.verify`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Hashable

import numpy as np

from compiler.compiling import compile_rasp
from compiler.lab.circuits.components import Network, network
from compiler.lab.circuits.variants import analytic_projection, gd_projection, reparametrise
from compiler.lab.zoo import weights as zoo_weights
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import MODULE_NAME, TiedBlock
from compiler.model.dense import dense_tensors
from compiler.model.tying import untied
from rasp import rasp


@dataclasses.dataclass(frozen=True)
class VariantModel:
    """One variant: the compiled model it comes from, the tensors a record stores, and what
    makes those tensors of the model (a projection, or a reparametrised network)."""

    variant: str
    model: CompiledModel
    tensors: dict[str, np.ndarray]
    compression: dict | None = None  # compressed, gd: the projection's widths and claims
    projection: np.ndarray | None = None  # compressed, gd: W `[D, d]`
    net: Network | None = None  # reparametrised: the changed network
    exact: bool = True  # the variant is meant to compute the program exactly (not compressed, gd)
    reparametrisation: dict | None = None  # reparametrised: its seed and what was changed
    loop: dict | None = None  # a compiled loop, stored untied: `loop_info` of its tying

    def stored_network(self) -> Network:
        """The network the stored tensors are (what the circuit check runs on)."""
        return self.net if self.net is not None else network(self.model, self.projection)

    @property
    def d_model(self) -> int:
        return int(self.tensors[f"{MODULE_NAME}/embed/token"].shape[1])


def loop_info(tied: TiedBlock) -> dict:
    """Where a compiled loop's shared block went in the untied model the record stores.

    `tied_layers` is the block's transformer layers in the compiled (tied) model, `[first, stop)`;
    `stored_layers[k]` the layers of the stored model that hold iteration `k + 1`'s copy.
    """
    width = tied.stop - tied.start
    stored = [[(tied.start + k * width) // 2, (tied.start + (k + 1) * width) // 2] for k in range(tied.repeats)]
    return {"tied_layers": [tied.start // 2, tied.stop // 2], "repeats": tied.repeats, "stored_layers": stored}


def compress(model: CompiledModel, program: rasp.SOp, seed: int = 0) -> tuple[np.ndarray, dict]:
    """The packed projection of `model` and its exactness claim with the claim's check
    (`compression.project`)."""
    from compression import project, task_of

    found = project(task_of(model, program), "packed", seed=seed)
    info = {"method": "packed", "protected": len(found.structure.protected), **found.claim.to_json(),
            "claims_exact": found.claim.exact}
    return found.w, info


def variant_seed(seed: int, index: int) -> int:
    """The seed of program `index`'s random variants in a zoo of seed `seed` (32 bits)."""
    digest = hashlib.sha256(f"tracr-compile zoo variant {seed} {index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def reparametrised(base: CompiledModel, seed: int) -> VariantModel:
    """`base` with its weights reparametrised (same function, see the module docstring)."""
    net = reparametrise(network(base), seed)
    info = {"seed": seed, "changes": ["residual rotation", "per-head invertible QK and OV maps",
                                      "ReLU neuron permutation and positive rescaling"]}
    return VariantModel("reparametrised", base, zoo_weights.network_tensors(net), net=net, reparametrisation=info)


def learned(base: CompiledModel, program: rasp.SOp, seed: int, steps: int) -> VariantModel:
    """`base` through a GD-learned projection (see the module docstring); may be inexact."""
    start, start_note, _ = analytic_projection(base, program)
    w, note, accuracy = gd_projection(base, program, start, steps=steps, seed=seed)
    info = {"method": "gd", "residual_dim": int(base.config.residual_width), "d": int(w.shape[1]),
            "start": start_note, "steps_budget": steps, "seed": seed, "note": note,
            "sequence_accuracy": accuracy, "exact_on_input_space": accuracy == 1.0}
    tensors = zoo_weights.fold_projection(dense_tensors(base), w)
    return VariantModel("gd", base, tensors, info, projection=w, exact=False)


# The compile each variant is made of, `(optimize, norm)`; every other variant starts from the
# optimised model without a norm.
_COMPILE = {"unoptimised": (False, None), "layernorm": (True, "layernorm")}


def compile_variants(
    program: rasp.SOp, vocab: tuple[Hashable, ...], max_seq_len: int, variants: tuple[str, ...], causal: bool = False,
    seed: int = 0, gd_steps: int = 300,
) -> dict[str, VariantModel | BaseException]:
    """Each requested variant, or the exception that stopped it (each compiled at most once).

    `seed` seeds the random variants (reparametrised, gd); `gd_steps` is the GD budget.
    """
    compiled: dict[tuple[bool, str | None], CompiledModel | BaseException] = {}
    loops: dict[tuple[bool, str | None], dict | None] = {}

    def model(optimize: bool, norm: str | None = None) -> CompiledModel:
        key = (optimize, norm)
        if key not in compiled:
            try:
                tied = compile_rasp(program, vocab, max_seq_len, causal=causal, optimize=optimize, norm=norm)
                loops[key] = None if tied.config.tied is None else loop_info(tied.config.tied)
                compiled[key] = untied(tied)
            except Exception as error:
                compiled[key] = error
        result = compiled[key]
        if isinstance(result, BaseException):
            raise result
        return result

    out: dict[str, VariantModel | BaseException] = {}
    for variant in variants:
        key = _COMPILE.get(variant, (True, None))
        try:
            base = model(*key)
            if variant == "compressed":
                w, info = compress(base, program)
                tensors = zoo_weights.fold_projection(dense_tensors(base), w)
                out[variant] = VariantModel(variant, base, tensors, info, projection=w, exact=False)
            elif variant == "reparametrised":
                out[variant] = reparametrised(base, seed)
            elif variant == "gd":
                out[variant] = learned(base, program, seed, gd_steps)
            else:
                out[variant] = VariantModel(variant, base, dense_tensors(base))
        except Exception as error:
            out[variant] = error
        else:
            loop, built = loops[key], out[variant]
            if loop is not None and isinstance(built, VariantModel):
                out[variant] = dataclasses.replace(built, loop=loop)
    return out
