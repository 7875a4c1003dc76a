"""A compression task: a RASP program compiled, with its input space and RASP references.

This is the only module of ``compression`` that knows about ``compiler`` and ``rasp``; the
training and analysis code sees a :class:`~compression.learned.frozen.FrozenModel` and an
:class:`~compression.learned.sampling.InputSpace`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable
from typing import Any

import numpy as np

import rasp
from compiler import CompiledModel, compile_rasp
from compiler.errors import CompressionError
from compression.evaluation import ReferenceSet, build_reference_set
from compression.learned.frozen import FrozenModel, OutputKind
from compression.learned.sampling import InputSpace


def frozen_from_compiled(compiled: CompiledModel) -> FrozenModel:
    """The compiled model's forward pass, weights and labels as a :class:`FrozenModel` (its
    ``one_hot`` coordinates: the residual directions of categorical values, which carry a value)."""
    encoder = compiled.input_encoder
    kind: OutputKind = "numerical" if compiled.config.numerical_output else "categorical"
    one_hot = tuple(i for i, direction in enumerate(compiled.residual_space.basis) if direction.value is not None)
    return FrozenModel(compiled.forward, compiled.params, tuple(compiled.residual_labels), kind,
                       encoder.bos_id, encoder.pad_id, one_hot)


def input_space_of(compiled: CompiledModel, min_length: int = 1, unique_tokens: bool = False) -> InputSpace:
    """Every sequence of 1..max_seq_len vocabulary tokens (optionally without repeats)."""
    encoder = compiled.input_encoder
    ids = encoder.token_to_id
    return InputSpace(tuple(encoder.vocab), tuple(ids[t] for t in encoder.vocab), encoder.max_seq_len,
                      encoder.bos_id, encoder.pad_id, min_length, unique_tokens)


@dataclasses.dataclass(frozen=True, eq=False)
class CompressionTask:
    """A compiled program ready to compress: model, valid inputs and reference semantics."""

    name: str
    program: Any  # the RASP s-op
    compiled: CompiledModel
    model: FrozenModel
    space: InputSpace
    causal: bool = False

    def __post_init__(self) -> None:
        norm = self.compiled.config.norm
        if norm is not None:
            raise CompressionError(f"task {self.name!r}: the model has a {norm.kind} before every sub-layer, which a "
                                   "residual projection would change (it normalises the compressed stream); make a "
                                   "projection of its compiled coordinates (compression.analytic.residual_structure "
                                   "reads them) and fold it into this model (compiler.model.folding.folded_model; "
                                   "to_huggingface(..., projection=W))")
        if self.model.output_kind == "categorical" and not getattr(self.compiled.output_encoder, "values", True):
            raise CompressionError(f"task {self.name!r}: the program's output has no values (it is None at every "
                             "position), so no projection can be scored against it; there is nothing to compress")

    def reference(self, tokens: list[Hashable]) -> list[Any]:
        """The RASP evaluator's output on ``tokens`` (the ground truth for accuracy)."""
        return rasp.evaluate(self.program, tokens, causal=self.causal)

    def reference_set(self, ids: np.ndarray) -> ReferenceSet:
        """References for every row of ``ids``."""
        values = self.compiled.output_encoder.values
        return build_reference_set(ids, self.space, self.reference, self.model.output_kind, values)


def task_of(compiled: CompiledModel, program: Any, *, unique_tokens: bool = False) -> CompressionTask:
    """A compiled model as a :class:`CompressionTask` (named by the program's label, causal as
    it was compiled), its inputs of every length from 1 (``unique_tokens``: without repeats)."""
    return CompressionTask(str(program.label), program, compiled, frozen_from_compiled(compiled),
                           input_space_of(compiled, unique_tokens=unique_tokens), bool(compiled.config.causal))


def make_task(
    name: str, program: Any, vocab: Iterable[Hashable], max_seq_len: int, *, causal: bool = False,
    min_length: int = 1, unique_tokens: bool = False, optimize: bool = False,
) -> CompressionTask:
    """Compile ``program`` and wrap it as a :class:`CompressionTask`.

    ``optimize`` defaults to False: the paper's figures are of Tracr's layout (e.g. frac_prevs
    with its is_x MLP and D = 14), which the optimisation passes would shrink. What users get by
    default is ``optimize=True``, which the claims fuzz (benchmarks/claims.py) checks.
    """
    compiled = compile_rasp(program, set(vocab), max_seq_len, causal=causal, optimize=optimize)
    return CompressionTask(name, program, compiled, frozen_from_compiled(compiled),
                           input_space_of(compiled, min_length, unique_tokens), causal)


def frac_prevs_task() -> CompressionTask:
    """The paper's Figure 2 program: fraction of ``x`` tokens so far, vocab {x, a, b, c}, length 5.

    The compiled model has D = 14: ``frac_prevs``, ``indices:0..4``, ``is_x``, ``one`` and
    ``tokens:{BOS, PAD, a, b, c, x}``.
    """
    is_x = (rasp.tokens == "x").named("is_x")
    return make_task("frac_prevs", rasp.lib.make_frac_prevs(is_x), {"x", "a", "b", "c"}, 5)


def sort_unique_task(vocab_size: int = 5, max_seq_len: int = 5) -> CompressionTask:
    """The paper's Figure 5 program: sort distinct integer tokens 1..vocab_size.

    Its valid inputs have no repeated token (``unique_tokens``), as the program requires.
    """
    program = rasp.lib.make_sort_unique(rasp.tokens, rasp.tokens)
    return make_task("sort_unique", program, range(1, vocab_size + 1), max_seq_len, unique_tokens=True)
