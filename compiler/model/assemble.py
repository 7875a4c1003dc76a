"""Assemble Craft blocks, laid out in sub-layers, into model weights.

`assemble` takes the residual space, the blocks of every sub-layer (even index: attention, odd:
MLP), the embedding tables and the output space (what `compiler.passes.layout.CraftModel`
holds), and returns a `ModelConfig` and the numpy weights keyed like the Haiku params. It is
called by `compiler.model.from_craft`, the one way from Craft blocks to a Haiku model.
Everything here is numpy; JAX is only needed to run the model.

Heads are factored exactly: `W_QK` (queries x keys, restricted to the rows and columns it uses)
is split into the connected components of its non-zero pattern, each becoming `I, Sᵀ` or `S, I`
(the narrower), or, for the staircase matrices of order comparisons, a dyadic cover with
`O(m log m)` non-zeros (`compiler.passes.qk_factor`), so no floating-point factorisation error enters.
`W_OV` becomes `W_V = I, W_O = W_OV` or `W_V = W_OV, W_O = I`, whichever is narrower. Heads built with explicit factors (superposition
constructions) keep them, and so keep their width `d_qk`; so does a head whose `W_QK` was built
as factors (`craft.maps.FactoredBilinearMap`: large order comparisons, already a dyadic cover).
Large blocks arrive as scipy.sparse matrices and are sliced and stored without becoming dense.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from compiler.model.config import AttentionSpec, HeadSpec, LayerSpec, MLPSpec, ModelConfig, SparseLinear
from compiler.passes.layout import Embeddings
from compiler.passes.qk_factor import sparse_factors
from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.blocks import MLP, AttentionHead, MultiAttentionHead
from craft.maps import FactoredBilinearMap

Weights = dict[str, dict[str, np.ndarray]]


def _indices(residual: VectorSpaceWithBasis, directions: tuple[BasisDirection, ...]) -> tuple[int, ...]:
    return tuple(int(residual.index(d)) for d in directions)


def _used(matrix: np.ndarray | sparse.sparray, axis: int) -> np.ndarray:
    """Positions along `axis` whose row (axis 0) or column (axis 1) has a non-zero entry."""
    if sparse.issparse(matrix):
        coo = sparse.coo_array(matrix)
        used = np.unique((coo.row, coo.col)[axis][coo.data != 0])
    else:
        used = np.flatnonzero(np.any(matrix != 0, axis=1 - axis))
    return used if used.size else np.arange(min(1, matrix.shape[axis]))


def _block(matrix: np.ndarray | sparse.sparray, rows: np.ndarray, cols: np.ndarray):
    """`matrix[rows][:, cols]`, dense or sparse as given."""
    if sparse.issparse(matrix):
        return sparse.csr_array(matrix)[rows][:, cols]
    return matrix[np.ix_(rows, cols)]


def _factor(matrix: np.ndarray | sparse.sparray) -> tuple:
    """Exact factors `A, B` with `A @ B.T == matrix`, of width `min(matrix.shape)`."""
    rows, cols = matrix.shape
    if sparse.issparse(matrix):
        if rows <= cols:
            return sparse.identity(rows, format="csr"), sparse.csr_array(matrix.T)
        return matrix, sparse.identity(cols, format="csr")
    if rows <= cols:
        return np.eye(rows, dtype=matrix.dtype), matrix.T
    return matrix, np.eye(cols, dtype=matrix.dtype)


def _head(
    head: AttentionHead, residual: VectorSpaceWithBasis, layer: dict[str, np.ndarray], h: int, sparse_qk: bool
) -> HeadSpec:
    ov = head.w_ov.matrix
    query_dirs = head.w_qk.left_space.basis
    key_dirs = head.w_qk.right_space.basis
    value_dirs = head.w_ov.input_space.basis
    out_dirs = head.w_ov.output_space.basis
    if head.w_q is not None and head.w_k is not None:
        q_rows, k_rows = np.arange(len(query_dirs)), np.arange(len(key_dirs))
        w_q, w_k = head.w_q, head.w_k
    elif isinstance(head.w_qk, FactoredBilinearMap):
        a, b = head.w_qk.left_factor, head.w_qk.right_factor
        q_rows, k_rows = _used(a, 0), _used(b, 0)
        columns = np.intersect1d(_used(a, 1), _used(b, 1))
        w_q, w_k = _block(a, q_rows, columns), _block(b, k_rows, columns)
    else:
        qk = head.w_qk.matrix
        q_rows, k_rows = _used(qk, 0), _used(qk, 1)
        used = _block(qk, q_rows, k_rows)
        w_q, w_k = sparse_factors(used) if sparse_qk else _factor(used)
    if head.w_v is not None and head.w_o is not None:
        v_rows, o_cols = np.arange(ov.shape[0]), np.arange(ov.shape[1])
        w_v, w_o_t = head.w_v, head.w_o.T
    else:
        v_rows, o_cols = _used(ov, 0), _used(ov, 1)
        w_v, w_o_t = _factor(_block(ov, v_rows, o_cols))
    specs = {}
    for name, matrix, dirs, idx, as_input in (
        ("q", w_q, query_dirs, q_rows, True),
        ("k", w_k, key_dirs, k_rows, True),
        ("v", w_v, value_dirs, v_rows, True),
        ("o", w_o_t.T, out_dirs, o_cols, False),
    ):
        residual_idx = _indices(residual, tuple(dirs[i] for i in idx))
        if as_input:
            spec, param = SparseLinear.from_matrix(matrix, in_idx=residual_idx)
        else:
            spec, param = SparseLinear.from_matrix(matrix, out_idx=residual_idx)
        layer[f"head_{h}_{name}"] = param
        specs[name] = spec
    return HeadSpec(specs["q"], specs["k"], specs["v"], specs["o"])


def _mlp(mlp: MLP, residual: VectorSpaceWithBasis, layer: dict[str, np.ndarray]) -> MLPSpec:
    first, second = mlp.first.matrix, mlp.second.matrix
    in_rows = _used(first, 0)
    out_cols = _used(second, 1)
    in_idx = _indices(residual, tuple(mlp.input_space.basis[i] for i in in_rows))
    out_idx = _indices(residual, tuple(mlp.output_space.basis[i] for i in out_cols))
    w_in, layer["w_in"] = SparseLinear.from_matrix(_block(first, in_rows, np.arange(first.shape[1])), in_idx=in_idx)
    w_out, layer["w_out"] = SparseLinear.from_matrix(_block(second, np.arange(second.shape[0]), out_cols), out_idx=out_idx)
    return MLPSpec(w_in, w_out, mlp.activation)


def _heads_of(block: AttentionHead | MultiAttentionHead | None) -> tuple[AttentionHead, ...]:
    if block is None:
        return ()
    return tuple(block.heads())


def assemble(
    residual: VectorSpaceWithBasis,
    sublayers: list[MLP | AttentionHead | MultiAttentionHead | None],
    embeddings: Embeddings,
    output_space: VectorSpaceWithBasis,
    *,
    max_seq_len: int,
    causal: bool,
    numerical_output: bool,
    sparse_qk: bool = True,
) -> tuple[ModelConfig, Weights]:
    """Build the model config and weights; `sublayers[i]` is `None` for an empty sub-layer.

    `sparse_qk` factors `W_QK` per component (`compiler.passes.qk_factor`); False gives `I, W_QKᵀ`.
    """
    if len(sublayers) % 2:
        sublayers = list(sublayers) + [None]
    weights: Weights = {}
    layers: list[LayerSpec] = []
    for index, block in enumerate(sublayers):
        layer: dict[str, np.ndarray] = {}
        if index % 2 == 0:
            if isinstance(block, MLP):
                raise ValueError(f"sub-layer {index} is an attention sub-layer but holds an MLP")
            heads = tuple(_head(h, residual, layer, i, sparse_qk) for i, h in enumerate(_heads_of(block)))
            layers.append(AttentionSpec(heads))
        else:
            if block is None:
                empty = np.zeros((1, 0), dtype=np.float32)
                w_in, layer["w_in"] = SparseLinear.from_matrix(empty, in_idx=(0,))
                w_out, layer["w_out"] = SparseLinear.from_matrix(empty.T, out_idx=(0,))
                layers.append(MLPSpec(w_in, w_out))
            elif isinstance(block, MLP):
                layers.append(_mlp(block, residual, layer))
            else:
                raise ValueError(f"sub-layer {index} is an MLP sub-layer but holds attention")
        weights[f"layer_{index}"] = layer

    token_spec, token_param = SparseLinear.from_matrix(embeddings.token)
    pos_spec, pos_param = SparseLinear.from_matrix(embeddings.position)
    weights["embed"] = {"token": token_param, "position": pos_param}
    out_idx = _indices(residual, output_space.basis)
    weights["unembed"] = {}
    # The identity over the output directions, built sparse: a dense eye is |outputs|² floats
    # (1 GiB for 16,000 output values) for a weight stored as |outputs| entries.
    unembed_spec, weights["unembed"]["w_u"] = SparseLinear.from_matrix(
        sparse.eye_array(len(out_idx), dtype=np.float32, format="csr"), in_idx=out_idx
    )
    config = ModelConfig(
        residual_labels=tuple(str(d) for d in residual.basis),
        layers=tuple(layers),
        token_embed=token_spec,
        pos_embed=pos_spec,
        unembed=unembed_spec,
        vocab_size=embeddings.token.shape[0],
        max_seq_len=max_seq_len,
        pad_id=embeddings.pad_id,
        causal=causal,
        numerical_output=numerical_output,
    )
    return config, weights
