"""Dense, labelled weights: the compiled model as tools that expect plain matrices see it.

The compiled model stores every weight sparsely (`compiler.model.config.SparseLinear`: a small
matrix, or its non-zero values, plus the residual coordinates it touches), so `model.params`
shows storage: `w_out` as a vector of 22 non-zeros, `w_u` of shape `(4,)`. Two views fix that:

* `labelled_weights(model)`: every weight as a `LabelledMatrix`, a dense numpy array whose rows
  and columns carry names: residual labels (`tokens:a`, `one`, `reverse`), input tokens,
  positions, output values, and hidden units (an MLP's hidden directions as the compiler named
  them, a head's query/key and value dimensions as `q0, q1, ...` / `v0, ...`).
* `dense_model(model)`: the same `CompiledModel` with every weight stored as a full matrix over
  the residual stream. Its Haiku params have the standard layout (`compiled_transformer/embed`
  `token: [V, D]`, `.../layer_0` `head_0_q: [D, d_qk]`, `.../layer_1` `w_in: [D, H]`,
  `.../unembed` `w_u: [D, n]`), so treescope, penzai or any Haiku tool sees `[D, ...]`
  matrices, and its forward pass computes what the sparse one does.

Dense weights stored flat, under those names with the module prefix (`dense_tensors`: model
files, zoo records, the export, circuit networks), become a model again with
`config_of_dense_tensors`; `fold_projection` turns them into the
weights of the compressed model that a residual projection `W` makes (the one place a projection
is folded into weights: zoo records, the TransformerLens export and circuit networks use it).

Both work on compiled and loaded models (a loaded model has no Craft blocks, so its hidden units
are numbered instead of named).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from compiler.errors import CompilerError
from compiler.model.config import (
    LAYER_PREFIX,
    MLP_IN,
    MLP_OUT,
    MODULE_NAME,
    AttentionSpec,
    HeadSpec,
    MLPSpec,
    ModelConfig,
    NormSpec,
    SparseLinear,
    layer_module,
)
from compiler.model.transformer import build
from compiler.model.weights import (
    HasWeights,
    head_weights,
    mlp_weights,
    position_embedding,
    token_embedding,
    unembedding,
)


@dataclasses.dataclass(frozen=True, eq=False)
class LabelledMatrix:
    """A dense `[rows, cols]` matrix with a name for every row and every column."""

    values: np.ndarray
    rows: tuple[str, ...]
    cols: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.values.shape != (len(self.rows), len(self.cols)):
            raise ValueError(
                f"LabelledMatrix: values of shape {self.values.shape} for {len(self.rows)} row and "
                f"{len(self.cols)} column labels"
            )

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype)

    def __getitem__(self, labels: tuple[str, str]) -> float:
        """The entry at `(row label, column label)`."""
        row, col = labels
        return float(self.values[self._index(self.rows, row, "row"), self._index(self.cols, col, "column")])

    def row(self, label: str) -> np.ndarray:
        return self.values[self._index(self.rows, label, "row")]

    def col(self, label: str) -> np.ndarray:
        return self.values[:, self._index(self.cols, label, "column")]

    def nonzero(self) -> Iterator[tuple[str, str, float]]:
        """`(row label, column label, value)` of every non-zero entry, row by row."""
        for r, c in zip(*np.nonzero(self.values)):
            yield self.rows[r], self.cols[c], float(self.values[r, c])

    @staticmethod
    def _index(labels: tuple[str, ...], label: str, axis: str) -> int:
        try:
            return labels.index(label)
        except ValueError:
            shown = ", ".join(labels[:8]) + (", ..." if len(labels) > 8 else "")
            raise KeyError(f"no {axis} labelled {label!r}; the {axis}s are: {shown}") from None


def _hidden_labels(model: Any, sublayer: int, width: int) -> tuple[str, ...]:
    """Names of an MLP's hidden units: the Craft block's hidden directions when the model has its
    Craft blocks (a compiled model), else `hidden 0, hidden 1, ...` (a loaded one)."""
    blocks = getattr(model, "sublayers", ()) or ()
    block = blocks[sublayer] if sublayer < len(blocks) else None
    first = getattr(block, "first", None)
    if first is not None and first.output_space.num_dims == width:
        return tuple(str(direction) for direction in first.output_space.basis)
    return tuple(f"hidden {j}" for j in range(width))


def _numbered(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{j}" for j in range(count))


def labelled_weights(model: HasWeights) -> dict[str, LabelledMatrix]:
    """Every weight of `model` as a dense `LabelledMatrix`, keyed by where it sits.

    Keys and shapes (D residual labels, V input tokens with BOS and PAD, T = max_seq_len + 1):
    `embed/token` `[V, D]`, `embed/position` `[T, D]`; per attention sub-layer `i` and head `h`:
    `layer_i/head_h/w_q`, `.../w_k` `[D, d_qk]`, `.../w_v` `[D, d_v]`, `.../w_o` `[d_v, D]`;
    per MLP sub-layer `i`: `layer_i/mlp/w_in` `[D, H]`, `layer_i/mlp/w_out` `[H, D]`;
    `unembed` `[D, n]` (columns: output values; one `output` column for a numerical program).
    """
    config = model.config
    residual = config.residual_labels
    encoder = getattr(model, "input_encoder", None)
    tokens = (
        tuple(str(t) for t in (*encoder.vocab, encoder.bos, encoder.pad))
        if encoder is not None
        else _numbered("id ", config.vocab_size)
    )
    found = {
        "embed/token": LabelledMatrix(token_embedding(model), tokens, residual),
        "embed/position": LabelledMatrix(position_embedding(model), _numbered("pos ", config.max_seq_len + 1), residual),
    }
    for index, layer in enumerate(config.layers):
        if isinstance(layer, AttentionSpec):
            for h in range(len(layer.heads)):
                weights = head_weights(model, index, h)
                qk, v = _numbered("q", weights.w_q.shape[1]), _numbered("v", weights.w_v.shape[1])
                prefix = f"layer_{index}/head_{h}"
                found[f"{prefix}/w_q"] = LabelledMatrix(weights.w_q, residual, qk)
                found[f"{prefix}/w_k"] = LabelledMatrix(weights.w_k, residual, _numbered("k", len(qk)))
                found[f"{prefix}/w_v"] = LabelledMatrix(weights.w_v, residual, v)
                found[f"{prefix}/w_o"] = LabelledMatrix(weights.w_o, v, residual)
        elif layer.w_in.shape[1]:
            mlp = mlp_weights(model, index)
            hidden = _hidden_labels(model, index, mlp.hidden_width)
            found[f"layer_{index}/mlp/w_in"] = LabelledMatrix(mlp.w_in, residual, hidden)
            found[f"layer_{index}/mlp/w_out"] = LabelledMatrix(mlp.w_out, hidden, residual)
    found["unembed"] = LabelledMatrix(unembedding(model), residual, _output_labels(model))
    return found


def _output_labels(model: Any) -> tuple[str, ...]:
    width = model.config.unembed.shape[1]
    encoder = getattr(model, "output_encoder", None)
    encoders = getattr(encoder, "encoders", None)
    if encoder is not None and encoders is not None:  # several programs: "label:value", or the label for a number
        labels = []
        for label, part in zip(encoder.labels, encoders):
            labels.extend([label] if part.values is None else [f"{label}:{value}" for value in part.values])
        return tuple(labels)
    values = getattr(encoder, "values", None)
    if values is None or len(values) != width:
        return ("output",) if width == 1 else _numbered("out ", width)
    return tuple(str(value) for value in values)


# -- the dense model ----------------------------------------------------------------------------


def _dense_spec(matrix: np.ndarray) -> SparseLinear:
    """A `SparseLinear` that stores `matrix` whole, over all coordinates."""
    return SparseLinear((int(matrix.shape[0]), int(matrix.shape[1])))


def dense_config_and_weights(model: HasWeights) -> tuple[ModelConfig, dict[str, dict[str, np.ndarray]]]:
    """`model`'s config with every weight dense over the residual stream, and those weights
    keyed as the Haiku params (`embed`, `layer_<i>`, `unembed`)."""
    config = model.config
    token, position, w_u = token_embedding(model), position_embedding(model), unembedding(model)
    weights: dict[str, dict[str, np.ndarray]] = {"embed": {"token": token, "position": position}}
    layers: list[AttentionSpec | MLPSpec] = []
    for index, layer in enumerate(config.layers):
        module: dict[str, np.ndarray] = {}
        if isinstance(layer, AttentionSpec):
            heads = []
            for h, head in enumerate(layer.heads):
                dense = head_weights(model, index, h)
                parts = {"q": dense.w_q, "k": dense.w_k, "v": dense.w_v, "o": dense.w_o}
                for name, matrix in parts.items():
                    module[f"head_{h}_{name}"] = matrix
                heads.append(dataclasses.replace(head, **{f"w_{name}": _dense_spec(m) for name, m in parts.items()}))
            layers.append(dataclasses.replace(layer, heads=tuple(heads)))
        else:
            mlp = mlp_weights(model, index)
            module = {"w_in": mlp.w_in, "w_out": mlp.w_out}
            layers.append(MLPSpec(_dense_spec(mlp.w_in), _dense_spec(mlp.w_out), layer.activation))
        weights[f"layer_{index}"] = module
    weights["unembed"] = {"w_u": w_u}
    dense_config = dataclasses.replace(
        config,
        layers=tuple(layers),
        token_embed=_dense_spec(token),
        pos_embed=_dense_spec(position),
        unembed=_dense_spec(w_u),
    )
    return dense_config, weights


def tensor_name(module: str, name: str) -> str:
    """The flat name of parameter `name` of Haiku module `module` in a model file or zoo record."""
    return f"{MODULE_NAME}/{module}/{name}"


def dense_tensors(model: HasWeights) -> dict[str, np.ndarray]:
    """Every weight of `model` as a dense float32 matrix over the residual stream, under its flat
    name (`tensor_name`): the one dense view that model files, zoo records, the TransformerLens
    export and circuit networks read (`config_of_dense_tensors` is its inverse)."""
    _, weights = dense_config_and_weights(model)
    return {tensor_name(module, name): np.ascontiguousarray(value, dtype=np.float32)
            for module, values in weights.items() for name, value in values.items()}


def config_of_dense_tensors(tensors: dict[str, np.ndarray], *, pad_id: int, causal: bool, numerical_output: bool,
                            activations: dict[int, str], dtype: type = np.float32, norm: NormSpec | None = None,
                            ) -> tuple[ModelConfig, dict[str, dict[str, np.ndarray]]]:
    """The config and Haiku-keyed params of dense weights stored flat, as model files and zoo
    records name them (`compiled_transformer/layer_<i>/head_<h>_q`, `.../w_in`, ...), so that a
    forward pass over `ModelConfig` runs them. A sub-layer with no tensors (an empty one, left out
    of a record) becomes an attention sub-layer without heads: it adds nothing.

    Args:
      tensors: every weight, dense over the residual stream, under its flat name.
      pad_id, causal, numerical_output: as the compiled model's config has them.
      activations: each MLP sub-layer's activation by index (ReLU where absent).
      dtype: the float type of the returned params.
      norm: the model's norm (`ModelConfig.norm`), None for none.

    Returns:
      `(config, params)`; the config's residual labels are the coordinates' numbers.
    """
    modules: dict[str, dict[str, np.ndarray]] = {}
    for name, value in tensors.items():
        prefix, _, part = name.rpartition("/")
        modules.setdefault(prefix.removeprefix(MODULE_NAME + "/"), {})[part] = np.asarray(value, dtype)
    token, position, w_u = modules["embed"]["token"], modules["embed"]["position"], modules["unembed"]["w_u"]
    indices = [int(key.removeprefix(LAYER_PREFIX)) for key in modules if key.startswith(LAYER_PREFIX)]
    layers: list[AttentionSpec | MLPSpec] = []
    for index in range(max(indices, default=-1) + 1):
        module = modules.get(layer_module(index), {})
        if MLP_IN in module:
            layers.append(MLPSpec(_dense_spec(module[MLP_IN]), _dense_spec(module[MLP_OUT]), activations.get(index, "relu")))
            continue
        count = len([part for part in module if part.endswith("_q")])
        layers.append(AttentionSpec(tuple(
            HeadSpec(*(_dense_spec(module[f"head_{h}_{part}"]) for part in "qkvo")) for h in range(count))))
    config = ModelConfig(
        residual_labels=tuple(str(i) for i in range(token.shape[1])), layers=tuple(layers),
        token_embed=_dense_spec(token), pos_embed=_dense_spec(position), unembed=_dense_spec(w_u),
        vocab_size=token.shape[0], max_seq_len=position.shape[0] - 1, pad_id=pad_id, causal=causal,
        numerical_output=numerical_output, norm=norm,
    )
    return config, {f"{MODULE_NAME}/{key}": value for key, value in modules.items()}


# Flat tensor names (`config_of_dense_tensors`) of the weights that write the residual stream and
# of those that read it.
_WRITES = re.compile(r"(^|/)(embed/token|embed/position|layer_\d+/head_\d+_o|layer_\d+/w_out)$")
_READS = re.compile(r"(^|/)(layer_\d+/head_\d+_[qkv]|layer_\d+/w_in|unembed/w_u)$")


def fold_projection(tensors: dict[str, np.ndarray], projection: np.ndarray) -> dict[str, np.ndarray]:
    """The weights of the compressed model whose residual stream is `r @ W` (width d).

    Every weight that writes the stream (the embeddings, a head's `_o`, an MLP's `w_out`) is
    multiplied by `W` on the right, every weight that reads it (`_q`, `_k`, `_v`, `w_in`, `w_u`)
    by `Wᵀ` on the left, so the result is an ordinary model of width d that computes what
    `forward(params, ids, projection=W)` computes. The products are formed in float64 and
    rounded once to float32.

    Args:
      tensors: dense weights under their flat names (`compiled_transformer/layer_2/w_in`, or
        without the module prefix), as `config_of_dense_tensors` reads them.
      projection: `W`, `[D, d]` with D the tensors' residual width.
    Returns:
      The folded tensors under the same names, float32.
    Raises:
      CompilerError: a tensor that neither reads nor writes the stream, or a `W` whose first
        dimension is not the residual width.
    """
    w = np.asarray(projection, np.float64)
    folded = {}
    for name, tensor in tensors.items():
        t = np.asarray(tensor, np.float64)
        if _WRITES.search(name):
            product, width = t @ w if t.shape[-1] == w.shape[0] else None, t.shape[-1]
        elif _READS.search(name):
            product, width = w.T @ t if t.shape[0] == w.shape[0] else None, t.shape[0]
        else:
            raise CompilerError(f"tensor {name!r} neither reads nor writes the residual stream")
        if product is None:
            raise CompilerError(f"projection of shape {w.shape} does not fit tensor {name!r} (residual width {width})")
        folded[name] = np.ascontiguousarray(product, dtype=np.float32)
    return folded


def dense_model(model: Any) -> Any:
    """The same compiled model with dense weights: Haiku-standard `[D, ...]` params.

    Returns a `CompiledModel` (`dataclasses.replace` of `model`) whose `params`, `config` and
    `forward` are dense; `apply`, `run`, `forward(params, ids, projection=W)`, the weight
    accessors and `labelled_weights` work on it as on `model` and give the same numbers. Memory
    grows to the dense sizes (`D * D`-scale per head), so ask for it on models you inspect.
    """
    config, weights = dense_config_and_weights(model)
    params, forward, _ = build(config, weights)
    return dataclasses.replace(model, params=params, config=config, forward=forward)
