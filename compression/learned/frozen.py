"""The frozen model that compression trains against, as a pure function plus metadata.

Compression only needs the compiled model's forward pass with an optional residual projection
(the contract in docs/architecture.md, "compiler/"): ``forward(params, ids, projection=W)``
returning an object with ``.output`` (``[B, T, n_out]`` logits or ``[B, T]`` values) and
``.residuals`` (a tuple of ``[B, T, D]`` arrays, decompressed when a projection is given).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import jax

from compiler.errors import CompressionError

OutputKind = Literal["categorical", "numerical"]


class ForwardOutput(Protocol):
    """What a frozen forward pass returns. ``output`` and ``residuals`` are always read; the
    exactness objective (``LossConfig.exact()``) also reads ``attention`` (per attention
    sub-layer, ``[B, H, T, T]`` patterns), ``written`` (per sub-layer, what it computes in
    residual coordinates before the projection writes it) and ``hidden`` (per ReLU MLP, the
    pre-activations of the units its output reads; the compiled ones are taken from a forward
    pass with the identity as projection)."""

    output: jax.Array
    residuals: Sequence[jax.Array]
    attention: Sequence[jax.Array]
    written: Sequence[jax.Array]
    hidden: Sequence[jax.Array]


ForwardFn = Callable[..., ForwardOutput]


@dataclasses.dataclass(frozen=True)
class FrozenModel:
    """A frozen model: pure forward function, its parameters and how to read its stream.

    ``forward(params, ids, projection=None)`` must be jittable and pure. ``bos_id``/``pad_id``
    are the input ids whose positions the losses ignore. ``one_hot`` lists the residual
    coordinates that hold one value of a categorical variable (1 where it is the value, else 0);
    ``LossConfig.written_margin`` reads them.
    """

    forward: ForwardFn
    params: Any
    residual_labels: tuple[str, ...]
    output_kind: OutputKind
    bos_id: int
    pad_id: int
    one_hot: tuple[int, ...] = ()

    @property
    def residual_dim(self) -> int:
        """D, the width of the uncompressed residual stream."""
        return len(self.residual_labels)

    def __post_init__(self) -> None:
        if self.output_kind not in ("categorical", "numerical"):
            raise CompressionError(f"output_kind must be 'categorical' or 'numerical', got {self.output_kind!r}")
        if any(not 0 <= i < self.residual_dim for i in self.one_hot):
            raise CompressionError(f"one_hot holds coordinates outside 0..{self.residual_dim - 1}: {self.one_hot}")
