"""`compile_rasp`: from a RASP program to a jitted Haiku transformer.

The pipeline (each stage a function over plain data, see docs/compiling.md):
trace -> infer values -> validate -> fuse elementwise ops -> lower to Craft blocks -> allocate
sub-layers -> merge parallel blocks -> assemble weights -> build the Haiku model.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import networkx as nx
import numpy as np

from compiler.passes import graph as g
from compiler.passes.discretise import discretise_numerical_inputs
from compiler.passes.allocate import Allocator, longest_path
from compiler.passes.assemble import Embeddings, assemble
from compiler.model.compiled_model import CompiledModel
from compiler.model.encoders import InputEncoder, OutputEncoder
from compiler.errors import InvalidInputError, UnsupportedProgramError
from compiler.passes.lower import NUMERICAL_FIT, ONE, LoweringOptions, fuse_elementwise, lower, output_space
from compiler.model.transformer import build
from compiler.passes.optimize import FACTOR_QK, optimize_graph, selected_passes
from compiler.passes.validate import check_graph, warn_causal_semantics
from compiler.passes.values import infer_values
from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces, value_sort_key
from craft.blocks import SeriesWithResiduals, combine_in_parallel
from craft.chamber.numerical_mlp import MIN_SHARPNESS
from rasp import rasp

# Tracr's special token names, the defaults of `compile_rasp_to_model`.
COMPILER_BOS = "compiler_bos"
COMPILER_PAD = "compiler_pad"


def _check_arguments(vocab: Iterable[Any], max_seq_len: int, bos: Any, pad: Any) -> tuple:
    if isinstance(vocab, (str, bytes)):
        raise InvalidInputError(
            f"vocab must be a collection of tokens, got the string {vocab!r}; pass e.g. set({vocab!r})"
        )
    try:
        tokens = tuple(sorted(set(vocab), key=value_sort_key))
    except TypeError as error:
        raise InvalidInputError(f"vocab holds an unhashable token: {error}") from error
    if not tokens:
        raise InvalidInputError("vocab is empty; pass the set of input tokens")
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, (int, np.integer)) or max_seq_len < 1:
        raise InvalidInputError(f"max_seq_len must be a positive integer, got {max_seq_len!r}")
    if bos == pad:
        raise InvalidInputError(f"compiler_bos and compiler_pad must differ, both are {bos!r}")
    for name, special in (("compiler_bos", bos), ("compiler_pad", pad)):
        if special in tokens:
            raise InvalidInputError(
                f"{name}={special!r} is also a vocabulary token; choose a {name} outside the vocab"
            )
    return tokens


def _sublayers(graph: nx.DiGraph, schedule: dict[str, int]) -> list[list]:
    """Blocks grouped by sub-layer; a node's blocks end at its scheduled sub-layer."""
    placed: dict[int, list] = {}
    for label in g.sop_nodes(graph):
        blocks = graph.nodes[label].get(g.BLOCKS, ())
        first = schedule[label] - (len(blocks) - 1)
        for offset, (parity, block) in enumerate(blocks):
            index = first + offset
            if index % 2 != parity:  # pragma: no cover - the allocator guarantees parity
                raise AssertionError(f"{label}: block placed in a sub-layer of the wrong kind")
            placed.setdefault(index, []).append(block)
        graph.nodes[label][g.LAYER] = schedule[label] // 2 if blocks else None
    count = max(placed, default=-1) + 1
    return [placed.get(i, []) for i in range(count)]


def _embeddings(
    graph: nx.DiGraph,
    residual: VectorSpaceWithBasis,
    encoder: InputEncoder,
    max_seq_len: int,
) -> Embeddings:
    """Token rows write tokens:x, one and every Full; position rows write indices and constants."""
    token = np.zeros((encoder.vocab_size, residual.num_dims), dtype=np.float32)
    position = np.zeros((max_seq_len + 1, residual.num_dims), dtype=np.float32)
    one = residual.index(ONE)
    token[:, one] = 1.0
    token[encoder.bos_id, residual.index(BasisDirection("tokens", encoder.bos))] = 1.0
    token[encoder.pad_id, residual.index(BasisDirection("tokens", encoder.pad))] = 1.0
    for label in g.sop_nodes(graph):
        node = graph.nodes[label]
        kind, expr = node[g.KIND], node[g.EXPR]
        numerical = rasp.is_numerical(expr)
        if kind == "tokens":
            for token_value in encoder.vocab:
                column, value = _direction(residual, label, token_value, numerical)
                token[encoder.token_to_id[token_value], column] = value
        elif kind == "indices":
            for i in range(max_seq_len):
                column, value = _direction(residual, label, i, numerical)
                position[i + 1, column] = value
        elif kind == "full" and expr.fill is not None:
            column, value = _direction(residual, label, expr.fill, numerical)
            token[np.arange(encoder.vocab_size) != encoder.bos_id, column] = value
        elif kind == "constant":
            for i, fill in enumerate(list(expr.value)[:max_seq_len]):
                if fill is not None:
                    column, value = _direction(residual, label, fill, numerical)
                    position[i + 1, column] = value
    return Embeddings(token=token, position=position, pad_id=encoder.pad_id)


def _direction(residual: VectorSpaceWithBasis, label: str, value: Any, numerical: bool) -> tuple[int, float]:
    if numerical:
        return residual.index(BasisDirection(label)), float(value)
    return residual.index(BasisDirection(label, value)), 1.0


def compile_rasp(
    program: rasp.SOp,
    vocab: Iterable[Hashable],
    max_seq_len: int,
    causal: bool = False,
    compiler_bos: Hashable = "BOS",
    compiler_pad: Hashable = "PAD",
    mlp_exactness: float = 100,
    allocator: Allocator = longest_path,
    causal_strict: bool = False,
    optimize: bool | Iterable[str] = True,
) -> CompiledModel:
    """Compile `program` into a transformer exact on every input of up to `max_seq_len` tokens.

    With `causal=True` the model computes `rasp.evaluate(program, xs, causal=True)`; when a
    selector may select later positions (so that can differ from the plain evaluation) a
    `CausalSemanticsWarning` names it, and `causal_strict=True` refuses the program instead.
    `optimize` picks the optimisation passes (`compiler.passes.optimize`): True (default) runs all of
    them, False none (one block per s-op, Tracr's layout), or a collection of pass names.

    Raises `UnsupportedProgramError` listing every reason when the program cannot be compiled
    exactly (see `compiler.passes.validate`), `ValueInferenceError` when a value set cannot be computed,
    and `InvalidInputError` for bad arguments.
    """
    tokens = _check_arguments(vocab, max_seq_len, compiler_bos, compiler_pad)
    passes = selected_passes(optimize)
    if not isinstance(mlp_exactness, (int, float)) or not mlp_exactness >= MIN_SHARPNESS:
        raise InvalidInputError(
            f"mlp_exactness must be a number >= {MIN_SHARPNESS:g} (the sharpness of numerical "
            f"MLP ramps), got {mlp_exactness!r}"
        )
    graph = g.trace(discretise_numerical_inputs(program))
    infer_values(graph, tokens, max_seq_len)
    bos = BasisDirection("tokens", compiler_bos)
    problems = check_graph(graph, causal, bos, causal_strict=causal_strict, passes=passes)
    if problems:
        raise UnsupportedProgramError(problems)
    warn_causal_semantics(graph)

    pad = BasisDirection("tokens", compiler_pad)
    fuse_elementwise(graph)
    graph = optimize_graph(graph, passes)
    options = LoweringOptions(
        max_seq_len=max_seq_len, causal=causal, bos=bos, mlp_exactness=float(mlp_exactness)
    )
    lower(graph, options)
    sublayers = [combine_in_parallel(blocks) if blocks else None for blocks in _sublayers(graph, allocator(graph))]

    spaces = [output_space(graph, label) for label in g.sop_nodes(graph)]
    for block in sublayers:
        if block is not None:
            spaces += [block.input_space, block.output_space]
    residual = join_vector_spaces(VectorSpaceWithBasis((ONE, bos, pad)), *spaces)

    encoder = InputEncoder(tokens, compiler_bos, compiler_pad, max_seq_len)
    sink = graph.graph["sink"]
    out_space = output_space(graph, sink)
    numerical_output = rasp.is_numerical(graph.nodes[sink][g.EXPR])
    config, weights = assemble(
        residual,
        sublayers,
        _embeddings(graph, residual, encoder, max_seq_len),
        out_space,
        max_seq_len=max_seq_len,
        causal=causal,
        numerical_output=numerical_output,
        sparse_qk=FACTOR_QK in passes,
    )
    params, forward, _ = build(config, weights)
    output_encoder = OutputEncoder(
        values=None if numerical_output else tuple(d.value for d in out_space.basis),
        bos=compiler_bos,
    )
    craft_model = SeriesWithResiduals(tuple(b for b in sublayers if b is not None))
    map_errors = {
        label: (data[NUMERICAL_FIT].construction, data[NUMERICAL_FIT].error)
        for label, data in graph.nodes(data=True)
        if NUMERICAL_FIT in data
    }
    return CompiledModel(
        numerical_error_bound=max((error for _, error in map_errors.values()), default=0.0),
        numerical_map_errors=map_errors,
        params=params,
        config=config,
        forward=forward,
        graph=graph,
        craft_model=craft_model,
        sublayers=tuple(sublayers),
        residual_space=residual,
        input_encoder=encoder,
        output_encoder=output_encoder,
        program=program,
    )


def compile_rasp_to_model(
    program: rasp.SOp,
    vocab: Iterable[Hashable],
    max_seq_len: int,
    causal: bool = False,
    compiler_bos: Hashable = COMPILER_BOS,
    compiler_pad: Hashable = COMPILER_PAD,
    mlp_exactness: int = 100,
    causal_strict: bool = False,
    optimize: bool | Iterable[str] = True,
) -> CompiledModel:
    """Tracr's entry point, with its argument names and default special tokens."""
    return compile_rasp(
        program,
        vocab,
        max_seq_len,
        causal=causal,
        compiler_bos=compiler_bos,
        compiler_pad=compiler_pad,
        mlp_exactness=mlp_exactness,
        causal_strict=causal_strict,
        optimize=optimize,
    )


__all__: Sequence[str] = (
    "COMPILER_BOS",
    "COMPILER_PAD",
    "compile_rasp",
    "compile_rasp_to_model",
)
