"""Lay out a lowered graph for assembly: the residual stream, the embedding tables, the output.

After lowering and allocation a program is Craft blocks in sub-layers. This pass adds what the
weights need besides the blocks and gathers it in one record, `CraftModel`: the residual space
(`residual_space`: `one`, BOS, PAD and every s-op's and block's directions, sorted, so the same
program always gets the same layout), the token and position embedding tables (`embeddings`),
and the output space. `compiler.model.from_craft.model_from_craft` turns a `CraftModel` into the
Haiku model; constructions that build Craft blocks by hand fill a `CraftModel` themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.lower import output_space
from craft.bases import ONE, TOKENS_NAME, BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP, AttentionHead, Block, MultiAttentionHead

SubLayer = MLP | AttentionHead | MultiAttentionHead | None


@dataclasses.dataclass(frozen=True)
class Embeddings:
    """Residual vectors written by each token id and each position (row = id / position)."""

    token: np.ndarray  # [vocab_size, D]
    position: np.ndarray  # [max_seq_len + 1, D]
    pad_id: int


@dataclasses.dataclass(frozen=True, eq=False)
class CraftModel:
    """A model as Craft blocks, ready to assemble into weights.

    `sublayers[i]` is the block of sub-layer `i` (even: attention, odd: MLP; `None`: empty). The
    output is read from `output_space`: one logit per direction, or one value when
    `numerical_output`.
    """

    residual: VectorSpaceWithBasis
    sublayers: tuple[SubLayer, ...]
    embeddings: Embeddings
    output_space: VectorSpaceWithBasis
    max_seq_len: int
    causal: bool
    numerical_output: bool = False


def lay_out(
    graph: nx.DiGraph,
    sublayers: Sequence[SubLayer],
    token_ids: Mapping[Hashable, int],
    bos: Hashable,
    pad: Hashable,
    *,
    max_seq_len: int,
    causal: bool,
) -> CraftModel:
    """The `CraftModel` of a lowered, allocated graph.

    Args:
      graph: the lowered graph (`compiler.passes.lower`); its sinks are the outputs.
      sublayers: its blocks per sub-layer (`compiler.passes.allocate.place_blocks`).
      token_ids: the id of every input token, BOS and PAD included.
      bos, pad: the special tokens.
      max_seq_len: the longest input, without BOS.
      causal: whether attention is masked to earlier positions.
    """
    bos_dir, pad_dir = BasisDirection(TOKENS_NAME, bos), BasisDirection(TOKENS_NAME, pad)
    residual = residual_space(graph, sublayers, bos_dir, pad_dir)
    sinks = graph.graph[nodes.SINKS]
    return CraftModel(
        residual=residual,
        sublayers=tuple(sublayers),
        embeddings=embeddings(graph, residual, token_ids, bos, pad, max_seq_len),
        output_space=outputs_space(graph),
        max_seq_len=max_seq_len,
        causal=causal,
        numerical_output=len(sinks) == 1 and g.is_numerical(graph, sinks[0]),
    )


def outputs_space(graph: nx.DiGraph) -> VectorSpaceWithBasis:
    """The directions the unembedding reads: each output s-op's space, in program order.

    One program: its output space (one direction per value, or one numerical direction). Several
    programs (`compiler.passes.outputs`): their spaces one after the other, so each program's
    logits are a contiguous block of columns.
    """
    spaces = [output_space(graph, sink) for sink in graph.graph[nodes.SINKS]]
    if len(spaces) == 1:
        return spaces[0]
    return VectorSpaceWithBasis(tuple(d for space in spaces for d in space.basis))


def residual_space(
    graph: nx.DiGraph, sublayers: Sequence[Block | None], bos: BasisDirection, pad: BasisDirection
) -> VectorSpaceWithBasis:
    """The residual stream: `one`, BOS, PAD, every s-op's subspace and every block's input and
    output spaces, joined (sorted, so the same program always gets the same layout)."""
    spaces = [graph.nodes[label][nodes.OUTPUT_SPACE] for label in g.sop_nodes(graph)]
    for block in sublayers:
        if block is not None:
            spaces += [block.input_space, block.output_space]
    return join_vector_spaces(VectorSpaceWithBasis((ONE, bos, pad)), *spaces)


def embeddings(
    graph: nx.DiGraph,
    residual: VectorSpaceWithBasis,
    token_ids: Mapping[Hashable, int],
    bos: Hashable,
    pad: Hashable,
    max_seq_len: int,
) -> Embeddings:
    """The embedding tables of a lowered graph.

    `token_ids` numbers every input token, BOS and PAD included. Token rows write `tokens:x`,
    `one` and every `Full`; position rows (position 0 is BOS) write `indices` and constants.
    """
    vocab_size = len(token_ids)
    bos_id, pad_id = token_ids[bos], token_ids[pad]
    vocab = [token for token in token_ids if token != bos and token != pad]
    token = np.zeros((vocab_size, residual.num_dims), dtype=np.float32)
    position = np.zeros((max_seq_len + 1, residual.num_dims), dtype=np.float32)
    token[:, residual.index(ONE)] = 1.0
    token[bos_id, residual.index(BasisDirection(TOKENS_NAME, bos))] = 1.0
    token[pad_id, residual.index(BasisDirection(TOKENS_NAME, pad))] = 1.0
    for label in g.sop_nodes(graph):
        node = graph.nodes[label]
        kind, expr = node[nodes.KIND], node[nodes.EXPR]
        numerical = g.is_numerical(graph, label)
        if kind is g.NodeKind.TOKENS:
            for token_value in vocab:
                column, value = _direction(residual, label, token_value, numerical)
                token[token_ids[token_value], column] = value
        elif kind is g.NodeKind.INDICES:
            for i in range(max_seq_len):
                column, value = _direction(residual, label, i, numerical)
                position[i + 1, column] = value
        elif kind is g.NodeKind.FULL and expr.fill is not None:
            column, value = _direction(residual, label, expr.fill, numerical)
            token[np.arange(vocab_size) != bos_id, column] = value
        elif kind is g.NodeKind.CONSTANT:
            for i, fill in enumerate(list(expr.value)[:max_seq_len]):
                if fill is not None:
                    column, value = _direction(residual, label, fill, numerical)
                    position[i + 1, column] = value
    return Embeddings(token=token, position=position, pad_id=pad_id)


def _direction(residual: VectorSpaceWithBasis, label: str, value: Any, numerical: bool) -> tuple[int, float]:
    """The residual column an s-op's value is written to, and what is written there."""
    if numerical:
        return residual.index(BasisDirection(label)), float(value)
    return residual.index(BasisDirection(label, value)), 1.0
