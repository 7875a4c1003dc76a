"""What an exported model's tensors mean: the `ExportInfo` record and its readers.

`compiler.io.export` builds an `ExportInfo` for every export and attaches it to the TransformerLens
model as `.export_info`. It is numpy only: it encodes inputs as the compiled model does, turns
TransformerLens logits into the compiled model's outputs and decoded values, maps a compressed
export's residual stream back to the labelled directions, and tells compiled heads from the
zero heads that pad every block to one head count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from compiler.errors import CompilerError
from compiler.model.encoders import InputEncoder, OutputEncoder, OutputsEncoder, output_parts

# The smallest normal float32. XLA on CPU flushes results below it to zero; torch keeps them
# (3.8e-44 where the compiled model gives 0.0), so `ExportInfo.outputs` flushes them too.
FLOAT32_TINY = float(np.finfo(np.float32).tiny)


class ExportError(CompilerError):
    """The model uses something the target format cannot express, or the installed
    TransformerLens is not a supported version."""


@dataclasses.dataclass(frozen=True)
class ExportInfo:
    """What the exported tensors mean; travels with the model as `.export_info`.

    `real_heads[b]`: block `b`'s heads `0 .. real_heads[b] - 1` are compiled heads, the rest
    (up to `n_heads`) are zero padding: a uniform pattern that writes nothing. `stages` pairs
    each of the compiled model's residual snapshots (`model.stage_names`) with the
    TransformerLens hook holding the same stream. `pad_mask_dim` is the head dimension that masks
    PAD keys (`None`: not masked, so batches must not be padded). `attn_scale` is what
    TransformerLens divides scores by, already multiplied into `W_Q` (`None`: no scaling).
    `projection` is the `[D, d]` matrix folded into a compressed export (`None`: the residual
    stream is the compiled one, `d_model = D`). `route` says which TransformerLens class and
    version the model was built with (`None` for `export_weights` alone).
    """

    residual_labels: tuple[str, ...]
    input_encoder: InputEncoder
    output_encoder: OutputEncoder | OutputsEncoder
    numerical_output: bool
    causal: bool
    n_heads: int
    real_heads: tuple[int, ...]
    block_sublayers: tuple[tuple[int | None, int | None], ...]
    stages: tuple[tuple[str, str], ...]
    pad_mask_dim: int | None
    attn_scale: float | None
    projection: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    program_label: str | None = None
    transformer_lens_version: str | None = None
    route: str | None = None

    # -- inputs ----------------------------------------------------------------------------------

    @property
    def bos_id(self) -> int:
        return self.input_encoder.bos_id

    @property
    def pad_id(self) -> int:
        return self.input_encoder.pad_id

    @property
    def input_tokens(self) -> tuple[Hashable, ...]:
        """Token of every input id: the vocabulary in id order, then BOS, then PAD."""
        return (*self.input_encoder.vocab, self.input_encoder.bos, self.input_encoder.pad)

    def encode_batch(self, batch: Sequence[Sequence[Hashable]]) -> np.ndarray:
        """`[batch, T]` ids of sequences starting with BOS, padded at the end with the PAD id.

        Raises `ExportError` for a padded batch when the export cannot mask PAD keys (a compressed
        export whose projection mixes `one` or `tokens:PAD` with other directions).
        """
        ids = self.input_encoder.encode_batch(batch)
        if self.pad_mask_dim is None and len({len(tokens) for tokens in batch}) > 1:
            raise ExportError(
                "this export cannot mask PAD keys (its projection does not keep the 'one' and "
                "'tokens:PAD' directions on axes of their own), so sequences of different lengths "
                "cannot share a batch; run one batch per length, or use encode_with_mask(batch) "
                "and pass its attention_mask to the model"
            )
        return ids

    def encode_with_mask(self, batch: Sequence[Sequence[Hashable]]) -> tuple[np.ndarray, np.ndarray]:
        """`(ids, attention_mask)` of a padded batch: the mask is 1 on real tokens, 0 on PAD.

        For exports that cannot mask PAD keys through the weights (`pad_mask_dim is None`): pass
        `attention_mask=` with the ids. Raises `ExportError` on TransformerLens 3.x for a
        bidirectional model, where `HookedTransformer` ignores `attention_mask` (run one batch per
        length there).
        """
        ids = self.input_encoder.encode_batch(batch)
        version = self.transformer_lens_version or ""
        padded = bool(np.any(ids == self.pad_id))
        if padded and self.pad_mask_dim is None and version.startswith("3.") and not self.causal:
            raise ExportError(
                f"TransformerLens {version} ignores attention_mask in bidirectional models, and this "
                "export cannot mask PAD keys through its weights; run one batch per length "
                "(encode_batch), or use TransformerLens 4 (the export extra)"
            )
        return ids, (ids != self.pad_id).astype(np.int64)

    # -- outputs ---------------------------------------------------------------------------------

    @property
    def output_values(self) -> tuple[Any, ...] | None:
        """Value of every output logit column (`None` for a numerical output: column 0).

        Several programs compiled together: their columns one after the other, a numerical
        program's column holding `None` (`output_columns` says which columns are whose).
        """
        parts = output_parts(self.output_encoder)
        if len(parts) == 1:
            return parts[0].encoder.values
        return tuple(value for part in parts for value in (part.encoder.values or (None,)))

    @property
    def output_columns(self) -> dict[str, slice]:
        """Each output s-op's logit columns, by label (one entry unless several programs)."""
        return {part.label: part.columns for part in output_parts(self.output_encoder, self.program_label or "output")}

    def outputs(self, logits: Any) -> np.ndarray:
        """TransformerLens logits `[..., T, d_vocab_out]` (numpy or torch) as the compiled model's
        `ModelOutput.output`: `[..., T]` for a numerical program, else unchanged; float32 values
        below the smallest normal float32 become 0, as in the compiled model on CPU."""
        output = np.array(_to_numpy(logits), dtype=np.float32)
        output[np.abs(output) < FLOAT32_TINY] = 0.0
        return output[..., 0] if self.numerical_output else output

    def decode(self, logits: Any, length: int | None = None) -> list[Any] | dict[str, list[Any]]:
        """Decode one sequence's `[T, d_vocab_out]` logits into values, cut to `length` positions.

        Several programs compiled together give `{label: decoded sequence}`.
        """
        decoded = self.output_encoder.decode(self.outputs(logits))
        if isinstance(decoded, dict):
            return {label: values[:length] for label, values in decoded.items()}
        return decoded[:length]

    def decode_batch(self, logits: Any, inputs: Any = None) -> list[Any]:
        """Decode `[B, T, d_vocab_out]` logits row by row.

        `inputs` cuts each row to its sequence's length, as `CompiledModel.apply_batch` does: the
        batch of token lists, or the `[B, T]` ids (numpy or torch; PAD positions are cut).
        """
        rows = self.outputs(logits)
        if inputs is None:
            lengths: list[int | None] = [None] * len(rows)
        elif hasattr(inputs, "shape"):
            lengths = [int(n) for n in (np.asarray(_to_numpy(inputs)) != self.pad_id).sum(axis=-1)]
        else:
            lengths = [len(tokens) for tokens in inputs]
        if len(lengths) != len(rows):
            raise ValueError(f"decode_batch: {len(rows)} rows of logits for {len(lengths)} input sequences")
        decoded = [self.output_encoder.decode(row) for row in rows]
        return [
            {label: values[:n] for label, values in item.items()} if isinstance(item, dict) else item[:n]
            for item, n in zip(decoded, lengths)
        ]

    # -- the residual stream ---------------------------------------------------------------------

    @property
    def compressed(self) -> bool:
        return self.projection is not None

    def decompress(self, residual: Any) -> np.ndarray:
        """A `[..., d_model]` residual stream of the export over the compiled labels, `[..., D]`.

        For a compressed export this is `r @ W.T`, what the compiled model's
        `forward(..., projection=W)` returns as its residuals; otherwise the stream itself.
        """
        stream = np.asarray(_to_numpy(residual), dtype=np.float32)
        if self.projection is None:
            return stream
        return stream @ np.asarray(self.projection, dtype=np.float32).T

    # -- heads -----------------------------------------------------------------------------------

    @property
    def padded_heads(self) -> tuple[tuple[int, int], ...]:
        """`(block, head)` of every zero head added so each block has `n_heads` heads."""
        return tuple(
            (block, head) for block, real in enumerate(self.real_heads) for head in range(real, self.n_heads)
        )

    def real_head_results(self, result: Any, head_axis: int = 1) -> dict[tuple[int, int], Any]:
        """The entries of a per-head result that belong to compiled heads, by `(block, head)`.

        `result` is indexed by block on axis 0 and by head on `head_axis` (TransformerLens'
        patching tables are `[n_layers, n_heads]` or `[n_layers, pos, n_heads]`: `head_axis=2`).
        Padded heads are left out, so a table of effects names only heads the compiler built.
        """
        array = result
        shape = tuple(array.shape)
        if len(shape) <= head_axis or shape[0] != len(self.real_heads) or shape[head_axis] != self.n_heads:
            raise ValueError(
                f"real_head_results: expected blocks ({len(self.real_heads)}) on axis 0 and heads "
                f"({self.n_heads}) on axis {head_axis}, got a result of shape {shape}"
            )
        found = {}
        for block, real in enumerate(self.real_heads):
            for head in range(real):
                index: list[int | slice] = [slice(None)] * len(shape)
                index[0], index[head_axis] = block, head
                found[(block, head)] = array[tuple(index)]
        return found


def _to_numpy(value: Any) -> Any:
    """A torch tensor as numpy (detached, on CPU); anything else unchanged."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return value

