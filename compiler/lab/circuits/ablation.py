"""What an ablated edge carries instead, over a stated input distribution.

Definitions (for a source s, a port p and a position t; `out_s(x)[t]` is what s writes at t
on input x in the unpatched model):

* **zero**: the term of s in p's input becomes 0.
* **mean**: it becomes the mean of `out_s(x')[t]` over the sampled inputs x' that have a token
  (not PAD) at position t: the source's average contribution at that position.
* **resample**: it becomes `out_s(x')[t]` for one other sampled input x' of the same length
  (a fixed cyclic shift inside each length group; a length drawn once keeps its own value).

The circuit under an ablation is then defined by `compiler.lab.circuits.measure`. Inputs are
drawn by `InputDistribution`: lengths uniform in `[min_length, max_seq_len]`, tokens uniform
from the vocabulary (without repeats when `unique_tokens`), every row padded to the full length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable

import jax.numpy as jnp
import numpy as np

from compiler.enums import StrEnum
from compiler.errors import LabError
from compiler.lab.circuits.components import Network
from compiler.model.compiled_model import CompiledModel


class Ablation(StrEnum):
    """What an ablated edge carries instead of its source's term (docs/circuits.md, Definitions).
    A `str`, so the members compare equal to and serialise as their names."""

    ZERO = "zero"
    MEAN = "mean"
    RESAMPLE = "resample"


# The order matters: `ablated_terms` and the compiled patching programs take an ablation's index here.
ABLATIONS = tuple(Ablation)


@dataclasses.dataclass(frozen=True)
class InputDistribution:
    """Random inputs of a program: `count` rows, lengths uniform, tokens uniform."""

    count: int = 64
    seed: int = 0
    min_length: int = 1
    unique_tokens: bool = False

    def tokens(self, vocab: tuple[Hashable, ...], max_seq_len: int) -> list[list[Hashable]]:
        """`count` token lists (without BOS)."""
        if self.count < 2:
            raise LabError(f"an input distribution needs at least 2 inputs, got count={self.count}")
        if not 1 <= self.min_length <= max_seq_len:
            raise LabError(f"min_length must be in [1, {max_seq_len}], got {self.min_length}")
        rng = np.random.default_rng(self.seed)
        tokens = sorted(vocab, key=repr)
        rows = []
        for _ in range(self.count):
            length = int(rng.integers(self.min_length, max_seq_len + 1))
            if self.unique_tokens:
                length = min(length, len(tokens))
                picks = rng.permutation(len(tokens))[:length]
            else:
                picks = rng.integers(0, len(tokens), length)
            rows.append([tokens[i] for i in picks])
        return rows

    def ids(self, model: CompiledModel) -> np.ndarray:
        """`[count, max_seq_len + 1]` ids: BOS, the tokens, PAD to the end."""
        encoder = model.input_encoder
        rows = self.tokens(tuple(encoder.vocab), model.config.max_seq_len)
        ids = np.full((len(rows), model.config.max_seq_len + 1), encoder.pad_id, np.int32)
        for i, row in enumerate(rows):
            ids[i, : len(row) + 1] = encoder.encode([encoder.bos, *row])
        return ids


def check_ablation(ablation: str) -> Ablation:
    """`ablation` as an `Ablation`.

    Args:
      ablation: "zero", "mean" or "resample" (or the member itself).

    Returns:
      The member.

    Raises:
      LabError: any other name.
    """
    if ablation not in ABLATIONS:
        raise LabError(f"unknown ablation {ablation!r}; expected one of {tuple(a.value for a in Ablation)}")
    return Ablation(ablation)


def resample_order(ids: np.ndarray, pad_id: int) -> np.ndarray:
    """For each row, the row whose values replace it: the next row of the same length (cyclic)."""
    lengths = (np.asarray(ids) != pad_id).sum(axis=1)
    order = np.arange(len(lengths))
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        order[rows] = np.roll(rows, -1)
    return order


def reference(net: Network, ablation: str, ids: np.ndarray, outputs: jnp.ndarray) -> jnp.ndarray:
    """What every source's ablated term becomes, `[S, B, T, d]`.

    Args:
        net: the network.
        ablation: "zero", "mean" or "resample".
        ids: the sampled inputs `[B, T]`.
        outputs: the sources' unpatched outputs on `ids` (`patching.source_outputs`).
    """
    ids = np.asarray(ids)
    return ablated_terms(ABLATIONS.index(check_ablation(ablation)), jnp.asarray(ids != net.pad_id, jnp.float32),
                         jnp.asarray(resample_order(ids, net.pad_id)), outputs)


def ablated_terms(kind: int | jnp.ndarray, real: jnp.ndarray, order: jnp.ndarray, outputs: jnp.ndarray) -> jnp.ndarray:
    """`reference` from arrays alone, so it also runs inside a compiled program (`patching`).

    Args:
        kind: the ablation's index in `ABLATIONS` (0 zero, 1 mean, 2 resample); may be traced.
        real: `[B, T]` 1.0 where an input has a token (not PAD).
        order: `[B]` the row each row's values are resampled from (`resample_order`).
        outputs: the sources' unpatched outputs `[S, B, T, d]`.
    """
    totals = jnp.einsum("bt,sbtd->std", real, outputs)
    counts = jnp.maximum(real.sum(axis=0), 1.0)[None, :, None]
    mean = jnp.broadcast_to((totals / counts)[:, None], outputs.shape)
    return jnp.where(kind == 0, 0.0, jnp.where(kind == 1, mean, outputs[:, order]))
