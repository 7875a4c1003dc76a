"""The components of a compiled model and the edges between them, as dense arrays.

A compiled model is a residual network: every *source* (the token embedding, the position
embedding, each attention head, each MLP) adds a vector to the residual stream, and every
*destination port* (a head's query, key or value input, an MLP's input, the unembedding) reads
the sum of everything written before it. An *edge* is one (source, port) pair with the source
upstream of the port; ablating it replaces that source's term in that port's input sum only.

`network(model, projection)` turns a `CompiledModel` (optionally run in a compressed residual of
width d through a `[D, d]` projection, as `compression` does) into a `Network`: dense weights in
the stream's own basis, padded per layer to a common head width (zero columns change nothing),
with the components named three times: in the project's labels ("layer 0 attn head 1"), in the
hooks of the TransformerLens export that fire by default (`blocks.0.attn.hook_z`, head 1, with
`W_O`, the export's weight that carries that head's slice into the residual stream), and in
auto-circuit's node names ("A0.1"). Everything is numpy; `compiler.lab.circuits.patching` runs it
in JAX.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from compiler.errors import LabError
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import AttentionSpec, NormSpec, layer_module
from compiler.model.dense import dense_tensors, fold_projection, tensor_name
from compiler.model.encoders import EMPTY_THRESHOLD
from compiler.model.tying import untied
from compiler.passes import nodes

PORTS = ("q", "k", "v")  # a head's three inputs, in this order
MLP_PORT = "in"  # the single input of an MLP and of the unembedding


@dataclasses.dataclass(frozen=True)
class Component:
    """One node of the component graph.

    `kind` is "embed", "head", "mlp" or "unembed"; `block` the transformer block (TransformerLens'
    `blocks.<block>`), `head` the head index within it. `hook` / `hook_head` is where the
    TransformerLens export holds what the component writes (for the unembedding: the final
    residual it reads); `hook_weight` names the export's weight that carries a head's slice of
    the hook into the residual stream (`blocks.<b>.attn.W_O`: the write is
    `hook[..., hook_head, :] @ W_O[hook_head]`), "" where the hook is the write itself.
    `auto_circuit` is the node name auto-circuit gives it. `writes` names the s-ops (residual
    label prefixes) the component writes in the exact model.
    """

    name: str
    kind: str
    block: int | None = None
    head: int | None = None
    hook: str = ""
    hook_head: int | None = None
    auto_circuit: str = ""
    writes: tuple[str, ...] = ()
    hook_weight: str = ""


@dataclasses.dataclass(frozen=True)
class Port:
    """An input of a component: a head's `q` / `k` / `v`, or `in` (MLP, unembedding).

    `hook` / `hook_head` is where the TransformerLens export holds what the port reads: a
    head's `blocks.<b>.attn.hook_q` (`hook_k`, `hook_v`), which is the residual read through
    `hook_weight` (`blocks.<b>.attn.W_Q`: `resid @ W_Q[hook_head]`, so a gradient there maps
    back to the residual as `grad[..., hook_head, :] @ W_Q[hook_head].T`); an MLP's
    `blocks.<b>.hook_mlp_in` and the unembedding's last `hook_resid_post` read the residual
    itself (`hook_weight` "").
    """

    component: str
    port: str
    hook: str
    hook_head: int | None
    auto_circuit: str
    hook_weight: str = ""

    @property
    def name(self) -> str:
        return f"{self.component}.{self.port}"


@dataclasses.dataclass(frozen=True)
class Edge:
    """Source component -> destination port, with its names in the three vocabularies (the
    hook weights: `Component.hook_weight`, `Port.hook_weight`)."""

    src: str
    dst: str  # the port's name, "<component>.<port>"
    src_hook: str
    src_hook_head: int | None
    dst_hook: str
    dst_hook_head: int | None
    auto_circuit: str
    src_hook_weight: str = ""
    dst_hook_weight: str = ""

    @property
    def name(self) -> str:
        return f"{self.src} -> {self.dst}"


@dataclasses.dataclass(frozen=True)
class AttentionLayer:
    """Heads of one attention sub-layer, padded to common widths: `w_q`, `w_k` `[H, d, k]`,
    `w_v` `[H, d, v]`, `w_o` `[H, v, d]`."""

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray


@dataclasses.dataclass(frozen=True)
class MLPLayer:
    """`w_in` `[d, h]`, `w_out` `[h, d]` and the activation's name."""

    w_in: np.ndarray
    w_out: np.ndarray
    activation: str


@dataclasses.dataclass(frozen=True, eq=False)
class Network:
    """A compiled model as sources, ports and dense weights in its residual basis (width d).

    `layers` follows `model.config.layers` (attention and MLP sub-layers alternating), skipping
    empty ones. `columns` are the output columns scored (one program's, for several compiled
    together); `numerical_tolerance` is how far a numerical output may move and still decode to
    the same value (half the smallest gap of its value set). `empty_threshold`: a categorical
    output decodes as "none" where every logit is below it, as the compiled model's decoder
    does; None decodes the argmax alone, as `compression`'s exactness check does (a GD-trained
    projection keeps the argmax, not the logit scale).
    """

    sources: tuple[Component, ...]
    ports: tuple[Port, ...]
    tok_embed: np.ndarray  # [vocab_size, d]
    pos_embed: np.ndarray  # [max_seq_len + 1, d]
    layers: tuple[AttentionLayer | MLPLayer, ...]
    unembed: np.ndarray  # [d, n_out]
    columns: slice
    numerical: bool
    numerical_tolerance: float
    bos_id: int
    pad_id: int
    causal: bool
    empty_threshold: float | None = EMPTY_THRESHOLD
    norm: NormSpec | None = None  # the pre-norm every port reads through (`compile_rasp(norm=...)`)

    @property
    def width(self) -> int:
        return self.tok_embed.shape[1]

    @functools.cached_property
    def edges(self) -> tuple[Edge, ...]:
        """Every (upstream source, port) pair, ports in forward order, sources in order."""
        found = []
        for port, count in zip(self.ports, self.upstream_counts):
            for src in self.sources[:count]:
                found.append(
                    Edge(src.name, port.name, src.hook, src.hook_head, port.hook, port.hook_head,
                         f"{src.auto_circuit}->{port.auto_circuit}", src.hook_weight, port.hook_weight)
                )
        return tuple(found)

    @functools.cached_property
    def upstream_counts(self) -> tuple[int, ...]:
        """Per port, how many sources (a prefix of `sources`) are written before it is read."""
        counts, written = [], 2
        for layer in self.layers:
            n_ports = 3 * len(layer.w_q) if isinstance(layer, AttentionLayer) else 1
            counts += [written] * n_ports
            written += len(layer.w_q) if isinstance(layer, AttentionLayer) else 1
        return tuple(counts + [written])

    @functools.cached_property
    def edge_index(self) -> tuple[np.ndarray, np.ndarray]:
        """`(port, source)` index arrays of `edges`, for masks `[ports, sources, T]`."""
        ports = [p for p, count in enumerate(self.upstream_counts) for _ in range(count)]
        sources = [s for count in self.upstream_counts for s in range(count)]
        return np.asarray(ports, np.int32), np.asarray(sources, np.int32)

    def replace_weights(self, **changes) -> Network:
        """The same network with some arrays replaced (reparametrisations)."""
        return dataclasses.replace(self, **changes)


def head_name(block: int, head: int) -> str:
    return f"layer {block} attn head {head}"


def mlp_name(block: int) -> str:
    return f"layer {block} mlp"


def _sop_names(labels: tuple[str, ...], columns: np.ndarray) -> tuple[str, ...]:
    """The s-op names (label prefixes before ':') of residual columns, in first-seen order."""
    names = [labels[c].split(":", 1)[0] for c in columns]
    return tuple(dict.fromkeys(names))


def _written(labels: tuple[str, ...], matrix: np.ndarray) -> tuple[str, ...]:
    return _sop_names(labels, np.nonzero(np.any(matrix != 0, axis=0))[0])


def _stack_heads(heads: list[tuple[np.ndarray, ...]]) -> AttentionLayer:
    """Heads' `(w_q, w_k, w_v, w_o)`, zero-padded to the layer's widest and stacked."""
    width_qk = max(q.shape[1] for q, _, _, _ in heads)
    width_v = max(v.shape[1] for _, _, v, _ in heads)

    def pad(matrix: np.ndarray, width: int, axis: int) -> np.ndarray:
        extra = [(0, 0), (0, 0)]
        extra[axis] = (0, width - matrix.shape[axis])
        return np.pad(matrix, extra)

    return AttentionLayer(
        w_q=np.stack([pad(q, width_qk, 1) for q, _, _, _ in heads]),
        w_k=np.stack([pad(k, width_qk, 1) for _, k, _, _ in heads]),
        w_v=np.stack([pad(v, width_v, 1) for _, _, v, _ in heads]),
        w_o=np.stack([pad(o, width_v, 0) for _, _, _, o in heads]),
    )


def numerical_tolerance(model: CompiledModel, label: str) -> float:
    """Half the smallest gap between the values a numerical output can take (0.5 if unknown)."""
    graph = model.graph
    values = graph.nodes[label].get(nodes.VALUE_SET) if graph is not None and label in graph else None
    return half_smallest_gap(values or ())


def half_smallest_gap(values) -> float:
    """Half the smallest gap between distinct numbers of `values` (0.5 with fewer than two).

    Values equal to 6 decimals are one value: a value set can hold float twins such as 0.3 and
    0.1 + 0.2, whose gap (5.6e-17) no float32 model resolves; taken as a gap, it made every
    rounding difference of a reparametrised model a changed output (random program 13).
    """
    numbers = np.unique(np.round([float(v) for v in values if isinstance(v, (int, float))], 6))
    gaps = np.diff(numbers)
    return float(gaps.min() / 2) if len(gaps) else 0.5


def network(model: CompiledModel, projection: np.ndarray | None = None, output: str | None = None) -> Network:
    """The `Network` of `model`, read through `projection` (`[D, d]`, None: the identity).

    A compiled loop (`rasp.Loop`: a tied block run several times) is read as its unrolled model
    (`compiler.model.tying.untied`): each iteration's heads and MLP are components of their own,
    in the blocks of the TransformerLens export, which is unrolled the same way.

    Args:
        model: a compiled model (one program, or several compiled together; tied or not).
        projection: the residual projection of a compressed model (`compression`): the stream
            has width d, a source writes `y @ projection`, a port reads `r @ projection.T`.
        output: the output label scored (one of `model.output_columns`); default the first.
    Returns:
        The network with its sources, ports, dense weights and scored columns.
    Raises:
        LabError: `projection` is not `[D, d]`, `output` names no output of the model, or a
            projection is given for a model with a norm (fold it in first: `folded_model`).
    """
    if model.config.norm is not None and projection is not None:
        raise LabError(f"a model with a {model.config.norm.kind} cannot run a residual projection (the norm would "
                       "normalise the compressed stream); pass projection=None, or fold the projection into the "
                       "model first (compiler.model.folding.folded_model) and pass the folded model")
    model = untied(model)
    config = model.config
    labels = config.residual_labels
    width = config.residual_width
    if projection is not None:
        projection = np.asarray(projection, np.float32)
        if projection.ndim != 2 or projection.shape[0] != width:
            raise LabError(f"projection must be [D, d] with D = {width} residual dimensions, got {projection.shape}")
    outputs = model.output_columns
    label = output or next(iter(outputs))
    if label not in outputs:
        raise LabError(f"output {label!r} is not one of the model's outputs {sorted(outputs)}; pass one of those")
    exact = dense_tensors(model)  # over the residual labels, which name what each part writes
    folded = exact if projection is None else fold_projection(exact, projection)

    def weight(module: str, name: str, tensors: dict[str, np.ndarray] = folded) -> np.ndarray:
        return tensors[tensor_name(module, name)]

    tok, pos = weight("embed", "token", exact), weight("embed", "position", exact)
    sources = [
        Component("embed tokens", "embed", hook="hook_embed", auto_circuit="Resid Start", writes=_written(labels, tok)),
        Component("embed positions", "embed", hook="hook_pos_embed", auto_circuit="Resid Start",
                  writes=_written(labels, pos)),
    ]
    ports: list[Port] = []
    layers: list[AttentionLayer | MLPLayer] = []
    for index, spec in enumerate(config.layers):
        block, module = index // 2, layer_module(index)
        if isinstance(spec, AttentionSpec):
            if not spec.heads:
                continue
            for h in range(len(spec.heads)):
                name = head_name(block, h)
                for port in PORTS:
                    ports.append(Port(name, port, f"blocks.{block}.attn.hook_{port}", h, f"A{block}.{h}.{port.upper()}",
                                      f"blocks.{block}.attn.W_{port.upper()}"))
            for h in range(len(spec.heads)):
                sources.append(Component(head_name(block, h), "head", block, h, f"blocks.{block}.attn.hook_z", h,
                                         f"A{block}.{h}", _written(labels, weight(module, f"head_{h}_o", exact)),
                                         f"blocks.{block}.attn.W_O"))
            layers.append(_stack_heads([tuple(weight(module, f"head_{h}_{part}") for part in "qkvo")
                                        for h in range(len(spec.heads))]))
        else:
            if spec.w_in.shape[1] == 0:
                continue
            name = mlp_name(block)
            ports.append(Port(name, MLP_PORT, f"blocks.{block}.hook_mlp_in", None, f"MLP {block}"))
            sources.append(Component(name, "mlp", block, None, f"blocks.{block}.hook_mlp_out", None, f"MLP {block}",
                                     _written(labels, weight(module, "w_out", exact))))
            layers.append(MLPLayer(weight(module, "w_in"), weight(module, "w_out"), spec.activation))
    last_block = max(len(config.layers) - 1, 0) // 2
    ports.append(Port("unembed", MLP_PORT, f"blocks.{last_block}.hook_resid_post", None, "Resid End"))
    numerical = next(part.numerical for part in model.output_parts if part.label == label)
    return Network(
        sources=tuple(sources),
        ports=tuple(ports),
        tok_embed=weight("embed", "token"),
        pos_embed=weight("embed", "position"),
        layers=tuple(layers),
        unembed=weight("unembed", "w_u"),
        columns=outputs[label],
        numerical=numerical,
        numerical_tolerance=numerical_tolerance(model, label) if numerical else EMPTY_THRESHOLD,
        bos_id=model.input_encoder.bos_id,
        pad_id=model.input_encoder.pad_id,
        causal=config.causal,
        norm=config.norm,
    )
