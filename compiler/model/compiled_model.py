"""The object `compile_rasp` returns: weights, config, a jitted forward pass and labels."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

from compiler.model.config import AttentionSpec, ModelConfig
from compiler.model.dense import LabelledMatrix, dense_model, labelled_weights
from compiler.model.encoders import InputEncoder, OutputEncoder, OutputPart, OutputsEncoder, output_parts
from compiler.model.transformer import ModelOutput, build
from compiler.model.weights import module_params
from compiler.passes import nodes
from craft.bases import VectorSpaceWithBasis
from craft.blocks import SeriesWithResiduals


@dataclasses.dataclass(frozen=True)
class LabelledResidual:
    """The residual stream at one point of the forward pass, `[T, D]`, with its labels."""

    name: str  # "embed", "layer 0 attn", "layer 0 mlp", ...
    values: np.ndarray
    labels: tuple[str, ...]

    def column(self, label: str) -> np.ndarray:
        """Values of one residual direction across positions."""
        return self.values[:, self.labels.index(label)]


@dataclasses.dataclass(frozen=True)
class ApplyResult:
    """One sequence through the model: decoded outputs, residual streams, attention patterns."""

    decoded: list[Any] | dict[str, list[Any]]  # {output label: values} for several programs
    output: np.ndarray
    residuals: tuple[LabelledResidual, ...]
    attention: tuple[np.ndarray, ...]  # per attention sub-layer, [heads, T, T]


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledModel:
    """A compiled RASP program. `forward(params, ids, projection=None)` is pure and jitted."""

    params: dict
    config: ModelConfig
    forward: jax.stages.Wrapped  # jitted: `forward(...)` gives a ModelOutput, `.lower(...)` compiles ahead
    graph: nx.DiGraph
    craft_model: SeriesWithResiduals | None  # None for a model loaded from a file
    sublayers: tuple  # merged Craft block per sub-layer (None where empty)
    residual_space: VectorSpaceWithBasis
    input_encoder: InputEncoder
    output_encoder: OutputEncoder | OutputsEncoder  # OutputsEncoder: several programs
    program: Any = None
    # Worst relative error |model - f(x)| / max(1, |f(x)|) of any numerical -> numerical Map
    # block over its input value set, measured in float32 at compile time (0.0: no such Map;
    # None: unknown, e.g. a model loaded from a file). Per s-op: `numerical_map_errors`.
    numerical_error_bound: float | None = None
    numerical_map_errors: Any = None  # {label: (construction, error)} or None when unknown
    # Owners of each residual slot when compiled with `reuse_residual=True`
    # (`compiler.model.reuse.ResidualReuse`); None: one direction per coordinate.
    residual_reuse: Any = None
    # Executables compiled ahead of time by `warmup`, by input shape (not copied by `replace`).
    _executables: dict = dataclasses.field(init=False, default_factory=dict, repr=False, compare=False)

    @property
    def residual_labels(self) -> tuple[str, ...]:
        return self.config.residual_labels

    @property
    def output_columns(self) -> dict[str, slice]:
        """Each output s-op's columns of `ModelOutput.output`, by label.

        One program: all columns (a numerical output is `[batch, T]`, without a column axis).
        Several (`compile_rasp([...])`): consecutive blocks in program order.
        """
        return {part.label: part.columns for part in self.output_parts}

    @property
    def output_parts(self) -> tuple[OutputPart, ...]:
        """Each output program's label, columns and encoder (`compiler.model.encoders.output_parts`)."""
        label = self.graph.graph[nodes.SINK] if self.graph is not None else "output"
        return output_parts(self.output_encoder, label)

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Names of the residual snapshots: the embedding, then every sub-layer."""
        names = ["embed"]
        tied = self.config.tied
        for position, index in enumerate(self.config.layer_order):
            kind = "attn" if isinstance(self.config.layers[index], AttentionSpec) else "mlp"
            name = f"layer {position // 2} {kind}"
            if tied is not None and tied.start <= index < tied.stop:  # a loop iteration
                iteration = (position - tied.start) // (tied.stop - tied.start) + 1
                name += f" (tied layer {index // 2}, iteration {iteration})"
            names.append(name)
        return tuple(names)

    def with_config(self, config: ModelConfig) -> CompiledModel:
        """A copy running `config` (e.g. other weight forms, `compiler.model.forms`) on the same
        weights; the parameters must keep their shapes."""
        modules = {module for module, _ in config.linears()}
        weights = {module: module_params(self, module) for module in modules}
        params, forward, _ = build(config, weights)
        return dataclasses.replace(self, config=config, params=params, forward=forward)

    def labelled_weights(self) -> dict[str, LabelledMatrix]:
        """Every weight as a dense matrix with named rows and columns (`compiler.model.dense`)."""
        return labelled_weights(self)

    def dense(self) -> CompiledModel:
        """This model with dense `[D, ...]` Haiku params and the same outputs (`compiler.model.dense`)."""
        return dense_model(self)

    def run(self, ids: np.ndarray, *, outputs_only: bool = False) -> ModelOutput:
        """Forward pass on a `[batch, T]` id array.

        Shorter inputs are padded with PAD to the full `max_seq_len + 1` positions and the
        results cut back to `T` (PAD keys get no attention, so the real positions are
        unchanged): every call with one batch size reuses one compiled executable, instead of
        one trace and XLA compilation per length. An executable made by `warmup` for the shape
        is used directly. With `outputs_only`, the result holds `output` alone (no residual
        snapshots or attention patterns are kept: the memory of one stream, not one per
        sub-layer).
        """
        ids = np.asarray(ids, dtype=np.int32)
        length = ids.shape[-1]
        full = self.config.max_seq_len + 1
        if ids.ndim == 2 and length < full:
            padded = np.full(ids.shape[:-1] + (full,), self.config.pad_id, dtype=np.int32)
            padded[..., :length] = ids
            ids = padded
        outputs_only = bool(outputs_only)
        executable = self._executables.get((ids.shape, outputs_only))
        if executable is None and outputs_only:  # a full pass warmed up for this shape serves too
            executable = self._executables.get((ids.shape, False))
        if executable is not None:
            result = executable(self.params, ids)
        else:
            result = self.forward(self.params, jnp.asarray(ids), outputs_only=outputs_only)
        if outputs_only:
            result = ModelOutput(result.output, (), ())
        if ids.shape[-1] == length:
            return result
        return ModelOutput(
            result.output[:, :length],
            tuple(r[:, :length] for r in result.residuals),
            tuple(a[..., :length, :length] for a in result.attention),
        )

    def warmup(
        self, batch_size: int = 1, seq_len: int | None = None, *, fast_compile: bool = False, outputs_only: bool = False
    ) -> float:
        """Trace and compile the forward pass for `[batch_size, max_seq_len + 1]` ids now; seconds.

        JAX compiles once per input shape, on the first call with it. This lowers and compiles
        ahead of time (`jax.jit(...).lower(...).compile()`) and keeps the executable, so later
        `run`, `apply` and `apply_batch` calls with that batch size (any length: `run` pads to
        the full length) start at once. `seq_len` is checked but, since `run` pads, every
        length shares the one executable.

        Args:
          batch_size: sequences per call.
          seq_len: tokens after BOS (default `max_seq_len`); any value in range gives the same
            executable.
          fast_compile: ask XLA for its cheapest compilation (`xla_backend_optimization_level`
            0): about half the compile time on CPU, but the compiled forward runs several times
            slower; for a model run a few times.
          outputs_only: compile the pass that returns the output alone (`run(...,
            outputs_only=True)`, and `apply_batch`, which uses it).

        Returns:
          The seconds taken by lowering and compiling.

        Raises:
          ValueError: an impossible batch size or length.
        """
        length = self.config.max_seq_len if seq_len is None else seq_len
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"warmup: batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self.config.max_seq_len:
            raise ValueError(
                f"warmup: seq_len must be an integer in [0, {self.config.max_seq_len}] (tokens "
                f"after BOS), got {seq_len!r}"
            )
        ids = np.full((batch_size, self.config.max_seq_len + 1), self.config.pad_id, dtype=np.int32)
        ids[:, 0] = self.input_encoder.bos_id
        start = time.perf_counter()
        options: dict[str, Any] | None = {"xla_backend_optimization_level": 0} if fast_compile else None
        lowered = self.forward.lower(self.params, ids, outputs_only=bool(outputs_only))
        self._executables[(ids.shape, bool(outputs_only))] = lowered.compile(options)
        return time.perf_counter() - start

    def apply(self, tokens: Sequence[Hashable]) -> ApplyResult:
        """Run one sequence (starting with BOS) and decode it; position 0 decodes as BOS."""
        ids = np.asarray([self.input_encoder.encode(tokens)], dtype=np.int32)
        result = self.run(ids)
        assert result.output is not None  # a whole pass
        output = np.asarray(result.output[0])
        residuals = tuple(
            LabelledResidual(name, np.asarray(r[0]), self.residual_labels)
            for name, r in zip(self.stage_names, result.residuals)
        )
        attention = tuple(np.asarray(a[0]) for a in result.attention)
        return ApplyResult(self.output_encoder.decode(output), output, residuals, attention)

    def apply_batch(self, batch: Sequence[Sequence[Hashable]]) -> list[list[Any] | dict[str, list[Any]]]:
        """Decoded outputs of several sequences (each starting with BOS), padded internally.

        For several programs compiled together, each item is `{output label: decoded sequence}`.
        An empty batch gives `[]`; a string or a flat token list raises `InvalidInputError`.
        Only the output is computed and kept (`run(..., outputs_only=True)`).
        """
        if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)) and len(batch) == 0:
            return []
        ids = self.input_encoder.encode_batch(batch)
        output = np.asarray(self.run(ids, outputs_only=True).output)
        return [_truncated(self.output_encoder.decode(output[row]), len(tokens)) for row, tokens in enumerate(batch)]


def _truncated(decoded: list[Any] | dict[str, list[Any]], length: int) -> list[Any] | dict[str, list[Any]]:
    """A decoded sequence (or each program's, for several) cut to the input's length."""
    if isinstance(decoded, dict):
        return {label: values[:length] for label, values in decoded.items()}
    return decoded[:length]
